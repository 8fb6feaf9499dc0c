"""Image tables' bytes read memory-mapped (`tapefit.data.mapped_images`), Parquet's copied once."""

import os
import re
from pathlib import Path

import numpy as np
import pytest

from tapefit import TapefitError
from tapefit.data.image_tables import image_table
from tests.data.files import CLASSES, hf_dataset, photos, pixels_of

pytest.importorskip("datasets")


@pytest.mark.parametrize("saved_as", ["save_to_disk", "parquet"])
def test_a_tables_image_bytes_are_read_memory_mapped_not_held(tmp_path, caplog, saved_as):
    rows = photos(tmp_path / "photos", 3)
    dataset = hf_dataset(rows, CLASSES)
    table = str(tmp_path / ("train.parquet" if saved_as == "parquet" else "train"))
    dataset.to_parquet(table) if saved_as == "parquet" else dataset.save_to_disk(table)
    with caplog.at_level("INFO", logger="tapefit"):
        data = image_table(table, test_path=table, image_size=(12, 16), val_fraction=0.25)
    sources = [bytes(s) for paths, _ in data.splits.values() for s in paths]
    assert all(source.startswith(b"mmap:") and len(source) < 16 for source in sources)
    assert "held in memory" not in caplog.text
    copied = re.findall(r"its images copied once into (\S+) ", caplog.text)
    assert len(copied) == (saved_as == "parquet")  # Parquet: its image column, copied once
    if copied:
        cache = Path(os.environ["TAPEFIT_CACHE_DIR"]) / "image_tables"
        assert Path(copied[0]).parent == cache and Path(copied[0]).is_file()
        caplog.clear()
        with caplog.at_level("INFO", logger="tapefit"):
            image_table(table, image_size=(12, 16))  # the same file: the same copy
        assert "copied once" not in caplog.text and f"read memory-mapped from {copied[0]}" in (
            caplog.text
        )
        hf_dataset(rows[:6], CLASSES).to_parquet(table)  # another file by the same name
        with caplog.at_level("INFO", logger="tapefit"):
            assert image_table(table, image_size=(12, 16)).sizes == {"train": 5, "val": 1}
        assert re.findall(r"copied once into (\S+) ", caplog.text) not in ([], copied)
    images, labels = pixels_of(data, "test")  # each row read out of the map, in order
    np.testing.assert_array_equal(images, np.stack([p for _, _, p in rows]) / np.float32(255))
    assert [data.class_names[i] for i in labels] == [k for _, k, _ in rows]
    for epoch in range(2):  # shuffled each epoch, every row once with its class
        images, labels = pixels_of(data.rebuilt(batch_size=4), "train")
        by_class = {k: {p.tobytes() for _, kk, p in rows if kk == k} for k in CLASSES}
        assert len(images) == data.sizes["train"]
        for image, label in zip(images, labels, strict=True):
            pixels = np.round(image * 255).astype("uint8").tobytes()
            assert pixels in by_class[data.class_names[label]], epoch


def test_a_cache_folder_that_cannot_hold_the_copy_is_a_one_line_error(tmp_path, monkeypatch):
    rows = photos(tmp_path / "photos", 1)
    hf_dataset(rows, CLASSES).to_parquet(str(tmp_path / "train.parquet"))
    (tmp_path / "a_file").write_text("not a folder")
    monkeypatch.setenv("TAPEFIT_CACHE_DIR", str(tmp_path / "a_file"))
    with pytest.raises(TapefitError) as refused:
        image_table(str(tmp_path / "train.parquet"), image_size=(12, 16))
    assert str(refused.value).endswith(
        "a_file/image_tables (Not a directory): set TAPEFIT_CACHE_DIR to a writable folder "
        "with room for the images"
    )
    assert "cannot write its images' Arrow copy into" in str(refused.value)
