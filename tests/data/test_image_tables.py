"""`data=image_table`: labelled images listed in the tables people have (a CSV of files beside
the photos, JSON, a Hugging Face image dataset saved to disk or to Parquet), decoded in the
pipeline to exactly the pixels of the files, class names kept, and one-line errors naming the
table and row at fault; trained, predicted and served from a user's folder through the CLI."""

import csv
import json

import numpy as np
import pytest
import tensorflow as tf

from tapefit import TapefitError
from tapefit.data.image_tables import image_table
from tests.data.files import CLASSES, hf_dataset, photos, pixels_of
from tests.helpers import run_cli_batch

datasets = pytest.importorskip("datasets")


def test_a_csv_of_files_beside_the_photos_with_json_and_tsv_tables_for_the_other_splits(tmp_path):
    train = photos(tmp_path / "photos", 4)
    val = photos(tmp_path / "val_photos", 1, seed=1)
    with (tmp_path / "train.csv").open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["file", "species"])
        writer.writerows((path, kind) for path, kind, _ in reversed(train))
    (tmp_path / "val.json").write_text(
        json.dumps([{"file": str(tmp_path / p), "species": k} for p, k, _ in val])
    )
    (tmp_path / "test.tsv").write_text(
        "file\tspecies\n" + "".join(f"{p}\t{k}\n" for p, k, _ in train[:3])
    )
    data = image_table(
        str(tmp_path / "train.csv"),
        validation_path=str(tmp_path / "val.json"),
        test_path=str(tmp_path / "test.tsv"),
        image_column="file",
        label_column="species",
        image_size=(12, 16),
        seed=3,
    )
    assert data.class_names == sorted(CLASSES) and data.image_shape == (12, 16, 3)
    assert data.sizes == {"train": 12, "val": 3, "test": 3}
    images, labels = pixels_of(data, "val")  # in the table's order, decoded as the files
    np.testing.assert_array_equal(images, np.stack([p for _, _, p in val]) / np.float32(255))
    assert labels.tolist() == [data.class_names.index(k) for _, k, _ in val]
    images, labels = pixels_of(data, "train")  # shuffled: every image once, with its class
    by_class = {k: {p.tobytes() for _, kk, p in train if kk == k} for k in CLASSES}
    for image, label in zip(images, labels, strict=True):
        pixels = np.round(image * 255).astype("uint8").tobytes()
        assert pixels in by_class[data.class_names[label]]


@pytest.mark.parametrize("saved_as", ["save_to_disk", "parquet"])
def test_a_hugging_face_image_dataset_keeps_its_class_names_and_pixels(tmp_path, saved_as):
    rows = photos(tmp_path / "photos", 2)
    names = ("stripes", "circle", "square")  # the dataset's own order, not sorted
    dataset = hf_dataset(rows, names)
    path = tmp_path / "train"
    if saved_as == "parquet":
        path = tmp_path / "train.parquet"
        dataset.to_parquet(str(path))
    else:
        dataset.save_to_disk(str(path))
    data = image_table(str(path), validation_path=str(path), image_size=(12, 16))
    assert data.class_names == list(names)
    images, labels = pixels_of(data, "val")
    np.testing.assert_array_equal(images, np.stack([p for _, _, p in rows]) / np.float32(255))
    assert [names[i] for i in labels] == [k for _, k, _ in rows]


def test_class_indices_without_names_are_their_own_names(tmp_path):
    rows = photos(tmp_path / "photos", 2)
    lines = [json.dumps({"image": p, "label": CLASSES.index(k)}) for p, k, _ in rows]
    (tmp_path / "train.jsonl").write_text("\n".join(lines))
    data = image_table(str(tmp_path / "train.jsonl"), image_size=(12, 16), val_fraction=0.5)
    assert data.class_names == ["0", "1", "2"] and data.num_classes == 3


@pytest.mark.parametrize("kind", ["csv", "tsv", "jsonl", "json", "parquet", "save_to_disk"])
def test_a_test_table_without_labels_is_images_to_predict_named_by_its_cells(tmp_path, kind):
    rows = photos(tmp_path / "photos", 2)
    with (tmp_path / "train.csv").open("w", newline="") as file:
        csv.writer(file).writerows([("image", "label"), *((p, k) for p, k, _ in rows)])
    new = relative = [path for path, _, _ in rows[::-2]]  # as the table writes them
    path = tmp_path / f"new.{kind}"
    if kind in ("csv", "tsv"):
        separator = "," if kind == "csv" else "\t"
        path.write_text(f"image{separator}note\n" + "".join(f"{p}{separator}x\n" for p in new))
    elif kind == "jsonl":
        path.write_text("\n".join(json.dumps({"image": p}) for p in new))
    elif kind == "json":
        path.write_text(json.dumps([{"image": p} for p in new]))
    else:
        new = [str(tmp_path / p) for p in relative]  # a dataset's paths are absolute
        dataset = datasets.Dataset.from_dict({"image": new})
        path = tmp_path / ("new.parquet" if kind == "parquet" else "new")
        dataset.to_parquet(str(path)) if kind == "parquet" else dataset.save_to_disk(str(path))
    data = image_table(str(tmp_path / "train.csv"), test_path=str(path), image_size=(12, 16))
    assert list(data.unlabelled) == ["test"] and data.sizes["test"] == len(new)
    assert (
        "has no column 'label', so its images have no labels (its columns: ['image'"
        in (data.unlabelled["test"])
    )
    images = np.concatenate(list(data.test.as_numpy_iterator()))  # batches of images alone
    by_path = {p: pixels for p, _, pixels in rows}
    want = np.stack([by_path[p] for p in relative]) / np.float32(255)
    np.testing.assert_array_equal(images, want)
    assert data.input_columns("test") == {"image": new}
    assert data.rebuilt(3).input_columns("test") == {"image": new}
    val_names = data.input_columns("val")["image"]  # held out by the seed, names kept with rows
    val_images, val_labels = pixels_of(data, "val")
    for name, image, label in zip(val_names, val_images, val_labels, strict=True):
        np.testing.assert_array_equal(image, by_path[name] / np.float32(255))
        assert data.class_names[label] == dict((p, k) for p, k, _ in rows)[name]


@pytest.mark.parametrize(
    ("table", "options", "message"),
    [
        ("file,kind\nphotos/circle_0.png,circle\n", {}, r"train.csv: no column 'image' in the "
         r"header; it has \['file', 'kind'\]: set data.image_column to one of them$"),
        ("images,label\nphotos/circle_0.png,circle\n", {}, r"train.csv: no column 'image' in "
         r"the header; it has \['images', 'label'\] \(did you mean 'images'\?\): set "
         r"data.image_column to one of them$"),
        ("image,label\nphotos/gone.png,circle\n", {}, r"train.csv:2: image file .*photos/gone.png "
         r"does not exist \(a relative path is the table's folder's\); fix or remove the row$"),
        ("image,label\nphotos/circle_0.png,\n", {}, r"train.csv:2: the label '' is neither a "
         r"class name nor a class index"),
        ("image,label\nphotos/circle_0.png,circle\nphotos/square_0.png,1\n", {},
         r"train.csv:3: label 1 mixes class names and class indices \(line 2: 'circle'\): use one"),
        ("image,label\n", {}, r"image table .*train.csv holds no rows: it is empty$"),
        ("image,label\nphotos/circle_0.png,circle\nphotos/square_0.png,square\n",
         {"validation_path": "none.csv"}, r"image table .*none.csv does not "
         r"exist: check data.validation_path$"),
        ("image,label\nphotos/circle_0.png,circle\nphotos/square_0.png,square\n",
         {"validation_path": "val.csv"}, r"val.csv:2: class 'horse' is not one of the "
         r"training classes \['circle', 'square'\]"),
    ],
)  # fmt: skip
def test_a_bad_table_is_a_one_line_error_naming_it(tmp_path, table, options, message):
    photos(tmp_path / "photos", 1)
    (tmp_path / "train.csv").write_text(table)
    (tmp_path / "val.csv").write_text("image,label\nphotos/circle_0.png,horse\n")
    options = {k: str(tmp_path / v) for k, v in options.items()}
    with pytest.raises(TapefitError, match=message) as raised:
        image_table(str(tmp_path / "train.csv"), image_size=(12, 16), **options)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("saved_as", ["parquet", "save_to_disk"])
def test_an_undecodable_image_in_a_table_is_named_by_its_row(tmp_path, saved_as):
    rows = photos(tmp_path / "photos", 1)
    dataset = hf_dataset(rows, CLASSES).cast_column("image", datasets.Image(decode=False))
    images = list(dataset["image"])
    images[1] = {"bytes": b"not a png", "path": None}
    broken = datasets.Dataset.from_dict(
        {"image": images, "label": dataset["label"]}, features=dataset.features
    )
    table = str(tmp_path / ("train.parquet" if saved_as == "parquet" else "train"))
    broken.to_parquet(table) if saved_as == "parquet" else broken.save_to_disk(table)
    data = image_table(table, validation_path=table, image_size=(12, 16))
    with pytest.raises(tf.errors.InvalidArgumentError) as failed:
        list(data.val)
    error = data.diagnose(failed.value)
    assert str(error).startswith("row 2 of the train table: not a readable image (Unknown image")
    assert str(error).endswith(" required.): replace or remove it")  # no op or graph names


@pytest.mark.slow
def test_a_users_tables_train_predict_with_class_names_and_refuse_a_bad_row_from_the_cli(
    tmp_path,
):
    rows = photos(tmp_path / "photos", 6)
    hf_dataset(rows, CLASSES).to_parquet(str(tmp_path / "train.parquet"))
    (tmp_path / "test.csv").write_text(
        "image,label\n" + "".join(f"{p},{k}\n" for p, k, _ in rows[::2])
    )
    (tmp_path / "bad.csv").write_text("image,label\nphotos/none.png,circle\n")
    (tmp_path / "new.csv").write_text("image\n" + "".join(f"{p}\n" for p, _, _ in rows[1::3]))
    unlabelled = "data.test_path=new.csv"
    common = [
        "data=image_table",
        "data.train_path=train.parquet",
        "data.image_size=[12,16]",
        "model.architecture=mlp",
        "trainer.epochs=1",
    ]
    trained, predicted, refused, *unlabelled_runs = run_cli_batch(
        [
            [*common, "data.test_path=test.csv", "hydra.run.dir=runs/photos"],
            ("tapefit.predict", ["run=runs/photos", "output=predictions.csv"]),
            [*common, "data.test_path=bad.csv", "hydra.run.dir=runs/bad"],
            ("tapefit.predict", ["run=runs/photos", "output=new.out.csv", unlabelled]),
            ("tapefit.evaluate", ["run=runs/photos", unlabelled]),
            [*common, unlabelled, "hydra.run.dir=runs/unlabelled"],
        ],
        cwd=tmp_path,
    )
    assert trained.returncode == 0, trained.stderr[-2000:]
    assert json.loads((tmp_path / "runs/photos/classes.json").read_text()) == list(CLASSES)
    assert predicted.returncode == 0, predicted.stderr[-2000:]
    with (tmp_path / "predictions.csv").open() as file:
        predictions = list(csv.DictReader(file))
    assert len(predictions) == 9 and {p["label"] for p in predictions} <= set(CLASSES)
    assert [p["image"] for p in predictions] == [path for path, _, _ in rows[::2]]
    assert list(predictions[0]) == ["image", "label", *(f"prob_{k}" for k in CLASSES)]
    # a table of new images without labels: predicted, named by the table's own cells;
    # evaluated or trained on, refused in one line before anything runs
    new_predicted, evaluated, trained_on_unlabelled = unlabelled_runs
    assert new_predicted.returncode == 0, new_predicted.stderr[-2000:]
    with (tmp_path / "new.out.csv").open() as file:
        new_predictions = list(csv.DictReader(file))
    assert [p["image"] for p in new_predictions] == [path for path, _, _ in rows[1::3]]
    assert {p["label"] for p in new_predictions} <= set(CLASSES)
    refusal = (
        "new.csv has no column 'label', so its images have no labels (its columns: ['image']; "
        "labels in another column: set data.label_column)"
    )
    for result, needs in [
        (evaluated, "tapefit.evaluate scores labelled images"),
        (trained_on_unlabelled, "a run trains and tests on labelled images"),
    ]:
        assert result.returncode == 2, result.stderr[-2000:]
        last = result.stderr.strip().splitlines()[-1]
        assert refusal in last and needs in last and "tapefit.predict takes images" in last, last
    assert not (tmp_path / "runs/unlabelled").exists()
    assert not (tmp_path / "runs/photos/eval").exists()
    assert refused.returncode == 2
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith("tapefit: error: ") and "bad.csv:2: image file" in last, last
    assert not (tmp_path / "runs/bad").exists()
