"""A resume continues the same run: the checkpointed config must match this one's, except
for the keys that may differ (how long, how chatty, where it is tracked)."""

from __future__ import annotations

from typing import Any

from tapefit.errors import TapefitError

# Keys a resumed run may change: how long to train, how chatty, and the resume switches.
MAY_DIFFER = ("trainer.epochs", "trainer.verbose", "resume", "force_resume")
MAY_DIFFER_GROUPS = ("logger",)  # where a run is tracked does not change what it trains


def check_same_config(
    saved: dict[str, Any],
    current: dict[str, Any],
    force: bool,
    may_differ: tuple[str, ...] = MAY_DIFFER,
) -> None:
    """Refuse a resume whose config differs from the checkpointed run's (unless `force`).

    Args:
        saved: The checkpointed run's `config_snapshot`.
        current: This run's.
        force: `force_resume`: compare nothing.
        may_differ: Keys that may change between the two.

    Example:
        >>> check_same_config({"seed": 0}, {"seed": 1}, force=False)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        tapefit.errors.TapefitError: resume refused: ... in seed (0 -> 1); ...
    """
    differing = sorted(
        key
        for key in set(saved) | set(current)
        if key not in may_differ
        and key.split(".")[0] not in MAY_DIFFER_GROUPS
        and saved.get(key) != current.get(key)
    )
    if differing and not force:
        shown = ", ".join(f"{k} ({saved.get(k)!r} -> {current.get(k)!r})" for k in differing[:6])
        raise TapefitError(
            f"resume refused: the config differs from the checkpointed run's in {shown}; "
            "resume with the same overrides, or add force_resume=true"
        )
