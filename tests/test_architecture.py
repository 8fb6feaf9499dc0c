"""The package's shape: layered imports with no cycle, and a model of a user's own that plugs in
with its own module and YAML only, on the road tapefit's own models take."""

import ast
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import keras
import pytest

import tapefit
from tests import processes

PACKAGE = Path(tapefit.__file__).resolve().parent

# Lower layers never import higher ones (docs/explanation/architecture.md). Keys are module
# paths under tapefit/; a module takes the layer of the longest key it starts with.
LAYERS = [
    {
        "errors",
        "choices",
        "backend",
        "keras_compat",
        "files",
        "protocols",
        "config",
        "training",
        "sweeps",
        "step",
        "text",
        "evaluation",
    },
    {
        "step.step_guards",
        "step.functional",
        "step.symbolic",
        "step.constructor_config",
        "step.rebuild_check",
        "step.tape_model",
        "step.gradcheck",
        "step.nonfinite_guard",
    },
    {"models", "data"},
    {
        "config.schemas",
        "config.targets",
        "config.target_spec",
        "config.typecheck",
        "config.typed",
        "config.snapshot",
        "config.override_errors",
        "config.inert_settings",
        "config.compose_once",
    },
    {"config.reference"},
    {
        "training.runtime",
        "readiness",
        "training.hparams",
        "training.optimizers",
        "training.schedules",
        "training.debugging",
        "training.run_status",
        "callbacks",
        "checkpointing",
        "training.preemption",
        "objective",
        "training.selection",
        "training.run_files",
        "training.compiling",
        "training.build_from_data",
        "training.export",
        "training.tracking",
        "sweeps.search_space",
        "sweeps.search_tracking",
        "training.fitting",
        "training.fit_plan",
    },
    {"sweeps.records"},
    {"runner"},
    {
        "sweeps.spec",
        "sweeps.space_check",
        "sweeps.search_dir",
        "sweeps.trial_callbacks",
        "sweeps.data_cache",
        "sweeps.trials",
        "sweeps.search_results",
        "sweeps.tuning",
        "sweeps.optuna_search",
        "sweeps.summary",
        "sweeps.lr_find",
    },
    {"__init__", "__main__", "launch", "evaluate", "predict", "compare", "mine", "doctor"},
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
                t.startswith(("tapefit.config", "tapefit.runner")) for t in GRAPH[module]
            )


# -- a third model, written as a user would: one module of theirs, its YAML, nothing else -----

USER_MODULE = """
from types import SimpleNamespace

import keras
import numpy as np

import tapefit
from tapefit.data.pipeline import make_pipeline


class Regressor(tapefit.TapeModel):
    \"\"\"A linear regressor sized by its data; it brings its loss, metric and objective.\"\"\"

    def __init__(self, features: int, units: int = 1, **kwargs):
        super().__init__(**kwargs)
        self.features, self.units = features, units
        self.dense = keras.layers.Dense(units)
        self.dense.build((None, features))

    def call(self, x, training=False):
        return self.dense(x)

    def compile_defaults(self):
        return {"loss": "mse", "metrics": ["mae"]}

    @classmethod
    def default_objective(cls, data_config):
        return "val_mae"


def linear(samples: int = 256, batch_size: int = 32, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(samples, 4)).astype("float32")
    y = (x @ np.array([1.0, -2.0, 0.5, 3.0], "float32"))[:, None]
    held_out = make_pipeline((x[:32], y[:32]), batch_size, shuffle=False, seed=seed)
    return SimpleNamespace(
        train=make_pipeline((x, y), batch_size, shuffle=True, seed=seed),
        val=held_out,
        test=held_out,
        sizes={"train": samples, "val": 32, "test": 32},
        model_arguments=lambda: {"features": x.shape[1]},
    )


def check_linear(options):
    if options.get("samples", 256) < 64:
        raise tapefit.TapefitError(f"data.samples={options['samples']} must be at least 64")


linear.check_options = check_linear
"""


def user_project(root: Path) -> Path:
    """A user folder with `regression.py` and its YAML under conf/, as tapefit's own are."""
    (root / "regression.py").write_text(USER_MODULE)
    conf = root / "conf"
    (conf / "model").mkdir(parents=True)
    (conf / "data").mkdir()
    (conf / "model" / "regressor.yaml").write_text(
        "_target_: regression.Regressor\nunits: 1  # outputs\n"
    )
    (conf / "data" / "linear.yaml").write_text(
        "_target_: regression.linear\nsamples: 256  # rows generated\n"
        "batch_size: 16  # rows per batch\n"
    )
    return conf


@pytest.mark.slow  # end to end: make test-fast leaves it out
def test_a_third_model_plugs_in_with_its_module_and_yaml_only(tmp_path):
    """The road tapefit's own models take: `_target_` YAMLs, optional hooks found by duck
    typing (the data size the model, the model brings its loss and objective), checks from
    the signature and the loader's `check_options`, all through the real CLI."""
    user_project(tmp_path)
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2")

    def cli(*overrides):
        command = [sys.executable, "-m", "tapefit", "--config-dir", "conf", "model=regressor"]
        return processes.run(
            [*command, "data=linear", "trainer.verbose=0", *overrides],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    result = cli("trainer.epochs=2", "optimizer.learning_rate=0.05", "hydra.run.dir=run")
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["objective"] == "val_mae" and metrics["samples"]["train"] == 256
    assert "test_mae" in metrics and (tmp_path / "run" / "model.keras").is_file()
    refusals = {
        "+model.unitz=2": "Regressor takes no argument 'unitz' (did you mean model.units?)",
        "data.samples=8": "data.samples=8 must be at least 64",
        "data.samples=many": "data.samples='many' must be an integer",
    }
    for override, message in refusals.items():
        bad = cli(override, f"hydra.run.dir=bad{len(message)}")
        errors = [line for line in bad.stderr.splitlines() if line.startswith("tapefit: error:")]
        assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr[-2000:]
        assert len(errors) == 1 and message in errors[0], bad.stderr[-2000:]


def test_data_that_cannot_size_the_model_is_refused_in_one_line(compose, tmp_path):
    cfg = compose(["data=pairs_synthetic", "data.train_size=32", "data.val_size=8"])
    cfg.data.test_size = 8
    with pytest.raises(
        tapefit.TapefitError,
        match=r"model: Classifier needs image_shape, which data=tapefit.data.loaders."
        r"synthetic_pairs does not supply: choose data that does, or set model.image_shape",
    ):
        tapefit.run(cfg, tmp_path / "run")


@pytest.mark.slow  # a fresh process or an XLA compile (make test-fast leaves it out)
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


# The packages bottom to top (docs/explanation/architecture.md): each imports only those before it.
PACKAGE_ORDER = [
    ["errors", "choices", "backend", "keras_compat", "files", "protocols"],
    ["step"],
    ["config"],
    ["text", "evaluation", "objective"],
    ["models", "data"],
    ["callbacks"],
    ["training", "readiness"],
    ["checkpointing"],
    ["runner"],
    ["sweeps"],
    ["launch", "__main__", "__init__", "evaluate", "predict", "compare", "mine", "doctor"],
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


def test_no_module_is_aliased_under_another_name():
    """No shims: a module is imported by its one name (the aliases of the moves to
    `tapefit.runner` are gone; CHANGELOG says what to import instead)."""
    import sys

    assert "tapefit.training.train" not in sys.modules
    assert "sys.modules" not in (PACKAGE / "__init__.py").read_text()


# The run's edge: the packages and command-line modules that compose, check and convert the
# composed config. Everything else takes typed objects.
COMMAND_MODULES = tuple(f"tapefit.{name}" for name in PACKAGE_ORDER[-1] if name != "__init__")
RUNS_EDGE = ("tapefit.runner", "tapefit.sweeps", "tapefit.config", *COMMAND_MODULES)


def test_below_the_runs_edge_no_function_takes_the_composed_config():
    """The config becomes typed objects at the run's edge (`tapefit.runner.spec.RunSpec`):
    every package and module outside `RUNS_EDGE` takes those, never a `cfg`."""
    taking = [
        f"{module}.{node.name}"
        for path in PACKAGE.rglob("*.py")
        if not (module := module_name(path)).startswith(RUNS_EDGE)
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and "cfg" in [a.arg for a in [*node.args.args, *node.args.kwonlyargs]]
    ]
    assert taking == []


def keras_private_names() -> set[str]:
    """The private attributes of Keras' models, layers (attention too), optimizers, callbacks
    (a TensorBoard given its model, a callback list) and saving library, as a built, compiled
    model and its optimizer hold them."""
    from tapefit.keras_compat import saving_lib

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(use_ema=True), "mse", metrics=["mae"])
    model.optimizer.build(model.trainable_variables)
    attention = keras.layers.MultiHeadAttention(num_heads=1, key_dim=1)
    board = keras.callbacks.TensorBoard(log_dir=tempfile.mkdtemp())
    board.set_model(model)  # what Keras sets on a TensorBoard given its model
    callbacks = keras.callbacks.CallbackList([], model=model)
    objects = [model, model.layers[0], model.optimizer, board, callbacks, saving_lib, attention]
    return {
        name
        for thing in objects
        for name in [*dir(thing), *vars(thing)]
        if name.startswith("_") and not name.startswith("__")
    }


def private_reads(tree: ast.AST) -> list[tuple[int, str, str]]:
    """(line, object, name) of every `x._name` and `getattr(x, "_name")` in `tree`, and of
    every private method a class defines (an override of Keras' is a use on `self`)."""
    reads = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            reads += [
                (method.lineno, "self", method.name)
                for method in node.body
                if isinstance(method, ast.FunctionDef) and method.name.startswith("_")
            ]
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            reads.append((node.lineno, ast.unparse(node.value), node.attr))
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) in ("getattr", "hasattr", "setattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and str(node.args[1].value).startswith("_")
        ):
            reads.append((node.lineno, ast.unparse(node.args[0]), node.args[1].value))
    return [read for read in reads if not read[2].startswith("__")]


def test_private_keras_attributes_are_read_in_keras_compat_only():
    """Keras' private attributes (`_flatten_layers`, `_compile_metrics`, an optimizer's
    `_iterations`, ...) may change in any release: `tapefit/keras_compat.py` reads them; a
    subclass of a Keras class reads or overrides on itself only those listed there."""
    from tapefit.keras_compat import SUBCLASS_PRIVATES

    private = keras_private_names()
    assert {"_flatten_layers", "_compile_metrics", "_iterations", "_lock"} <= private
    reads = [
        (module_name(path), line, owner, name)
        for path in PACKAGE.rglob("*.py")
        if path.name != "keras_compat.py"
        for line, owner, name in private_reads(ast.parse(path.read_text()))
        if name in private
    ]
    on_others = [f"{m}:{line} {o}.{n}" for m, line, o, n in reads if o not in ("self", "super()")]
    unlisted = [f"{m}:{line} {o}.{n}" for m, line, o, n in reads if n not in SUBCLASS_PRIVATES]
    assert on_others == [] and unlisted == []
    assert {n for _, _, _, n in reads} == set(SUBCLASS_PRIVATES)  # no stale entry


def test_models_do_not_import_the_loaders():
    """Text processing the models need (vocabulary, WordPiece, word vectors) lives in
    `tapefit.text`, below both: a model needs no loader to read its texts."""
    edges = package_edges()
    assert ("models", "data") not in edges and ("data", "models") not in edges


def code_lines(source: str) -> int:
    """Lines of code in `source`: not blank, not a comment, not part of a docstring."""
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        scopes = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        if isinstance(node, scopes) and ast.get_docstring(node, clean=False) is not None:
            first = node.body[0]
            docstrings.update(range(first.lineno, first.end_lineno + 1))
    return sum(
        1
        for number, line in enumerate(source.splitlines(), 1)
        if line.strip() and not line.strip().startswith("#") and number not in docstrings
    )


def test_code_lines_count_code_only():
    source = '"""Module."""\n\n# a comment\ndef f():\n    """Doc\n    lines."""\n    return 1\n'
    assert code_lines(source) == 2


def test_no_module_holds_over_300_lines_of_code():
    """Small modules with one job: at most 300 lines of code (docstrings and comments not
    counted), as CONTRIBUTING.md asks."""
    sizes = {
        str(path.relative_to(PACKAGE)): code_lines(path.read_text())
        for path in PACKAGE.rglob("*.py")
    }
    assert {name: size for name, size in sizes.items() if size > 300} == {}


def test_the_tests_mirror_the_packages():
    """`tests/<package>/test_<module>.py` (CONTRIBUTING.md): a test folder per package, and no
    other folder but `cli` (the commands, end to end) and `docs` (the pages' examples)."""
    packages = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    folders = {path.name for path in Path(__file__).parent.iterdir() if path.is_dir()}
    folders -= {"__pycache__"}
    assert folders - packages == {"cli", "docs"}
    assert packages - folders == set()


def test_no_family_wording_is_left():
    """The removed "families" (models grouped by task) left no word behind: code, config,
    docs and experiments say "model" (the CHANGELOG's migration lines may name it)."""
    roots = [
        PACKAGE,
        PACKAGE.parent / "conf",
        PACKAGE.parent / "docs",
        PACKAGE.parent / "experiments",
    ]
    files = [PACKAGE.parent / "README.md"]
    files += [p for r in roots for p in r.rglob("*") if p.suffix in (".py", ".md", ".yaml")]
    stale = [str(p.relative_to(PACKAGE.parent)) for p in files if "famil" in p.read_text().lower()]
    assert stale == []


def test_no_test_module_imports_another():
    """Tests share helpers through helper modules and conftest.py fixtures, never by importing
    another test module (which runs its collection-time code and couples the two)."""
    tests = PACKAGE.parent / "tests"
    importing = [
        f"{path.relative_to(tests)}: {node.module}"
        for path in tests.rglob("test_*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom)
        and node.module
        and node.module.startswith("tests.")
        and node.module.rsplit(".", 1)[-1].startswith("test_")
    ]
    assert importing == []
