"""`tapefit.training.preemption`: a SLURM batch job's id and run directory, its requeue on
SIGUSR1, and a requeued start."""

import signal

import pytest

from tapefit.config.schemas import TrainerConfig
from tapefit.config.typed import typed


@pytest.mark.parametrize(
    ("env", "job", "run_name"),
    [
        ({}, None, "2026-01-01_00-00-00"),
        ({"SLURM_JOB_ID": "7", "SLURM_JOB_NAME": "train"}, "7", "slurm-7"),
        ({"SLURM_JOB_ID": "7", "SLURM_JOB_NAME": "bash"}, None, "2026-01-01_00-00-00"),
        ({"SLURM_JOB_ID": "9", "SLURM_ARRAY_JOB_ID": "8", "SLURM_ARRAY_TASK_ID": "3"}, "8_3", None),
    ],
)
def test_a_slurm_batch_job_is_requeued_by_its_id_and_keeps_one_run_directory(
    monkeypatch, env, job, run_name
):
    """Array tasks are requeued as ARRAY_TASK; an interactive allocation (salloc's shell) is
    not a batch job: its runs keep time-stamped directories."""
    from tapefit.training.preemption import run_dir_name, slurm_batch_job

    for name in ("SLURM_JOB_ID", "SLURM_JOB_NAME", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert slurm_batch_job() == job
    assert run_dir_name("2026-01-01_00-00-00") == (run_name or f"slurm-{job}")


def test_a_failed_requeue_says_so_in_one_line_and_what_to_do(compose, monkeypatch, caplog):
    from tapefit.training.preemption import requeue, requeued_start

    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("SLURM_JOB_NAME", "train")
    monkeypatch.setenv("PATH", "")  # no scontrol
    trainer = typed(TrainerConfig, compose([]).trainer)
    assert requeue(trainer, signal.SIGTERM) is False and not caplog.records  # SIGUSR1 requeues
    assert requeue(trainer, signal.SIGUSR1) is False
    [record] = caplog.records
    assert record.getMessage().startswith("could not requeue SLURM job 4242 (")
    assert record.getMessage().endswith("): submit it again with resume=true")
    assert requeued_start(True) is False  # a first start
    monkeypatch.setenv("SLURM_RESTART_COUNT", "2")
    assert requeued_start(False) is False  # trainer.requeue=false
    assert requeued_start(True) is True
