"""The configuration reference, generated from `conf/` and the schemas so it cannot drift.

Every config group's options are read from their YAML files; a key's description is its
comment there (the comment lines just above it and the comment after its value), or, for a
key a file inherits from a schema (`defaults: [trainer_schema]`), the comment beside the
field in `tapefit/config/schemas.py`. Types come from the schema's or the `_target_`'s type
hints. `docs/gen_config_reference.py` renders the page at build time, and a test composes
every option through Hydra and fails on any key the page does not describe.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from tapefit.config.comments import header_comment, schema_comments, yaml_comments
from tapefit.config.schemas import SCHEMAS, SpaceEntry, TapefitConfig, config_dir
from tapefit.config.targets import locate
from tapefit.config.typecheck import describe, parameter_types

# Groups whose options sit at the root of the config, or under another package: shown as the
# overrides they make, their keys described where those keys live.
GLOBAL_GROUPS = ("experiment", "hparams_search", "search_space", "debug")
# Root keys that are config groups, documented by group.
GROUP_KEYS = (
    "data",
    "model",
    "optimizer",
    "scheduler",
    "trainer",
    "callbacks",
    "tune",
    "logger",
)
TARGET_NOTE = "the class or function this node builds; point it at your own (same arguments)"


@dataclass(frozen=True)
class KeyDoc:
    """One documented key: dotted path (from the config's root), type, default, description."""

    key: str
    type: str
    default: str
    description: str


@dataclass
class OptionDoc:
    """One option of a config group (`data=digits`): its summary and its keys."""

    group: str
    name: str
    summary: str
    target: str | None = None
    keys: list[KeyDoc] = field(default_factory=list)
    overrides: str = ""  # for options of GLOBAL_GROUPS: the YAML they apply


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _value_type(value: Any) -> str:
    if value is None:
        return "null"
    for kind, words in ((bool, "true or false"), (int, "an integer"), (float, "a number")):
        if isinstance(value, kind):
            return words
    if isinstance(value, str) and value.startswith("${") and value.endswith("}"):
        return f"as `{value[2:-1].lstrip('.')}`"  # an interpolation: the other key's value
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | ListConfig):
        return "a list"
    return "a mapping"


def _hints(owner: Any) -> dict[str, Any]:
    """Type hints by key: a dataclass schema's fields, a `_target_`'s parameters, a TypedDict."""
    if owner is None:
        return {}
    if dataclasses.is_dataclass(owner) or _is_typed_dict(owner):
        return typing.get_type_hints(owner)
    return parameter_types(owner)


def _is_typed_dict(annotation: Any) -> bool:
    return isinstance(annotation, type) and hasattr(annotation, "__total__")


def _is_mapping_hint(annotation: Any) -> bool:
    origin = typing.get_origin(annotation) or annotation
    return origin in (dict, Mapping, typing.Mapping)


def leaf_keys(node: Any, owner: Any = None, prefix: str = "") -> Iterator[tuple[str, Any, Any]]:
    """Every leaf of a config node: (dotted key, value, type hint or None).

    A nested mapping is descended into, unless its hint is a plain mapping (`callbacks.extra`,
    `tune.space`, `optimizers`): those are one key, whose entries are the user's.

    Args:
        node: A DictConfig (or mapping) of one group option or of the root.
        owner: The schema dataclass or `_target_` object whose hints type the keys.
        prefix: Dotted path of `node` from the config's root.

    Yields:
        `(dotted key, value, hint)` for each leaf, `_target_` included.
    """
    hints = _hints(owner)
    if isinstance(node, DictConfig):
        node = OmegaConf.to_container(node, resolve=False, enum_to_str=True)
    for key in node:
        if key == "defaults":
            continue
        value = node[key]
        dotted = f"{prefix}{key}"
        hint = hints.get(key)
        nested = isinstance(value, dict) and len(value) > 0
        if nested and not _is_mapping_hint(hint):
            child = _child_owner(value, hint)
            yield from leaf_keys(value, child, dotted + ".")
        else:
            yield dotted, value, hint


def _child_owner(value: Any, hint: Any) -> Any:
    target = value.get("_target_") if hasattr(value, "get") else None
    if isinstance(target, str):
        try:
            return locate(target, "_target_")
        except Exception:  # a target not installed here: types from the values
            return None
    if dataclasses.is_dataclass(hint) or _is_typed_dict(hint):
        return hint
    return None


def node_owner(group: str, node: Any) -> Any:
    """What types a group's node: the object its `_target_` names, else the group's schema."""
    owner = _child_owner(node, None)
    return owner if owner is not None else SCHEMAS.get((group, f"{group}_schema"))


def _option_owner(group: str, loaded: DictConfig) -> tuple[Any, str | None]:
    target = loaded.get("_target_")
    if isinstance(target, str):
        try:
            return locate(target, f"{group}._target_"), target
        except Exception:
            return None, target
    for entry in loaded.get("defaults", []) or []:
        for (schema_group, name), schema in SCHEMAS.items():
            if entry == name and schema_group == group:
                return schema, None
    return None, None


def _option_node(group: str, loaded: DictConfig, owner: Any) -> DictConfig:
    body = OmegaConf.masked_copy(loaded, [k for k in loaded if k != "defaults"])
    if dataclasses.is_dataclass(owner):
        return OmegaConf.merge(OmegaConf.structured(owner), body)
    return body


def option_doc(group: str, path: Path) -> OptionDoc:
    """The documentation of one option file of `group`."""
    text = path.read_text()
    doc = OptionDoc(group=group, name=path.stem, summary=header_comment(text))
    top = group.split("/")[0]
    if top in GLOBAL_GROUPS or top == "hydra":
        body = [line for line in text.splitlines() if not line.startswith("#")]
        doc.overrides = "\n".join(body).strip()
        if top != "hydra":
            return doc
    loaded = OmegaConf.load(path)
    owner, doc.target = _option_owner(group, loaded)
    comments = yaml_comments(text)
    schema_notes = schema_comments(owner) if dataclasses.is_dataclass(owner) else {}
    node = _option_node(group, loaded, owner)
    for key, value, hint in leaf_keys(node, owner):
        note = comments.get(key) or _schema_note(key, owner, schema_notes)
        if not note and key.endswith("_target_"):
            note = TARGET_NOTE
        kind = describe(hint) if hint is not None else _value_type(value)
        prefix = "hydra.launcher" if group == "hydra/launcher" else group
        doc.keys.append(KeyDoc(f"{prefix}.{key}", kind, _shown(value), note))
    return doc


def _schema_note(key: str, owner: Any, top_notes: dict[str, str]) -> str:
    """A key's comment in the schema that declares it (nested dataclasses followed)."""
    parts = key.split(".")
    schema = owner
    for part in parts[:-1]:
        if not dataclasses.is_dataclass(schema):
            return ""
        schema = typing.get_type_hints(schema).get(part)
    if not dataclasses.is_dataclass(schema):
        return ""
    notes = top_notes if len(parts) == 1 else schema_comments(schema)
    return notes.get(parts[-1], "")


def root_doc() -> OptionDoc:
    """The keys at the config's root that belong to no group (`seed`, `objective`, `compile`)."""
    doc = OptionDoc(group="", name="root", summary=(TapefitConfig.__doc__ or "").strip())
    node = OmegaConf.structured(TapefitConfig)
    notes = schema_comments(TapefitConfig)
    for key, value, hint in leaf_keys(node, TapefitConfig):
        if key.split(".")[0] in GROUP_KEYS:
            continue
        note = _schema_note(key, TapefitConfig, notes)
        doc.keys.append(
            KeyDoc(key, describe(hint) if hint else _value_type(value), _shown(value), note)
        )
    return doc


def space_entry_doc() -> OptionDoc:
    """The keys of one `tune.space` entry (`SpaceEntry`)."""
    doc = OptionDoc(group="tune.space", name="entry", summary=(SpaceEntry.__doc__ or "").strip())
    notes = schema_comments(SpaceEntry)
    node = OmegaConf.structured(SpaceEntry)
    for key, value, hint in leaf_keys(node, SpaceEntry):
        doc.keys.append(
            KeyDoc(f"tune.space.<key>.{key}", describe(hint), _shown(value), notes.get(key, ""))
        )
    return doc


def group_options(conf: Path | None = None) -> dict[str, list[OptionDoc]]:
    """Every option of every config group under `conf/`, by group (`hydra/launcher` nested)."""
    conf = conf or config_dir()
    groups: dict[str, list[OptionDoc]] = {}
    for path in sorted(conf.rglob("*.yaml")):
        group = path.parent.relative_to(conf).as_posix()
        if group == ".":
            continue
        groups.setdefault(group, []).append(option_doc(group, path))
    return groups


def undocumented(conf: Path | None = None) -> list[str]:
    """Keys with no description, as `group=option: key` (empty when the reference is whole)."""
    missing = [f"(root): {k.key}" for k in root_doc().keys if not k.description]
    missing += [f"tune.space entry: {k.key}" for k in space_entry_doc().keys if not k.description]
    for group, options in group_options(conf).items():
        for option in options:
            missing += [f"{group}={option.name}: {k.key}" for k in option.keys if not k.description]
    return missing


GROUP_INTROS = {
    "data": "The data: a loader named by `_target_`, returning train/validation/test splits.",
    "model": "The model: a `TapeModel` subclass named by `_target_` (tapefit's or yours).",
    "optimizer": "The optimizer: any optimizer class named by `_target_`.",
    "trainer": "How `fit` runs: epochs, compilation, precision, distribution, checkpoints.",
    "callbacks": "The run's Keras callbacks, each named by `_target_`, `enabled` to switch.",
    "tune": "`tune=<algorithm>`: a keras-tuner search or an Optuna study of tapefit runs.",
    "logger": "An experiment tracker (`logger=mlflow`); none by default.",
    "search_space": "What a search varies: each entry a dotted config key (`tune.space`).",
    "experiment": "Presets: each holds only what differs from the defaults (`@package _global_`).",
    "hparams_search": "Optuna through Hydra's multirun (`-m hparams_search=NAME`).",
    "hydra/launcher": "Where multirun jobs run: SLURM through submitit (`-m hydra/launcher=NAME`).",
}


def _cell(text: str) -> str:
    return _prose(text).replace("|", "\\|").replace("\n", " ")


def _prose(text: str) -> str:
    """Comment text as Markdown: brackets outside code spans escaped (`[a=...]` is no link)."""
    parts = text.split("`")
    for index in range(0, len(parts), 2):
        parts[index] = parts[index].replace("[", "\\[").replace("]", "\\]")
    return "`".join(parts)


def _table(keys: list[KeyDoc]) -> list[str]:
    rows = ["| key | type | default | description |", "| --- | --- | --- | --- |"]
    for key in keys:
        shown = key.default.replace("|", "\\|")
        default = f"`{shown}`" if shown != "" else '`""`'
        rows.append(f"| `{key.key}` | {_cell(key.type)} | {default} | {_cell(key.description)} |")
    return rows


def render_markdown(conf: Path | None = None) -> str:
    """The configuration reference page as Markdown (`docs/reference/config.md` at build time).

    Args:
        conf: The `conf/` directory; default: tapefit's own.

    Returns:
        The page: the root keys, then each group with each option's keys in a table.
    """
    lines = [
        "# Configuration reference",
        "",
        "Generated from `conf/` and `tapefit/config/schemas.py` when the site is built: every",
        "key the command line accepts, with its type, its default in that option, and the",
        "comment beside it in the YAML file or the schema. A run also applies an experiment,",
        "`experiment=classifier` unless you pick another, whose values win over these: the",
        "default run has `trainer.steps_per_execution: 8` and the classifier's `tune.space`",
        "(each experiment's values are under [`experiment`](#experiment)). Set any of them on",
        "the command line (`python -m tapefit trainer.epochs=3`), pick an option of a group with",
        "`GROUP=OPTION` (`data=pairs_file`), or add a key of your own target's",
        "(`model.penalty=0.1`) — every value is checked before anything is built.",
        "",
        "## Root keys",
        "",
        root_doc().summary,
        "",
        *_table(root_doc().keys),
    ]
    groups = group_options(conf)
    order = [*GROUP_KEYS, *(g for g in groups if g not in GROUP_KEYS)]
    for group in order:
        if group not in groups:
            continue
        lines += ["", f"## `{group}`", "", GROUP_INTROS.get(group, ""), ""]
        for option in groups[group]:
            lines += [f"### `{group}={option.name}`", "", _prose(option.summary), ""]
            if option.target:
                lines += [f"`_target_`: `{option.target}`", ""]
            if option.overrides:
                lines += ["```yaml", option.overrides, "```", ""]
            if option.keys:
                lines += [*_table(option.keys), ""]
        if group == "search_space":
            entry = space_entry_doc()
            lines += ["### One entry of `tune.space`", "", entry.summary, "", *_table(entry.keys)]
    return "\n".join(lines).rstrip() + "\n"
