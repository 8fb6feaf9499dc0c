"""Shared fixtures: TensorFlow backend, two logical CPUs for distribution tests, seeds, configs."""

from tapefit.backend import ensure_tensorflow_backend, set_command_defaults

set_command_defaults()  # the tests run TensorFlow as `python -m tapefit` does
ensure_tensorflow_backend()  # before TensorFlow is imported

# isort: split
import keras  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

# Two logical CPUs let MirroredStrategy run two replicas on this GPU-less machine. It must be
# set before TensorFlow initialises its devices, so it happens at import time.
_cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    _cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()]
)


def pytest_collection_finish(session):
    """Freeze what the imports made (TensorFlow, Keras, tapefit, the test modules), as
    `python -m tapefit` does: every in-process run's `clear_session` collects garbage, and
    without the freeze each collection walks those objects again (0.3 s a run here)."""
    import gc

    gc.freeze()


@pytest.fixture(autouse=True)
def _seed_and_policy():
    """Every test starts from the same seed and float32, whatever the previous one set."""
    keras.utils.set_random_seed(1234)
    keras.mixed_precision.set_global_policy("float32")
    yield
    keras.mixed_precision.set_global_policy("float32")


@pytest.fixture
def compose():
    """Compose the real config tree with overrides, as the CLI would."""
    from tapefit.runner.composition import compose as compose_config

    return compose_config


@pytest.fixture(scope="session")
def mirrored_strategy():
    """One MirroredStrategy over the two logical CPUs for the whole session: separate instances
    in one process reuse collective instance keys and abort each other's all-reduces."""
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    assert strategy.num_replicas_in_sync == 2
    return strategy


# Modules that train in fresh processes, over the CLI, or for several runs each: `make test`
# runs them, `make test-fast` (`-m "not slow"`) leaves them out.
SLOW_MODULES = {
    "test_cli",
    "test_builtin_subclass",
    "test_experiments",
    "test_export",
    "test_keras_files_load",
    "test_monitoring",
    "test_optuna_search",
    "test_pair_stream",
    "test_processes",
    "test_readme",
    "test_resume",
    "test_resume_matrix",
    "test_scale_out",
    "test_telemetry",
    "test_tuning",
    "test_user_project",
    "test_user_project_hits",
}


# The longest tests, longest first (`--durations=0` of a whole run): they run first, so the two
# xdist workers share them out at the start (xdist hands the first quarter of the tests out
# round-robin) instead of one worker running the last of them while the other waits.
LONGEST_FIRST = (
    "tests/run/test_kill_points.py::test_a_kill_at_every_point_resumes_bitwise",
    "tests/run/test_kill_points.py::test_a_sigterm_at_every_point",
    "tests/docs/test_doc_commands.py::test_every_command_runs_as_the_page_says",
    "tests/step/test_step_guards.py::test_a_bad_batch_on_one_replica",
    "tests/cli/test_experiments.py::test_benchmark_smoke_run",
    "tests/docs/test_doc_examples.py",
    "tests/run/test_scale_out.py",
    "tests/run/test_recipes.py",
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.module.__name__.rsplit(".", 1)[-1] in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)

    def rank(item: pytest.Item) -> int:
        starts = [i for i, prefix in enumerate(LONGEST_FIRST) if item.nodeid.startswith(prefix)]
        return starts[0] if starts else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the rest keep their order
