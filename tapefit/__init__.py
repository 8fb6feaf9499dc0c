"""tapefit: explicit tf.GradientTape training steps with everything Keras' fit() gives you."""

from tapefit.backend import ensure_tensorflow_backend

ensure_tensorflow_backend()

from tapefit.errors import TapefitError  # noqa: E402
from tapefit.tape_model import StepOutput, TapeModel  # noqa: E402

__version__ = "0.1.0"

__all__ = ["StepOutput", "TapeModel", "TapefitError", "__version__"]
