"""tapefit: explicit tf.GradientTape training steps with everything Keras' fit() gives you."""

from tapefit.backend import ensure_tensorflow_backend_or_exit

ensure_tensorflow_backend_or_exit()  # before anything imports Keras

from tapefit.errors import TapefitError, UnsaveableModelError  # noqa: E402
from tapefit.models import Classifier, SiameseModel, TextEncoder  # noqa: E402
from tapefit.runner.composition import compose  # noqa: E402
from tapefit.runner.train import run  # noqa: E402
from tapefit.step.gradcheck import gradcheck  # noqa: E402
from tapefit.step.tape_model import StepOutput, TapeModel  # noqa: E402

__version__ = "0.1.0"

# The modules a run is made of moved to `tapefit.runner`: their old names keep working.
import importlib as _importlib  # noqa: E402
import sys as _sys  # noqa: E402

for _old, _new in {
    "tapefit.training.train": "tapefit.runner.train",
    "tapefit.training.finish": "tapefit.runner.finish",
    "tapefit.config.validation": "tapefit.runner.validation",
    "tapefit.config.composition": "tapefit.runner.composition",
}.items():
    _sys.modules.setdefault(_old, _importlib.import_module(_new))

__all__ = [
    "Classifier",
    "SiameseModel",
    "StepOutput",
    "TapeModel",
    "TapefitError",
    "TextEncoder",
    "UnsaveableModelError",
    "__version__",
    "compose",
    "gradcheck",
    "run",
]
