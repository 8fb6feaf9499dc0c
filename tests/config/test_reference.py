"""tapefit/config/reference.py: the generated configuration reference describes every key the
command line accepts."""

import pytest

from tapefit.config.reference import (
    GROUP_KEYS,
    group_options,
    leaf_keys,
    node_owner,
    render_markdown,
    root_doc,
    undocumented,
)
from tapefit.config.schemas import TapefitConfig, config_dir
from tests.helpers import REPO

OPTIONS = group_options()


def documented(group: str) -> set[str]:
    return {key.key for option in OPTIONS[group] for key in option.keys}


def composed_keys(cfg, group: str) -> set[str]:
    node = cfg[group]
    if node is None:  # a group whose default is null (logger)
        return set()
    return {key for key, _, _ in leaf_keys(node, node_owner(group, node), f"{group}.")}


def test_every_key_has_a_description():
    assert undocumented() == []


def test_a_key_without_a_comment_is_reported(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "mine.yaml").write_text(
        "# My loader.\n_target_: tapefit.data.loaders.digits\nbatch_size: 8  # per batch\n"
        "val_fraction: 0.1\n"
    )
    assert [m for m in undocumented(tmp_path) if m.startswith("data=")] == [
        "data=mine: data.val_fraction"
    ]


@pytest.mark.parametrize(
    "group,option",
    [(g, o.name) for g in GROUP_KEYS for o in OPTIONS[g]],
)
def test_each_option_composed_has_only_documented_keys(compose, group, option):
    cfg = compose([f"{group}={option}"])
    keys = composed_keys(cfg, group)
    assert keys, f"{group}={option} composed no key"
    mine = {k.key for o in OPTIONS[group] if o.name == option for k in o.keys}
    assert keys - mine == set()


@pytest.mark.parametrize("experiment", [o.name for o in OPTIONS["experiment"]])
def test_each_experiment_composes_documented_keys(compose, experiment):
    cfg = compose([f"experiment={experiment}"])
    root = {k.key for k in root_doc().keys}
    for group in GROUP_KEYS:
        assert composed_keys(cfg, group) - documented(group) == set(), group
    top = {
        key
        for key, _, _ in leaf_keys(cfg, TapefitConfig)
        if key.split(".")[0] not in GROUP_KEYS and key != "hydra"
    }
    assert top - root == set()


def test_page_lists_every_group_option_and_key():
    page = render_markdown()
    for group, options in OPTIONS.items():
        for option in options:
            assert f"### `{group}={option.name}`" in page
            for key in option.keys:
                assert f"| `{key.key}` |" in page
    assert "| `trainer.epochs` | an integer | `10` |" in page
    assert config_dir().name == "conf"


def test_the_committed_page_is_current():
    """docs/reference/config.md (which README links to) is what the build generates."""
    committed = (config_dir().parent / "docs" / "reference" / "config.md").read_text()
    assert committed == render_markdown(), "stale: run `make docs-config`"


def test_the_page_names_what_the_default_experiment_sets(compose):
    """config.md shows each option's own defaults; a default run also applies
    `experiment=classifier`, and the page says which of its values differ."""
    cfg = compose([])
    page = (REPO / "docs" / "reference" / "config.md").read_text()
    assert cfg.trainer.steps_per_execution != 1  # the trainer option's own default
    assert f"`trainer.steps_per_execution: {cfg.trainer.steps_per_execution}`" in page
    assert len(cfg.tune.space) > 0 and "the classifier's `tune.space`" in page
