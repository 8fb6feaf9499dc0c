"""A `_target_` node of the composed config as a typed object: what to build, with which plain
arguments, and whether the run's checks have passed it. The run's edge makes these once
(`tapefit.runner.spec`); the optimizers, the schedule, compile's loss and metrics and the
configured callbacks are built from them, never from the config."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tapefit.config.targets import instantiate, plain_arguments


@dataclass(frozen=True)
class TargetSpec:
    """One object the config names by `_target_`, resolved.

    Attributes:
        key: Where the config sets it (`optimizer`, `callbacks.early_stopping`), for errors.
        target: The dotted path of the class or function (`keras.optimizers.Adam`).
        arguments: Its arguments as plain, resolved values (no interpolation left).
        checked: The run's checks (`tapefit.runner.validation.check_config`) have passed
            these arguments against the target's signature, types and `check_options`, so
            building it checks nothing again.
        located: The class or function `target` names, when the edge has imported it
            already (the model's class): building it does not import it again.

    Example:
        >>> node = {"_target_": "keras.optimizers.SGD", "learning_rate": 0.5}
        >>> spec = TargetSpec.of(node, "optimizer")
        >>> spec.target, spec.arguments, type(spec.build()).__name__
        ('keras.optimizers.SGD', {'learning_rate': 0.5}, 'SGD')
    """

    key: str
    target: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    checked: bool = False
    located: Any = field(default=None, compare=False, repr=False)

    @classmethod
    def of(
        cls,
        node: Mapping[str, Any],
        key: str,
        exclude: Iterable[str] = (),
        checked: bool = False,
        located: Any = None,
    ) -> TargetSpec:
        """The spec of a `_target_` node (a config node or a plain mapping), without the keys
        in `exclude` (tapefit's own switches, such as a callback's `enabled`) and those the
        config leaves `???` (required, for something else to supply)."""
        arguments = plain_arguments(node, ("_target_", *exclude), enum_to_str=True)
        return cls(key, str(node["_target_"]), arguments, checked, located)

    def node(self) -> dict[str, Any]:
        """The `{"_target_": ..., **arguments}` mapping Hydra's `instantiate` builds."""
        return {"_target_": self.target, **self.arguments}

    def build(self, **extra: Any) -> Any:
        """The object, called with its arguments and `extra` (what tapefit adds: a schedule's
        learning rate, a callback's `log_dir`); checked first unless `checked`."""
        return instantiate(
            self.node(), self.key, check=not self.checked, located=self.located, **extra
        )
