"""`tapefit.training.export.verification`: each export's outputs checked against the model's."""

import logging

import numpy as np
import pytest
import tensorflow as tf

from tapefit.errors import TapefitError
from tapefit.training.export import runtimes
from tapefit.training.export.endpoints import ExportEndpoint
from tapefit.training.export.verification import (
    VerifyBatch,
    endpoint_inputs,
    first_batch,
    verify_exports,
)


class Data:
    def __init__(self, **splits):
        self.train, self.val, self.test = (splits.get(name) for name in ("train", "val", "test"))


def batches(x, y, size):
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(size)


def endpoint(name, function, *specs):
    """An endpoint of one positional argument per spec."""
    return ExportEndpoint(name, function, tuple(specs), tuple(specs))


X_SPEC = tf.TensorSpec([None, 2], tf.float32, name="x")
DOUBLE = endpoint("serve", lambda x: x * 2.0, X_SPEC)
TRIPLE = endpoint("triple", lambda x: x * 3.0, X_SPEC)
X = np.arange(8, dtype="float32").reshape(4, 2)


def test_the_first_batch_is_the_test_splits_x_cut_to_the_rows_asked():
    x = np.arange(20, dtype="float32").reshape(10, 2)
    data = Data(
        train=batches(x + 100, np.zeros(10), 8),
        val=batches(x + 10, np.zeros(10), 8),
        test=batches(x, np.zeros(10), 8),
    )
    batch = first_batch(data, rows=3)
    assert batch.split == "test" and batch.rows == 3
    np.testing.assert_array_equal(batch.x, x[:3])


def test_the_first_batch_falls_back_to_validation_then_training_past_empty_splits():
    x = np.ones((6, 2), "float32")
    empty = batches(x, np.zeros(6), 4).take(0)
    pairs = ({"a": x, "b": x[:, 0]}, np.zeros(6))  # nested inputs keep their structure
    val = tf.data.Dataset.from_tensor_slices(pairs).batch(4)
    batch = first_batch(Data(train=batches(x, np.zeros(6), 4), val=val, test=empty))
    assert batch.split == "val" and batch.rows == 4 and sorted(batch.x) == ["a", "b"]
    assert first_batch(Data(train=batches(x, np.zeros(6), 5))).split == "train"
    assert first_batch(Data(test=empty)) is None and first_batch(Data()) is None


def test_inputs_that_fit_one_for_one_are_cast_to_the_specs_dtypes():
    specs = (tf.TensorSpec([None, 2], tf.float32), tf.TensorSpec([None], tf.int32))
    given = endpoint("serve", None, *specs)
    flat = endpoint_inputs(given, VerifyBatch("test", (X.astype("float64"), np.arange(4))))
    assert [a.dtype.name for a in flat] == ["float32", "int32"]
    np.testing.assert_array_equal(flat[1], np.arange(4))


def test_an_endpoint_takes_the_first_input_that_fits_each_spec_in_turn():
    texts_a, texts_b = np.array(["a", "b"]), np.array(["c", "d"])
    encode = endpoint("encode", None, tf.TensorSpec([None], tf.string, name="texts"))
    [texts] = endpoint_inputs(encode, VerifyBatch("test", (np.ones(2, "int64"), texts_a, texts_b)))
    assert list(texts) == ["a", "b"]  # the first text of each pair, not the ids before them
    both = endpoint("pair", None, *encode.specs, *encode.specs)
    batch = VerifyBatch("test", (np.ones(2, "int64"), texts_a, texts_b))
    assert [list(t) for t in endpoint_inputs(both, batch)] == [["a", "b"], ["c", "d"]]


def test_an_endpoint_nothing_in_the_batch_fits_gets_no_inputs():
    images = endpoint("serve", None, tf.TensorSpec([None, 4, 4], tf.float32))
    assert endpoint_inputs(images, VerifyBatch("test", X)) is None  # wrong shape
    texts = endpoint("encode", None, tf.TensorSpec([None], tf.string))
    assert endpoint_inputs(texts, VerifyBatch("test", np.arange(4.0))) is None  # numbers


def fake_runtime(monkeypatch, shift=0.0, outputs=None, shifts=None):
    """onnx's runtime replaced by one returning the endpoint's own outputs, shifted (by
    `shift`, or by endpoint in `shifts`), or `outputs`; it records the files it ran."""
    ran = []

    def run(path, given, flat):
        ran.append(path.name)
        moved = (shifts or {}).get(given.name, shift)
        return outputs if outputs is not None else [given.function(flat[0]) + moved]

    monkeypatch.setitem(runtimes.RUNTIMES, "onnx", lambda: ("fake-runtime 1.0", run))
    return ran


def test_the_report_records_each_formats_runtime_and_largest_difference(monkeypatch, tmp_path):
    shifts = {"serve": 2.0**-15, "triple": -(2.0**-16)}  # exact in float32 beside outputs < 32
    ran = fake_runtime(monkeypatch, shifts=shifts)
    files = {"onnx": {"serve": "onnx/serve.onnx", "triple": "onnx/triple.onnx"}}
    report = verify_exports(None, [DOUBLE, TRIPLE], tmp_path, files, VerifyBatch("val", X), 1e-4)
    assert ran == ["serve.onnx", "triple.onnx"]
    assert report["tolerance"] == 1e-4 and report["verified"] is True
    assert report["inputs"] == {"split": "val", "rows": 4}
    assert report["formats"] == {
        "onnx": {
            "runtime": "fake-runtime 1.0",
            "max_abs_diff": 2.0**-15,  # the largest over the endpoints
            "endpoints": {
                "serve": {"file": "onnx/serve.onnx", "max_abs_diff": 2.0**-15},
                "triple": {"file": "onnx/triple.onnx", "max_abs_diff": 2.0**-16},
            },
        }
    }


def test_without_a_batch_the_exports_are_recorded_unverified(monkeypatch, tmp_path):
    ran = fake_runtime(monkeypatch)
    report = verify_exports(None, [DOUBLE], tmp_path, {"onnx": {"serve": "s.onnx"}}, None, 1e-4)
    assert ran == [] and report["verified"] is False and report["inputs"] is None
    assert report["formats"]["onnx"]["max_abs_diff"] is None
    assert report["formats"]["onnx"]["endpoints"]["serve"] == {
        "file": "s.onnx",
        "max_abs_diff": None,
    }


def test_an_endpoint_nothing_fits_is_logged_and_left_unverified(monkeypatch, tmp_path, caplog):
    ran = fake_runtime(monkeypatch)
    texts = endpoint("encode", None, tf.TensorSpec([None], tf.string, name="texts"))
    with caplog.at_level(logging.WARNING, logger="tapefit"):
        report = verify_exports(
            None,
            [DOUBLE, texts],
            tmp_path,
            {"onnx": {"serve": "s", "encode": "e"}},
            VerifyBatch("test", X),
            1e-4,
        )
    assert ran == ["s"]
    assert report["formats"]["onnx"]["endpoints"]["encode"]["max_abs_diff"] is None
    assert report["formats"]["onnx"]["max_abs_diff"] == 0.0  # the verified endpoint's
    assert (
        "endpoint encode is not verified: nothing in the first test batch fits texts: string"
        in caplog.text
    )


class Model:
    """Stands for the Keras model: the refusals name its class."""


def test_an_export_as_far_as_the_tolerance_passes(monkeypatch, tmp_path):
    fake_runtime(monkeypatch, shift=2.0**-14)
    batch = VerifyBatch("val", X)
    report = verify_exports(Model(), [DOUBLE], tmp_path, {"onnx": {"serve": "s"}}, batch, 2.0**-14)
    assert report["formats"]["onnx"]["max_abs_diff"] == 2.0**-14


@pytest.mark.parametrize(
    ("shift", "shown"),
    [(2.0**-13, "0.000122"), (np.inf, "inf")],
    ids=["just_too_far", "infinite"],
)
def test_an_export_further_than_the_tolerance_is_refused_in_one_line(
    monkeypatch, tmp_path, shift, shown
):
    fake_runtime(monkeypatch, shift=shift)
    with pytest.raises(TapefitError) as refused:
        verify_exports(
            Model(), [DOUBLE], tmp_path, {"onnx": {"serve": "s"}}, VerifyBatch("val", X), 1e-4
        )
    assert str(refused.value) == (
        "trainer.export_formats: the onnx export of Model (endpoint 'serve') differs from the "
        f"Keras model by {shown} on the first val batch, more than "
        "trainer.export_tolerance=0.0001; nothing was exported; leave onnx out of "
        "trainer.export_formats or raise the tolerance"
    )


def test_an_export_whose_outputs_have_other_shapes_is_refused_in_one_line(monkeypatch, tmp_path):
    fake_runtime(monkeypatch, outputs=[np.zeros((4, 2)), np.zeros(4)])
    with pytest.raises(TapefitError) as refused:
        verify_exports(
            Model(), [DOUBLE], tmp_path, {"onnx": {"serve": "s"}}, VerifyBatch("val", X), 1e-4
        )
    assert str(refused.value) == (
        "trainer.export_formats: the onnx export of Model (endpoint 'serve') returns outputs of "
        "shapes [(4, 2), (4,)] where the Keras model returns [(4, 2)]; nothing was exported; "
        "leave onnx out"
    )


def test_an_export_returning_nan_is_refused(monkeypatch, tmp_path):
    fake_runtime(monkeypatch, shift=np.nan)
    with pytest.raises(TapefitError, match=r"differs from the Keras model by nan on the first"):
        verify_exports(
            Model(), [DOUBLE], tmp_path, {"onnx": {"serve": "s"}}, VerifyBatch("val", X), 1e-4
        )
