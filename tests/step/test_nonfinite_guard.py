"""tapefit/step/nonfinite_guard.py: `on_nonfinite=stop` ends training at the first NaN/inf step,
naming its epoch and optimizer step, and `skip` reports the steps skipped; `fit` adds the guard."""

import keras
import numpy as np
import pytest

from tapefit import TapefitError
from tests.step.breakable_net import Net, X, Y, poisoned, train


def test_a_plain_fit_without_the_guard_callback_stops_too():
    """`compile(on_nonfinite="stop")` is all a plain `fit` user writes: TapeModel adds the
    guard itself, and `skip` reports its skipped steps."""
    model = Net()
    model.compile(keras.optimizers.Adam(1e-2), on_nonfinite="stop", allow_missing_gradients=["*"])
    with pytest.raises(TapefitError, match=r"NaN/inf at epoch 1, optimizer step 2"):
        model.fit(poisoned(), Y, batch_size=32, epochs=1, verbose=0, shuffle=False)
    model = Net()
    model.compile(keras.optimizers.Adam(1e-2), on_nonfinite="skip", allow_missing_gradients=["*"])
    history = model.fit(poisoned(), Y, batch_size=32, epochs=2, verbose=0, shuffle=False)
    assert history.history["skipped_steps"] == [1, 1]


def test_stop_names_epoch_and_step_and_keeps_the_last_finite_weights():
    with pytest.raises(TapefitError, match=r"NaN/inf at epoch 1, optimizer step 2: training st"):
        train("stop", poisoned())
    model, _ = train("skip", poisoned()[:64], epochs=1)  # the same first step, then the bad one
    first_only, _ = train("ignore", X[:32], epochs=1)
    for a, b in zip(model.get_weights(), first_only.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
