"""`tapefit.runner.run_dir_check`: a `hydra.run.dir` that cannot be a directory, in one line."""

import pytest
from omegaconf import OmegaConf

from tapefit.runner.run_dir_check import RunDirectoryCheck


def config(run_dir):
    return OmegaConf.create({"hydra": {"run": {"dir": str(run_dir)}}})


def test_a_run_dir_under_a_file_ends_the_command_with_one_line_and_exit_code_2(tmp_path, capsys):
    (tmp_path / "taken").write_text("a file")
    with pytest.raises(SystemExit) as ended:
        RunDirectoryCheck().on_run_start(config(tmp_path / "taken" / "run"))
    assert ended.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("tapefit: error: run directory ") and error.count("\n") == 1
    assert f"{tmp_path / 'taken'} is a file; choose another hydra.run.dir" in error


def test_a_usable_run_dir_passes_and_nothing_is_created(tmp_path):
    RunDirectoryCheck().on_run_start(config(tmp_path / "new" / "run"))
    assert not (tmp_path / "new").exists()
