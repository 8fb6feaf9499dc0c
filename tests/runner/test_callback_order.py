"""`tapefit.runner.callback_order`: the one place a run's callbacks get their order."""

import keras

import tapefit
from tapefit.callbacks.progress import EpochLog, StepProgbar
from tapefit.objective import Objective
from tapefit.runner.callback_order import Connections, assemble_callbacks
from tapefit.runner.spec import RunSpec
from tapefit.step.nonfinite_guard import NonFiniteGuard


class Named(keras.callbacks.Callback):
    """A callback known by its name; it records the list `use_callbacks` hands it."""

    def __init__(self, name):
        super().__init__()
        self.name, self.given = name, None

    def use_callbacks(self, callbacks):
        self.given = callbacks


def kinds(callbacks):
    return [getattr(c, "name", None) or type(c).__name__ for c in callbacks]


def test_guard_own_acting_connected_writers_progress_log_then_loggers(tmp_path):
    spec = RunSpec.of(
        tapefit.compose(
            [
                "callbacks.early_stopping.enabled=true",
                "callbacks.csv_logger.enabled=true",
                "callbacks.tensorboard.enabled=true",
                "callbacks.step_telemetry.enabled=true",
                "trainer.verbose=1",
                "trainer.on_nonfinite=stop",
            ]
        )
    )
    own, state, tracker = Named("own"), Named("state"), Named("tracker")
    connected = Connections(
        objective=Objective("val_loss", "min", "best"),
        own=[own],
        before_writers=[state],
        loggers=[tracker],
    )
    callbacks = assemble_callbacks(spec.callbacks, spec.trainer, tmp_path, connected)
    assert kinds(callbacks) == [
        "NonFiniteGuard",
        "own",
        "EarlyStopping",
        "StepTelemetry",  # a step's row is written before the checkpointer holds the step
        "state",
        "StepTensorBoard",
        "CSVLogger",
        "StepProgbar",
        "EpochLog",
        "tracker",
    ]
    assert isinstance(callbacks[0], NonFiniteGuard)
    assert own.given is callbacks and tracker.given is callbacks  # the final list, once


def test_no_guard_when_nonfinite_steps_are_ignored_and_no_bar_when_quiet(tmp_path):
    spec = RunSpec.of(tapefit.compose(["trainer.verbose=0", "trainer.on_nonfinite=ignore"]))
    connected = Connections(objective=spec.objective)
    callbacks = assemble_callbacks(spec.callbacks, spec.trainer, tmp_path, connected)
    assert not any(isinstance(c, (NonFiniteGuard, StepProgbar)) for c in callbacks)
    assert isinstance(callbacks[-1], EpochLog)
