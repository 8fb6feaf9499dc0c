"""The text options of the pair loaders (sequence length, vocabulary caps, tokenizer): checked
before anything is loaded, then carried by the data to the vectoriser the model will hold."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tapefit.data.loader_checks import at_least_or_null
from tapefit.data.pairs import PairData
from tapefit.text.wordpiece import check_installed


def check_text_options(options: Mapping[str, Any]) -> None:
    """Refuse text options no vectoriser can use, naming the `data.<key>`.

    Args:
        options: The loader's arguments, its defaults filled in (`with_defaults`).

    Raises:
        TapefitError: a size below its minimum, or `wordpiece` without keras-hub.

    Examples:
        >>> options = {"sequence_length": 16, "max_tokens": 2, "batch_size": 8}
        >>> check_text_options({**options, "tokenizer": "word", "wordpiece_vocabulary_size": 8})
        Traceback (most recent call last):
        ...
        tapefit.errors.TapefitError: data.max_tokens=2 must be at least 3 or null
    """
    at_least_or_null(options["sequence_length"], 1, "sequence_length", null=False)
    at_least_or_null(options["max_tokens"], 3, "max_tokens")
    at_least_or_null(options["batch_size"], 1, "batch_size", null=False)
    at_least_or_null(
        options["wordpiece_vocabulary_size"], 3, "wordpiece_vocabulary_size", null=False
    )
    if options["tokenizer"] == "wordpiece":
        check_installed("data.tokenizer=wordpiece")


def with_text_options(
    data: PairData,
    sequence_length: int,
    max_tokens: int | None,
    tokenizer: str = "word",
    wordpiece_vocabulary_size: int = 8000,
) -> PairData:
    """`data` carrying how its texts become tokens (the vectoriser the model will hold).

    Args:
        data: The pair data.
        sequence_length: Tokens per text after vectorisation.
        max_tokens: Vocabulary size cap of the word tokenizer; None: no cap.
        tokenizer: `word` or `wordpiece`.
        wordpiece_vocabulary_size: The WordPiece vocabulary's size cap.

    Returns:
        A copy of `data` with `text_options` set.

    Examples:
        >>> from tapefit.data.loaders import synthetic_pairs
        >>> data = synthetic_pairs(train_size=8, val_size=4, test_size=4)
        >>> with_text_options(data, 12, None).text_options
        {'sequence_length': 12, 'max_tokens': None}
    """
    options: dict[str, Any] = {"sequence_length": sequence_length, "max_tokens": max_tokens}
    if tokenizer != "word":  # the word tokenizer's options stay as they always were
        options.update(tokenizer=tokenizer, wordpiece_vocabulary_size=wordpiece_vocabulary_size)
    return dataclasses.replace(data, text_options=options)
