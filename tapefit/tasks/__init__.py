"""Model families. Every module in this package defines one family and registers it on import;
importing the package imports them all, so a new family is a new module here and nothing else
in Python."""

import importlib
import pkgutil

from tapefit.tasks.base import FAMILIES, Dataset, Task, register, task_for


def _import_families() -> None:
    for module in pkgutil.iter_modules(__path__):
        if module.name != "base":
            importlib.import_module(f"{__name__}.{module.name}")


_import_families()

__all__ = ["FAMILIES", "Dataset", "Task", "register", "task_for"]
