"""Splits without labels: new images to predict on, which a run never trains or tests on.

A loader may return a split with inputs alone (batches of `x`, no `y`) and name it in its data
object's `unlabelled` mapping, `{split: why}`, where `why` says in a few words what the input
lacks and how to give it (`data.test_path=new.csv has no column 'label' ...`).
`python -m tapefit.predict` reads such a split; a training run and `python -m tapefit.evaluate`
refuse it, in one line, before anything is trained or evaluated (`require_labels`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tapefit.errors import TapefitError

PREDICT = "python -m tapefit.predict takes images without labels"


def require_labels(data: Any, splits: Sequence[str], needs: str) -> None:
    """Refuse `data` if one of `splits` is unlabelled (see the module docstring).

    Args:
        data: What the run's loader returned.
        splits: The splits that must have labels.
        needs: What needs them, as a clause ("a run trains and tests on labelled images").

    Raises:
        TapefitError: one line: the split's `why`, what needs the labels, and the way out.

    Examples:
        >>> from types import SimpleNamespace
        >>> data = SimpleNamespace(unlabelled={"test": "data.test_path=new has no labels"})
        >>> require_labels(data, ["train", "val"], "a run trains on labelled images")
        >>> require_labels(data, ["test"], "tapefit.evaluate scores labelled images")
        Traceback (most recent call last):
        ...
        tapefit.errors.TapefitError: data.test_path=new has no labels: tapefit.evaluate scores ...
    """
    unlabelled = getattr(data, "unlabelled", None) or {}
    for split in splits:
        if split in unlabelled:
            raise TapefitError(f"{unlabelled[split]}: {needs}; {PREDICT}")
