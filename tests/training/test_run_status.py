"""`tapefit.training.run_status`: a run directory claimed by a live process is refused, and a
fresh run clears what a failed run left in it."""

import json
import subprocess
import sys

import pytest


def test_a_directory_in_use_by_a_live_process_is_refused(tmp_path, compose):
    from tapefit import TapefitError
    from tapefit.files import write_json
    from tapefit.runner.train import run

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        write_json(tmp_path / "status.json", {"state": "running", "pid": sleeper.pid})
        with pytest.raises(TapefitError, match=rf"in use by a running process \(pid {sleeper.pid}"):
            run(compose(["trainer.epochs=1"]), tmp_path)
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_fresh_run_clears_what_a_failed_run_left_even_under_configured_names(tmp_path):
    """Nothing a failed run wrote survives into the next run in its directory: the fixed
    outputs, a model report's pictures, and files the config renamed (a CSV under logs/)."""
    from tapefit.files import write_json
    from tapefit.training.run_status import claim

    write_json(tmp_path / "status.json", {"state": "failed", "error": "diverged"})
    left = ["history.json", "curves.png", "similarity.png", "classes.json", "logs/epochs.csv"]
    for name in left:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("from the failed run")
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "config.yaml").write_text("seed: 0\n")  # this job's own
    claim(tmp_path, resume=False, named=("logs", "checkpoints"))
    assert [name for name in left if (tmp_path / name).exists()] == []
    assert (tmp_path / ".hydra" / "config.yaml").is_file()
    assert json.loads((tmp_path / "status.json").read_text())["state"] == "running"
