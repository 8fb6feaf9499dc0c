"""`tapefit.data.pair_paths`: the files a pair-file option names, or a one-line refusal."""

import pytest

from tapefit.data.pair_paths import checked_file, expand_paths, is_saved_dataset
from tapefit.errors import TapefitError


def touch(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    return path


def saved_dataset(folder):
    """A folder as `Dataset.save_to_disk` leaves it (the two files tapefit looks for)."""
    touch(folder / "state.json")
    touch(folder / "dataset_info.json")
    return folder


def test_globs_expand_to_sorted_files_each_once_in_the_order_first_named(tmp_path):
    for name in ("shard-2.tsv", "shard-10.tsv", "shard-1.tsv", "extra.tsv"):
        touch(tmp_path / name)
    (tmp_path / "shard-dir.tsv").mkdir()  # matched by the glob, but not a file
    shards = str(tmp_path / "shard-*.tsv")
    files = expand_paths([str(tmp_path / "extra.tsv"), shards, str(tmp_path / "shard-1.tsv")], "x")
    assert [p.name for p in files] == ["extra.tsv", "shard-1.tsv", "shard-10.tsv", "shard-2.tsv"]


def test_a_plain_path_is_taken_as_it_is_with_the_home_folder_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert expand_paths("~/not-yet.tsv", "train_path") == [tmp_path / "not-yet.tsv"]


@pytest.mark.parametrize(
    ("value", "shown"),
    [([], "[]"), (None, "None"), (["a.tsv", 3], "['a.tsv', 3]"), (["a.tsv", ""], "['a.tsv', '']")],
    ids=["empty", "none", "not_a_string", "empty_string"],
)
def test_a_value_that_names_no_file_is_refused_naming_the_key(value, shown):
    with pytest.raises(TapefitError) as refused:
        expand_paths(value, "train_path")
    assert str(refused.value) == (
        f"data.train_path={shown} must be a file, a glob such as 'shards/*.tsv', or a list of them"
    )


def test_a_glob_matching_no_file_is_refused_naming_the_key_and_pattern(tmp_path):
    (tmp_path / "only-a-dir.tsv").mkdir()
    pattern = str(tmp_path / "*.tsv")
    with pytest.raises(TapefitError) as refused:
        expand_paths(pattern, "test_path")
    assert str(refused.value) == (
        f"data.test_path: no file matches {pattern!r}: check the folder and the pattern"
    )


def test_a_saved_dataset_folder_needs_both_of_its_files(tmp_path):
    assert is_saved_dataset(saved_dataset(tmp_path / "split"))
    for name in ("state.json", "dataset_info.json"):
        touch(tmp_path / name / name)
        assert not is_saved_dataset(tmp_path / name)
    assert not is_saved_dataset(tmp_path / "absent")


def test_checked_file_returns_a_file_or_a_saved_dataset_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    touch(tmp_path / "pairs.csv")
    assert checked_file("~/pairs.csv") == tmp_path / "pairs.csv"
    assert checked_file(saved_dataset(tmp_path / "sts")) == tmp_path / "sts"


def test_checked_file_refuses_a_dataset_dict_naming_its_splits(tmp_path):
    folder = tmp_path / "sts_dict"
    touch(folder / "dataset_dict.json")
    saved_dataset(folder / "validation")
    saved_dataset(folder / "train")
    (folder / "notes").mkdir()  # not a split
    with pytest.raises(TapefitError) as refused:
        checked_file(folder, "image table")
    assert str(refused.value) == (
        f"image table {folder} is a Hugging Face DatasetDict with splits train, validation: "
        f"point each path at one split's folder ({folder / 'train'})"
    )


def test_checked_file_refuses_a_directory_and_a_missing_path_naming_the_key(tmp_path):
    with pytest.raises(TapefitError) as refused:
        checked_file(tmp_path)
    assert str(refused.value) == (
        f"pair file {tmp_path} is a directory: point the path at a file in it"
    )
    with pytest.raises(TapefitError) as refused:
        checked_file(tmp_path / "absent.csv")
    assert str(refused.value).endswith("does not exist: check data.train_path/test_path")
    with pytest.raises(TapefitError) as refused:
        checked_file(tmp_path / "absent.csv", "image table", key="test_path")
    assert (
        str(refused.value)
        == f"image table {tmp_path / 'absent.csv'} does not exist: check data.test_path"
    )
