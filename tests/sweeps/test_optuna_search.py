"""tune=optuna: Optuna's own study over tune.space, every trial an ordinary tapefit run. Through
the real CLI a failed trial is recorded and the study goes on (its best trial re-runs alike); a
clearly worse trial is pruned after an epoch and recorded as pruned; a search killed mid-trial
continues the same study, and the same trial, from its SQLite storage; bad input is one line."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from tapefit import TapefitError
from tapefit.config.schemas import SpaceEntry
from tapefit.config.typed import typed
from tapefit.runner.train import run
from tapefit.sweeps.optuna_search import NEEDS_OPTUNA, search, suggest
from tests import processes
from tests.helpers import REPO, run_cli
from tests.sweeps.searches import FAST, hparams_sessions, rows

optuna = pytest.importorskip("optuna", reason="tune=optuna needs the sweep extra (Optuna >= 4)")

MINI_SPACE = """# @package tune.space
optimizer.learning_rate: {type: float, min: 1.0e-7, max: 3.0e-2, sampling: log}
data.batch_size: {type: choice, values: [32, 64]}
"""
LR = "optimizer.learning_rate"


def mini_space(cfg):
    cfg.tune.space = {
        LR: SpaceEntry(type="float", min=1e-7, max=3e-2, sampling="log"),
        "data.batch_size": SpaceEntry(type="choice", values=[32, 64]),
    }
    return cfg


def user_conf(tmp_path):
    """The space as a user's own file, found through hydra.searchpath (as a project would)."""
    (tmp_path / "conf" / "search_space").mkdir(parents=True)
    (tmp_path / "conf" / "search_space" / "mini.yaml").write_text(MINI_SPACE)
    return [f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "search_space=mini"]


def enqueue(search_dir, *trials, name="classifier"):
    """Trials the study hands out first, put in its storage with Optuna's own API."""
    search_dir.mkdir(parents=True, exist_ok=True)
    study = optuna.create_study(
        storage=f"sqlite:///{search_dir / 'optuna.db'}", study_name=name, direction="maximize"
    )
    for params in trials:
        study.enqueue_trial(params)


def load(search_dir, name="classifier"):
    return optuna.load_study(study_name=name, storage=f"sqlite:///{search_dir / 'optuna.db'}")


def test_a_search_through_the_cli_records_a_failed_trial_goes_on_and_its_best_reruns(
    compose, tmp_path
):
    search_dir = tmp_path / "search"
    enqueue(search_dir, {LR: 1e9, "data.batch_size": 32})  # trial 0: NaN at epoch 1
    result = run_cli(  # trial 1, after the failure: the study goes on
        "tune=optuna",
        "tune.max_trials=2",
        *FAST,
        *user_conf(tmp_path),
        f"hydra.run.dir={search_dir}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    table = {r["trial_id"]: r for r in rows(search_dir / "trials.csv")}
    assert sorted(table) == ["0", "1"]
    assert table["0"]["status"] == "failed" and "NaN/inf at epoch 1" in table["0"]["reason"]
    assert table["0"][LR] == "1000000000.0"
    assert table["1"]["status"] == "completed"
    study = load(search_dir)
    assert [t.state.name for t in study.trials] == ["FAIL", "COMPLETE"]
    assert study.trials[0].user_attrs["record"]["reason"] == table["0"]["reason"]
    summary = json.loads((search_dir / "search.json").read_text())
    assert summary["trials"] == {"completed": 1, "failed": 1}
    assert summary["best_value"] == study.best_value
    assert summary["best_trial"] == str(study.best_trial.number)
    assert summary["best_values"] == study.best_trial.params
    assert json.loads((search_dir / "status.json").read_text())["state"] == "completed"
    assert (search_dir / "best" / "model.keras").is_file()
    assert set(hparams_sessions(search_dir / "trials")) == {"0", "1"}  # failed too
    assert f"best trial {summary['best_trial']}: python -m tapefit" in result.stdout
    # best_config.yaml's command re-runs the best trial as an ordinary run, alike.
    header = (search_dir / "best_config.yaml").read_text().splitlines()[2]
    command = header.removeprefix("#   ").split()
    assert command == summary["best_command"].split()
    assert not any(a.startswith(("tune", "hydra", "search_space")) for a in command[3:])
    best_cfg = yaml.safe_load((search_dir / "best_config.yaml").read_text())
    assert best_cfg["tune"]["algorithm"] == "none"
    rerun = run(compose(command[3:]), tmp_path / "rerun")
    assert rerun["objective_value"] == summary["best_value"]


def test_pruning_stops_a_clearly_worse_trial_after_an_epoch_and_records_it(compose, tmp_path):
    """The median pruner with one startup trial: trial 1 (learning rate 1e-7, chance accuracy)
    is below trial 0's first-epoch value, so it stops after its first of three epochs."""
    enqueue(tmp_path, {LR: 1e-2, "data.batch_size": 32}, {LR: 1e-7, "data.batch_size": 32})
    overrides = ["tune=optuna", "tune.max_trials=2", "tune.pruner_startup_trials=1"]
    cfg = mini_space(compose([*overrides, *FAST, "trainer.epochs=3"]))
    summary = search(cfg, tmp_path)
    table = {r["trial_id"]: r for r in rows(tmp_path / "trials.csv")}
    assert table["0"]["status"] == "completed" and table["0"]["epochs"] == "3"
    assert table["1"]["status"] == "pruned" and table["1"]["epochs"] == "1"
    assert table["1"]["reason"] == "pruned after epoch 1"
    assert summary["trials"] == {"completed": 1, "pruned": 1} and summary["best_trial"] == "0"
    study = load(tmp_path)
    assert [t.state.name for t in study.trials] == ["COMPLETE", "PRUNED"]
    assert sorted(study.trials[0].intermediate_values) == [0, 1, 2]
    assert list(study.trials[1].intermediate_values) == [0]
    first_epochs = [t.intermediate_values[0] for t in study.trials]
    assert first_epochs[1] < first_epochs[0]
    history = json.loads((tmp_path / "trials" / "1" / "history.json").read_text())
    assert len(history["val_accuracy"]) == 1  # an ordinary run that stopped after epoch 1
    assert "0" in hparams_sessions(tmp_path / "trials")


def test_a_killed_search_continues_the_same_study_and_the_interrupted_trial(tmp_path):
    """Two trials: trial 0 finishes, trial 1 is killed after its first of three epochs and
    continued from its checkpoint by the next start."""
    search_dir = tmp_path / "search"
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2")
    command = [
        *(sys.executable, "-m", "tapefit", "tune=optuna", "tune.max_trials=2"),
        *FAST,
        "trainer.epochs=3",
        *user_conf(tmp_path),
        f"hydra.run.dir={search_dir}",
    ]
    process = processes.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    checkpoints = search_dir / "trials" / "1" / "resume"
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not any(checkpoints.glob("*.json")):
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)  # inside trial 1, after its first epoch
        process.wait(timeout=30)
    finally:
        process.kill()
    before = load(search_dir)
    assert [t.state.name for t in before.trials] == ["COMPLETE", "RUNNING"]
    params = before.trials[1].params
    finished_at = (search_dir / "trials" / "0" / "trial.json").stat().st_mtime
    again = processes.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    output = again.stdout + again.stderr
    assert "trial 1: continuing it" in output
    assert f"resuming {search_dir / 'trials' / '1'} after epoch" in output  # its checkpoints
    study = load(search_dir)
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 2  # max_trials in all
    assert study.trials[1].params == params
    assert sorted(study.trials[1].intermediate_values) == [0, 1, 2]
    assert (search_dir / "trials" / "0" / "trial.json").stat().st_mtime == finished_at
    table = rows(search_dir / "trials.csv")
    assert sorted(r["trial_id"] for r in table) == ["0", "1"]
    assert {r["status"] for r in table} == {"completed"}
    assert {"0", "1"} <= set(hparams_sessions(search_dir / "trials"))


def test_sigterm_stops_the_search_after_the_step_and_leaves_the_trial_to_continue(tmp_path):
    """Like a keras-tuner search: exit 143, status.json interrupted, a checkpoint of the steps
    done; the Optuna trial stays RUNNING for the next start to continue."""
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2")
    command = [
        *(sys.executable, "-m", "tapefit", "tune=optuna", "tune.max_trials=2"),
        *(*FAST, "trainer.epochs=50", f"hydra.run.dir={tmp_path}"),
    ]
    process = processes.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 180
        first = tmp_path / "trials" / "0" / "resume"
        while time.monotonic() < deadline and not any(first.glob("*.json")):
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        process.kill()
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["state"] == "interrupted" and status["signal"] == signal.SIGTERM
    run_status = json.loads((tmp_path / "trials" / "0" / "status.json").read_text())
    assert run_status["state"] == "interrupted"
    assert [t.state.name for t in load(tmp_path).trials] == ["RUNNING"]
    assert rows(tmp_path / "trials.csv")[0]["status"] == "running"


def test_conditional_entries_are_suggested_only_when_their_condition_holds():
    space = {
        "model.architecture": {"type": "choice", "values": ["mlp", "cnn"]},
        "model.bn_momentum": {
            "type": "choice",
            "values": [0.9, 0.99],
            "when": {"model.architecture": ["cnn"]},
        },
        "model.dropout": {"type": "float", "min": 0.0, "max": 0.5, "step": 0.1},
        "model.units": {"type": "int", "min": 8, "max": 64, "sampling": "log"},
    }
    space = {key: typed(SpaceEntry, entry) for key, entry in space.items()}
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    study.enqueue_trial({"model.architecture": "mlp"})
    study.enqueue_trial({"model.architecture": "cnn"})
    mlp, cnn = suggest(study.ask(), space), suggest(study.ask(), space)
    assert mlp["model.architecture"] == "mlp" and "model.bn_momentum" not in mlp
    assert cnn["model.architecture"] == "cnn" and cnn["model.bn_momentum"] in (0.9, 0.99)
    for values in (mlp, cnn):
        assert values["model.dropout"] * 10 == pytest.approx(round(values["model.dropout"] * 10))
        assert isinstance(values["model.units"], int) and 8 <= values["model.units"] <= 64


@pytest.mark.parametrize(
    ("overrides", "space", "match"),
    [
        (
            ["tune.storage=sqlite:////nonexistent-dir/x/optuna.db"],
            None,
            r"tune.storage=sqlite:////nonexistent-dir/x/optuna.db cannot be opened",
        ),
        (
            ["tune.storage=postgresql://me:secret@localhost:1/db"],
            None,
            r"tune.storage=postgresql://me:\*\*\*@localhost:1/db cannot be opened",
        ),
        (["tune.pruner=hyperband", "tune.max_epochs=0"], None, "tune.max_epochs=0 must be"),
        (
            [],
            {"type": "float", "min": 1e-4, "max": 1e-2, "sampling": "reverse_log"},
            "sampling=reverse_log is keras-tuner's",
        ),
    ],
)
def test_bad_input_is_one_line_before_any_trial(compose, tmp_path, overrides, space, match):
    cfg = mini_space(compose(["tune=optuna", *FAST, *overrides]))
    if space:
        cfg.tune.space[LR] = SpaceEntry(**space)
    with pytest.raises(TapefitError, match=match) as caught:
        search(cfg, tmp_path)
    assert "\n" not in str(caught.value) and "secret" not in str(caught.value)
    assert not (tmp_path / "trials").exists()


def test_without_optuna_the_error_says_how_to_install_it(compose, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)  # import optuna raises ImportError
    with pytest.raises(TapefitError) as caught:
        search(mini_space(compose(["tune=optuna", *FAST])), tmp_path)
    assert (
        str(caught.value)
        == NEEDS_OPTUNA
        == "tune=optuna needs Optuna: pip install 'tapefit[sweep]'"
    )


def test_the_launcher_refuses_tuners_for_optuna(capsys):
    from tapefit.launch import parse

    with pytest.raises(SystemExit):
        parse(["--tuners", "2", "--", "tune=optuna"])
    assert "tune=optuna shares its study through a database" in capsys.readouterr().err


def test_an_unknown_sampler_or_pruner_fails_when_the_config_is_composed(compose):
    """Closed sets are Enums of the schema: Hydra names the choices before anything runs."""
    with pytest.raises(Exception) as caught:
        compose(["tune=optuna", "tune.pruner=mean"])
    error = f"{caught.value} {caught.value.__cause__}"
    assert "Invalid value 'mean', expected one of [median, hyperband, none]" in error


@pytest.mark.parametrize("key", ["tune.sampler=random", "tune.storage=sqlite:///x.db"])
def test_a_keras_tuner_search_refuses_keys_only_optuna_reads(compose, tmp_path, key):
    from tapefit.sweeps.tuning import search as keras_tuner_search

    cfg = mini_space(compose(["tune=random", *FAST, key]))
    with pytest.raises(TapefitError, match=rf"^{key.split('=')[0]}=.* is read only by tune=optuna"):
        keras_tuner_search(cfg, tmp_path)
    assert not (tmp_path / "trials").exists()
