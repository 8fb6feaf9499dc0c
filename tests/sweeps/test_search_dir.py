"""`tapefit.sweeps.search_dir`: a search directory claimed by one live process and one config."""

import json
import os
import subprocess

import pytest

from tapefit.config.snapshot import config_snapshot
from tapefit.errors import TapefitError
from tapefit.files import write_json
from tapefit.sweeps.search_dir import begin_search, claim_search


def read(path):
    return json.loads(path.read_text())


def test_a_new_search_directory_holds_the_config_and_is_marked_running(tmp_path, search_spec):
    search = search_spec(tune__max_trials=2)
    claim_search(tmp_path / "new" / "search", search)
    saved = read(tmp_path / "new" / "search" / "search_config.json")
    assert saved == json.loads(json.dumps(config_snapshot(search.config)))
    assert saved["tune.max_trials"] == 2
    status = read(tmp_path / "new" / "search" / "status.json")
    assert (status["state"], status["kind"], status["pid"]) == ("running", "search", os.getpid())


def test_a_directory_another_live_process_searches_in_is_refused(tmp_path, search_spec):
    other = os.getppid()  # alive while this test runs, and not this process
    write_json(tmp_path / "status.json", {"state": "running", "pid": other})
    with pytest.raises(TapefitError) as refused:
        claim_search(tmp_path, search_spec())
    assert str(refused.value) == (
        f"search directory {tmp_path} is in use by a running process (pid {other}): wait for "
        "it, stop it, or choose another hydra.run.dir"
    )
    assert not (tmp_path / "search_config.json").exists()


def test_a_directory_left_running_by_a_dead_process_or_this_one_is_claimed(tmp_path, search_spec):
    dead = subprocess.Popen(["true"])
    dead.wait()
    for pid in (dead.pid, os.getpid()):
        write_json(tmp_path / "status.json", {"state": "running", "pid": pid})
        claim_search(tmp_path, search_spec())
        assert read(tmp_path / "status.json")["pid"] == os.getpid()


def test_a_search_continued_with_another_config_is_refused(tmp_path, search_spec):
    claim_search(tmp_path, search_spec(seed=1))
    with pytest.raises(TapefitError, match=r"resume refused: .* in seed \(1 -> 2\); resume with"):
        claim_search(tmp_path, search_spec(seed=2))
    assert read(tmp_path / "search_config.json")["seed"] == 1  # the first search's, kept


def test_more_trials_force_resume_or_overwrite_let_a_search_continue(tmp_path, search_spec):
    claim_search(tmp_path, search_spec(seed=1, tune__max_trials=2))
    claim_search(tmp_path, search_spec(seed=1, tune__max_trials=5))  # a search asked for more
    assert read(tmp_path / "search_config.json")["tune.max_trials"] == 5
    claim_search(tmp_path, search_spec(seed=2, force_resume=True))
    claim_search(tmp_path, search_spec(seed=3, tune__overwrite=True))
    assert read(tmp_path / "search_config.json")["seed"] == 3


@pytest.mark.parametrize("overwrite", [False, True])
def test_overwrite_drops_the_earlier_searchs_trials_and_dashboard(tmp_path, search_spec, overwrite):
    for name in ("trials/0/metrics.json", "tensorboard/old.txt", "best/model.keras", "notes.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("earlier search")
    begin_search(tmp_path, search_spec(tune__overwrite=overwrite))
    for name in ("trials/0/metrics.json", "tensorboard/old.txt", "best/model.keras"):
        assert (tmp_path / name).exists() is not overwrite, name
    assert (tmp_path / "notes.txt").read_text() == "earlier search"
    assert list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))  # the columns
