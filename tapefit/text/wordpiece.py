"""Subword (WordPiece) tokenisation for the pair models: the vocabulary learnt on the training
texts, and the layer that turns raw strings into piece ids inside the model.

Why: the word tokenizer (Keras' `TextVectorization`) maps every word it did not see in
training to one OOV id, so a misspelling, an inflection or a rare name carries nothing. A
WordPiece vocabulary holds frequent words whole and splits the others into known pieces
(`bazoke` -> `ba ##zo ##ke`), so an unseen word keeps most of its letters.

keras-hub (`pip install 'tapefit[text]'`) supplies both the learner and the layer, and is
imported only here and only when `tokenizer=wordpiece` is used: `import tapefit` and runs
with the word tokenizer never load it.
"""

from __future__ import annotations

import importlib
import logging
from enum import Enum
from typing import Any

from tapefit.errors import TapefitError

log = logging.getLogger("tapefit")

PAD = "[PAD]"  # id 0: the padding every encoder masks, as TextVectorization's ""
UNK = "[UNK]"  # id 1: a word whose characters the vocabulary cannot spell
RESERVED = (PAD, UNK)
SUFFIX = "##"  # marks a piece that continues a word
INSTALL = "pip install 'tapefit[text]'"


class Tokenizer(str, Enum):
    """How a pair model turns raw strings into token ids (`data.tokenizer`)."""

    word = "word"  # Keras' TextVectorization: whole words, unseen ones -> one OOV id
    wordpiece = "wordpiece"  # keras-hub's WordPieceTokenizer: unseen words -> known pieces
    pretrained = "pretrained"  # the pretrained encoder's own (model.encoder.preset): none learnt


def keras_hub(key: str = "data.tokenizer=wordpiece") -> Any:
    """Import keras-hub (and the tensorflow-text ops it runs on), or refuse in one line.

    Why: keras-hub is an optional extra; a run that asks for WordPiece without it should
    stop before training, saying what is missing and how to install it.

    Args:
        key: What asked for it, named in the error.

    Returns:
        The `keras_hub` module.

    Raises:
        TapefitError: keras-hub or tensorflow-text is not installed (or fails to import).

    Example:
        >>> from tapefit.text.wordpiece import keras_hub
        >>> keras_hub().tokenizers.WordPieceTokenizer.__name__
        'WordPieceTokenizer'
    """
    for package, name in (("keras_hub", "keras-hub"), ("tensorflow_text", "tensorflow-text")):
        try:
            importlib.import_module(package)
        except ImportError as error:
            reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise TapefitError(
                f"{key} needs {name}, which cannot be imported ({reason}): {INSTALL}"
            ) from None
    return importlib.import_module("keras_hub")


def check_installed(key: str = "data.tokenizer=wordpiece") -> None:
    """Refuse in one line, before any data are read, when keras-hub is not installed.

    Cheaper than importing it: only looks the packages up, so a config check stays fast.

    Args:
        key: What asked for it, named in the error.

    Raises:
        TapefitError: keras-hub or tensorflow-text is not installed.

    Example:
        >>> from tapefit.text.wordpiece import check_installed
        >>> check_installed()  # keras-hub is installed here: nothing to say
    """
    import importlib.util

    for package, name in (("keras_hub", "keras-hub"), ("tensorflow_text", "tensorflow-text")):
        if importlib.util.find_spec(package) is None:
            raise TapefitError(f"{key} needs {name}, which is not installed: {INSTALL}")


def learn_wordpiece_vocabulary(texts: Any, vocabulary_size: int = 8000) -> list[str]:
    """A WordPiece vocabulary learnt on `texts`: `[PAD]` (id 0), `[UNK]` (id 1), then pieces.

    keras-hub's `compute_word_piece_vocabulary` on the lowercased texts (accents kept, split
    on whitespace and punctuation, punctuation kept as tokens): words frequent enough stay
    whole, every character seen is a piece (alone and as a `##` continuation), so a word of
    known characters is never `[UNK]`. `[PAD]` at id 0 is the padding the encoder masks.

    Args:
        texts: The training texts (both sides of every pair).
        vocabulary_size: The most entries the vocabulary may hold, the two reserved ones
            included; small data give fewer.

    Returns:
        The vocabulary in id order.

    Raises:
        TapefitError: keras-hub is missing, `vocabulary_size` is below 3, or the texts hold
            no tokens.

    Example:
        >>> from tapefit.text.wordpiece import learn_wordpiece_vocabulary
        >>> vocabulary = learn_wordpiece_vocabulary(["a cat sat", "the cat ran"] * 10, 100)
        >>> vocabulary[:2], "cat" in vocabulary, "##t" in vocabulary
        (['[PAD]', '[UNK]'], True, True)
    """
    if vocabulary_size < len(RESERVED) + 1:
        raise TapefitError(
            f"data.wordpiece_vocabulary_size={vocabulary_size} must be at least "
            f"{len(RESERVED) + 1} ({PAD}, {UNK} and one piece)"
        )
    hub = keras_hub()
    import tensorflow as tf

    strings = [t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in texts]
    vocabulary = hub.tokenizers.compute_word_piece_vocabulary(
        tf.data.Dataset.from_tensor_slices(tf.constant(strings, tf.string)).batch(1024),
        int(vocabulary_size),
        lowercase=True,
        strip_accents=False,
        suffix_indicator=SUFFIX,
        reserved_tokens=list(RESERVED),
    )
    vocabulary = [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in vocabulary]
    if len(vocabulary) <= len(RESERVED):
        raise TapefitError("the training texts hold no tokens: every text is empty")
    log.info(
        "wordpiece vocabulary: %d entries (at most %d) learnt on %d texts",
        len(vocabulary),
        vocabulary_size,
        len(strings),
    )
    return vocabulary


def check_vocabulary(vocabulary: list[str]) -> None:
    """Refuse a vocabulary the WordPiece layer cannot use as tapefit's encoders expect.

    Args:
        vocabulary: The vocabulary in id order.

    Raises:
        TapefitError: `[PAD]` is not at id 0 (the padding the encoders mask), or `[UNK]`
            is missing.

    Example:
        >>> from tapefit.text.wordpiece import check_vocabulary
        >>> check_vocabulary(["[PAD]", "[UNK]", "cat", "##s"])
    """
    if not vocabulary or vocabulary[0] != PAD or UNK not in vocabulary:
        shown = ", ".join(repr(v) for v in vocabulary[:3])
        raise TapefitError(
            f"tokenizer=wordpiece needs a WordPiece vocabulary with {PAD} at id 0 and {UNK} "
            f"in it (tapefit.text.wordpiece.learn_wordpiece_vocabulary makes one); it starts "
            f"{shown or 'with nothing'}"
        )


def wordpiece_layer(vocabulary: list[str], sequence_length: int, name: str = "vectorizer") -> Any:
    """keras-hub's `WordPieceTokenizer` as tapefit's models use it: strings -> padded ids.

    Lowercased, accents kept, unknown words `[UNK]`, int64 ids padded with 0 (`[PAD]`) or cut
    to `sequence_length`, as `TextVectorization` gives them. It always runs keras-hub's
    TensorFlow path (tensorflow-text ops), also when called eagerly, so `encode` tokenises
    exactly as the traced training step and the exported SavedModel do.

    Args:
        vocabulary: A vocabulary `check_vocabulary` accepts.
        sequence_length: Pieces per text (padded or cut).
        name: The layer's name.

    Returns:
        The layer; its vocabulary is saved with the model (`.keras` assets).

    Raises:
        TapefitError: keras-hub is missing, or the vocabulary lacks `[PAD]` first or `[UNK]`.

    Example:
        >>> from tapefit.text.wordpiece import wordpiece_layer
        >>> layer = wordpiece_layer(["[PAD]", "[UNK]", "cat", "##s", "sat"], 4)
        >>> layer(["Cats sat"]).numpy().tolist()
        [[2, 3, 4, 0]]
    """
    check_vocabulary(vocabulary)
    hub = keras_hub("tokenizer=wordpiece")
    return hub.tokenizers.WordPieceTokenizer(
        vocabulary=list(vocabulary),
        sequence_length=int(sequence_length),
        lowercase=True,
        strip_accents=False,
        suffix_indicator=SUFFIX,
        oov_token=UNK,
        dtype="int64",
        name=name,
        # keras-hub 0.32 runs eager calls through a pure-Python tokenizer; the TF path is the
        # one training traces and the SavedModel serves, so eager calls take it too
        _allow_python_workflow=False,
    )


def is_word_start(piece: str) -> bool:
    """Whether a vocabulary entry begins a word (not a `##` continuation, not reserved).

    Such pieces are looked up in a word-vector file; a piece that is a whole word
    (`cat`) gets that word's vector, one that is only a word's start (`ba` of `bazoke`) gets
    the vector of the word it spells, if the file has one.

    Args:
        piece: A vocabulary entry.

    Returns:
        True for a word-start piece.

    Example:
        >>> from tapefit.text.wordpiece import is_word_start
        >>> [is_word_start(p) for p in ("cat", "##s", "[UNK]")]
        [True, False, False]
    """
    return not piece.startswith(SUFFIX) and piece not in RESERVED
