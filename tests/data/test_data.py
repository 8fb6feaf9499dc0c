"""Image data: digits splits, the MNIST loader on a file in keras' format, clear errors."""

import numpy as np
import pytest

import tapefit
from tapefit import TapefitError
from tapefit.data.images import load_digits_splits, load_mnist_splits
from tapefit.data.loaders import mnist as load_mnist
from tests.data.files import write_mnist


def test_digits_split_is_stratified_scaled_and_complete():
    splits = load_digits_splits(val_fraction=0.15, test_fraction=0.2, seed=0)
    sizes = {name: len(y) for name, (_, y) in splits.items()}
    assert sum(sizes.values()) == 1797
    assert sizes["test"] == 360
    for images, labels in splits.values():
        assert images.shape[1:] == (8, 8, 1) and images.dtype == np.float32
        assert images.min() >= 0.0 and images.max() <= 1.0
        assert np.bincount(labels, minlength=10).min() >= 15  # every class in every split


def test_mnist_loader_reads_a_keras_format_file(tmp_path):
    arrays = write_mnist(tmp_path / "mnist.npz")
    splits = load_mnist_splits(str(tmp_path / "mnist.npz"), val_fraction=0.1, seed=0)
    assert [len(splits[s][1]) for s in ("train", "val", "test")] == [54, 6, 20]
    x_test, y_test = splits["test"]
    assert x_test.shape == (20, 28, 28, 1) and x_test.dtype == np.float32
    np.testing.assert_allclose(x_test[..., 0], arrays["x_test"] / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(y_test, arrays["y_test"])


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


def test_missing_mnist_file_says_how_to_get_it(tmp_path):
    with pytest.raises(TapefitError, match=r"does not exist: point it at mnist.npz"):
        load_mnist_splits(str(tmp_path / "absent.npz"), 0.1, 0)


def test_mnist_file_without_an_array_is_named(tmp_path):
    write_mnist(tmp_path / "mnist.npz", y_test=True)
    with pytest.raises(TapefitError, match="lacks y_test"):
        load_mnist_splits(str(tmp_path / "mnist.npz"), 0.1, 0)


def test_corrupt_mnist_file_is_reported(tmp_path):
    (tmp_path / "mnist.npz").write_bytes(b"not a zip archive")
    with pytest.raises(TapefitError, match=r"not a readable \.npz"):
        load_mnist_splits(str(tmp_path / "mnist.npz"), 0.1, 0)


def test_offline_download_failure_explains_data_path(monkeypatch):
    import keras

    def offline():
        raise Exception("URL fetch failure")

    monkeypatch.setattr(keras.datasets.mnist, "load_data", offline)
    with pytest.raises(TapefitError, match=r"offline machine .* data.path="):
        load_mnist_splits(None, 0.1, 0)


def test_fractions_outside_zero_one_are_rejected(compose, tmp_path):
    cfg = compose(["data.val_fraction=1.5"])
    with pytest.raises(TapefitError, match=r"val_fraction=1\.5 must lie strictly between"):
        tapefit.run(cfg, tmp_path)
    with pytest.raises(TapefitError, match=r"test_fraction=0\.0 must lie strictly between"):
        load_digits_splits(0.1, 0.0, seed=0)


def test_pipelines_run_without_the_autotuner_and_keep_every_sample():
    # The autotuner's thread made each iterator's teardown wait seconds
    # (docs/explanation/benchmark.md, Fast defaults).
    from tapefit.data.pipeline import make_pipeline

    arrays = (np.arange(10, dtype="float32"), np.arange(10))
    dataset = make_pipeline(arrays, 4, shuffle=True, seed=0)
    assert dataset.options().autotune.enabled is False
    assert sorted(float(v) for x, _ in dataset for v in x) == list(range(10))
