"""What a model will run like on this machine and on a GPU: the readiness report
(`python -m tapefit.doctor`, and a few lines in every run's log)."""

from tapefit.readiness.report import Readiness, log_readiness, readiness_of

__all__ = ["Readiness", "log_readiness", "readiness_of"]
