"""tapefit/models/siamese_options.py: the pair loss chosen refuses hard negatives it cannot use."""

import pytest

import tapefit
from tapefit.errors import TapefitError


def test_a_siamese_model_without_a_negative_loss_refuses_negatives():
    model = tapefit.SiameseModel(vocab_size=20, sequence_length=4, hard_negatives=True)
    with pytest.raises(TapefitError, match=r"model\.loss\.name=cosine_mse cannot use") as error:
        model.compile_defaults()
    assert "\n" not in str(error.value)
    again = tapefit.SiameseModel.from_config(model.get_config())
    assert again.hard_negatives is True
