"""tapefit/config/schemas.py: the schemas refuse a bad key, type or choice at compose time, and
`config_dir` finds the shipped `conf/`."""

from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException

from tapefit.config.schemas import config_dir


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("trainer.epochs=three", "epochs"),
        ("trainer.precision=float8", "precision"),
        ("trainer.strategy=ring", "strategy"),
        ("trainer.jit_compile=sometimes", "jit_compile"),
        ("callbacks.early_stopping.mode=up", "mode"),
        ("callbacks.tensorboard.update_freq=hourly", "update_freq"),
        ("trainer.on_nonfinite=explode", "on_nonfinite"),
        ("trainer.on_missing_gradients=shrug", "on_missing_gradients"),
        ("trainer.gradient_accumulation_steps=two", "gradient_accumulation_steps"),
        ("callbacks.step_telemetry.every_n_steps=often", "every_n_steps"),
        ("experiment=nope", "nope"),
    ],
)
def test_bad_overrides_fail_at_compose_time(compose, override, message):
    with pytest.raises(ConfigCompositionException) as caught:
        compose(override.split())
    text = str(caught.value) + str(caught.value.__cause__)
    assert message in text


def test_config_dir_is_the_repository_conf():
    assert config_dir() == Path(__file__).resolve().parents[2] / "conf"


def test_installed_package_uses_its_packaged_conf(tmp_path):
    installed = tmp_path / "site-packages" / "tapefit"
    (installed / "conf").mkdir(parents=True)
    (installed / "conf" / "config.yaml").write_text("seed: 0\n")
    assert config_dir(installed) == installed / "conf"
