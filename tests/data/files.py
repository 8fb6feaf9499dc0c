"""Files the data tests write: a `mnist.npz` in Keras' layout, small drawn images, and the
image tables' photos and Hugging Face datasets of them."""

import numpy as np
import tensorflow as tf

SIZE = (12, 16)  # the drawn images' height and width
CLASSES = ("circle", "square", "stripes")  # the photos' classes, as `draw` names them


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


def photos(folder, per_class, seed=0):
    """`folder/<class>_<i>.png`; returns [(relative path, class name, pixels)]."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for kind in CLASSES:
        for index in range(per_class):
            pixels = draw(kind, rng)
            (folder / f"{kind}_{index}.png").write_bytes(tf.io.encode_png(pixels).numpy())
            written.append((f"{folder.name}/{kind}_{index}.png", kind, pixels))
    return written


def hf_dataset(rows, names):
    """A Hugging Face image dataset: the encoded images as bytes, ClassLabel indices."""
    import datasets  # an optional extra: the tests that call this skip without it

    features = datasets.Features(
        {"image": datasets.Image(), "label": datasets.ClassLabel(names=list(names))}
    )
    images = [{"bytes": tf.io.encode_png(p).numpy(), "path": None} for _, _, p in rows]
    labels = [list(names).index(kind) for _, kind, _ in rows]
    return datasets.Dataset.from_dict({"image": images, "label": labels}, features=features)


def pixels_of(data, split):
    images, labels = zip(*getattr(data, split).unbatch().as_numpy_iterator(), strict=True)
    return np.stack(images), np.array(labels)
