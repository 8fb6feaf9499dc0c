"""Datasets as `tf.data` pipelines, chosen by `data.name`."""

from tapefit.data.images import ImageData, image_datasets
from tapefit.data.pairs import PairData, pair_datasets

__all__ = ["ImageData", "PairData", "image_datasets", "pair_datasets"]
