"""The user-facing scripts in experiments/ keep working."""

import importlib.util

from tests.helpers import REPO, scalar_tags


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "experiments" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_custom_step_example_learns_and_logs(tmp_path):
    custom_step = load("custom_step")
    history = custom_step.main(str(tmp_path))
    assert history.history["loss"][-1] < 0.5 * history.history["loss"][0]
    assert history.history["val_mae"][-1] < 0.4
    assert len(scalar_tags(tmp_path / "train")["epoch_loss"]) == 20
