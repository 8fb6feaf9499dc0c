"""The MNIST loader (`tapefit.data.loaders`): batched as configured, reshuffled each epoch."""

import numpy as np

from tapefit.data.loaders import mnist as load_mnist
from tests.data.files import write_mnist


def test_mnist_pipelines_batch_as_configured(tmp_path):
    write_mnist(tmp_path / "mnist.npz")
    options = {
        "path": str(tmp_path / "mnist.npz"),
        "batch_size": 16,
        "val_fraction": 0.1,
        "train_limit": 40,
        "cache": True,
    }
    data = load_mnist(**options, seed=0)
    assert data.image_shape == (28, 28, 1) and data.num_classes == 10
    assert data.sizes == {"train": 40, "val": 6, "test": 20}
    batches = [y.shape[0] for _, y in data.train]
    assert batches == [16, 16, 8]


def test_training_batches_are_reshuffled_each_epoch_but_reproducible(tmp_path):
    write_mnist(tmp_path / "mnist.npz")
    options = {
        "path": str(tmp_path / "mnist.npz"),
        "batch_size": 54,
        "val_fraction": 0.1,
        "train_limit": None,
        "cache": True,
    }
    first = load_mnist(**options, seed=3).train
    epoch_a, epoch_b = (next(iter(first))[1].numpy() for _ in range(2))
    again = next(iter(load_mnist(**options, seed=3).train))[1].numpy()
    assert not np.array_equal(epoch_a, epoch_b)
    np.testing.assert_array_equal(epoch_a, again)
