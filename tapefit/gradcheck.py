"""Which trainable variables a TapeModel's loss does not reach: the GradientTape tutorial's
lesson (forward pass and loss inside the tape, or the gradients are None) as a check."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from tapefit.tape_model import TapeModel


def gradcheck(model: TapeModel, batch: Any) -> dict[str, str]:
    """Run `model.forward` on one batch under a tape; return `{variable path: "none"|"zero"}`
    for every trainable variable whose gradient is missing or exactly zero (empty = healthy).

    Example:

    ```python
    problems = tapefit.gradcheck(model, next(iter(dataset)))
    assert not problems, problems
    ```
    """
    variables = model.trainable_variables
    with tf.GradientTape() as tape:
        loss = model.forward(batch, training=True).loss
    gradients = tape.gradient(loss, variables)
    problems = {}
    for variable, gradient in zip(variables, gradients, strict=True):
        if gradient is None:
            problems[variable.path] = "none"
        elif not np.any(tf.convert_to_tensor(gradient).numpy()):
            problems[variable.path] = "zero"
    return problems
