"""Tiny pretrained-encoder checkpoints the tests write themselves (no network): a KerasHub
preset folder (`save_to_preset`) and Hugging Face-format folders as `transformers` and
`sentence-transformers` save them (config.json, model.safetensors with the Hugging Face BERT
weight names, vocab.txt and/or tokenizer.json, modules.json and 1_Pooling/config.json)."""

from __future__ import annotations

import json
from pathlib import Path

import keras
import numpy as np

WORDS = [
    *("the", "a", "an", "cat", "cats", "dog", "dogs", "sat", "sits", "ran", "runs", "on"),
    *("mat", "bird", "birds", "flew", "over", "red", "blue", "big", "small", "fox", "quick"),
    *("brown", "lazy", "jumps", "man", "woman", "plays", "guitar", "eats", "food", "is"),
    *("are", "in", "park"),
]
VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, "##s", "##ed", "##ing"]
SIZES = {"num_layers": 2, "num_heads": 2, "hidden_dim": 16, "intermediate_dim": 32}
MAX_LENGTH = 64
# Four scored sentence pairs the pretrained-encoder tests train on, two to a batch.
TEXTS_A = ["the cat sat on the mat", "a dog runs", "birds flew over the park", "a man eats food"]
TEXTS_B = ["a cat sits on a mat", "the dog ran", "a big bird", "the woman plays guitar"]
LABELS = np.array([4.5, 3.5, 1.0, 0.5], dtype="float32")


def scored_pairs():
    """`TEXTS_A`, `TEXTS_B` and `LABELS` as a dataset of `((texts_a, texts_b), labels)`,
    two pairs a batch."""
    import tensorflow as tf

    return tf.data.Dataset.from_tensor_slices(((TEXTS_A, TEXTS_B), LABELS)).batch(2)


def tiny_backbone(seed: int = 0, num_layers: int = SIZES["num_layers"]):
    """A random BERT backbone over `VOCABULARY`, 2 layers unless `num_layers` says otherwise
    (every weight drawn from `seed`)."""
    import keras_hub

    keras.utils.set_random_seed(seed)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(VOCABULARY),
        max_sequence_length=MAX_LENGTH,
        **{**SIZES, "num_layers": num_layers},
    )
    rng = np.random.default_rng(seed)
    for weight in backbone.weights:
        weight.assign(rng.normal(0.0, 0.2, weight.shape).astype("float32"))
    return backbone


def write_keras_hub_preset(folder: Path, seed: int = 0):
    """A KerasHub preset folder (backbone + tokenizer); returns the backbone written."""
    import keras_hub

    backbone = tiny_backbone(seed)
    backbone.save_to_preset(str(folder))
    keras_hub.models.BertTokenizer(vocabulary=VOCABULARY, lowercase=True).save_to_preset(
        str(folder)
    )
    return backbone


def hf_bert_weights(backbone, prefix: str = "") -> dict[str, np.ndarray]:
    """The backbone's weights under Hugging Face BERT names, PyTorch layout (out, in)."""
    hidden = backbone.hidden_dim

    def array(variable) -> np.ndarray:
        return np.asarray(keras.ops.convert_to_numpy(variable), dtype="float32")

    layer = backbone.get_layer
    weights = {
        "embeddings.word_embeddings.weight": array(layer("token_embedding").embeddings),
        "embeddings.position_embeddings.weight": array(
            layer("position_embedding").position_embeddings
        ),
        "embeddings.token_type_embeddings.weight": array(layer("segment_embedding").embeddings),
        "embeddings.LayerNorm.weight": array(layer("embeddings_layer_norm").gamma),
        "embeddings.LayerNorm.bias": array(layer("embeddings_layer_norm").beta),
        "pooler.dense.weight": array(layer("pooled_dense").kernel).T,
        "pooler.dense.bias": array(layer("pooled_dense").bias),
    }
    for i in range(backbone.num_layers):
        block = layer(f"transformer_layer_{i}")
        attention = block._self_attention_layer
        name = f"encoder.layer.{i}."
        for part, dense in (
            ("query", attention.query_dense),
            ("key", attention.key_dense),
            ("value", attention.value_dense),
        ):
            weights[f"{name}attention.self.{part}.weight"] = (
                array(dense.kernel).reshape(hidden, hidden).T
            )
            weights[f"{name}attention.self.{part}.bias"] = array(dense.bias).reshape(hidden)
        output = attention.output_dense
        weights[f"{name}attention.output.dense.weight"] = (
            array(output.kernel).reshape(hidden, hidden).T
        )
        weights[f"{name}attention.output.dense.bias"] = array(output.bias)
        norm = block._self_attention_layer_norm
        weights[f"{name}attention.output.LayerNorm.weight"] = array(norm.gamma)
        weights[f"{name}attention.output.LayerNorm.bias"] = array(norm.beta)
        weights[f"{name}intermediate.dense.weight"] = array(
            block._feedforward_intermediate_dense.kernel
        ).T
        weights[f"{name}intermediate.dense.bias"] = array(
            block._feedforward_intermediate_dense.bias
        )
        weights[f"{name}output.dense.weight"] = array(block._feedforward_output_dense.kernel).T
        weights[f"{name}output.dense.bias"] = array(block._feedforward_output_dense.bias)
        weights[f"{name}output.LayerNorm.weight"] = array(block._feedforward_layer_norm.gamma)
        weights[f"{name}output.LayerNorm.bias"] = array(block._feedforward_layer_norm.beta)
    return {prefix + key: np.ascontiguousarray(value) for key, value in weights.items()}


def write_tokenizer_json(path: Path, lowercase: bool = True, kind: str = "WordPiece") -> None:
    """A `tokenizers` JSON file of the WordPiece vocabulary (or another `kind` of model)."""
    vocab = {word: i for i, word in enumerate(VOCABULARY)}
    spec = {
        "version": "1.0",
        "normalizer": {"type": "BertNormalizer", "lowercase": lowercase},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "model": {"type": kind, "unk_token": "[UNK]", "vocab": vocab},
    }
    path.write_text(json.dumps(spec))


def write_hf_folder(
    folder: Path,
    seed: int = 0,
    vocab_txt: bool = True,
    tokenizer_json: bool = True,
    pooling: str | None = "mean",
    weights: str = "safetensors",
    model_type: str = "bert",
    num_layers: int = SIZES["num_layers"],
):
    """A Hugging Face-format BERT folder as sentence-transformers saves it; returns the
    backbone whose weights it holds.

    Args:
        folder: Where to write it.
        seed: The weights' seed.
        vocab_txt: Write vocab.txt.
        tokenizer_json: Write tokenizer.json.
        pooling: Write modules.json and 1_Pooling/config.json with this mode (mean, cls, max,
            or any other sentence-transformers mode name); None: a plain transformers folder.
        weights: `safetensors`, or `pytorch` (a pytorch_model.bin stand-in only).
        model_type: config.json's `model_type`.
        num_layers: The encoder's layers (a test whose subject is not the conversion of
            each layer takes 1).
    """
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    backbone = tiny_backbone(seed, num_layers)
    if weights == "safetensors":
        save_file(hf_bert_weights(backbone), str(folder / "model.safetensors"))
    else:
        (folder / "pytorch_model.bin").write_bytes(b"\x80\x02pickled")
    config = {
        "architectures": ["BertModel"],
        "model_type": model_type,
        "vocab_size": len(VOCABULARY),
        "hidden_size": SIZES["hidden_dim"],
        "num_hidden_layers": num_layers,
        "num_attention_heads": SIZES["num_heads"],
        "intermediate_size": SIZES["intermediate_dim"],
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": MAX_LENGTH,
        "type_vocab_size": 2,
        "layer_norm_eps": 1e-12,
        "pad_token_id": 0,
    }
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"do_lower_case": True, "tokenizer_class": "BertTokenizer"})
    )
    if vocab_txt:
        (folder / "vocab.txt").write_text("\n".join(VOCABULARY) + "\n")
    if tokenizer_json:
        write_tokenizer_json(folder / "tokenizer.json")
    if pooling is not None:
        modules = [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {
                "idx": 1,
                "name": "1",
                "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling",
            },
        ]
        (folder / "modules.json").write_text(json.dumps(modules))
        (folder / "1_Pooling").mkdir(exist_ok=True)
        modes = {
            "word_embedding_dimension": SIZES["hidden_dim"],
            "pooling_mode_cls_token": pooling == "cls",
            "pooling_mode_mean_tokens": pooling == "mean",
            "pooling_mode_max_tokens": pooling == "max",
        }
        if pooling not in ("mean", "cls", "max"):
            modes[f"pooling_mode_{pooling}"] = True
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(modes))
        (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 32}))
    return backbone
