"""Shared fixtures: TensorFlow backend, two logical CPUs for distribution tests, seeds, configs."""

import atexit
import gc
import os
import shutil
import sys
import tempfile
import textwrap
from unittest import mock

import pytest

from tests import module_seconds
from tests.helpers import built_once_per_session

# Grappler, TensorFlow's graph optimiser, off in the tests (`TAPEFIT_TESTS_GRAPPLER=on` keeps
# TensorFlow's default): the tests' graphs run a few steps each, so optimising them costs more
# than it saves (a two-step run of the MLP, the digits CNN and the Siamese LSTM, alternated in one
# process: 1.25 -> 1.06 s, 3.14 -> 2.73 s, 2.83 -> 2.36 s). Every comparison a test makes is
# between runs under the same setting; the tests that compare TapeModel with Keras' own step are
# marked `tf_defaults` and run with Grappler on, as users' runs do. The forking server
# (tests/zygote.py) reads the same variable, so the runs it forks match.
os.environ.setdefault("TAPEFIT_TESTS_GRAPPLER", "off")
GRAPPLER_OFF = os.environ["TAPEFIT_TESTS_GRAPPLER"] == "off"


def runs_tests(config: pytest.Config) -> bool:
    """False only in xdist's controller, which hands the tests out and runs none: it imports
    neither TensorFlow nor tapefit (5 s of imports before the first worker started)."""
    return hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", 0)


def pytest_configure(config: pytest.Config) -> None:
    if runs_tests(config):
        set_up_tensorflow()


# What `python -m tapefit` sets before TensorFlow is imported (`set_command_defaults`), set here
# before anything imports it: importing `tapefit.backend` imports the package, and with it Keras
# and TensorFlow, which read these variables once, at import. Set any later, they had no effect
# in the test processes while the commands they start had them: on a CPU where TensorFlow leaves
# oneDNN off by itself (an AMD EPYC), a model computed in a test differed in the last bit from
# the same model reloaded by a command. `set_up_tensorflow` checks this copy against tapefit's.
COMMAND_ENVIRONMENT = {"TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "1"}
for _name, _value in COMMAND_ENVIRONMENT.items():
    os.environ.setdefault(_name, _value)
TENSORFLOW_IMPORTED_EARLIER = "tensorflow" in sys.modules  # by a pytest plugin: too late


def set_up_tensorflow() -> None:
    """TensorFlow as `python -m tapefit` runs it, on this test process's share of the cores,
    with two logical CPUs; before any test module imports it."""
    if TENSORFLOW_IMPORTED_EARLIER:
        raise RuntimeError(
            "TensorFlow was imported before tests/conftest.py set COMMAND_ENVIRONMENT: run "
            "pytest without the plugin that imports it"
        )
    from tapefit.backend import set_command_defaults  # the import pins KERAS_BACKEND too

    with mock.patch.dict(os.environ, clear=True):  # what it sets where nothing is set
        set_command_defaults()
        command_environment = dict(os.environ)
    if command_environment != COMMAND_ENVIRONMENT:
        raise RuntimeError(
            f"tapefit.backend.set_command_defaults sets {command_environment}, tests/conftest.py's "
            f"COMMAND_ENVIRONMENT {COMMAND_ENVIRONMENT}: make them the same"
        )

    # Each xdist worker's TensorFlow gets its share of the cores for its intra-op pool (one each
    # with `-n 2` on two cores), before TensorFlow starts; the processes a test starts inherit
    # it. Two workers each running two intra-op threads on two cores made every run wait on the
    # other's: on a slice of the suite (resume, recipes, Siamese, TapeModel; 85 tests, `-n 2`,
    # alternated) 158.6 and 152.1 s of pytest with two threads, 142.9 and 136.1 s with one. The
    # setting only divides the cores: the runs a test compares with each other use the same one.
    if os.environ.get("PYTEST_XDIST_WORKER") and "TF_NUM_INTRAOP_THREADS" not in os.environ:
        workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
        os.environ["TF_NUM_INTRAOP_THREADS"] = str(max(1, (os.cpu_count() or 1) // workers))

    # tapefit's cache (Arrow copies of Parquet image tables) in a folder of this test process's
    # own, which its forked runs inherit, not the user's ~/.cache.
    if "TAPEFIT_CACHE_DIR" not in os.environ:
        os.environ["TAPEFIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="tapefit-cache-")
        atexit.register(shutil.rmtree, os.environ["TAPEFIT_CACHE_DIR"], ignore_errors=True)

    import tensorflow as tf

    # Two logical CPUs let MirroredStrategy run two replicas on this GPU-less machine. It must be
    # set before TensorFlow initialises its devices.
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()]
    )
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": GRAPPLER_OFF})


@pytest.fixture(autouse=True)
def _graph_optimisation(request):
    """TensorFlow's default graph optimisation for the tests marked `tf_defaults`."""
    if not (GRAPPLER_OFF and request.node.get_closest_marker("tf_defaults")):
        yield
        return
    import tensorflow as tf

    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": False})
    try:
        yield
    finally:
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})


def pytest_collection_finish(session):
    """Freeze what the imports made (TensorFlow, Keras, tapefit, the test modules), as
    `python -m tapefit` does: every in-process run's `clear_session` collects garbage, and
    without the freeze each collection walks those objects again (0.3 s a run here)."""
    gc.freeze()


# After each test, what it left alive (session fixtures' runs, Keras' and TensorFlow's caches
# of the graphs it traced) is frozen too, so the next tests' collections skip it. A worker's
# heap grows to some 400,000 objects over a session, and each of its runs' `clear_session` walked
# them all again: a run of the small CNN took 2.04 s beside 300,000 such objects, 1.61 s with them
# frozen (median of 4, alternated in one process). Every `REFREEZE_EVERY` tests everything is
# thawed and collected once, so what became garbage since it was frozen is still freed.
REFREEZE_EVERY = 100
_tests_since_thaw = 0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    global _tests_since_thaw
    yield
    _tests_since_thaw += 1
    if _tests_since_thaw >= REFREEZE_EVERY:
        gc.unfreeze()
        _tests_since_thaw = 0
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _seed_and_policy():
    """Every test starts from the same seed and float32, whatever the previous one set."""
    import keras

    keras.utils.set_random_seed(1234)
    keras.mixed_precision.set_global_policy("float32")
    yield
    keras.mixed_precision.set_global_policy("float32")


@pytest.fixture
def compose():
    """Compose the real config tree with overrides, as the CLI would."""
    from tapefit.runner.composition import compose as compose_config

    return compose_config


@pytest.fixture(scope="module")
def wgan_gp():
    """experiments/wgan_gp.py imported as a module: a TapeModel with two named optimizers
    (tests/training/test_optimizers.py, tests/step/test_optimizer_variables.py)."""
    from tests.helpers import load_experiment

    return load_experiment("wgan_gp")


@pytest.fixture(scope="session")
def mirrored_strategy():
    """One MirroredStrategy over the two logical CPUs for the whole session: separate instances
    in one process reuse collective instance keys and abort each other's all-reduces."""
    import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    assert strategy.num_replicas_in_sync == 2
    return strategy


@pytest.fixture(scope="session")
@built_once_per_session
def classifier_run(tmp_path_factory):
    """The digits classifier trained two epochs through `python -m tapefit` (the CNN, every
    default), once a session: (run directory, the finished process). tests/cli/test_cli.py reads
    its files, tests/runner/test_finished_runs.py evaluates it and predicts with it (into
    `eval/` and its own folders: nothing the other tests read)."""
    from tests.helpers import run_cli

    run_dir = tmp_path_factory.mktemp("classifier_run")
    result = run_cli("trainer.epochs=2", f"hydra.run.dir={run_dir}")
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir, result


# A user's project (`hits_project`): a model, a metric whose direction tapefit cannot know, and
# endless and unbatched datasets, run with `--config-dir conf experiment=autoencoder`.
HITS_MODULE = textwrap.dedent(
    '''
    import keras
    import numpy as np
    import tensorflow as tf

    import tapefit


    class AutoEncoder(tapefit.TapeModel):
        def __init__(self, width=2, **kwargs):
            super().__init__(**kwargs)
            self.width = width
            self.encode = keras.layers.Dense(width, activation="tanh")
            self.decode = keras.layers.Dense(4)

        def call(self, x, training=False):
            return self.decode(self.encode(x))


    class Agreement(keras.metrics.Metric):
        """1 / (1 + mean squared error): better when higher, a name tapefit cannot know."""

        def __init__(self, name="agreement", **kwargs):
            super().__init__(name=name, **kwargs)
            self.total = self.add_variable((), initializer="zeros", name="total")
            self.count = self.add_variable((), initializer="zeros", name="count")

        def update_state(self, y_true, y_pred, sample_weight=None):
            error = keras.ops.mean(keras.ops.square(y_true - y_pred), axis=-1)
            self.total.assign_add(keras.ops.sum(error))
            self.count.assign_add(keras.ops.cast(keras.ops.shape(error)[0], "float32"))

        def result(self):
            return 1.0 / (1.0 + self.total / self.count)


    def points(n, seed):
        x = np.random.default_rng(seed).normal(size=(n, 4)).astype("float32")
        x[:, 2:] = x[:, :2] * 0.5  # two directions carry everything: learnable in width 2
        return x


    def arrays(n=256, seed=0):
        return {"train": (points(n, seed), points(n, seed)), "test": (points(64, 9), points(64, 9))}


    def datasets(repeat=False):
        """Batched tf.data splits, a validation split of their own."""
        train = tf.data.Dataset.from_tensor_slices((points(256, 0), points(256, 0))).batch(16)
        val = tf.data.Dataset.from_tensor_slices((points(64, 1), points(64, 1))).batch(16)
        return {"train": train.repeat() if repeat else train, "validation": val}


    def unbatched():
        x = points(64, 0)
        return {"train": tf.data.Dataset.from_tensor_slices((x, x)), "validation": (x, x)}


    def word_labels():
        """Labels as a pandas column of words reads: an object array of strings."""
        x = points(64, 0)
        words = np.array(["up" if value > 0 else "down" for value in x[:, 0]], dtype=object)
        return {"train": (x, words)}
    '''
)

HITS_EXPERIMENT = """# @package _global_
defaults:
  - override /model: null
  - override /data: null
experiment_name: autoencoder
model: {_target_: hits_user.AutoEncoder}
data: {_target_: hits_user.arrays}
compile: {loss: mse}
trainer: {epochs: 3, verbose: 0, steps_per_execution: 1, deterministic: true}
"""

HITS_LEARNING_RATES = """# @package tune.space
optimizer.learning_rate: {type: choice, values: [0.0003, 0.01, 0.05]}
"""


@pytest.fixture(scope="session")
def siamese_run(tmp_path_factory):
    """The run directory of `experiment=siamese` (the LSTM) trained through the CLI once a
    session (tests/models/siamese_runs.py): tests/models/test_siamese.py reads its files,
    tests/runner/test_finished_runs.py evaluates it and predicts with it."""
    from tests.models.siamese_runs import build_siamese_run

    return build_siamese_run(tmp_path_factory=tmp_path_factory)


@pytest.fixture(scope="session")
def binary_contrastive_run(tmp_path_factory):
    """`(run_dir, result)` of `experiment=siamese` on binary labels with the contrastive loss,
    through the CLI once a session (tests/models/siamese_runs.py)."""
    from tests.models.siamese_runs import build_binary_contrastive_run

    return build_binary_contrastive_run(tmp_path_factory=tmp_path_factory)


@pytest.fixture(scope="session")
def hits_project(tmp_path_factory):
    """The project folder of `HITS_MODULE` (as `hits_user.py`), its experiment and a search
    space: what tests/cli/test_user_project_hits.py and the rows of docs/reference/errors.md
    (tests/docs/test_error_table.py) run the CLI in. Tests write their runs elsewhere."""
    root = tmp_path_factory.mktemp("hits_project")
    (root / "hits_user.py").write_text(HITS_MODULE)
    (root / "conf" / "experiment").mkdir(parents=True)
    (root / "conf" / "experiment" / "autoencoder.yaml").write_text(HITS_EXPERIMENT)
    (root / "conf" / "search_space").mkdir()
    (root / "conf" / "search_space" / "learning_rates.yaml").write_text(HITS_LEARNING_RATES)
    return root


# Modules that train in fresh processes, over the CLI, or for several runs each: `make test`
# runs them, `make test-fast` (`-m "not slow"`) leaves them out.
SLOW_MODULES = {
    "test_backend",
    "test_builtin_subclass",
    "test_cli",
    "test_experiments",
    "test_export",
    "test_keras_files_load",
    "test_optuna_search",
    "test_pair_stream",
    "test_pretrained_project",
    "test_processes",
    "test_readme",
    "test_resume",
    "test_resume_matrix",
    "test_scale_out",
    "test_search_sessions",
    "test_serving",
    "test_telemetry",
    "test_tuning",
    "test_user_project",
    "test_user_project_hits",
}


# The longest tests, longest first (`--durations=0` of a whole run): they run first, so the two
# xdist workers share them out at the start (xdist hands the first quarter of the tests out
# round-robin) instead of one worker running the last of them while the other waits.
LONGEST_FIRST = (
    "tests/checkpointing/test_kill_points.py::test_a_kill_at_every_point_resumes_bitwise",
    "tests/checkpointing/test_kill_points.py::test_a_sigterm_at_every_point",
    "tests/docs/test_doc_commands.py::test_every_command_runs_as_the_page_says",
    "tests/step/test_step_guards.py::test_a_bad_batch_on_one_replica",
    "tests/cli/test_experiments.py::test_benchmark_smoke_run",
    "tests/docs/test_doc_examples.py",
    "tests/runner/test_scale_out.py",
    "tests/runner/test_recipes.py",
)


def pytest_collection_modifyitems(config, items):
    # Slow too: each test that took `module_seconds.SLOW_TEST_SECONDS` or more in the last
    # whole run (tests/module_seconds.json), so `make test-fast` runs the unit tests only.
    slow_tests = module_seconds.load_slow_tests()
    for item in items:
        if item.module.__name__.rsplit(".", 1)[-1] in SLOW_MODULES or item.nodeid in slow_tests:
            item.add_marker(pytest.mark.slow)

    # After those, whole modules, heaviest first (tests/module_seconds.json): the suite ends
    # with its lightest tests, so neither worker idles while the other runs a long last one
    # (one worker ran alone for the last half minute when the order was the files' own). A
    # module's tests stay together and in their order, so a module fixture is built once.
    seconds = module_seconds.load()

    def rank(item: pytest.Item) -> tuple[int, float]:
        starts = [i for i, prefix in enumerate(LONGEST_FIRST) if item.nodeid.startswith(prefix)]
        first = starts[0] if starts else len(LONGEST_FIRST)
        return first, -seconds.get(item.nodeid.split("::")[0], 0.0)

    items.sort(key=rank)  # stable: within a module, the tests keep their order
