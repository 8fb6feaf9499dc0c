"""`tapefit.callbacks.configured`: the `callbacks` group's callbacks built from their specs, files
inside the run directory, `mode: auto` resolved, in the order of their roles."""

import keras
import pytest

from tapefit.callbacks.configured import (
    CallbackSettings,
    build_callback,
    build_callbacks,
    callback_arguments,
    monitor_mode,
)
from tapefit.config.target_spec import TargetSpec
from tapefit.errors import TapefitError
from tapefit.objective import Objective


def spec(name, target, **arguments):
    return TargetSpec(f"callbacks.{name}", target, arguments, checked=True)


CHECKPOINT = spec(
    "model_checkpoint",
    "keras.callbacks.ModelCheckpoint",
    enabled=True,
    monitor="val_loss",
    mode="auto",
    save_best_only=True,
    filename="checkpoints/best.weights.h5",
)
CSV = spec("csv_logger", "keras.callbacks.CSVLogger", enabled=True, filename="history.csv")
STOPPING = spec("early_stopping", "keras.callbacks.EarlyStopping", monitor="val_loss", mode="max")


def test_a_checkpoint_is_written_inside_the_run_directory_under_the_name_its_class_takes(tmp_path):
    checkpoint = build_callback(CHECKPOINT, tmp_path, None, append=False)
    assert isinstance(checkpoint, keras.callbacks.ModelCheckpoint)
    assert checkpoint.filepath == str(tmp_path / "checkpoints" / "best.weights.h5")
    assert (tmp_path / "checkpoints").is_dir()  # made before training writes into it
    assert checkpoint.save_weights_only is True  # from the .weights.h5 ending
    assert checkpoint.mode == "min"  # auto, for a loss


def test_only_the_values_a_signature_takes_are_supplied_and_tapefits_keys_are_dropped(tmp_path):
    supplied = {"log_dir": "logs", "append": True}
    assert callback_arguments(CSV, tmp_path, supplied) == {
        "filename": str(tmp_path / "history.csv"),
        "append": True,  # CSVLogger takes `append`, not `log_dir`
    }
    set_by_config = spec("csv_logger", "keras.callbacks.CSVLogger", filename="h.csv", append=False)
    assert callback_arguments(set_by_config, None, supplied) == {
        "filename": "h.csv",  # no run directory: as given
        "append": False,  # the config's own value wins
    }


def test_auto_takes_the_objectives_direction_for_the_objective_else_the_metrics():
    agreement = Objective("val_agreement", "max")
    key = "callbacks.early_stopping.mode"
    assert monitor_mode("val_agreement", "auto", key, agreement) == "max"
    assert monitor_mode("val_accuracy", "auto", key, agreement) == "max"
    assert monitor_mode("val_agreement", "min", key, agreement) == "min"  # as configured
    with pytest.raises(
        TapefitError,
        match=r"^callbacks\.early_stopping\.mode=auto cannot tell whether val_agreement is better",
    ):
        monitor_mode("val_agreement", "auto", key, Objective("val_loss", "min"))


def test_the_callbacks_come_acting_then_extra_then_the_given_ones_then_the_writers(tmp_path):
    extra = spec("extra.terminate", "keras.callbacks.TerminateOnNaN")
    settings = CallbackSettings(acting=(STOPPING, CHECKPOINT), extra=(extra,), writers=(CSV,))
    mine = keras.callbacks.History()
    built = build_callbacks(settings, tmp_path, before_writers=[mine], append=True)
    assert [type(c).__name__ for c in built] == [
        "EarlyStopping",
        "ModelCheckpoint",
        "TerminateOnNaN",
        "History",
        "CSVLogger",
    ]
    assert built[0].mode == "max" and built[3] is mine and built[4].append is True
    assert settings.enabled("csv_logger") is CSV and settings.enabled("tensorboard") is None
    assert settings.enabled("extra.terminate") is None  # extra callbacks are not by role
