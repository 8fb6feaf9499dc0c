"""The one place a run's callbacks get their order (Lightning's callback connector)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import keras

from tapefit.callbacks.configured import CallbackSettings, build_callbacks
from tapefit.callbacks.progress import EpochLog, StepProgbar
from tapefit.config.schemas import TrainerConfig
from tapefit.objective import Objective
from tapefit.step.nonfinite_guard import NonFiniteGuard
from tapefit.step.step_guards import OnNonFinite


@dataclass(frozen=True)
class Connections:
    """What the run's other parts hand the callback order.

    Attributes:
        objective: The run's objective (the `auto` mode of a callback watching it).
        own: The model's `training_callbacks(data)` (they add to the epoch logs).
        before_writers: Resume state, best-epoch weights, the checkpointer, the signal
            stopper and a caller's callbacks, placed ahead of those that write the logs.
        append: The CSV log is continued (a resumed run), not started.
        loggers: The experiment tracker's callbacks (they send the complete epoch logs).
        averages: Weight EMA's swaps, or None.
    """

    objective: Objective
    own: list[keras.callbacks.Callback] = field(default_factory=list)
    before_writers: list[keras.callbacks.Callback] = field(default_factory=list)
    append: bool = False
    loggers: list[keras.callbacks.Callback] = field(default_factory=list)
    averages: Any = None


def assemble_callbacks(
    settings: CallbackSettings, trainer: TrainerConfig, run_dir: Path, connected: Connections
) -> list[keras.callbacks.Callback]:
    """The run's callbacks in their order (`settings`: the configured callbacks; `trainer`:
    the trainer's typed settings):

    0. with weight EMA, `connected.averages.swap_in`: validation and the epoch-end callbacks
       up to its `swap_out` (placed in `before_writers`, ahead of the resume checkpointer)
       see the averaged weights;
    1. the non-finite guard (it must see a bad step before anything records it);
    2. the model's own `training_callbacks(data)` (they add to the epoch logs);
    3. the configured ones, with `connected.before_writers` ahead of those that write the
       logs (the CSV appended to when `connected.append`);
    4. the progress bar, then the epoch's log line;
    5. the experiment tracker's (`connected.loggers`), which sends the complete epoch logs.

    Callbacks that save or carry the others' state get the final list (`use_callbacks`).
    """
    callbacks = list(connected.own)
    if OnNonFinite(trainer.on_nonfinite) != OnNonFinite.ignore:
        callbacks.insert(0, NonFiniteGuard())
    if connected.averages is not None:  # EMA: averaged weights from validation until `swap_out`
        callbacks.insert(0, connected.averages.swap_in)
    callbacks += build_callbacks(
        settings,
        run_dir,
        before_writers=connected.before_writers,
        append=connected.append,
        objective=connected.objective,
    )
    if trainer.verbose:  # before the epoch's log line, so the bar ends its line first
        callbacks.append(StepProgbar())
    callbacks.append(EpochLog())
    callbacks += connected.loggers
    for callback in callbacks:
        if hasattr(callback, "use_callbacks"):
            callback.use_callbacks(callbacks)
    return callbacks
