"""The first-class TapeModel subclasses and their building blocks."""

from tapefit.models.classifier import Classifier
from tapefit.models.layers import TextEncoder
from tapefit.models.siamese import SiameseModel

__all__ = ["Classifier", "SiameseModel", "TextEncoder"]
