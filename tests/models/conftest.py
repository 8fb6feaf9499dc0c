"""Fixtures of the model tests: a one-layer BERT checkpoint in Hugging Face's folder layout,
written once a session, and its folder as the pretrained encoder's `preset`."""

import pytest

from tests.text.pretrained_checkpoints import write_hf_folder


@pytest.fixture(scope="session")
def one_layer_bert(tmp_path_factory):
    """A one-layer BERT folder as sentence-transformers saves it (mean pooling): the subjects
    of its tests are the packing, pooling, tape step, schedules and reloads of a pretrained
    backbone, not the conversion of each layer (whose tracing they would pay twice over with
    the default two)."""
    folder = tmp_path_factory.mktemp("pretrained") / "st"
    write_hf_folder(folder, pooling="mean", num_layers=1)
    return folder


@pytest.fixture(scope="module")
def preset(one_layer_bert):
    """The session's one-layer BERT folder as a string, as a config's
    `model.encoder.preset` names it (test_pretrained_encoder.py, test_fine_tuning.py,
    test_siamese_pretrained.py)."""
    return str(one_layer_bert)
