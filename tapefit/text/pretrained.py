"""A pretrained text encoder's parts, read from a folder or a KerasHub preset: the backbone,
its tokenizer, and what a sentence-transformers folder says of its pooling and length.

`keras_hub.models.Backbone.from_preset` reads KerasHub presets (by name, or a folder saved with
`save_to_preset`) and Hugging Face-format folders (`config.json` + `model.safetensors`, as
`transformers` and `sentence-transformers` save them) for the architectures KerasHub
converts. Everything this module refuses, it refuses before training, in one line that names
the folder, the file and what is supported. Loading never runs code from the checkpoint:
weights come from safetensors or Keras weight files only; pickled PyTorch weights are refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tapefit.errors import TapefitError

# Hugging Face `model_type`s of text encoders KerasHub converts (keras_hub 0.32).
HF_TEXT_ENCODERS = ("bert", "distilbert", "roberta", "xlm-roberta", "albert")
# sentence-transformers' pooling modes (1_Pooling/config.json), by tapefit's name.
POOLING_MODES = {
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
}
CONVERT = (
    'convert it to safetensors once, where transformers is installed: python -c "from '
    "transformers import AutoModel as M; M.from_pretrained('{folder}').save_pretrained("
    "'{folder}', safe_serialization=True)\""
)


@dataclass(frozen=True)
class PretrainedParts:
    """What a pretrained text encoder is made of.

    Attributes:
        backbone: The KerasHub backbone, with its weights.
        tokenizer: Its tokenizer (vocabulary, lower-casing), a KerasHub tokenizer layer.
        pooling: The pooling the checkpoint was trained with (`1_Pooling/config.json` of a
            sentence-transformers folder: `mean`, `cls` or `max`), None when it says none.
        sequence_length: The most tokens it was trained with (`sentence_bert_config.json`'s
            `max_seq_length`), None when it says none.
        source: The preset name or folder, for messages.
    """

    backbone: Any
    tokenizer: Any
    pooling: str | None
    sequence_length: int | None
    source: str


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise TapefitError(f"model.encoder.preset: {path} is not readable JSON ({error})") from None


def check_folder(folder: Path) -> str:
    """Refuse a folder that is not a text encoder KerasHub can load; return its kind,
    `keras_hub` or `huggingface`.

    Args:
        folder: The preset folder.

    Raises:
        TapefitError: no `config.json`, an architecture that is not a text encoder KerasHub
            converts, or no weights tapefit will read (pickled PyTorch weights are refused).

    Example:
        >>> check_folder(Path("no/such/folder"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        tapefit.errors.TapefitError: model.encoder.preset=no/such/folder: ...
    """
    if not folder.is_dir():
        raise TapefitError(
            f"model.encoder.preset={folder}: no such folder (give a KerasHub preset folder, a "
            "Hugging Face-format folder with config.json and model.safetensors, or a KerasHub "
            "preset name)"
        )
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise TapefitError(
            f"model.encoder.preset={folder}: the folder has no config.json, so it is neither a "
            "KerasHub preset (save_to_preset) nor a Hugging Face checkpoint"
        )
    config = _read_json(config_file)
    if "registered_name" in config:
        return "keras_hub"
    model_type = config.get("model_type")
    if model_type not in HF_TEXT_ENCODERS:
        raise TapefitError(
            f"model.encoder.preset={folder}: config.json says model_type={model_type!r}, which is "
            f"not a text encoder KerasHub converts (supported: {', '.join(HF_TEXT_ENCODERS)})"
        )
    if not any((folder / name).is_file() for name in SAFETENSORS):
        pickled = [n for n in ("pytorch_model.bin", "tf_model.h5") if (folder / n).is_file()]
        found = f" (it holds {', '.join(pickled)}, which tapefit never loads)" if pickled else ""
        raise TapefitError(
            f"model.encoder.preset={folder}: no model.safetensors{found}; "
            + CONVERT.format(folder=folder)
        )
    return "huggingface"


SAFETENSORS = ("model.safetensors", "model.safetensors.index.json")


def sentence_transformers_pooling(folder: Path) -> str | None:
    """The pooling `1_Pooling/config.json` (named in `modules.json`) says the checkpoint was
    trained with, or None.

    Raises:
        TapefitError: a pooling mode tapefit has not (weighted mean, last token, ...).
    """
    modules_file = folder / "modules.json"
    if not modules_file.is_file():
        return None
    modules = _read_json(modules_file)
    paths = [m.get("path", "") for m in modules if str(m.get("type", "")).endswith("Pooling")]
    if not paths or not (folder / paths[0] / "config.json").is_file():
        return None
    config = _read_json(folder / paths[0] / "config.json")
    modes = [name for key, name in POOLING_MODES.items() if config.get(key)]
    others = [k for k, v in config.items() if k.startswith("pooling_mode") and v]
    unknown = [k for k in others if k not in POOLING_MODES]
    if unknown or len(modes) != 1:
        raise TapefitError(
            f"model.encoder.preset={folder}: {paths[0]}/config.json asks for "
            f"{', '.join(others) or 'no pooling'}; tapefit pools by one of mean, cls or max: "
            "set model.encoder.pooling to choose one"
        )
    return modes[0]


def sentence_transformers_length(folder: Path) -> int | None:
    """`max_seq_length` of `sentence_bert_config.json`, or None."""
    path = folder / "sentence_bert_config.json"
    if not path.is_file():
        return None
    length = _read_json(path).get("max_seq_length")
    return int(length) if length else None


def _wordpiece_from_tokenizer_json(folder: Path) -> Any:
    """A BERT tokenizer from `tokenizer.json` alone (sentence-transformers folders may have no
    vocab.txt): its WordPiece vocabulary in id order and its lower-casing."""
    import keras_hub

    spec = _read_json(folder / "tokenizer.json")
    model = spec.get("model") or {}
    if model.get("type") != "WordPiece":
        raise TapefitError(
            f"model.encoder.preset={folder}: tokenizer.json holds a {model.get('type')} "
            "tokenizer and there is no vocab.txt; tapefit reads a WordPiece tokenizer.json, or "
            "vocab.txt"
        )
    vocabulary = sorted(model["vocab"], key=model["vocab"].get)
    lowercase = bool((spec.get("normalizer") or {}).get("lowercase", True))
    return keras_hub.models.BertTokenizer(vocabulary=vocabulary, lowercase=lowercase)


def load_tokenizer(folder: Path, kind: str) -> Any:
    """The folder's tokenizer: KerasHub's reader, or for a BERT-style checkpoint without
    vocab.txt or tokenizer_config.json, one built from `tokenizer.json` or `vocab.txt`."""
    import keras_hub

    config = _read_json(folder / "config.json")
    wordpiece = kind == "huggingface" and config.get("model_type") in ("bert", "distilbert")
    if wordpiece and not (folder / "vocab.txt").is_file():
        if (folder / "tokenizer.json").is_file():
            return _wordpiece_from_tokenizer_json(folder)
        raise TapefitError(
            f"model.encoder.preset={folder}: neither vocab.txt nor tokenizer.json is there: "
            "copy the checkpoint's tokenizer files into the folder"
        )
    if wordpiece and not (folder / "tokenizer_config.json").is_file():
        lines = (folder / "vocab.txt").read_text(encoding="utf-8").splitlines()
        return keras_hub.models.BertTokenizer(vocabulary=lines, lowercase=True)
    try:
        return keras_hub.models.Tokenizer.from_preset(str(folder))
    except (FileNotFoundError, ValueError, KeyError) as error:
        raise TapefitError(
            f"model.encoder.preset={folder}: its tokenizer cannot be read ({error}); a KerasHub "
            "preset needs tokenizer.json and assets/tokenizer/, a Hugging Face folder its "
            "tokenizer files (vocab.txt, or vocab.json and merges.txt)"
        ) from None


def load_pretrained(preset: str) -> PretrainedParts:
    """The backbone, tokenizer and sentence-transformers settings of `preset`.

    Args:
        preset: A local KerasHub preset folder, a local Hugging Face-format folder, or a
            KerasHub preset name (downloaded by KerasHub, or read from its cache).

    Returns:
        The parts.

    Raises:
        TapefitError: keras-hub missing, or a folder this module refuses (see
            `check_folder`), in one line.

    Example:
        >>> load_pretrained("no/such/folder")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        tapefit.errors.TapefitError: model.encoder.preset=no/such/folder: ...
    """
    looks_like_path = "/" in preset or preset.startswith(".") or Path(preset).exists()
    if looks_like_path:
        folder = Path(preset).expanduser()
        kind = check_folder(folder)
    try:
        import keras_hub
    except ImportError:
        raise TapefitError(
            "model.encoder.preset needs keras-hub: pip install 'tapefit[text]'"
        ) from None
    if not looks_like_path:
        return _named_preset(keras_hub, preset)
    try:
        # the run's dtype policy (mixed precision), not the one the preset was saved with
        backbone = keras_hub.models.Backbone.from_preset(str(folder), dtype=_policy())
    except ModuleNotFoundError as error:
        raise TapefitError(
            f"model.encoder.preset={folder} needs {error.name}: pip install 'tapefit[text]'"
        ) from None
    except (FileNotFoundError, ValueError, KeyError) as error:
        raise TapefitError(
            f"model.encoder.preset={folder}: KerasHub cannot build its backbone ({error})"
        ) from None
    check_text_backbone(backbone, str(folder))
    return PretrainedParts(
        backbone=backbone,
        tokenizer=load_tokenizer(folder, kind),
        pooling=sentence_transformers_pooling(folder),
        sequence_length=sentence_transformers_length(folder),
        source=str(folder),
    )


def _named_preset(keras_hub: Any, name: str) -> PretrainedParts:
    try:
        backbone = keras_hub.models.Backbone.from_preset(name, dtype=_policy())
        tokenizer = keras_hub.models.Tokenizer.from_preset(name)
    except Exception as error:  # a name KerasHub does not know, or no network to fetch it
        raise TapefitError(
            f"model.encoder.preset={name}: KerasHub cannot load this preset ({error}); give a "
            "local preset folder, or fetch it where there is a network and save it with "
            "save_to_preset"
        ) from None
    check_text_backbone(backbone, name)
    return PretrainedParts(backbone, tokenizer, None, None, name)


def _policy() -> str:
    """The global Keras dtype policy's name (`float32`, `mixed_float16`, ...)."""
    import keras

    return keras.config.dtype_policy().name


def check_text_backbone(backbone: Any, source: str) -> None:
    """Refuse a backbone that does not read token ids with a padding mask (an image or
    decoder model)."""
    inputs = backbone.input if isinstance(backbone.input, dict) else {}
    if not {"token_ids", "padding_mask"} <= set(inputs):
        raise TapefitError(
            f"model.encoder.preset={source}: {type(backbone).__name__} is not a text encoder "
            "that reads token_ids and a padding_mask (BERT, DistilBERT, RoBERTa, XLM-RoBERTa, "
            "ALBERT, ...)"
        )
