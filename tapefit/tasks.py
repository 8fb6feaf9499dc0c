"""What differs between model families: their data, their model and how they are compiled.

`train.run` is the same for every family; it looks the family up here by `model.name`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import keras

from tapefit.data import image_datasets, pair_datasets
from tapefit.errors import TapefitError
from tapefit.losses import PAIR_LOSSES
from tapefit.metrics import SplitMetrics, pair_metrics
from tapefit.models import Classifier, SiameseModel
from tapefit.outputs import plot_similarity


class Task(ABC):
    """The family-specific pieces of a run."""

    data_names: tuple[str, ...] = ()

    @abstractmethod
    def datasets(self, cfg: Any) -> Any:
        """Train/val/test pipelines for `cfg.data`."""

    @abstractmethod
    def model(self, cfg: Any, data: Any) -> keras.Model:
        """The TapeModel for `cfg.model`, sized from `data`."""

    @abstractmethod
    def compile_arguments(self, cfg: Any) -> dict[str, Any]:
        """`loss` and `metrics` for `Model.compile`."""

    def callbacks(self, cfg: Any, data: Any) -> list[keras.callbacks.Callback]:
        """Callbacks that must run before the configured ones (they add to the epoch logs)."""
        return []

    def report(self, model: keras.Model, data: Any, run_dir: Path) -> dict[str, Any]:
        """Extra metrics and artefacts after training; none by default."""
        return {}


class ClassifierTask(Task):
    """Images -> class probabilities, sparse categorical cross-entropy, accuracy."""

    data_names = ("digits", "mnist")

    def datasets(self, cfg: Any) -> Any:
        return image_datasets(cfg.data, cfg.seed)

    def model(self, cfg: Any, data: Any) -> keras.Model:
        return Classifier(
            image_shape=data.image_shape,
            num_classes=data.num_classes,
            architecture=str(cfg.model.architecture.value),
            dropout=cfg.model.dropout,
            bn_momentum=cfg.model.bn_momentum,
            hidden_units=list(cfg.model.hidden_units),
        )

    def compile_arguments(self, cfg: Any) -> dict[str, Any]:
        return {"loss": "sparse_categorical_crossentropy", "metrics": ["accuracy"]}


class SiameseTask(Task):
    """Text pairs -> cosine similarity, a pair loss, whole-split correlation or AUC metrics."""

    data_names = ("pairs_synthetic", "pairs_file")

    def datasets(self, cfg: Any) -> Any:
        data = pair_datasets(cfg.data, cfg.seed)
        loss = cfg.model.loss.name.value
        if loss == "contrastive" and data.label_type != "binary":
            raise TapefitError(
                "loss=contrastive needs binary 0/1 labels: set data.label_type=binary, or use "
                "model.loss.name=cosine_mse for graded labels"
            )
        if loss == "cosine_mse" and data.label_type != "graded":
            raise TapefitError(
                "loss=cosine_mse regresses graded labels: set data.label_type=graded, or use "
                "model.loss.name=contrastive for binary labels"
            )
        return data

    def model(self, cfg: Any, data: Any) -> keras.Model:
        encoder = {key: value for key, value in cfg.model.encoder.items()}
        return SiameseModel.from_texts(
            data.training_texts(),
            sequence_length=cfg.data.sequence_length,
            max_tokens=cfg.data.max_tokens,
            encoder=encoder,
        )

    def compile_arguments(self, cfg: Any) -> dict[str, Any]:
        options = cfg.model.loss
        name = options.name.value
        loss_class = PAIR_LOSSES[name]
        if name == "cosine_mse":
            label_range = (0.0, 5.0) if cfg.data.name == "pairs_synthetic" else cfg.data.label_range
            loss = loss_class(
                label_range=list(label_range), target_range=list(options.target_range)
            )
        elif name == "contrastive":
            loss = loss_class(margin=options.margin)
        elif name == "in_batch_negatives":
            loss = loss_class(scale=options.scale)
        else:
            loss = loss_class()
        return {"loss": loss}

    def callbacks(self, cfg: Any, data: Any) -> list[keras.callbacks.Callback]:
        labels = data.splits["val"][2]
        return [SplitMetrics(data.inputs("val"), labels, data.label_type, prefix="val_")]

    def report(self, model: keras.Model, data: Any, run_dir: Path) -> dict[str, Any]:
        scores = model.predict(data.inputs("test"), verbose=0)
        gold = data.splits["test"][2]
        plot_similarity(scores, gold, data.label_type, run_dir / "similarity.png")
        metrics = pair_metrics(scores, gold, data.label_type)
        report = {f"test_{name}": value for name, value in metrics.items()}
        report["skipped_lines"] = data.skipped_lines
        return report


TASKS: dict[str, Task] = {"classifier": ClassifierTask(), "siamese": SiameseTask()}


def task_for(cfg: Any) -> Task:
    """The task for `cfg.model.name`, checked against `cfg.data.name`."""
    task = TASKS.get(cfg.model.name)
    if task is None:
        raise TapefitError(f"model.name={cfg.model.name!r} is unknown: choose one of {list(TASKS)}")
    if cfg.data.name not in task.data_names:
        raise TapefitError(
            f"data={cfg.data.name} does not fit model={cfg.model.name}: it takes "
            f"{', '.join(task.data_names)}"
        )
    return task
