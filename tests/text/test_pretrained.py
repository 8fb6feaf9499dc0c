"""Pretrained encoders read from folders the tests write: KerasHub presets and Hugging Face
folders load with their weights and tokenizers exactly, and every folder tapefit cannot use
is refused in one line that names it."""

import numpy as np
import pytest

pytest.importorskip("keras_hub")
pytest.importorskip("safetensors")

from tapefit.errors import TapefitError
from tapefit.text.pretrained import load_pretrained
from tests.text.pretrained_checkpoints import (
    write_hf_folder,
    write_keras_hub_preset,
    write_tokenizer_json,
)

TEXTS = ["The quick brown fox jumps", "a cat sits on the mat", "Birds flew"]


def assert_same_weights(expected, loaded):
    assert len(expected.weights) == len(loaded.weights)
    for a, b in zip(expected.weights, loaded.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)


def test_a_keras_hub_preset_folder_loads_its_backbone_and_tokenizer(tmp_path):
    written = write_keras_hub_preset(tmp_path / "preset")
    parts = load_pretrained(str(tmp_path / "preset"))
    assert type(parts.backbone).__name__ == "BertBackbone"
    assert_same_weights(written, parts.backbone)
    assert (parts.pooling, parts.sequence_length) == (None, None)


def test_a_sentence_transformers_folder_loads_weights_tokenizer_pooling_and_length(tmp_path):
    written = write_hf_folder(tmp_path / "st", pooling="cls")
    parts = load_pretrained(str(tmp_path / "st"))
    assert_same_weights(written, parts.backbone)  # the Hugging Face names converted exactly
    assert (parts.pooling, parts.sequence_length) == ("cls", 32)
    ids = [list(map(int, row)) for row in parts.tokenizer(TEXTS)]
    assert ids[1] == [
        parts.tokenizer.token_to_id(w) for w in ["a", "cat", "sits", "on", "the", "mat"]
    ]


def test_tokenizer_json_alone_tokenises_as_vocab_txt(tmp_path):
    write_hf_folder(tmp_path / "both", tokenizer_json=False)
    write_hf_folder(tmp_path / "json", vocab_txt=False)
    from_vocab = load_pretrained(str(tmp_path / "both")).tokenizer(TEXTS)
    from_json = load_pretrained(str(tmp_path / "json")).tokenizer(TEXTS)
    assert [list(map(int, r)) for r in from_vocab] == [list(map(int, r)) for r in from_json]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d.mkdir(), "the folder has no config.json"),
        (
            lambda d: write_hf_folder(d, model_type="mpnet"),
            "model_type='mpnet', which is not a text encoder KerasHub converts (supported: "
            "bert, distilbert, roberta, xlm-roberta, albert)",
        ),
        (
            lambda d: write_hf_folder(d, weights="pytorch"),
            "no model.safetensors (it holds pytorch_model.bin, which tapefit never loads); "
            "convert it to safetensors once",
        ),
        (
            lambda d: write_hf_folder(d, pooling="weightedmean_tokens"),
            "1_Pooling/config.json asks for pooling_mode_weightedmean_tokens; tapefit pools by "
            "one of mean, cls or max",
        ),
        (
            lambda d: write_hf_folder(d, vocab_txt=False, tokenizer_json=False),
            "neither vocab.txt nor tokenizer.json is there",
        ),
    ],
    ids=["no-config", "mpnet", "pickled-weights", "weighted-pooling", "no-tokenizer"],
)
def test_a_folder_tapefit_cannot_use_is_refused_naming_it(tmp_path, make, message):
    folder = tmp_path / "checkpoint"
    make(folder)
    with pytest.raises(TapefitError) as refused:
        load_pretrained(str(folder))
    assert str(refused.value).startswith(f"model.encoder.preset={folder}: ")
    assert message in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_bpe_tokenizer_json_without_vocab_txt_is_refused(tmp_path):
    folder = tmp_path / "bpe"
    write_hf_folder(folder, vocab_txt=False)
    write_tokenizer_json(folder / "tokenizer.json", kind="BPE")
    with pytest.raises(TapefitError, match=r"tokenizer\.json holds a BPE tokenizer"):
        load_pretrained(str(folder))


def test_a_missing_folder_names_what_a_preset_may_be(tmp_path):
    with pytest.raises(TapefitError, match="no such folder \\(give a KerasHub preset folder"):
        load_pretrained(str(tmp_path / "missing"))


def test_an_unreadable_config_is_refused(tmp_path):
    folder = tmp_path / "broken"
    write_hf_folder(folder)
    (folder / "config.json").write_text("{not json")
    with pytest.raises(TapefitError, match=r"config\.json is not readable JSON"):
        load_pretrained(str(folder))
