"""A Hydra callback that checks the run directory before Hydra creates it (conf/config.yaml).

Hydra makes `hydra.run.dir` itself, before tapefit's code runs: a path that is a file, or lies
under one, failed there with Hydra's traceback (`FileExistsError`, exit code 1). This callback
runs first and ends such a command with tapefit's one line and exit code 2, as
`docs/reference/errors.md` promises.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from tapefit.errors import TapefitError
from tapefit.training.run_status import check_not_a_file


class RunDirectoryCheck(Callback):
    """`on_run_start`: refuse a `hydra.run.dir` that cannot be a directory, in one line. It
    creates nothing: Hydra resolves `${now:...}` again when it makes the directory.

    Example:
        >>> from omegaconf import OmegaConf
        >>> config = OmegaConf.create({"hydra": {"run": {"dir": "outputs/doc-check"}}})
        >>> RunDirectoryCheck().on_run_start(config)  # a usable path: nothing happens
    """

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            check_not_a_file(Path(str(config.hydra.run.dir)))
        except TapefitError as error:
            print(f"tapefit: error: {error}", file=sys.stderr)
            sys.exit(2)
