"""The first-class TapeModel subclasses and their building blocks."""

from tapefit.models.backbone_classifier import BackboneClassifier
from tapefit.models.classifier import Classifier
from tapefit.models.layers import TextEncoder
from tapefit.models.siamese import SiameseModel

__all__ = ["BackboneClassifier", "Classifier", "SiameseModel", "TextEncoder"]
