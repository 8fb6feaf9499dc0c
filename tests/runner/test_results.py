"""`tapefit.runner.results`: the last phase of a run refuses non-finite test metrics."""

import math

import pytest

from tapefit.errors import TapefitError
from tapefit.runner.results import check_finite_metrics


def test_non_finite_test_metrics_fail_the_run_naming_them():
    check_finite_metrics({"test_loss": 0.5, "test_accuracy": 1.0, "samples": {"test": 3}})
    with pytest.raises(TapefitError, match=r"non-finite test_accuracy, test_loss: training"):
        check_finite_metrics({"test_loss": math.nan, "test_accuracy": math.inf, "epochs": 2})
