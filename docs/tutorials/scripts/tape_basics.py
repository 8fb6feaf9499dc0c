"""GradientTape basics, the way tapefit uses them: the tutorial "GradientTape basics" runs
this file step by step.

    python docs/tutorials/scripts/tape_basics.py /tmp/tape-basics

It prints every gradient it computes, checks them against finite differences with
`tapefit.gradcheck`, and writes `tape_basics.png` (a function, its tape gradient and the
finite-difference estimate) into the output folder.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import tapefit  # first: pins Keras to the TensorFlow backend

# isort: split
import keras
import numpy as np
import tensorflow as tf


# --8<-- [start:first]
def first_gradient() -> float:
    """dy/dx of y = x² at x = 3, recorded by a tape.

    Returns:
        The gradient, 6.0.
    """
    x = tf.Variable(3.0)  # trainable variables are watched automatically
    with tf.GradientTape() as tape:
        y = x**2  # every operation on a watched value is recorded
    dy_dx = tape.gradient(y, x)  # play the tape backwards: 2x = 6
    return float(dy_dx)


# --8<-- [end:first]


# --8<-- [start:persistent]
def persistent_tape() -> dict[str, float]:
    """Two gradients from one recording: y = x², z = y² at x = 3.

    Returns:
        `dz/dx` (4x³ = 108) and `dy/dx` (2x = 6).
    """
    x = tf.constant(3.0)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)  # a constant is not a variable: watch it by hand
        y = x * x
        z = y * y
    dz_dx = tape.gradient(z, x)  # 108.0
    dy_dx = tape.gradient(y, x)  # 6.0: a second call, allowed because the tape is persistent
    del tape  # a persistent tape keeps its recording until it is dropped
    return {"dz_dx": float(dz_dx), "dy_dx": float(dy_dx)}


# --8<-- [end:persistent]


# --8<-- [start:watch]
def watching_constants() -> dict[str, float | None]:
    """What the tape sees: a watched constant gets a gradient, an unwatched one does not.

    Returns:
        The gradient with respect to a watched constant (6.0) and to an unwatched one (None).
    """
    watched, unwatched = tf.constant(3.0), tf.constant(3.0)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(watched)
        y_watched = watched**2
        y_unwatched = unwatched**2
    gradients = {
        "watched": tape.gradient(y_watched, watched),
        "unwatched": tape.gradient(y_unwatched, unwatched),  # None: nothing was recorded
    }
    del tape
    return {name: None if g is None else float(g) for name, g in gradients.items()}


# --8<-- [end:watch]


# --8<-- [start:intermediate]
def intermediate_gradient() -> float:
    """dz/dy where y = x² is an intermediate tensor and z = y², at x = 3.

    Returns:
        dz/dy = 2y = 18.0.
    """
    x = tf.constant(3.0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = x * x  # y = 9 was computed under the tape, so the tape knows it
        z = y * y
    return float(tape.gradient(z, y))  # 2y = 18, not dz/dx = 108


# --8<-- [end:intermediate]


# --8<-- [start:control_flow]
def loop_and_branch(x: tf.Tensor, steps: int) -> tf.Tensor:
    """Multiply by x on iterations 2, 3 and 4 of a Python loop, and only there."""
    output = tf.constant(1.0, x.dtype)
    for i in range(steps):
        if 1 < i < 5:
            output = output * x
    return output


def control_flow() -> dict[str, float]:
    """Gradients through Python control flow: the tape records only the branches taken.

    Returns:
        d/dx at x = 2 for 6 steps (x³: 3x² = 12) and for 4 steps (x²: 2x = 4).
    """
    x = tf.constant(2.0)
    results = {}
    for steps in (6, 4):
        with tf.GradientTape() as tape:
            tape.watch(x)
            output = loop_and_branch(x, steps)
        results[f"steps={steps}"] = float(tape.gradient(output, x))
    return results


# --8<-- [end:control_flow]


# --8<-- [start:numpy]
def numpy_round_trip() -> dict[str, Any]:
    """A value that leaves TensorFlow (here through NumPy) leaves the tape too.

    Returns:
        The gradient through TensorFlow ops (6.0) and through a NumPy round trip (None).
    """
    x = tf.Variable(3.0)
    with tf.GradientTape(persistent=True) as tape:
        inside = x**2
        outside = tf.constant(x.numpy() ** 2)  # computed by NumPy: the tape sees a constant
    gradients = {"tensorflow": tape.gradient(inside, x), "numpy": tape.gradient(outside, x)}
    del tape
    return {name: None if g is None else float(g) for name, g in gradients.items()}


# --8<-- [end:numpy]


# --8<-- [start:gradcheck_functions]
def check_functions() -> dict[str, float]:
    """`tapefit.gradcheck` on every function above: tape gradient against central finite
    differences, in float64.

    Returns:
        The worst relative error over all checks.
    """
    checks = {
        "x**2": tapefit.gradcheck(lambda x: x**2, 3.0),
        "y and z (persistent)": tapefit.gradcheck(lambda x: [x * x, (x * x) ** 2], 3.0),
        "loop and branch": tapefit.gradcheck(lambda x: loop_and_branch(x, 6), 2.0),
        "a*b*sin(a)": tapefit.gradcheck(lambda a, b: a * b * tf.sin(a), 1.0, 2.0),
        "tanh on a matrix": tapefit.gradcheck(
            lambda w: tf.reduce_sum(tf.tanh(w) ** 3), np.linspace(-2, 2, 12).reshape(3, 4)
        ),
    }
    for name, check in checks.items():
        print(
            f"gradcheck {name:<22} checked {check.checked:>2} entries, "
            f"max relative error {check.max_relative_error:.1e}"
        )
    return {name: check.max_relative_error for name, check in checks.items()}


# --8<-- [end:gradcheck_functions]


# --8<-- [start:gradcheck_model]
class TinyClassifier(tapefit.TapeModel):
    """Dense (tanh) -> Dense (softmax); `detach_hidden=True` adds a classic mistake."""

    def __init__(self, detach_hidden: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.detach_hidden = detach_hidden
        self.hidden = keras.layers.Dense(8, activation="tanh", name="hidden")
        self.out = keras.layers.Dense(3, activation="softmax", name="out")

    def call(self, x: Any, training: bool = False) -> Any:
        hidden = self.hidden(x)
        if self.detach_hidden:
            hidden = tf.stop_gradient(hidden)  # the mistake: the first layer can never learn
        return self.out(hidden)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "detach_hidden": self.detach_hidden}


def check_models() -> dict[str, Any]:
    """`tapefit.gradcheck(model, batch)`: the model's loss against finite differences, and
    the variables its loss does not reach.

    Returns:
        For the correct model and the broken one: the worst relative error and the
        unreached variables.
    """
    rng = np.random.default_rng(0)
    batch = (rng.normal(size=(16, 4)).astype("float32"), np.arange(16) % 3)
    results = {}
    for detach in (False, True):
        keras.utils.set_random_seed(0)
        model = TinyClassifier(detach_hidden=detach, name="tiny")
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        model(batch[0])  # build the weights
        check = tapefit.gradcheck(model, batch)
        name = "detached" if detach else "correct"
        print(
            f"gradcheck model ({name}): max relative error {check.max_relative_error:.1e}, "
            f"unreached {check.unreached}"
        )
        results[name] = {"error": check.max_relative_error, "unreached": check.unreached}
    return results


# --8<-- [end:gradcheck_model]


def plot_gradient(path: Path) -> Path:
    """f(x) = x·sin(x), its tape gradient over a grid, and central differences at a few x.

    Args:
        path: The PNG to write.

    Returns:
        `path`.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = tf.constant(np.linspace(-6, 6, 241), tf.float64)
    with tf.GradientTape() as tape:
        tape.watch(grid)
        values = grid * tf.sin(grid)  # elementwise: the gradient of the sum is each slope
    slopes = tape.gradient(values, grid)
    probes = np.linspace(-5.5, 5.5, 12)
    epsilon = 1e-4

    def f(x: np.ndarray) -> np.ndarray:
        return x * np.sin(x)

    numeric = (f(probes + epsilon) - f(probes - epsilon)) / (2 * epsilon)  # central differences
    figure, axis = plt.subplots(figsize=(6, 3.4))
    axis.plot(grid, values, label="f(x) = x·sin(x)")
    axis.plot(grid, slopes, label="tape.gradient", linestyle="--")
    axis.scatter(probes, numeric, color="black", s=14, zorder=3, label="finite differences")
    axis.set_xlabel("x")
    axis.grid(alpha=0.3)
    axis.legend(loc="lower center", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path


def main(out_dir: Path) -> dict[str, Any]:
    """Run every step of the tutorial, print its results and write `tape_basics.png`.

    Args:
        out_dir: Folder for the PNG (created if needed).

    Returns:
        Every value printed, by step.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "first": first_gradient(),
        "persistent": persistent_tape(),
        "watch": watching_constants(),
        "intermediate": intermediate_gradient(),
        "control_flow": control_flow(),
        "numpy": numpy_round_trip(),
    }
    for name, value in results.items():
        print(f"{name:<13} {value}")
    results["gradcheck"] = check_functions()
    results["gradcheck_model"] = check_models()
    results["png"] = plot_gradient(out_dir / "tape_basics.png")
    return results


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "."))
