"""tapefit/models/siamese_run_hooks.py: only a cosine_mse model maps similarities to labels."""

import pytest

import tapefit
from tapefit import TapefitError


def test_only_a_cosine_mse_model_has_a_label_scale():
    regressing = tapefit.SiameseModel(vocabulary=["a"], label_range=[0.0, 5.0])
    assert regressing.similarity_to_label([0.5]).tolist() == [2.5]
    ranking = tapefit.SiameseModel(vocabulary=["a"], loss={"name": "cosent"})
    with pytest.raises(TapefitError, match=r"model\.loss\.name=cosent learns similarities"):
        ranking.similarity_to_label([0.5])
