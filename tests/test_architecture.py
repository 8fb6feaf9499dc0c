"""The package's shape: layered imports with no cycle, and a model family that plugs in with
its own module and YAML only."""

import ast
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import keras
import numpy as np
import pytest

import tapefit
from tapefit.data.pipeline import make_pipeline
from tapefit.families import FAMILIES, Dataset, Family, family_for, register

PACKAGE = Path(tapefit.__file__).resolve().parent

# Lower layers never import higher ones (README, "Architecture"). Keys are module paths under
# tapefit/; a module takes the layer of the longest key it starts with.
LAYERS = [
    {"errors", "choices", "backend", "config", "training", "sweeps", "step"},
    {"step.tape_model", "step.tools", "step.monitor", "step.gradcheck"},
    {"models", "data"},
    {"config.schemas", "config.targets"},
    {
        "training.runtime",
        "training.callbacks",
        "training.optimizers",
        "training.lifecycle",
        "training.resume",
        "training.objective",
        "training.outputs",
        "training.checkpoints",
        "training.compiling",
        "training.building",
        "sweeps.search_space",
    },
    {"sweeps.records"},
    {"families"},
    {"config.composition", "config.validation", "training.train"},
    {"sweeps.tuning", "sweeps.summary"},
    {"__init__", "__main__", "launch"},
]
KEYS = {key: rank for rank, names in enumerate(LAYERS) for key in names}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int:
    relative = module.split(".", 1)[1] if "." in module else "__init__"
    matches = [key for key in KEYS if relative == key or relative.startswith(key + ".")]
    return KEYS[max(matches, key=len)]


def tapefit_imports(path: Path) -> set[str]:
    imported = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tapefit"):
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            imported.update(a.name for a in node.names if a.name.startswith("tapefit"))
    return imported


GRAPH = {module_name(p): tapefit_imports(p) for p in PACKAGE.rglob("*.py")}


def test_every_module_has_a_layer():
    for module in GRAPH:
        layer_of(module)  # ValueError (max of nothing) would mean an unplaced module


def test_no_module_imports_a_higher_layer():
    upward = [
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        for target in targets
        if module != "tapefit" and layer_of(target) > layer_of(module)
    ]
    assert upward == []


def test_imports_have_no_cycle():
    def resolve(target: str) -> str:
        return target if target in GRAPH else target.rsplit(".", 1)[0]

    visiting, done = set(), set()

    def visit(module: str, path: list[str]) -> None:
        if module in done:
            return
        assert module not in visiting, " -> ".join([*path, module])
        visiting.add(module)
        for target in GRAPH.get(module, ()):
            if target != "tapefit":
                visit(resolve(target), [*path, module])
        visiting.discard(module)
        done.add(module)

    for module in GRAPH:
        if module != "tapefit":
            visit(module, [])


def test_models_losses_metrics_and_data_never_read_config():
    for path in PACKAGE.rglob("*.py"):
        module = module_name(path)
        if module != "tapefit" and layer_of(module) <= 2:
            source = path.read_text()
            assert "omegaconf" not in source and "hydra" not in source, module
            assert not any(
                t.startswith(("tapefit.config.schemas", "tapefit.families")) for t in GRAPH[module]
            )


# -- a third family, written as a user would: one module, its YAML, nothing else -------------


@dataclass
class LinearDataConfig:
    name: str = "linear"
    samples: int = 256
    batch_size: int = 32


@dataclass
class RegressorConfig:
    name: str = "regressor"
    units: int = 1


def load_linear(options, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(options.samples, 4)).astype("float32")
    y = (x @ np.array([1.0, -2.0, 0.5, 3.0], "float32"))[:, None]
    held_out = make_pipeline((x[:32], y[:32]), options.batch_size, shuffle=False, seed=seed)
    return SimpleNamespace(
        train=make_pipeline((x, y), options.batch_size, shuffle=True, seed=seed),
        val=held_out,
        test=held_out,
        sizes={"train": options.samples, "val": 32, "test": 32},
        features=x.shape[1],
    )


class RegressionFamily(Family):
    name = "regressor"
    model_schema = RegressorConfig
    datasets: ClassVar = {"linear": Dataset(LinearDataConfig, load_linear)}

    def model(self, cfg, data):
        inputs = keras.Input((data.features,))
        return tapefit.TapeModel(inputs, keras.layers.Dense(cfg.model.units)(inputs))

    def compile_arguments(self, cfg, data):
        return {"loss": "mse", "metrics": ["mae"]}

    def logged_metrics(self, cfg, model=None):
        return ["loss", "mae"]

    def default_objective(self, cfg):
        return "val_mae"


@pytest.fixture
def third_family(tmp_path):
    conf = tmp_path / "conf"
    (conf / "model").mkdir(parents=True)
    (conf / "data").mkdir()
    (conf / "model" / "regressor.yaml").write_text("defaults:\n  - regressor_schema\n  - _self_\n")
    (conf / "data" / "linear.yaml").write_text(
        "defaults:\n  - linear_schema\n  - _self_\nname: linear\nbatch_size: 16\n"
    )
    register(RegressionFamily)
    yield conf
    FAMILIES.pop("regressor")


def test_a_new_family_plugs_in_with_its_module_and_yaml_only(third_family, tmp_path):
    cfg = tapefit.compose(
        [
            f"hydra.searchpath=[file://{third_family}]",
            "model=regressor",
            "data=linear",
            "trainer.epochs=3",
            "trainer.verbose=0",
            "optimizer.learning_rate=0.05",
        ]
    )
    assert isinstance(family_for(cfg), RegressionFamily) and cfg.data.batch_size == 16
    metrics = tapefit.run(cfg, tmp_path / "run")
    assert metrics["samples"]["train"] == 256 and metrics["epochs_run"] == 3
    history = (tmp_path / "run" / "history.json").read_text()
    assert '"val_mae"' in history and (tmp_path / "run" / "model.keras").is_file()


def test_a_dataset_of_another_family_is_refused(compose):
    cfg = compose(["data=pairs_synthetic"])  # the classifier does not take text pairs
    with pytest.raises(tapefit.TapefitError, match="does not fit model=classifier: it takes"):
        family_for(cfg)
