"""`tapefit.backend`: another Keras backend is refused, in one line and exit code 2 from the
command line (the module and the console script), and as an error when tapefit is imported."""

import pytest


@pytest.mark.parametrize("entry_point", ["module", "script"])
def test_another_keras_backend_is_one_line_and_exit_code_2(entry_point):
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = Path(sys.executable).with_name("tapefit")
    assert script.is_file(), "the tapefit console script is installed with the package"
    command = [sys.executable, "-m", "tapefit"] if entry_point == "module" else [str(script)]
    env = dict(os.environ, KERAS_BACKEND="jax")
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr == (
        "tapefit: error: KERAS_BACKEND='jax' is not supported: tapefit's steps use "
        "tf.GradientTape; unset KERAS_BACKEND or set KERAS_BACKEND=tensorflow\n"
    )
    assert result.stdout == ""


def test_importing_tapefit_with_another_backend_raises_its_error():
    import os
    import subprocess
    import sys

    code = (
        "try:\n    import tapefit\n"
        "except Exception as error:\n    print(type(error).__name__, error)"
    )
    env = dict(os.environ, KERAS_BACKEND="jax")
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("TapefitError KERAS_BACKEND='jax' is not supported")
