"""`tune.space` checked before the first trial: every entry names a config key, and every
bound and choice gives a config a run can use, or the search stops in one line."""

from __future__ import annotations

from hydra.core.hydra_config import HydraConfig

from tapefit.errors import TapefitError
from tapefit.runner.validation import check_config
from tapefit.sweeps.search_space import apply_values, corner_values, declare
from tapefit.sweeps.spec import SearchSpec


def check_space(spec: SearchSpec) -> None:
    """Every entry names a config key, and every bound or choice gives a config a run can use.

    Args:
        spec: The search: its space, and the config each corner of it is applied to.

    Raises:
        TapefitError: An empty space, an entry keras-tuner cannot declare, or a value no run
            can use, in one line naming the entry (`tune.space.<key>: ...`).
    """
    space = spec.tune.space
    if not space:
        raise TapefitError(
            "tune.space is empty: pick a search_space=<name> or list entries under tune.space"
        )
    declare(space)
    for corner in corner_values(space):
        key, value = next(iter(corner.items()))
        try:
            check_config(apply_values(spec.config, corner))
        except TapefitError as error:
            message = str(error).removeprefix(f"tune.space.{key}: ")
            raise TapefitError(
                f"tune.space.{key}: value {value!r} cannot run: {message}{space_origin(key)}"
            ) from None


def space_origin(key: str) -> str:
    """Where tune.space's entries came from, when the CLI composed them from a
    `search_space` option: a key the user never wrote may be that option's.

    Example:
        >>> space_origin("model.dropout")  # no Hydra CLI here: nothing to add
        ''
    """
    if not HydraConfig.initialized():
        return ""
    choice = HydraConfig.get().runtime.choices.get("search_space")
    if choice in (None, "null"):
        return ""
    return (
        f" (tune.space holds the entries of search_space={choice}; if tune.space.{key} is not "
        "yours, pick a search_space for your model, or drop it with "
        "'- override /search_space: null' in your experiment's defaults)"
    )
