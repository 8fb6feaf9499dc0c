"""Files the data tests write: a `mnist.npz` in Keras' layout and small drawn images."""

import numpy as np

SIZE = (12, 16)  # the drawn images' height and width


def write_mnist(path, n_train=60, n_test=20, **drop):
    """A small file in the exact layout of keras' mnist.npz (uint8 images, uint8 labels)."""
    rng = np.random.default_rng(0)
    arrays = {
        "x_train": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "y_train": np.arange(n_train, dtype=np.uint8) % 10,
        "x_test": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "y_test": np.arange(n_test, dtype=np.uint8) % 10,
    }
    for key in drop:
        arrays.pop(key)
    np.savez_compressed(path, **arrays)
    return arrays


def draw(kind, rng, channels=3):
    """A 12x16 image of a class: a bright disc, square or stripes on noise."""
    image = rng.integers(0, 60, (*SIZE, channels)).astype("uint8")
    yy, xx = np.mgrid[: SIZE[0], : SIZE[1]]
    mask = {
        "circle": (yy - 6) ** 2 + (xx - 8) ** 2 < 16,
        "square": (abs(yy - 6) < 3) & (abs(xx - 8) < 3),
        "stripes": xx % 4 == 0,
    }[kind]
    image[mask] = 230
    return image
