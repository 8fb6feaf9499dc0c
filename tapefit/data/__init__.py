"""Datasets as `tf.data` pipelines, chosen by `data.name`."""

from tapefit.data.images import ImageData, image_datasets

__all__ = ["ImageData", "image_datasets"]
