"""`python -m tapefit` / `tapefit`: compose the config with Hydra and call `train.run`.

The backend guard runs in `tapefit/__init__.py`, which Python imports before this module.
"""

from __future__ import annotations

import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from tapefit.composition import register_schemas
from tapefit.config import config_dir
from tapefit.errors import TapefitError

register_schemas()


@hydra.main(config_path=str(config_dir()), config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    """Train the composed experiment; return its objective (for Hydra sweepers)."""
    from tapefit.train import run

    try:
        metrics = run(cfg, HydraConfig.get().runtime.output_dir)
    except TapefitError as error:
        print(f"tapefit: error: {error}", file=sys.stderr)
        sys.exit(2)
    print(
        "test metrics: "
        + ", ".join(f"{k}={v:.4f}" for k, v in metrics.items() if k.startswith("test_"))
    )
    if cfg.objective is None:
        return None
    if cfg.objective not in metrics:
        print(
            f"tapefit: error: objective={cfg.objective} is not among {sorted(metrics)}",
            file=sys.stderr,
        )
        sys.exit(2)
    return float(metrics[cfg.objective])


if __name__ == "__main__":
    main()
