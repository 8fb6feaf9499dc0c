"""The package's shape: layered imports with no cycle, and a model family that plugs in with
its own module and YAML only."""

import ast
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tapefit
from tapefit.families import (
    ENTRY_POINT_GROUP,
    FAMILIES,
    family_for,
    load_entry_point_families,
)
from tapefit.runner.validation import check_config

PACKAGE = Path(tapefit.__file__).resolve().parent

# Lower layers never import higher ones (README, "Architecture"). Keys are module paths under
# tapefit/; a module takes the layer of the longest key it starts with.
LAYERS = [
    {"errors", "choices", "backend", "keras_compat", "config", "training", "sweeps", "step"},
    {
        "step.tools",
        "step.functional",
        "step.symbolic",
        "step.constructor_config",
        "step.rebuild_check",
        "step.tape_model",
        "step.monitor",
        "step.gradcheck",
    },
    {"models", "data"},
    {"config.schemas", "config.targets"},
    {
        "training.runtime",
        "training.tensorboard",
        "training.hparams",
        "training.callbacks",
        "training.optimizers",
        "training.lifecycle",
        "training.preemption",
        "training.resume",
        "training.objective",
        "training.direction",
        "training.selection",
        "training.outputs",
        "training.checkpoints",
        "training.callback_state",
        "training.compiling",
        "training.building",
        "training.export",
        "sweeps.search_space",
    },
    {"sweeps.records"},
    {"families"},
    {"runner"},
    {"sweeps.tuning", "sweeps.summary", "sweeps.trials", "sweeps.optuna_search"},
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


def test_keras_private_api_is_imported_in_one_module_only():
    """`keras.src` may change in any Keras release: one module holds every such import."""
    private = sorted(
        module_name(path)
        for path in PACKAGE.rglob("*.py")
        if "keras.src" in path.read_text() and path.name != "keras_compat.py"
    )
    assert private == []


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


# -- a third family, written as a user would: one module of theirs, its YAML, nothing else ----

FAMILY_MODULE = """
from dataclasses import dataclass
from types import SimpleNamespace
from typing import ClassVar

import keras
import numpy as np

import tapefit
from tapefit.data.pipeline import make_pipeline
from tapefit.families import Dataset, Family, register


@dataclass
class LinearDataConfig:
    name: str = "linear"
    samples: int = 256
    batch_size: int = 32


@dataclass
class RegressorConfig:
    name: str = "NAME"
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


def check_linear(options):
    if options.samples < 64:
        raise tapefit.TapefitError(f"data.samples={options.samples} must be at least 64")


@register
class RegressionFamily(Family):
    name = "NAME"
    model_schema = RegressorConfig
    datasets: ClassVar = {"linear": Dataset(LinearDataConfig, load_linear, check_linear)}

    def model(self, cfg, data):
        inputs = keras.Input((data.features,))
        return tapefit.TapeModel(inputs, keras.layers.Dense(cfg.model.units)(inputs))

    def compile_arguments(self, cfg, data):
        return {"loss": "mse", "metrics": ["mae"]}

    def logged_metrics(self, cfg, model=None):
        return ["loss", "mae"]

    def default_objective(self, cfg):
        return "val_mae"
"""


def family_project(root: Path, name: str, with_schemas: bool) -> Path:
    """A user folder with the family module `<name>_family.py` and its YAML under conf/."""
    (root / f"{name}_family.py").write_text(FAMILY_MODULE.replace("NAME", name))
    conf = root / "conf"
    (conf / "model").mkdir(parents=True)
    (conf / "data").mkdir()

    def defaults(schema: str) -> str:
        return f"defaults:\n  - {schema}_schema\n  - _self_\n" if with_schemas else ""

    (conf / "model" / f"{name}.yaml").write_text(defaults(name) + f"name: {name}\n")
    (conf / "data" / "linear.yaml").write_text(
        defaults("linear") + "name: linear\nbatch_size: 16\n"
    )
    return conf


@pytest.fixture
def registered_family(tmp_path, monkeypatch):
    conf = family_project(tmp_path, "regressor", with_schemas=True)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("regressor_family")
    yield conf, module
    FAMILIES.pop("regressor")
    sys.modules.pop("regressor_family")


def test_a_new_family_plugs_in_with_its_module_and_yaml_only(registered_family, tmp_path):
    conf, module = registered_family
    cfg = tapefit.compose(
        [
            f"hydra.searchpath=[file://{conf}]",
            "model=regressor",
            "data=linear",
            "trainer.epochs=3",
            "trainer.verbose=0",
            "optimizer.learning_rate=0.05",
        ]
    )
    assert isinstance(family_for(cfg), module.RegressionFamily) and cfg.data.batch_size == 16
    metrics = tapefit.run(cfg, tmp_path / "run")
    assert metrics["samples"]["train"] == 256 and metrics["epochs_run"] == 3
    history = (tmp_path / "run" / "history.json").read_text()
    assert '"val_mae"' in history and (tmp_path / "run" / "model.keras").is_file()
    with pytest.raises(tapefit.TapefitError, match=r"data\.samples=8 must be at least 64"):
        check_config(
            tapefit.compose(
                [
                    f"hydra.searchpath=[file://{conf}]",
                    "model=regressor",
                    "data=linear",
                    "data.samples=8",
                ]
            )
        )


def test_an_installed_packages_entry_point_registers_its_family(tmp_path, monkeypatch):
    conf = family_project(tmp_path, "plugged", with_schemas=True)
    dist = tmp_path / "plugged_family-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: plugged-family\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nplugged = plugged_family\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        load_entry_point_families()
        assert "plugged" in FAMILIES
        cfg = tapefit.compose([f"hydra.searchpath=[file://{conf}]", "model=plugged", "data=linear"])
        assert cfg.model.units == 1  # typed by the schema the entry point brought, at compose
    finally:
        FAMILIES.pop("plugged", None)
        sys.modules.pop("plugged_family", None)


def test_a_family_named_by_the_families_key_runs_from_the_cli(tmp_path):
    family_project(tmp_path, "keyed", with_schemas=False)
    common = ["--config-dir", "conf", "model=keyed", "data=linear", "families=[keyed_family]"]
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2")

    def cli(*overrides):
        return subprocess.run(
            [sys.executable, "-m", "tapefit", *common, "trainer.verbose=0", *overrides],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    result = cli("trainer.epochs=2", f"hydra.run.dir={tmp_path / 'run'}")
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["objective"] == "val_mae" and metrics["samples"]["train"] == 256
    bad = cli("+model.unitz=2", f"hydra.run.dir={tmp_path / 'bad'}")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    errors = [line for line in bad.stderr.splitlines() if line.startswith("tapefit: error:")]
    assert len(errors) == 1 and "model.unitz" in errors[0], bad.stderr[-2000:]


def test_a_dataset_of_another_family_is_refused(compose):
    cfg = compose(["data=pairs_synthetic"])  # the classifier does not take text pairs
    with pytest.raises(tapefit.TapefitError, match="does not fit model=classifier: it takes"):
        family_for(cfg)


def test_importing_tapefit_changes_no_process_wide_setting():
    """A user's script decides TensorFlow's settings; only the CLI sets its defaults."""
    code = (
        "import os, json; before = dict(os.environ); import tapefit; "
        "print(json.dumps({k: v for k, v in os.environ.items() if before.get(k) != v}))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_", "KERAS_"))}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"KERAS_BACKEND": "tensorflow"}


# The packages bottom to top (README, "Architecture"): each imports only those before it.
PACKAGE_ORDER = [
    ["errors", "choices", "backend", "keras_compat"],
    ["step"],
    ["config"],
    ["models", "data"],
    ["training"],
    ["families"],
    ["runner"],
    ["sweeps"],
    ["launch", "__main__", "__init__"],
]


def package_edges() -> set[tuple[str, str]]:
    """(importing package, imported package) over tapefit's top-level packages and modules."""
    edges = set()
    for module, targets in GRAPH.items():
        parts = module.split(".")
        source = parts[1] if len(parts) > 1 else "__init__"
        for target in targets:
            imported = target.split(".")[1] if "." in target else "__init__"
            if imported != source:
                edges.add((source, imported))
    return edges


def test_packages_are_layers_without_cycles():
    rank = {name: index for index, names in enumerate(PACKAGE_ORDER) for name in names}
    edges = package_edges()
    assert {name for edge in edges for name in edge} <= set(rank), "a package with no layer"
    upward = sorted(f"{a} -> {b}" for a, b in edges if rank[b] > rank[a])
    cycles = sorted(f"{a} <-> {b}" for a, b in edges if (b, a) in edges and a < b)
    assert upward == [] and cycles == []


def test_the_modules_that_moved_keep_their_old_names():
    from tapefit.config.composition import compose
    from tapefit.training.train import build_model, run

    assert run is tapefit.run and compose is tapefit.compose
    assert build_model.__module__ == "tapefit.runner.train"
