"""Datasets as `tf.data` pipelines. Loaders take plain arguments and never read config."""

from tapefit.data.images import ImageData, image_data
from tapefit.data.pairs import PairData, pair_data

__all__ = ["ImageData", "PairData", "image_data", "pair_data"]
