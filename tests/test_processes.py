"""The tests' forked `python ...` (tests/processes.py) behaves as a real interpreter does."""

import os
import signal
import subprocess
import sys
import time

import pytest

from tests import processes

SCRIPT = """
import os, sys
print("out", sys.argv[1:], os.getcwd(), os.environ.get("PROBE"), sys.path[0] == "")
print("err", file=sys.stderr)
sys.exit(int(sys.argv[1]))
"""


def both(command, **kwargs):
    """(forked, real) results of the same command."""
    env = dict(processes.server_env(), PROBE="seen")
    forked = processes.run(command, env=env, capture_output=True, text=True, **kwargs)
    real = subprocess.run(command, env=env, capture_output=True, text=True, **kwargs)
    return forked, real


@pytest.mark.parametrize("code", ["0", "3"])
def test_a_forked_command_exits_prints_and_sees_what_a_real_one_does(tmp_path, code):
    forked, real = both([sys.executable, "-c", SCRIPT, code], cwd=tmp_path, timeout=120)
    assert forked.returncode == real.returncode == int(code)
    assert forked.stdout == real.stdout == f"out ['{code}'] {tmp_path} seen True\n"
    assert forked.stderr.endswith("err\n") and real.stderr.endswith("err\n")


def test_an_uncaught_error_and_a_message_exit_like_the_interpreter(tmp_path):
    forked, real = both([sys.executable, "-c", "raise ValueError('no')"], timeout=120)
    assert forked.returncode == real.returncode == 1
    assert forked.stderr.strip().endswith("ValueError: no")
    forked, real = both([sys.executable, "-c", "import sys; sys.exit('bye')"], timeout=120)
    assert forked.returncode == real.returncode == 1
    assert forked.stderr.strip().endswith("bye")


def test_a_module_runs_as_main_with_its_arguments(tmp_path):
    (tmp_path / "probe.py").write_text("import sys\nprint(__name__, sys.argv[1:])\n")
    forked, real = both([sys.executable, "-m", "probe", "a", "b"], cwd=tmp_path, timeout=120)
    assert forked.returncode == real.returncode == 0
    assert forked.stdout == real.stdout == "__main__ ['a', 'b']\n"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_a_signal_ends_a_forked_process_as_it_ends_a_real_one(signum):
    command = [sys.executable, "-c", "import time; time.sleep(60)"]
    process = processes.Popen(command, env=processes.server_env())
    assert process._real is None  # forked from the warm interpreter
    time.sleep(0.5)
    assert process.poll() is None
    process.send_signal(signum)
    assert process.wait(timeout=30) == -signum


def test_a_timeout_kills_the_process_and_raises_as_subprocess_does():
    with pytest.raises(subprocess.TimeoutExpired):
        processes.run([sys.executable, "-c", "import time; time.sleep(60)"], timeout=1)


def test_an_import_time_variable_that_differs_starts_a_real_interpreter():
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="0")
    process = processes.Popen([sys.executable, "-c", "pass"], env=env)
    assert process._real is not None
    assert process.wait(timeout=60) == 0


GRAPPLER_PROBE = (
    "import tensorflow as tf; "
    "print(tf.config.optimizer.get_experimental_options().get('disable_meta_optimizer'))"
)


def test_a_forked_run_optimises_graphs_as_the_test_process_does():
    """The tests turn TensorFlow's graph optimiser off (conftest.py): a forked child has it off
    too (a real interpreter, which nothing here configures, has TensorFlow's default)."""
    env = processes.server_env()
    forked = processes.run(
        [sys.executable, "-c", GRAPPLER_PROBE], env=env, capture_output=True, text=True, timeout=60
    )
    assert forked.stdout.strip() == str(env["TAPEFIT_TESTS_GRAPPLER"] == "off")


@pytest.mark.tf_defaults
def test_a_test_marked_tf_defaults_runs_with_the_graph_optimiser_on():
    import tensorflow as tf

    assert not tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer")


LOGS_AFTER_CONFIG = """
import logging.config
import tensorflow as tf
# as Hydra configures a job's logging: the handlers made before are shut down (absl's closes
# its stream unless it is sys.stderr)
logging.config.dictConfig({"version": 1, "disable_existing_loggers": False})
tf.get_logger().warning("probe line")
"""


def test_tensorflows_logger_writes_to_the_childs_stderr_after_a_logging_config(tmp_path):
    result = processes.run(
        [sys.executable, "-c", LOGS_AFTER_CONFIG],
        env=processes.server_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Logging error" not in result.stderr
    assert result.stderr.count("probe line") == 1
