"""`tune.space` checked before the first trial (`tapefit.sweeps.space_check`), in one line."""

import pytest

from tapefit import TapefitError
from tapefit.config.schemas import SpaceEntry
from tapefit.sweeps.space_check import check_space
from tapefit.sweeps.spec import SearchSpec


def test_a_key_the_config_cannot_take_is_refused_once_the_space_is_checked(compose):
    cfg = compose(["tune=random"])
    cfg.tune.space = {"trainer.epocs": SpaceEntry(type="choice", values=[1, 2])}
    spec = SearchSpec.of(cfg)  # the edge converts; check_space refuses, in one line
    assert spec.configured == {"trainer.epocs": None}
    expected = r"^tune.space.trainer.epocs: value 1 cannot run: trainer.epocs is not a config key"
    with pytest.raises(TapefitError, match=expected):
        check_space(spec)
