"""`python -m tapefit` / `tapefit`: compose the config with Hydra and call `train.run`.

The backend guard runs in `tapefit/__init__.py`, which Python imports before this module.
"""

from __future__ import annotations

import logging
import math
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from tapefit.composition import register_schemas
from tapefit.config import config_dir
from tapefit.errors import TapefitError

register_schemas()


@hydra.main(config_path=str(config_dir()), config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float:
    """Train the composed experiment; return its objective (for Hydra sweepers).

    Bad input ends with one `tapefit: error:` line and exit code 2; SIGINT/SIGTERM with exit
    code 130/143 after the current step. Both leave `status.json` saying so.
    """
    from tapefit.lifecycle import RunInterrupted
    from tapefit.train import run

    logging.captureWarnings(True)  # warnings reach tapefit.log through Hydra's job logging
    try:
        metrics = run(cfg, HydraConfig.get().runtime.output_dir)
    except TapefitError as error:
        print(f"tapefit: error: {error}", file=sys.stderr)
        sys.exit(2)
    except RunInterrupted as stop:
        print(f"tapefit: {stop}; status.json says interrupted", file=sys.stderr)
        sys.exit(128 + stop.signum)
    print(
        "test metrics: "
        + ", ".join(f"{k}={v:.4f}" for k, v in metrics.items() if k.startswith("test_"))
    )
    value = metrics["objective_value"]
    value = math.nan if value is None else float(value)  # no finite epoch value: NaN
    print(f"objective: {metrics['objective']}={value:.4f}")
    return value


if __name__ == "__main__":
    main()
