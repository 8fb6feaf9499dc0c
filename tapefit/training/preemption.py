"""Preemption on SLURM, as Lightning's auto-requeue does it: the time-limit signal
(`sbatch --signal=USR1@90`) has the run checkpoint and requeue its own job, and the requeued
start continues from that checkpoint by itself, in the same run directory."""

from __future__ import annotations

import logging
import os
import signal
import subprocess

from tapefit.config.schemas import TrainerConfig
from tapefit.training.runtime import writes_run_dir

log = logging.getLogger("tapefit")

REQUEUE_SIGNAL = signal.SIGUSR1  # what `sbatch --signal=USR1@SECONDS` sends before the limit
INTERACTIVE_JOB_NAMES = ("bash", "interactive")  # salloc/srun --pty shells, as Lightning reads


def slurm_batch_job() -> str | None:
    """The id `scontrol requeue` takes for this SLURM batch job (`ARRAYID_TASKID` for an array
    task), or None outside SLURM and in an interactive allocation."""
    if os.environ.get("SLURM_JOB_NAME") in INTERACTIVE_JOB_NAMES:
        return None
    array_job = os.environ.get("SLURM_ARRAY_JOB_ID")
    if array_job is not None:
        return f"{array_job}_{os.environ.get('SLURM_ARRAY_TASK_ID', '0')}"
    return os.environ.get("SLURM_JOB_ID")


def run_dir_name(default: str) -> str:
    """The last part of the default run directory (a Hydra resolver): `slurm-JOBID` in a SLURM
    batch job, so a requeued job finds its own checkpoints again; `default` (the start time)
    anywhere else."""
    job = slurm_batch_job()
    return f"slurm-{job}" if job else default


def restarts() -> int:
    """How many times SLURM has restarted this job (`SLURM_RESTART_COUNT`, set on a requeue)."""
    try:
        return int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0)
    except ValueError:
        return 0


def requeued_start(requeue_enabled: bool) -> bool:
    """Whether this start is a requeued SLURM job's (`trainer.requeue`), which then resumes by
    itself: the job continues from its last checkpoint without anyone editing its command.

    Example:
        >>> requeued_start(False)
        False
    """
    if not requeue_enabled or not (slurm_batch_job() and restarts()):
        return False
    log.info("SLURM restarted job %s (restart %d): resuming", slurm_batch_job(), restarts())
    return True


def requeue(trainer: TrainerConfig, signum: int) -> bool:
    """After the checkpoint a time-limit signal asked for: requeue this SLURM batch job with
    `scontrol requeue` (`trainer.requeue`); True if SLURM accepted. A failure is logged in one
    line with what to do instead."""
    job = slurm_batch_job()
    if signum != REQUEUE_SIGNAL or not trainer.requeue or job is None:
        return False
    if not writes_run_dir(trainer.strategy):
        return False  # one requeue per job: the chief's
    try:
        result = subprocess.run(
            ["scontrol", "requeue", job], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        reason = str(error)
    else:
        if result.returncode == 0:
            log.info("requeued SLURM job %s: its next start resumes from this checkpoint", job)
            return True
        reason = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        reason = f"scontrol exited with {result.returncode}: {reason[0]}"
    log.error("could not requeue SLURM job %s (%s): submit it again with resume=true", job, reason)
    return False
