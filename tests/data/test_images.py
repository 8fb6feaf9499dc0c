"""Image data (`tapefit.data.images`): digits splits, MNIST from a keras-format file, errors."""

import numpy as np
import pytest

import tapefit
from tapefit import TapefitError
from tapefit.data.images import load_digits_splits, load_mnist_splits
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
