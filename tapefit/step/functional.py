"""The functional API of `TapeModel(inputs, outputs)`: TapeModel wraps the functional network
instead of becoming a Keras `Functional` (Keras would rewrite TapeModel's base classes for good,
and every subclassed TapeModel would then be a broken Functional), so these attributes reach
through to the wrapped network's graph."""

from __future__ import annotations

from typing import Any


class FunctionalAccess:
    """`layers`, `inputs`, `outputs`, `input`, `output` of the wrapped functional network
    (`self._functional_network`), or Keras' own for a subclassed model."""

    @property
    def layers(self) -> list:
        """The network's layers (for `TapeModel(inputs, outputs)`: the functional graph's)."""
        if getattr(self, "_functional_network", None) is not None:
            return self._functional_network.layers
        return super().layers

    @layers.setter
    def layers(self, _: Any) -> None:
        raise AttributeError("`Model.layers` is reserved: use another attribute name")

    def _functional(self, attribute: str) -> Any:
        network = getattr(self, "_functional_network", None)
        if network is None:
            raise AttributeError(
                f"{type(self).__name__} is a subclassed model: {attribute} exists only for a "
                "model built from inputs and outputs"
            )
        return getattr(network, attribute)

    @property
    def inputs(self) -> Any:
        """The functional network's input tensors."""
        return self._functional("inputs")

    @property
    def outputs(self) -> Any:
        """The functional network's output tensors."""
        return self._functional("outputs")

    @property
    def input(self) -> Any:
        """As `keras.Model.input`; for `TapeModel(inputs, outputs)`, the network's."""
        if getattr(self, "_functional_network", None) is not None:
            return self._functional_network.input
        return super().input

    @property
    def output(self) -> Any:
        """As `keras.Model.output`; for `TapeModel(inputs, outputs)`, the network's."""
        if getattr(self, "_functional_network", None) is not None:
            return self._functional_network.output
        return super().output
