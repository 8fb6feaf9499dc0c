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
