"""Transfer learning on a folder of photos: tapefit's `BackboneClassifier` against the Keras
guide's code, same backbone, same batches, same seed.

    python experiments/image_benchmark.py                      # a random ResNet, synthetic photos
    python experiments/image_benchmark.py --preset DIR         # your KerasHub / timm / HF folder
    python experiments/image_benchmark.py --quick              # a smoke run

Each variant runs in a fresh process of its own, in turn, `--rounds` times:

- **keras**: the guide "Transfer learning & fine-tuning": the backbone frozen
  (`trainable = False`) and called with `training=False`, a new head (average pooling, dropout,
  dense softmax) compiled and fitted; then the backbone unfrozen, compiled again with a 100
  times smaller learning rate, and fitted on. Plain `keras.Model`, `compile`, `fit`.
- **tapefit**: `BackboneClassifier` with `fine_tuning.freeze_backbone_epochs`, one run of `fit`
  whose callback unfreezes the backbone, a `backbone` optimizer at the smaller rate.

Both read the batches of tapefit's `image_folder` loader (decoded, resized, shuffled by the same
seed). Reported per phase: the median seconds per step (each phase's first step, which traces,
left out) and the validation accuracy at the phase's end. The goal: tapefit's frozen phase costs
no more than the guide's plain `fit` of the head.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# isort: split


import keras
import numpy as np

from tapefit.data.loaders import image_folder
from tapefit.models import BackboneClassifier
from tapefit.models.image_backbone import load_image_backbone

CLASSES = ("columns5", "rows7", "columns9")  # the stripes of each class


class StepClock(keras.callbacks.Callback):
    """The end time of every training step, by epoch."""

    def on_train_begin(self, logs: dict | None = None) -> None:
        self.epochs: list[list[float]] = getattr(self, "epochs", [])

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.epochs.append([time.perf_counter()])

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self.epochs[-1].append(time.perf_counter())


def write_photos(root: Path, per_class: int, seed: int) -> None:
    """Class folders of JPEG photos, 60-90 by 80 pixels: one grey-brown colour for all, and a
    faint pattern per class (stripes of its own period and direction) under heavy noise."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    for index, name in enumerate(CLASSES):
        (root / name).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            height = 60 + i % 31
            pixels = np.array([120.0, 100.0, 80.0]) + rng.normal(0, 60, (height, 80, 3))
            rows, columns = np.mgrid[0:height, 0:80]
            phase = rng.uniform(0, 2 * np.pi)
            wave = np.sin((rows if index % 2 else columns) * 2 * np.pi / (5 + 2 * index) + phase)
            pixels += 25 * wave[..., None]
            Image.fromarray(np.clip(pixels, 0, 255).astype("uint8")).save(root / name / f"{i}.jpg")


def write_backbone(folder: Path, blocks: tuple[int, ...] = (2, 2)) -> None:
    """A random ResNet (stacks of 64 then 128 filters, `blocks` basic blocks each; two stacks
    of two by default) and an ImageNet converter at 64x64."""
    import keras_hub

    keras.utils.set_random_seed(0)
    keras_hub.models.ResNetBackbone(
        input_conv_filters=[64],
        input_conv_kernel_sizes=[7],
        stackwise_num_filters=[64, 128][: len(blocks)],
        stackwise_num_blocks=list(blocks),
        stackwise_num_strides=[1, 2][: len(blocks)],
        block_type="basic_block",
    ).save_to_preset(str(folder))
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    keras_hub.layers.ResNetImageConverter(
        image_size=(64, 64),
        scale=[1 / (255 * s) for s in std],
        offset=[-m / s for m, s in zip(mean, std, strict=True)],
    ).save_to_preset(str(folder))


def phases(clock: StepClock, frozen: int) -> dict[str, float]:
    """Median seconds per step of the frozen and the fine-tuning epochs (first steps out)."""
    result = {}
    for name, epochs in (("frozen", clock.epochs[:frozen]), ("tuned", clock.epochs[frozen:])):
        steps = [b - a for times in epochs for a, b in itertools.pairwise(times)]
        result[f"{name}_step_s"] = statistics.median(steps[1:])
    return result


def keras_guide(data: Any, preset: str, settings: dict) -> dict[str, Any]:
    """The guide's code: frozen base, new head, fit; unfreeze, compile at 1/100, fit on."""
    parts = load_image_backbone(preset)
    base, converter = parts.backbone, parts.converter
    base.trainable = False
    inputs = keras.Input(data.image_shape)
    # the converter's work as the guide writes it: Resizing, then the scale and offset
    height, width = converter.image_size
    x = keras.layers.Resizing(height, width, crop_to_aspect_ratio=True)(inputs * 255.0)
    x = x * np.asarray(converter.scale, "float32") + np.asarray(converter.offset or 0.0, "float32")
    x = base(x, training=False)
    x = keras.layers.GlobalAveragePooling2D()(x)
    x = keras.layers.Dropout(0.2)(x)
    outputs = keras.layers.Dense(len(CLASSES), activation="softmax")(x)
    model = keras.Model(inputs, outputs)
    clock, frozen, total = StepClock(), settings["frozen_epochs"], settings["epochs"]
    loss, metrics = "sparse_categorical_crossentropy", ["accuracy"]
    model.compile(keras.optimizers.Adam(settings["learning_rate"]), loss, metrics=metrics)
    first = model.fit(
        data.train, validation_data=data.val, epochs=frozen, callbacks=[clock], verbose=0
    )
    base.trainable = True
    model.compile(keras.optimizers.Adam(settings["learning_rate"] / 100), loss, metrics=metrics)
    second = model.fit(
        data.train, validation_data=data.val, initial_epoch=frozen, epochs=total,
        callbacks=[clock], verbose=0,
    )  # fmt: skip
    return {
        **phases(clock, frozen),
        "frozen_val_accuracy": first.history["val_accuracy"][-1],
        "tuned_val_accuracy": second.history["val_accuracy"][-1],
    }


def tapefit_model(data: Any, preset: str, settings: dict) -> dict[str, Any]:
    """`BackboneClassifier`: the same recipe in one `fit`."""
    frozen, rate = settings["frozen_epochs"], settings["learning_rate"]
    model = BackboneClassifier(
        data.image_shape,
        len(CLASSES),
        backbone={"preset": preset},
        dropout=0.2,
        fine_tuning={"freeze_backbone_epochs": frozen},
    )
    optimizers = {
        "head": keras.optimizers.Adam(rate),
        "backbone": keras.optimizers.Adam(rate / 100),
    }
    model.compile(optimizers, **model.compile_defaults())
    clock = StepClock()
    history = model.fit(
        data.train, validation_data=data.val, epochs=settings["epochs"],
        callbacks=[*model.training_callbacks(data), clock], verbose=0,
    )  # fmt: skip
    accuracy = history.history["val_accuracy"]
    return {
        **phases(clock, frozen),
        "frozen_val_accuracy": accuracy[frozen - 1],
        "tuned_val_accuracy": accuracy[-1],
    }


VARIANTS = {"keras": keras_guide, "tapefit": tapefit_model}


def variant(name: str, settings: dict, out: Path) -> None:
    """One variant in this process: load the folder's batches, train, write the figures."""
    keras.utils.set_random_seed(settings["seed"])
    data = image_folder(
        settings["photos"] + "/train",
        validation_path=settings["photos"] + "/val",
        image_size=(64, 64),
        batch_size=settings["batch_size"],
        seed=settings["seed"],
    )
    started = time.perf_counter()
    result = VARIANTS[name](data, settings["preset"], settings)
    result["wall_s"] = time.perf_counter() - started
    out.write_text(json.dumps(result))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Write the photos (and a backbone), run every variant `--rounds` times, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default=None, help="a backbone folder; default: random ResNet")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--frozen-epochs", type=int, default=2)
    parser.add_argument("--per-class", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="1 round, 2 epochs, 24 per class")
    parser.add_argument(
        "--blocks", type=int, nargs="+", default=[2, 2], metavar="N",
        help="the random ResNet's basic blocks per stack, one or two stacks (default 2 2; "
        "a smoke run's smallest: 1)",
    )  # fmt: skip
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--variant", choices=list(VARIANTS), help=argparse.SUPPRESS)
    parser.add_argument("--settings", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 1 <= len(args.blocks) <= 2 or min(args.blocks) < 1:
        parser.error(f"--blocks {' '.join(map(str, args.blocks))}: one or two counts >= 1")
    if args.variant:
        variant(args.variant, json.loads(args.settings), args.out)
        return {}
    if args.quick:
        args.rounds, args.epochs, args.frozen_epochs, args.per_class = 1, 2, 1, 24
    results: dict[str, list[dict]] = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        write_photos(folder / "photos" / "train", args.per_class, seed=0)
        write_photos(folder / "photos" / "val", max(args.per_class // 4, 4), seed=1)
        preset = args.preset or str(folder / "backbone")
        if args.preset is None:
            write_backbone(folder / "backbone", tuple(args.blocks))
        settings = {
            "photos": str(folder / "photos"), "preset": preset, "epochs": args.epochs,
            "frozen_epochs": args.frozen_epochs, "learning_rate": 1e-3, "batch_size": 32,
            "seed": 0,
        }  # fmt: skip
        for round_ in range(args.rounds):
            for name in VARIANTS:
                out = folder / f"{name}-{round_}.json"
                command = [sys.executable, __file__, "--variant", name, "--out", str(out)]
                subprocess.run([*command, "--settings", json.dumps(settings)], check=True)
                results[name].append(json.loads(out.read_text()))
                print(json.dumps({"variant": name, "round": round_, **results[name][-1]}))
    summary = {
        name: {key: statistics.median(r[key] for r in rows) for key in rows[0]}
        for name, rows in results.items()
    }
    pairs = list(zip(results["tapefit"], results["keras"], strict=True))  # round by round
    ratios = [t["frozen_step_s"] / k["frozen_step_s"] for t, k in pairs]
    tuned = [t["tuned_step_s"] / k["tuned_step_s"] for t, k in pairs]
    report = {
        "rounds": results,
        "medians": summary,
        "frozen_ratio": statistics.median(ratios),
        "tuned_ratio": statistics.median(tuned),
    }
    print("variant | frozen s/step | tuned s/step | val acc frozen | val acc tuned")
    for name, row in summary.items():
        print(
            f"{name} | {row['frozen_step_s']:.4f} | {row['tuned_step_s']:.4f} | "
            f"{row['frozen_val_accuracy']:.4f} | {row['tuned_val_accuracy']:.4f}"
        )
    print(
        f"tapefit/keras step time, frozen {report['frozen_ratio']:.3f} (goal <= 1.05), "
        f"fine-tuning {report['tuned_ratio']:.3f} (medians of within-round ratios)"
    )
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
