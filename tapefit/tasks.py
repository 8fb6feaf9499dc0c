"""What differs between model families: their data, their model and how they are compiled.

`train.run` is the same for every family; it looks the family up here by `model.name`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import keras

from tapefit.data import image_datasets
from tapefit.errors import TapefitError
from tapefit.models import Classifier


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


TASKS: dict[str, Task] = {"classifier": ClassifierTask()}


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
