"""The first-class TapeModel subclasses."""

from tapefit.models.classifier import Classifier

__all__ = ["Classifier"]
