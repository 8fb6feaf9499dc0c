"""What a model family declares, and the registry of families.

A family (`classifier`, `siamese`, ...) is one `Task` subclass in one module of this package,
decorated with `@register`. It names its model schema and its datasets (each a schema and a
loader), builds its model and compile arguments from the built data, and may add callbacks and
a report. `train.py` and `composition.py` only ever go through `FAMILIES` and `task_for`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import keras

from tapefit.errors import TapefitError


@dataclass(frozen=True)
class Dataset:
    """One `data=<name>` option of a family: its config schema and its loader.

    `load(data_cfg, seed)` returns the family's data object (pipelines plus the facts the model
    and loss need, e.g. `num_classes` or `label_range`).
    """

    schema: type
    load: Callable[[Any, int], Any]


class Task(ABC):
    """The family-specific pieces of a run; everything else is shared by `train.run`."""

    name: ClassVar[str]  # the value of `model.name`, and the name of conf/model/<name>.yaml
    model_schema: ClassVar[type]  # registered as model/<name>_schema
    datasets: ClassVar[dict[str, Dataset]]  # data.name -> Dataset, registered as <name>_schema

    def build_data(self, cfg: Any) -> Any:
        """The train/val/test data for `cfg.data`."""
        return self.datasets[cfg.data.name].load(cfg.data, cfg.seed)

    @abstractmethod
    def model(self, cfg: Any, data: Any) -> keras.Model:
        """The TapeModel for `cfg.model`, sized from `data`."""

    @abstractmethod
    def compile_arguments(self, cfg: Any, data: Any) -> dict[str, Any]:
        """`loss` and `metrics` for `Model.compile`; facts about the labels come from `data`."""

    def callbacks(self, cfg: Any, data: Any) -> list[keras.callbacks.Callback]:
        """Callbacks that must run before the configured ones (they add to the epoch logs)."""
        return []

    def report(self, model: keras.Model, data: Any, run_dir: Path) -> dict[str, Any]:
        """Extra metrics and artefacts after training; none by default."""
        return {}

    def check(self, cfg: Any) -> None:
        """Refuse values of the family's config that no run can use (one-line errors)."""
        return None

    def logged_metrics(self, cfg: Any) -> list[str]:
        """Metrics the step logs for training and validation (`val_` added for the latter)."""
        return ["loss"]

    def validation_metrics(self, cfg: Any) -> list[str]:
        """Metrics logged for validation only (whole-split callbacks), with their `val_`."""
        return []

    @abstractmethod
    def default_objective(self, cfg: Any) -> str:
        """The validation metric sweeps select on when `objective` is null."""

    @classmethod
    def schemas(cls) -> dict[tuple[str, str], type]:
        """This family's config schemas, keyed as Hydra's ConfigStore stores them."""
        stored = {("model", f"{cls.name}_schema"): cls.model_schema}
        stored.update(
            {("data", f"{name}_schema"): dataset.schema for name, dataset in cls.datasets.items()}
        )
        return stored


FAMILIES: dict[str, Task] = {}


def register(task_class: type[Task]) -> type[Task]:
    """Class decorator: make a family available as `model=<task_class.name>`."""
    if task_class.name in FAMILIES:
        raise TapefitError(f"model family {task_class.name!r} is registered twice")
    FAMILIES[task_class.name] = task_class()
    return task_class


def task_for(cfg: Any) -> Task:
    """The family of `cfg.model.name`, checked to accept `cfg.data.name`."""
    task = FAMILIES.get(cfg.model.name)
    if task is None:
        raise TapefitError(
            f"model.name={cfg.model.name!r} is unknown: choose one of {', '.join(FAMILIES)}"
        )
    if cfg.data.name not in task.datasets:
        raise TapefitError(
            f"data={cfg.data.name} does not fit model={cfg.model.name}: it takes "
            f"{', '.join(task.datasets)}"
        )
    return task
