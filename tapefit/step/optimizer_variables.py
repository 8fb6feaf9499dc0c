"""Which variables each of a model's optimizers updates, as positions in the model's trainable
variables (layer names are not stable across instances).

`TapeModel` saves them with its compile config and builds every optimizer on its variables
again before a `.keras` file's weights load, so that every optimizer's state reloads, not
only the first's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tapefit.keras_compat import updated_variables


def optimizer_positions(
    variables: Sequence[Any], optimizers: Mapping[str, Any]
) -> dict[str, list[int]]:
    """Each built optimizer's variables, as positions in `variables`.

    Args:
        variables: The model's trainable variables, in order.
        optimizers: Every optimizer by name (a `LossScaleOptimizer` is looked through).

    Returns:
        Name to positions, for the built optimizers whose variables all are in `variables`.

    Examples:
        >>> import keras
        >>> weights = [keras.Variable(1.0), keras.Variable(2.0)]
        >>> optimizer = keras.optimizers.SGD()
        >>> optimizer.build(weights[1:])
        >>> optimizer_positions(weights, {"optimizer": optimizer, "idle": keras.optimizers.SGD()})
        {'optimizer': [1]}
    """
    position = {id(v): i for i, v in enumerate(variables)}
    updated = {
        name: [position.get(id(v)) for v in updated_variables(getattr(o, "inner_optimizer", o))]
        for name, o in optimizers.items()
        if o.built
    }
    return {name: indices for name, indices in updated.items() if None not in indices}


def build_at_positions(
    optimizers: Mapping[str, Any], variables: Sequence[Any], positions: Mapping[str, list[int]]
) -> None:
    """Build each optimizer on the variables at its saved positions (`optimizer_positions`).

    An optimizer without positions, or with one beyond `variables`, is left unbuilt.

    Args:
        optimizers: Every optimizer by name.
        variables: The model's trainable variables, in order.
        positions: What `optimizer_positions` returned when the model was saved.

    Examples:
        >>> import keras
        >>> weights = [keras.Variable(1.0), keras.Variable(2.0)]
        >>> optimizer = keras.optimizers.SGD()
        >>> build_at_positions({"optimizer": optimizer}, weights, {"optimizer": [1]})
        >>> optimizer.built
        True
    """
    for name, optimizer in optimizers.items():
        indices = positions.get(name, [])
        if indices and max(indices) < len(variables):
            optimizer.build([variables[i] for i in indices])
