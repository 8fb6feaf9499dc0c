"""Checkpoints worth keeping (`checkpoint.save_top_k=K`): the K best epochs' models by the run's
objective, and the last epoch's, as `.keras` files in `<run dir>/checkpoints/`, each named with
its epoch and objective value (`epoch-0003-val_accuracy=0.9722.keras`), so that
`python -m tapefit.evaluate run=... ckpt=best|last|<epoch>` finds them by name.

Unlike the resume checkpoints (`resume/`, removed when the run completes), these stay.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from tapefit.callbacks.monitored import MonitoredCallback
from tapefit.errors import TapefitError
from tapefit.objective import Objective, rank
from tapefit.training.run_files import save_model

log = logging.getLogger("tapefit")

FOLDER = "checkpoints"
LAST = "last.keras"
NAME = re.compile(r"^epoch-(?P<epoch>\d{4})-(?P<metric>.+)=(?P<value>[-+.\deEinfa]+)\.keras$")


def checkpoint_name(epoch: int, metric: str, value: float) -> str:
    """The file name of a kept checkpoint: its epoch (from 1, as `Epoch 3/10`) and value.

    Examples:
        >>> checkpoint_name(3, "val_accuracy", 0.97222)
        'epoch-0003-val_accuracy=0.9722.keras'
    """
    return f"epoch-{epoch:04d}-{metric}={value:.4f}.keras"


def kept_checkpoints(folder: Path) -> list[tuple[int, float, Path]]:
    """The kept checkpoints in `folder`: `(epoch, value, path)`, by epoch."""
    found = []
    for path in Path(folder).glob("epoch-*.keras"):
        match = NAME.match(path.name)
        if match:
            found.append((int(match["epoch"]), float(match["value"]), path))
    return sorted(found)


def resolve_checkpoint(folder: Path, which: str, direction: str) -> Path:
    """The kept checkpoint `which` names: `best` (by `direction`), `last`, or an epoch number.

    Args:
        folder: `<run dir>/checkpoints`.
        which: `best`, `last` or an epoch counted from 1.
        direction: `max` or `min`: whether a higher objective value is better.

    Returns:
        The `.keras` file.

    Raises:
        TapefitError: nothing kept under that name, with what is kept.
    """
    kept = kept_checkpoints(folder)
    if which == "last":
        path = Path(folder) / LAST
        if path.is_file():
            return path
        raise TapefitError(f"ckpt=last: no {FOLDER}/{LAST}: train with checkpoint.save_last=true")
    if which == "best" and kept:  # the best value; among equals the first epoch
        return min(kept, key=lambda item: (rank(item[1], direction), item[0]))[2]
    if which.isdigit():
        for epoch, _, path in kept:
            if epoch == int(which):
                return path
    names = ", ".join(str(epoch) for epoch, _, _ in kept) or "none"
    raise TapefitError(
        f"ckpt={which}: no kept checkpoint of that name in {folder} (kept epochs: {names}); "
        "train with checkpoint.save_top_k=K to keep the K best"
    )


class KeepBestCheckpoints(MonitoredCallback):
    """Saves the `save_top_k` best epochs' models (by `objective`) and, with `save_last`, the
    last epoch's, into `folder`; a model falling out of the best K is deleted.

    Args:
        folder: Where the `.keras` files go (`<run dir>/checkpoints`).
        objective: The run's objective (name and direction).
        save_top_k: How many of the best epochs to keep, at least 1.
        save_last: Also keep `last.keras`, the latest epoch's model.
    """

    def __init__(
        self, folder: Path, objective: Objective, save_top_k: int, save_last: bool = True
    ) -> None:
        super().__init__(objective)
        self.folder = Path(folder)
        self.save_top_k, self.save_last = save_top_k, save_last
        self.kept: list[tuple[int, float, Path]] = []

    def on_train_begin(self, logs: dict | None = None) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.kept = kept_checkpoints(self.folder)  # a resumed run's earlier best

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        value = self.monitored_value(logs)
        if self.save_last:
            save_model(self.model, self.folder / LAST)
        if value is None:
            return  # checked before training: the objective is logged every epoch
        kept = [item for item in self.kept if item[0] != epoch + 1]  # a re-run epoch
        worst = self._worst(kept)
        if len(kept) >= self.save_top_k and not self.objective.better(value, worst[1]):
            return
        path = self.folder / checkpoint_name(epoch + 1, self.objective.name, value)
        save_model(self.model, path)
        kept.append((epoch + 1, value, path))
        while len(kept) > self.save_top_k:
            dropped = self._worst(kept)
            kept.remove(dropped)
            dropped[2].unlink(missing_ok=True)
        self.kept = sorted(kept)

    def _worst(self, kept: list[tuple[int, float, Path]]) -> Any:
        if not kept:
            return (0, self.objective.worst, None)
        # the worst value; among equals the latest epoch goes first (the first best is kept)
        return max(kept, key=lambda item: (self.objective.rank(item[1]), item[0]))
