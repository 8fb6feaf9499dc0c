"""Where mixed precision must not compute in 16 bits: sums, divisions and softmaxes take at
least float32 (float64 where Keras computes in it, as `tapefit.gradcheck` does)."""

from __future__ import annotations

from typing import Any

import keras

HALF = ("float16", "bfloat16")


def wide_dtype() -> str | None:
    """The dtype for sums, divisions and softmaxes: float32 under a mixed (16-bit) policy,
    else None, the policy's own (float32, or float64 where Keras computes in it).

    Example:
        >>> wide_dtype() is None  # float32 already
        True
    """
    return "float32" if keras.config.dtype_policy().compute_dtype in HALF else None


def at_least_float32(values: Any) -> Any:
    """`values` in float32 if they are 16-bit floats, else unchanged.

    Example:
        >>> import numpy as np
        >>> keras.backend.standardize_dtype(at_least_float32(np.ones(2, "float16")).dtype)
        'float32'
    """
    if str(keras.backend.standardize_dtype(values.dtype)) in HALF:
        return keras.ops.cast(values, "float32")
    return values
