"""tapefit/models/siamese_pretrained.py: settings that mean nothing beside a pretrained encoder
are refused, and a KerasHub preset folder builds the encoder."""

import numpy as np
import pytest

pytest.importorskip("keras_hub")
pytest.importorskip("safetensors")

from tapefit import SiameseModel
from tapefit.errors import TapefitError
from tests.text.pretrained_checkpoints import write_keras_hub_preset


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"encoder": {"preset": "X", "units": 64}},
            "model.encoder.units means nothing beside model.encoder.preset",
        ),
        (
            {"encoder": {"preset": "X"}, "vocabulary": ["a", "cat"]},
            "model.encoder.preset brings its own tokenizer and vocabulary, so the data must "
            "not learn one: set data.tokenizer=pretrained",
        ),
        ({"encoder": {"preset": None}}, "model.encoder.preset is not set"),
        (
            {"encoder": {"preset": "X", "pooling": "last"}},
            "model.encoder.pooling=last: a pretrained encoder pools by mean, cls or max",
        ),
        (
            {"vocabulary": ["a"], "tokenizer": "pretrained"},
            "tokenizer=pretrained needs a pretrained encoder to bring the tokenizer",
        ),
        (
            {"encoder": {"preset": "X"}, "tokenizer": "wordpiece"},
            "model.tokenizer=wordpiece: model.encoder.preset brings its own tokenizer",
        ),
    ],
    ids=["scratch-key", "vocabulary", "no-preset", "pooling", "pretrained-alone", "wordpiece"],
)
def test_settings_that_mean_nothing_with_a_pretrained_encoder_are_refused(
    preset, arguments, message
):
    if arguments.get("encoder", {}).get("preset") == "X":
        arguments = {**arguments, "encoder": {**arguments["encoder"], "preset": str(preset)}}
    with pytest.raises(TapefitError) as refused:
        SiameseModel(**arguments)
    assert message in str(refused.value)


@pytest.mark.slow
def test_a_keras_hub_preset_folder_builds_the_same_model(tmp_path):
    write_keras_hub_preset(tmp_path / "preset")
    model = SiameseModel(encoder={"preset": str(tmp_path / "preset"), "projection": 8})
    assert tuple(model.encode(["a cat", "a dog sat"]).shape) == (2, 8)
    np.testing.assert_allclose(np.linalg.norm(model.encode(["a cat"]), axis=1), 1.0, rtol=1e-6)
