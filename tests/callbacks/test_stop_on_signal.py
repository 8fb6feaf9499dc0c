"""`tapefit.callbacks.stop_on_signal`: a SIGINT, SIGTERM or SIGUSR1 stops the run after the
current step (after its checkpoint, or at the epoch's end for its last step), telling the
callbacks after the stopper first. The handlers are called directly, except in the two tests
that raise a signal in this process while `interruptible` has its handler installed (checked
first), which only records it. Whole runs stopped by signals: tests/checkpointing/."""

import signal

import keras
import numpy as np
import pytest

from tapefit.callbacks.stop_on_signal import (
    STOP_SIGNALS,
    RunInterrupted,
    StopOnSignal,
    interruptible,
)


class Told(keras.callbacks.Callback):
    """A callback after the stopper: records the batches `on_interrupt` is called with."""

    def __init__(self):
        super().__init__()
        self.told = []

    def on_interrupt(self, batch):
        self.told.append(batch)


class Checkpointer:
    """What the stopper asks of its `EpochCheckpoint`: the steps done so far saved, False at
    the epoch's last step (`last`), whose checkpoint comes at the epoch's end."""

    def __init__(self, last):
        self.last, self.saved = last, []

    def save_steps_done(self, batch):
        if batch == self.last:
            return False
        self.saved.append(batch)
        return True


def stopper_between(received=None):
    """A stopper in [Told, stopper, Told, plain callback], having received `received`."""
    stopper = StopOnSignal()
    before, after = Told(), Told()
    stopper.use_callbacks([before, stopper, after, keras.callbacks.History()])
    stopper.signum = received
    return stopper, before, after


def test_the_interruption_names_the_signal_and_keeps_its_number():
    stop = RunInterrupted(signal.SIGTERM)
    assert str(stop) == "interrupted by SIGTERM after the current step"
    assert stop.signum == signal.SIGTERM == 15


def test_without_a_signal_every_step_and_epoch_goes_on():
    stopper, _, after = stopper_between()
    stopper.on_train_begin()
    stopper.on_train_batch_end(0)
    stopper.on_test_batch_end(0)
    stopper.on_epoch_end(0)
    assert after.told == []


def test_a_signal_stops_after_the_step_telling_only_the_callbacks_after_the_stopper():
    stopper, before, after = stopper_between(signal.SIGUSR1)
    with pytest.raises(RunInterrupted) as stop:
        stopper.on_train_batch_end(4)
    assert stop.value.signum == signal.SIGUSR1
    assert after.told == [4] and before.told == []


def test_with_a_checkpoint_the_steps_are_saved_first_and_the_last_step_waits_for_the_epoch():
    stopper, _, after = stopper_between(signal.SIGTERM)
    stopper.checkpoint = Checkpointer(last=9)
    stopper.on_train_begin()
    stopper.on_train_batch_end(9)  # the epoch's last step: its validation comes first
    stopper.on_test_batch_end(0)  # validation runs to its end: the epoch is checkpointed
    assert stopper.checkpoint.saved == [] and after.told == []
    with pytest.raises(RunInterrupted):
        stopper.on_epoch_end(0)
    assert after.told == [None]  # at an epoch's end, no batch
    with pytest.raises(RunInterrupted):
        stopper.on_train_batch_end(3)  # mid-epoch: those steps are saved, then the stop
    assert stopper.checkpoint.saved == [3] and after.told == [None, 3]


def test_validation_stops_at_once_without_a_checkpoint_but_not_in_an_evaluate_after_fit():
    stopper, _, _ = stopper_between(signal.SIGINT)
    stopper.on_train_begin()
    with pytest.raises(RunInterrupted):
        stopper.on_test_batch_end(0)
    stopper.on_train_end()
    stopper.on_test_batch_end(0)  # not training: nothing to stop


def test_the_handlers_record_the_first_signal_in_training_stop_outside_it_and_are_restored():
    before = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    stopper = StopOnSignal()
    with interruptible(stopper):
        assert all(signal.getsignal(signum) is stopper.handler for signum in STOP_SIGNALS)
        with pytest.raises(RunInterrupted):  # outside fit there is no step to finish
            stopper.handler(signal.SIGINT, None)
        stopper.training = True
        stopper.handler(signal.SIGTERM, None)
        assert stopper.signum == signal.SIGTERM
        with pytest.raises(RunInterrupted):  # a second signal does not wait for the step
            stopper.handler(signal.SIGINT, None)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # as TensorFlow's multi-worker set-up
        stopper.rearm()
        assert signal.getsignal(signal.SIGTERM) is stopper.handler
    assert {signum: signal.getsignal(signum) for signum in STOP_SIGNALS} == before


def test_a_real_signal_in_training_is_only_recorded():
    stopper = StopOnSignal()
    stopper.training = True
    with interruptible(stopper):
        assert signal.getsignal(signal.SIGUSR1) is stopper.handler  # else no signal is sent
        signal.raise_signal(signal.SIGUSR1)
        assert stopper.signum == signal.SIGUSR1


class SignalAt(keras.callbacks.Callback):
    """SIGTERM to this process at the end of batch `batch` (before the stopper's hook)."""

    def __init__(self, batch):
        super().__init__()
        self.batch = batch

    def on_train_batch_end(self, batch, logs=None):
        if batch == self.batch:
            signal.raise_signal(signal.SIGTERM)


def test_a_sigterm_during_fit_stops_it_after_that_step():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    x = np.ones((16, 2), "float32")
    stopper = StopOnSignal()
    with interruptible(stopper):
        assert signal.getsignal(signal.SIGTERM) is stopper.handler  # else no signal is sent
        with pytest.raises(RunInterrupted) as stop:
            model.fit(
                x, x[:, :1], batch_size=2, epochs=2, verbose=0, callbacks=[SignalAt(2), stopper]
            )
    assert stop.value.signum == signal.SIGTERM
    assert int(model.optimizer.iterations) == 3  # batches 0, 1 and 2 of the first epoch
