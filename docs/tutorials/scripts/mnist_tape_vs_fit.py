"""An MLP and the tutorial CNN on scikit-learn's 8x8 digits, trained twice each: by a
hand-written GradientTape loop, then by `tapefit.TapeModel.fit`. The tutorial "MNIST MLP and
CNN" runs this file step by step.

    python docs/tutorials/scripts/mnist_tape_vs_fit.py /tmp/mnist-tutorial

Both ways start from the same initial weights and see the batches in the same order, so they
end with the same numbers, bit for bit (on CPU). The script prints each epoch of both, and
writes `mnist_curves.png` (loss and accuracy of both ways, training and validation) and the
fit run's TensorBoard logs into the output folder.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import tapefit  # first: pins Keras to the TensorFlow backend

# isort: split
import keras
import numpy as np
import tensorflow as tf

from tapefit.data.loaders import digits

EPOCHS = 6  # passes over the training split, for each network and each way
BATCH_SIZE = 32
SEED = 0


# --8<-- [start:data]
def load_data() -> tuple[Any, Any]:
    """Two identical copies of the digits' pipelines: one for the loop, one for `fit`.

    Returns:
        `(for_the_loop, for_fit)`: tapefit `ImageData` with `train`, `val` and `test`
        `tf.data` pipelines of `(images, labels)` batches.
    """
    keras.utils.set_random_seed(SEED)  # the shuffle order comes from the seed
    data = digits(batch_size=BATCH_SIZE, seed=SEED)  # 8x8x1 images in [0, 1], labels 0-9
    return data, data.rebuilt(BATCH_SIZE)  # same arrays, the same first-epoch shuffle again


# --8<-- [end:data]


# --8<-- [start:networks]
def network(kind: str) -> tuple[keras.KerasTensor, keras.KerasTensor]:
    """The inputs and outputs of the MLP or the CNN, from the same seed every call.

    Args:
        kind: `mlp` (64 -> 64 ReLU units) or `cnn` (conv/BatchNorm/pool blocks, dense 256,
            BatchNorm and Dropout: what `model.architecture=cnn` builds).

    Returns:
        `(inputs, outputs)` of a functional network; outputs are class probabilities.
    """
    keras.utils.set_random_seed(SEED)  # same initial weights and dropout masks every time
    inputs = keras.Input((8, 8, 1))
    layers = keras.layers
    if kind == "mlp":
        hidden = layers.Flatten()(inputs)
        hidden = layers.Dense(64, activation="relu")(hidden)
        hidden = layers.Dense(64, activation="relu")(hidden)
    else:
        hidden = inputs
        for filters, convolutions in ((16, 1), (32, 2), (64, 3)):
            for _ in range(convolutions):
                hidden = layers.Conv2D(filters, 3, padding="same", activation="relu")(hidden)
            hidden = layers.BatchNormalization(momentum=0.9)(hidden)
            hidden = layers.MaxPooling2D()(hidden)  # 8x8 -> 4x4 -> 2x2 -> 1x1
        hidden = layers.Flatten()(hidden)
        hidden = layers.Dense(256, activation="relu")(hidden)
        hidden = layers.BatchNormalization(momentum=0.9)(hidden)
        hidden = layers.Dropout(0.5)(hidden)
    outputs = layers.Dense(10, activation="softmax")(hidden)
    return inputs, outputs


# --8<-- [end:networks]


# --8<-- [start:loop]
def train_by_hand(kind: str, data: Any, epochs: int) -> tuple[keras.Model, dict[str, list]]:
    """The hand-written way: a plain `keras.Model`, a tape, an optimizer, metrics and an epoch
    loop, all written out.

    Args:
        kind: `mlp` or `cnn`.
        data: The digits' pipelines (`train`, `val`).
        epochs: Passes over the training split.

    Returns:
        The trained model and its history, `{"loss": [...], "accuracy": [...], "val_loss": ...}`.
    """
    model = keras.Model(*network(kind))
    optimizer = keras.optimizers.Adam(1e-3)
    loss_fn = keras.losses.SparseCategoricalCrossentropy()
    mean_loss = keras.metrics.Mean()
    accuracy = keras.metrics.SparseCategoricalAccuracy()

    @tf.function(reduce_retracing=True)  # a graph, as fit() compiles its step (see below)
    def train_step(images: tf.Tensor, labels: tf.Tensor) -> None:
        with tf.GradientTape() as tape:
            probabilities = model(images, training=True)  # forward pass under the tape
            loss = loss_fn(labels, probabilities)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
        mean_loss.update_state(loss, sample_weight=tf.shape(images)[0])  # mean over samples
        accuracy.update_state(labels, probabilities)

    @tf.function(reduce_retracing=True)
    def test_step(images: tf.Tensor, labels: tf.Tensor) -> None:
        probabilities = model(images, training=False)  # BatchNorm's moving statistics, no dropout
        mean_loss.update_state(loss_fn(labels, probabilities), sample_weight=tf.shape(images)[0])
        accuracy.update_state(labels, probabilities)

    history: dict[str, list] = {"accuracy": [], "loss": [], "val_accuracy": [], "val_loss": []}
    for epoch in range(epochs):
        for prefix, step, split in (("", train_step, data.train), ("val_", test_step, data.val)):
            mean_loss.reset_state()
            accuracy.reset_state()
            for images, labels in split:  # a new pass: the training split is reshuffled
                step(images, labels)
            history[f"{prefix}loss"].append(float(mean_loss.result()))
            history[f"{prefix}accuracy"].append(float(accuracy.result()))
        print(
            f"loop {kind} epoch {epoch + 1}: loss {history['loss'][-1]:.4f}, "
            f"accuracy {history['accuracy'][-1]:.4f}, val_loss {history['val_loss'][-1]:.4f}, "
            f"val_accuracy {history['val_accuracy'][-1]:.4f}"
        )
    return model, history


# --8<-- [end:loop]


# --8<-- [start:fit]
def train_with_fit(
    kind: str, data: Any, epochs: int, out_dir: Path
) -> tuple[tapefit.TapeModel, dict[str, list]]:
    """The tapefit way: the same network as a `TapeModel`, its tape step run by `fit`.

    Args:
        kind: `mlp` or `cnn`.
        data: The digits' pipelines (`train`, `val`).
        epochs: Passes over the training split.
        out_dir: Where TensorBoard logs and the best model (`<kind>_best.keras`) go.

    Returns:
        The trained model and `History.history`.
    """
    model = tapefit.TapeModel(*network(kind))
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
        jit_compile=False,  # as the loop's tf.function (XLA would round differently)
    )
    history = model.fit(
        data.train.repeat(),  # one endless stream of reshuffled passes (see the tutorial)
        steps_per_epoch=len(data.train),  # an epoch is one pass: 39 batches of up to 32
        validation_data=data.val,
        epochs=epochs,
        verbose=0,  # 2: one line per epoch, as Keras prints it
        shuffle=False,  # the dataset shuffles itself (and Keras warns that it ignores True)
        callbacks=[
            keras.callbacks.TensorBoard(log_dir=str(out_dir / "logs" / kind)),
            keras.callbacks.ModelCheckpoint(
                out_dir / f"{kind}_best.keras", monitor="val_accuracy", save_best_only=True
            ),
        ],
    )
    for epoch in range(len(history.history["loss"])):
        print(
            f"fit  {kind} epoch {epoch + 1}: "
            + ", ".join(f"{k} {v[epoch]:.4f}" for k, v in sorted(history.history.items()))
        )
    return model, history.history


# --8<-- [end:fit]


def plot_curves(histories: dict[str, dict[str, list]], path: Path) -> Path:
    """Loss and accuracy per epoch, training and validation, of every run in `histories`.

    Args:
        histories: `{"mlp loop": history, "mlp fit": history, ...}`.
        path: The PNG to write.

    Returns:
        `path`.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(8.5, 3.4))
    for index, (name, history) in enumerate(histories.items()):
        color, fit = f"C{index // 2}", name.endswith("fit")
        for axis, metric in zip(axes, ("loss", "accuracy"), strict=True):
            epochs = np.arange(1, len(history[metric]) + 1)
            for prefix, line, marker in (("", "-", "o"), ("val_", ":", "s")):
                style = (
                    {"marker": marker, "markersize": 7, "fillstyle": "none", "linestyle": "none"}
                    if fit
                    else {"linestyle": line, "linewidth": 1.2}
                )
                label = f"{name}, {'validation' if prefix else 'training'}"
                axis.plot(epochs, history[prefix + metric], color=color, label=label, **style)
    for axis, metric in zip(axes, ("loss", "accuracy"), strict=True):
        axis.set_xlabel("epoch")
        axis.set_title(metric)
        axis.grid(alpha=0.3)
    axes[0].set_yscale("log")
    axes[1].legend(fontsize=6.5, loc="lower right")
    figure.suptitle("hand-written loop (lines) and TapeModel.fit (markers)", fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path


def main(out_dir: Path) -> dict[str, Any]:
    """Train the MLP and the CNN both ways, compare, and write `mnist_curves.png`.

    Args:
        out_dir: Folder for the PNG and the TensorBoard logs (created if needed).

    Returns:
        Per network: both histories, the largest weight difference between the two ways,
        the test accuracy of the fit model, and the seconds each way took.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    histories = {}
    for kind in ("mlp", "cnn"):
        loop_data, fit_data = load_data()
        start = time.perf_counter()
        looped, loop_history = train_by_hand(kind, loop_data, EPOCHS)
        loop_seconds = time.perf_counter() - start
        start = time.perf_counter()
        fitted, fit_history = train_with_fit(kind, fit_data, EPOCHS, out_dir)
        fit_seconds = time.perf_counter() - start
        # --8<-- [start:compare]
        weight_difference = max(
            float(np.max(np.abs(a - b)))
            for a, b in zip(looped.get_weights(), fitted.get_weights(), strict=True)
        )
        same_history = all(loop_history[key] == fit_history[key] for key in loop_history)
        print(f"{kind}: largest weight difference {weight_difference}, same history {same_history}")
        # --8<-- [end:compare]
        # --8<-- [start:best]
        best = keras.models.load_model(out_dir / f"{kind}_best.keras")  # a TapeModel again
        test = best.evaluate(fit_data.test, verbose=0, return_dict=True)
        print(f"{kind}: test loss {test['loss']:.4f}, test accuracy {test['accuracy']:.4f}")
        # --8<-- [end:best]
        histories[f"{kind} loop"], histories[f"{kind} fit"] = loop_history, fit_history
        results[kind] = {
            "loop": loop_history,
            "fit": fit_history,
            "weight_difference": weight_difference,
            "same_history": same_history,
            "test": test,
            "seconds": {"loop": loop_seconds, "fit": fit_seconds},
            "params": fitted.count_params(),
        }
    results["png"] = plot_curves(histories, out_dir / "mnist_curves.png")
    return results


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "."))
