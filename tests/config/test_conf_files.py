"""The shipped `conf/` reads as documentation: every model, data and optimizer option names its
class or function by `_target_`, writes out every argument a user may set, comments each key,
and agrees with the signature it configures (a value that differs from the default says so)."""

import inspect
from pathlib import Path

import pytest
import yaml

from tapefit.config.schemas import config_dir
from tapefit.config.targets import KERAS_BASE_ARGUMENTS, accepted_arguments, locate

GROUPS = ("model", "data", "optimizer")
FILES = sorted(path for group in GROUPS for path in (config_dir() / group).glob("*.yaml"))
# Arguments a YAML leaves out on purpose, and why.
NOT_WRITTEN = {
    "seed": "the run's seed, passed by tapefit",
    "image_shape": "from the data (model_arguments)",
    "num_classes": "from the data",
    "class_names": "from the data",
    "vocabulary": "from the data",
    "vocab_size": "token-id inputs, used from Python",
    "pretrained_encoder": "a saved model's encoder layer; a config names model.encoder.preset",
    "backbone_layer": "a saved model's backbone; a config names model.backbone.preset",
    "converter": "a saved model's image converter; the preset brings its own",
    "fine_tuning": "a pretrained encoder's only: written in model/siamese_pretrained.yaml",
    "sequence_length": "from the data (data.sequence_length)",
    "label_type": "from the data",
    "label_range": "from the data",
    "hard_negatives": "from the data (data.negative_column)",
    "tokenizer": "from the data (data.tokenizer), which learns the vocabulary it reads",
    "gradient_accumulation_steps": "from trainer.gradient_accumulation_steps",
    "loss_scale_factor": "set by Keras' LossScaleOptimizer under mixed_float16",
    **{name: "Keras' own constructor argument" for name in KERAS_BASE_ARGUMENTS},
}


def commented_keys(path: Path) -> dict[str, bool]:
    """Each key of the YAML (dotted for nested ones) and whether a comment explains it: on its
    line, or on the comment lines right above it."""
    keys, stack, comment_above = {}, [], False
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not stripped:
            comment_above = False
            continue
        if stripped.startswith("#"):
            comment_above = True
            continue
        indent = len(line) - len(line.lstrip())
        key = stripped.split(":", 1)[0]
        stack = [(i, k) for i, k in stack if i < indent]
        dotted = ".".join([k for _, k in stack] + [key])
        keys[dotted] = comment_above or " # " in line or "  #" in line
        if stripped.endswith(":"):  # a nested node; its keys follow, indented
            stack.append((indent, key))
        comment_above = False
    return keys


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_option_is_a_commented_target_with_every_argument(path):
    node = yaml.safe_load(path.read_text())
    assert "_target_" in node, f"{path.name} names no _target_"
    target = locate(node["_target_"], "_target_")
    keys = commented_keys(path)
    uncommented = [key for key, commented in keys.items() if not commented and key != "_target_"]
    assert uncommented == [], f"{path.name}: keys without a comment"
    accepted, _ = accepted_arguments(target)
    missing = [name for name in accepted if name not in node and name not in NOT_WRITTEN]
    assert missing == [], f"{path.name} leaves out {missing}"
    function = target.__init__ if inspect.isclass(target) else target
    parameters = inspect.signature(function).parameters
    lines = {line.split(":", 1)[0].strip(): line for line in path.read_text().splitlines()}
    for name, value in node.items():
        default = parameters[name].default if name in parameters else inspect.Parameter.empty
        if default is inspect.Parameter.empty or isinstance(value, dict):
            continue
        same = as_lists(value) == as_lists(default)
        assert same or "default" in lines[name], (
            f"{path.name}: {name}={value} differs from the signature's {default!r} without saying"
        )


def as_lists(value):
    """`value` with every tuple a list, at every depth (YAML has no tuples)."""
    if isinstance(value, tuple | list):
        return [as_lists(item) for item in value]
    return value


def test_every_callback_is_a_commented_target_node():
    path = config_dir() / "callbacks" / "default.yaml"
    node = yaml.safe_load(path.read_text())
    callbacks = {name: value for name, value in node.items() if name not in ("defaults", "extra")}
    assert callbacks and all("_target_" in value for value in callbacks.values())
    keys = commented_keys(path)
    uncommented = [
        k for k, commented in keys.items() if not commented and not k.startswith("defaults")
    ]
    assert uncommented == []
