"""`tapefit.files`: files written atomically with the umask's permissions, and plain-value JSON."""

import json
import math
import os
import stat

import numpy as np
import pytest
import tensorflow as tf

from tapefit.files import atomic_path, atomic_write, read_json, to_builtin, write_json


@pytest.fixture
def umask_022():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "history.json"
    path.write_text("old")
    with pytest.raises(RuntimeError, match="disk full"), atomic_path(path) as temporary:
        temporary.write_text("half")
        raise RuntimeError("disk full")
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["history.json"]


def test_a_written_file_replaces_the_old_one_with_the_umasks_permissions(tmp_path, umask_022):
    path = tmp_path / "new" / "folder" / "model.keras"  # folders created
    with atomic_path(path, suffix=".keras") as temporary:
        assert temporary.parent == path.parent and temporary.name.startswith(".model.keras.")
        assert temporary.name.endswith(".tmp.keras")  # the suffix a writer insists on
        assert not path.exists()  # nothing at the path until the block succeeds
        temporary.write_bytes(b"weights")
    assert path.read_bytes() == b"weights"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # not mkstemp's 0o600
    assert sorted(p.name for p in path.parent.iterdir()) == ["model.keras"]


def test_atomic_write_hands_the_file_to_the_writer_in_the_mode_asked(tmp_path):
    path = tmp_path / "bytes.bin"
    assert atomic_write(path, lambda file: file.write(b"\x00\x01"), mode="wb") == path
    assert path.read_bytes() == b"\x00\x01"
    atomic_write(path, lambda file: file.write("text"))
    assert path.read_text() == "text"


def test_to_builtin_turns_numpy_and_tensors_into_plain_values_and_non_finite_into_none():
    value = {
        1: np.float32(0.5),
        "array": np.array([[1, 2], [3, 4]], dtype="int64"),
        "tuple": (np.int32(7), float("nan")),
        "tensor": tf.constant([1.5, np.inf]),
        "text": "kept",
        "flag": np.bool_(True),
    }
    plain = to_builtin(value)
    assert plain == {
        "1": 0.5,
        "array": [[1, 2], [3, 4]],
        "tuple": [7, None],
        "tensor": [1.5, None],
        "text": "kept",
        "flag": True,
    }
    assert type(plain["1"]) is float and type(plain["array"][0][0]) is int
    assert type(plain["flag"]) is bool
    assert to_builtin(np.float64(-math.inf)) is None


def test_write_json_writes_sorted_indented_plain_json_that_read_json_reads(tmp_path):
    path = write_json(tmp_path / "metrics.json", {"b": np.float32(2.0), "a": float("nan")})
    assert path.read_text() == '{\n  "a": null,\n  "b": 2.0\n}\n'
    assert read_json(path) == {"a": None, "b": 2.0}


def test_read_json_gives_the_default_for_a_missing_or_broken_file(tmp_path):
    assert read_json(tmp_path / "absent.json") is None
    assert read_json(tmp_path / "absent.json", missing={}) == {}
    (tmp_path / "broken.json").write_text('{"state": "runn')  # a user's half-written file
    assert read_json(tmp_path / "broken.json", missing="default") == "default"
    (tmp_path / "list.json").write_text(json.dumps([1, 2]))
    assert read_json(tmp_path / "list.json", missing="default") == [1, 2]
