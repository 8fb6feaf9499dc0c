"""`data=image_folder`: class-per-subfolder images decoded in the tf.data pipeline, the CNN
adapting to their size and channels, class names kept with the model and in the run
directory, and one-line errors naming the folder or file at fault."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from tapefit import TapefitError
from tapefit.data.loaders import image_folder
from tapefit.runner.model_from_config import build_model_from_config
from tapefit.runner.train import build_data, run
from tests.data.files import SIZE, draw

CLASSES = ("circle", "square", "stripes")


def write_folder(root, per_class, seed=0, channels=3):
    """`root/<class>/<i>.png` for every class; returns {path: pixels}."""
    rng = np.random.default_rng(seed)
    written = {}
    for kind in CLASSES:
        (root / kind).mkdir(parents=True, exist_ok=True)
        for index in range(per_class):
            pixels = draw(kind, rng, channels)
            path = root / kind / f"{index}.png"
            path.write_bytes(tf.io.encode_png(pixels).numpy())
            written[str(path)] = pixels
    return written


@pytest.fixture(scope="session")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("images")
    pixels = write_folder(root / "train", 8)
    pixels |= write_folder(root / "val", 3, seed=1)
    pixels |= write_folder(root / "test", 3, seed=2)
    return root, pixels


def overrides(root, *extra):
    return [
        "data=image_folder",
        f"data.train_path={root / 'train'}",
        f"data.image_size=[{SIZE[0]},{SIZE[1]}]",
        "data.batch_size=8",
        *extra,
    ]


def test_the_pipeline_decodes_files_it_lists_and_holds_only_their_names(folders, compose):
    root, pixels = folders
    cfg = compose(overrides(root, f"data.validation_path={root / 'val'}"))
    data = build_data(cfg)
    assert data.class_names == list(CLASSES) and data.num_classes == 3
    assert data.image_shape == (*SIZE, 3)
    assert data.sizes == {"train": 24, "val": 9} and data.test is None
    paths, _ = data.splits["train"]
    assert paths.dtype.kind == "U" and len(paths) == 24  # names, not pixels
    # The validation pipeline (not shuffled) yields each file's pixels / 255 with its label.
    images, batch_labels = next(iter(data.val))
    val_paths, val_labels = (part[: len(images)] for part in data.splits["val"])
    for image, label, path, expected in zip(
        images, batch_labels, val_paths, val_labels, strict=True
    ):
        np.testing.assert_allclose(image.numpy(), pixels[path] / 255.0, atol=1e-6)
        assert int(label) == expected == CLASSES.index(path.split("/")[-2])
    # Training reshuffles the file list each epoch, from the seed.
    first, second = ([int(y) for _, ys in data.train for y in ys] for _ in range(2))
    assert sorted(first) == sorted(second) and first != second
    again = [int(y) for _, ys in build_data(cfg).train for y in ys]
    assert again == first


def test_without_a_validation_folder_a_seeded_stratified_fraction_is_split_off(folders, compose):
    root, _ = folders
    data = build_data(compose(overrides(root, "data.val_fraction=0.25")))
    train_paths, _ = data.splits["train"]
    val_paths, val_labels = data.splits["val"]
    assert data.sizes == {"train": 18, "val": 6}
    assert not set(train_paths) & set(val_paths)
    assert np.bincount(val_labels).tolist() == [2, 2, 2]  # every class in both parts
    again = build_data(compose(overrides(root, "data.val_fraction=0.25"))).splits["val"][0]
    assert list(again) == list(val_paths)  # the same split from the same seed


def test_grayscale_images_reach_a_cnn_built_for_one_channel(folders, compose):
    root, _ = folders
    cfg = compose(overrides(root, "data.color_mode=grayscale", "model.architecture=cnn"))
    data = build_data(cfg)
    images, _ = next(iter(data.train))
    assert images.shape[1:] == (*SIZE, 1)
    model = build_model_from_config(cfg.model, data)
    assert model.image_shape == (*SIZE, 1)
    assert model(images).shape == (images.shape[0], 3)


@pytest.mark.slow
def test_a_run_keeps_the_class_names_with_the_model_and_in_the_run_directory(
    folders, compose, tmp_path
):
    root, _ = folders
    cfg = compose(
        overrides(
            root,
            f"data.validation_path={root / 'val'}",
            f"data.test_path={root / 'test'}",
            "model.architecture=mlp",
            "trainer.epochs=2",
            "trainer.verbose=0",
        )
    )
    metrics = run(cfg, tmp_path)
    assert json.loads((tmp_path / "classes.json").read_text()) == list(CLASSES)
    assert metrics["samples"] == {"train": 24, "val": 9, "test": 9}
    model = keras.models.load_model(tmp_path / "model.keras")
    assert model.class_names == list(CLASSES)
    test = build_data(cfg).test
    evaluated = model.evaluate(test, verbose=0, return_dict=True)
    assert evaluated["accuracy"] == pytest.approx(metrics["test_accuracy"], abs=1e-6)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("empty_class", r"class folder .*/train/square holds no images \(.png, .jpg"),
        ("unknown_val_class", r"/val/horse: class 'horse' is not one of the training classes"),
        ("no_subfolders", r"/flat has no class subfolders: put each class's images in a"),
        ("not_a_folder", r"data.train_path=.*/missing is not a directory"),
        (
            "unlabelled_test",
            r"data.test_path=.*/loose has no class subfolders \(put each class's "
            r"images in a subfolder named after the class\): a run trains and tests on labelled "
            r"images; python -m tapefit.predict takes images without labels$",
        ),
        (
            "empty_test",
            r"data.test_path=.*/loose holds no images \(.png, .jpg.*\) and no class "
            r"subfolders: point it at a folder of images$",
        ),
        ("bad_size", r"data.image_size=\[12\] must be \[height, width\]"),
    ],
)
def test_a_bad_folder_is_a_one_line_error_naming_it(tmp_path, compose, damage, message):
    root = tmp_path / "images"
    write_folder(root / "train", 2)
    write_folder(root / "val", 1)
    extra = [f"data.validation_path={root / 'val'}"]
    if damage == "empty_class":
        for path in (root / "train" / "square").iterdir():
            path.unlink()
    elif damage == "unknown_val_class":
        (root / "val" / "horse").mkdir()
    elif damage == "no_subfolders":
        (root / "flat").mkdir()
        extra.append(f"data.train_path={root / 'flat'}")
    elif damage == "not_a_folder":
        extra.append(f"data.train_path={root / 'missing'}")
    elif damage in ("unlabelled_test", "empty_test"):
        (root / "loose").mkdir()
        if damage == "unlabelled_test":
            (root / "train" / "square" / "0.png").rename(root / "loose" / "0.png")
        extra.append(f"data.test_path={root / 'loose'}")
    elif damage == "bad_size":
        extra.append("data.image_size=[12]")
    cfg = compose([*overrides(root), *extra, "trainer.epochs=1", "trainer.verbose=0"])
    with pytest.raises(TapefitError, match=message) as raised:
        run(cfg, tmp_path / "run")
    assert "\n" not in str(raised.value)
    assert json.loads((tmp_path / "run" / "status.json").read_text())["state"] == "failed"
    assert not (tmp_path / "run" / "model.keras").exists()


def test_a_test_folder_of_images_without_class_subfolders_is_images_to_predict(folders):
    root, pixels = folders
    loose = sorted(path for path in pixels if "/test/" in path)
    data = image_folder(str(root / "train"), test_path=str(root / "test" / "circle"),
                        image_size=SIZE, val_fraction=0.25)  # fmt: skip
    assert (
        list(data.unlabelled) == ["test"] and "has no class subfolders" in data.unlabelled["test"]
    )
    names = data.input_columns("test")["file"]
    assert names == sorted(path for path in loose if "/circle/" in path)
    images = np.concatenate(list(data.test.as_numpy_iterator()))  # batches of images alone
    np.testing.assert_array_equal(images, np.stack([pixels[n] for n in names]) / np.float32(255))


def test_an_unreadable_image_fails_the_run_naming_the_file(tmp_path, compose):
    root = tmp_path / "images"
    write_folder(root / "train", 4)
    broken = root / "train" / "stripes" / "2.png"
    broken.write_bytes(b"not a png at all")
    cfg = compose(
        overrides(root, "model.architecture=mlp", "trainer.epochs=1", "trainer.verbose=0")
    )
    with pytest.raises(TapefitError) as raised:
        run(cfg, tmp_path / "run")
    assert str(raised.value).startswith(f"{broken}: not a readable image (")
    assert str(raised.value).endswith("): replace or remove it")
    assert json.loads((tmp_path / "run" / "status.json").read_text())["state"] == "failed"
