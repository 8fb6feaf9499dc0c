"""What a model family declares, the registry of families, and how a run finds its family.

A family (`classifier`, `siamese`, or one of your own) is a `Family` subclass decorated with
`@register`. It names its model schema and its datasets (each a schema, a loader and its
checks), builds its model and compile arguments from the loaded data, and may add callbacks,
a report and its own objective. A model named by `_target_` needs no family: it gets
`TargetFamily` (`tapefit/families/target.py`). `train.py` and `composition.py` go only through
`FAMILIES` and `family_for`.

Families outside tapefit are found by the `tapefit.families` entry-point group (installed
packages) and by the `families` config key (modules to import when a run starts).
"""

from __future__ import annotations

import importlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, ClassVar

import keras

from tapefit.config.targets import ensure_working_directory_importable
from tapefit.errors import TapefitError

log = logging.getLogger("tapefit")
ENTRY_POINT_GROUP = "tapefit.families"


@dataclass(frozen=True)
class Dataset:
    """One `data=<name>` option of a family: its config schema, its loader and its checks.

    `load(data_cfg, seed)` returns the family's data object: `train`, `val` and `test`
    (`tf.data.Dataset`s, `val`/`test` may be None), `sizes` (samples per split) and, for
    sweeps that change only the batch size, optionally `rebuilt(batch_size)`.
    `check(data_cfg)` refuses values no run can use, before anything is loaded.
    """

    schema: type
    load: Callable[[Any, int], Any]
    check: Callable[[Any], None] | None = None


class Family(ABC):
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

    def export(self, model: keras.Model, data: Any, path: Path) -> None:
        """Write a SavedModel for serving at `path` (`trainer.export=true`): by default Keras'
        `model.export`, whose endpoint `serve` takes what `call` was built with."""
        model.export(str(path), format="tf_saved_model", verbose=False)

    def check(self, cfg: Any) -> None:
        """Refuse values of `cfg.model` that no run can use (one-line errors)."""
        return None

    def check_data(self, cfg: Any) -> None:
        """Run the checks of the dataset `cfg.data` names."""
        dataset = self.datasets.get(cfg.data.name)
        if dataset is not None and dataset.check is not None:
            dataset.check(cfg.data)

    def logged_metrics(self, cfg: Any, model: keras.Model | None = None) -> list[str] | None:
        """Metrics the step logs for training and validation (`val_` added for the latter);
        None when only the built `model` can tell."""
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


FAMILIES: dict[str, Family] = {}


def register(family_class: type[Family]) -> type[Family]:
    """Class decorator: make a family available as `model=<family_class.name>`."""
    if family_class.name in FAMILIES:
        if type(FAMILIES[family_class.name]).__qualname__ == family_class.__qualname__:
            return family_class  # the same module imported again (e.g. by path and by name)
        raise TapefitError(f"model family {family_class.name!r} is registered twice")
    FAMILIES[family_class.name] = family_class()
    return family_class


def import_family_modules(modules: Iterable[str], key: str = "families") -> None:
    """Import modules that register families (`families` config key), from the working
    directory or an installed package."""
    ensure_working_directory_importable()
    for module in modules:
        try:
            importlib.import_module(str(module))
        except ModuleNotFoundError as error:
            raise TapefitError(
                f"{key}: cannot import {module} ({error}): run from the folder that holds it, "
                "or install its package"
            ) from None


def load_entry_point_families() -> None:
    """Import every module installed packages declare in the `tapefit.families` group."""
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:
            entry.load()
        except Exception as error:
            log.warning("tapefit.families entry point %s failed to load: %s", entry.name, error)
