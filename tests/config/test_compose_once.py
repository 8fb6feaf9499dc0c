"""`python -m tapefit` composes its config once (tapefit/config/compose_once.py): the
composition handed to `Hydra.run` equals the one Hydra would make, and every command Hydra
answers differently (a multirun, a failed composition) still gets Hydra's answer."""

from __future__ import annotations

import sys

import pytest
from hydra import initialize_config_dir
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.hydra import Hydra
from hydra.core.global_hydra import GlobalHydra
from hydra.types import RunMode
from omegaconf import OmegaConf

from tapefit.config.compose_once import RUN_MODE_OVERRIDE, composed_once, with_run_mode_override
from tapefit.config.schemas import config_dir
from tapefit.runner.composition import register_schemas
from tests.helpers import REPO, run_in

# Command lines of the kinds the docs show: groups, experiments, appended and deleted keys,
# Hydra's own keys.
COMMAND_LINES = [
    [],
    ["experiment=siamese", "trainer.epochs=2"],
    ["model.architecture=mlp", "+callbacks.extra.x={_target_: keras.callbacks.History}"],
    ["experiment=siamese", "++seed=3", "hydra.run.dir=somewhere", "hydra.job.name=x"],
]


@pytest.fixture
def loader():
    """Hydra's loader over tapefit's configs, as the command line sets it up."""
    register_schemas()
    with initialize_config_dir(str(config_dir()), version_base="1.3"):
        yield GlobalHydra.instance().hydra.config_loader


def plain(cfg) -> dict:
    return OmegaConf.to_container(cfg, resolve=False, enum_to_str=True)


@pytest.mark.parametrize("overrides", COMMAND_LINES)
def test_the_run_composition_with_the_mode_override_equals_hydras(loader, overrides):
    hydras = loader.load_configuration("config", [*overrides, RUN_MODE_OVERRIDE], RunMode.RUN)
    ours = with_run_mode_override(loader.load_configuration("config", overrides, RunMode.RUN))
    assert plain(ours) == plain(hydras)
    assert ours.hydra.mode == RunMode.RUN
    assert list(ours.hydra.overrides.hydra)[-1] == RUN_MODE_OVERRIDE


class Compositions:
    """Counts the compositions Hydra's loader makes (not the one handed over)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.made: list[tuple[list[str], RunMode]] = []
        load = ConfigLoaderImpl.load_configuration

        def counted(loader, config_name, overrides, run_mode, *args, **kwargs):
            self.made.append((list(overrides), run_mode))
            return load(loader, config_name, overrides, run_mode, *args, **kwargs)

        monkeypatch.setattr(ConfigLoaderImpl, "load_configuration", counted)


# The command's entry point in a process of its own (Hydra sets up logging, the command
# freezes the collector), twice: as it is, then with Hydra alone; it prints each command's exit
# code and the modes of the compositions Hydra's loader made.
COMMAND_TWICE = """
import contextlib, sys
from hydra._internal.config_loader_impl import ConfigLoaderImpl
import tapefit.__main__ as command

made, load = [], ConfigLoaderImpl.load_configuration

def counted(loader, config_name, overrides, run_mode, *args, **kwargs):
    made.append(run_mode.name)
    return load(loader, config_name, overrides, run_mode, *args, **kwargs)

ConfigLoaderImpl.load_configuration = counted
for name, args in (("once", sys.argv[1:]), ("hydra", sys.argv[1:])):
    if name == "hydra":
        command.composed_once = contextlib.nullcontext
    sys.argv, made[:] = ["tapefit", *args], []
    code = 0
    try:
        command.cli()
    except SystemExit as stop:
        code = stop.code
    print(name, code, *made, flush=True)
"""


def command_twice(*args: str) -> dict[str, list[str]]:
    """{"once": [exit code, modes...], "hydra": [...]} for `python -m tapefit ARGS`."""
    done = run_in(REPO, [sys.executable, "-c", COMMAND_TWICE, *args])
    lines = [
        line.split() for line in done.stdout.splitlines() if line.startswith(("once", "hydra"))
    ]
    assert len(lines) == 2, done.stderr[-3000:]
    return {line[0]: line[1:] for line in lines} | {"stderr": done.stderr}


def test_a_command_composes_once_where_hydra_alone_composes_twice(tmp_path):
    # trainer.epochs=0 is refused by tapefit's checks after the composition, before training;
    # seed=1,2 without -m by Hydra's
    got = command_twice(f"hydra.run.dir={tmp_path / 'run'}", "trainer.epochs=0")
    assert got["once"] == ["2", "RUN"]
    assert got["hydra"] == ["2", "MULTIRUN", "RUN"]
    assert got["stderr"].count("tapefit: error: trainer.epochs") == 2, got["stderr"][-2000:]

    swept = command_twice(f"hydra.run.dir={tmp_path / 'run'}", "seed=1,2")
    # the sweep: Hydra's road, its mode lookup and its refused run composition
    assert swept["once"] == swept["hydra"] == ["1", "MULTIRUN", "RUN"]
    assert swept["stderr"].count("Ambiguous value for argument 'seed=1,2'") == 2

    # a mode that does not resolve: Hydra's mode lookup gives up, and its RUN override wins
    unresolved = command_twice(
        f"hydra.run.dir={tmp_path / 'run'}",
        "hydra.mode=${oc.env:NO_SUCH_VARIABLE}",
        "trainer.epochs=0",
    )
    assert unresolved["once"][0] == unresolved["hydra"][0] == "2"
    assert unresolved["stderr"].count("tapefit: error: trainer.epochs") == 2


def test_a_multirun_composes_as_hydra_alone_does(tmp_path):
    got = command_twice("-m", f"hydra.sweep.dir={tmp_path / 'sweep'}", "trainer.epochs=0")
    # the refused job ends the sweep with its worst value; the multirun composes afresh
    assert got["once"][0] == got["hydra"][0] == "0", got["stderr"][-2000:]
    # as many compositions: the mode lookup (in run mode here), then Hydra's own for the sweep
    assert got["hydra"][1:] == ["MULTIRUN", "MULTIRUN", "RUN", "RUN"]
    assert got["once"][1:] == ["RUN", "MULTIRUN", "RUN", "RUN"]
    assert got["stderr"].count("tapefit: error: trainer.epochs") == 2


def test_a_config_that_asks_for_a_multirun_gets_one(tmp_path, monkeypatch):
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "config.yaml").write_text("hydra:\n  mode: MULTIRUN\nvalue: 1\n")
    with initialize_config_dir(str(conf), version_base="1.3"), composed_once():
        hydra = GlobalHydra.instance().hydra
        assert Hydra.get_mode(hydra, "config", ["value=2"]) == RunMode.MULTIRUN
        compositions = Compositions(monkeypatch)
        hydra.config_loader.load_configuration("config", ["value=2"], RunMode.MULTIRUN)
        assert len(compositions.made) == 1  # nothing was handed over: composed afresh


def test_only_the_call_that_asks_for_the_same_composition_gets_it(loader):
    with composed_once():
        hydra = GlobalHydra.instance().hydra
        assert Hydra.get_mode(hydra, "config", ["seed=5"]) is None
        multirun = loader.load_configuration(
            "config", ["seed=5", "hydra.mode=MULTIRUN"], RunMode.MULTIRUN
        )
        handed = loader.load_configuration("config", ["seed=5", RUN_MODE_OVERRIDE], RunMode.RUN)
        again = loader.load_configuration("config", ["seed=5", RUN_MODE_OVERRIDE], RunMode.RUN)
    assert multirun.hydra.mode == RunMode.MULTIRUN
    assert handed is not again and plain(handed) == plain(again)
    assert Hydra.get_mode.__name__ == "get_mode"
