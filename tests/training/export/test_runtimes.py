"""`tapefit.training.export.runtimes`: each format's runtime fed the endpoint's inputs, by name
and in the dtypes the exported file declares."""

import shutil

import numpy as np
import pytest
import tensorflow as tf

from tapefit.errors import TapefitError
from tapefit.training.export import runtimes
from tapefit.training.export.endpoints import ExportEndpoint
from tapefit.training.export.runtimes import RUNTIMES, _feed, _natural_order

X_SPEC = tf.TensorSpec([None, 2], tf.float32, name="x")
COUNT_SPEC = tf.TensorSpec([None], tf.int64, name="count")


def endpoint(name, *specs):
    """An endpoint of one positional argument per spec (the runtimes call only the file)."""
    return ExportEndpoint(name, None, tuple(specs), tuple(specs))


X = np.arange(6, dtype="float64").reshape(3, 2)  # another dtype than the file declares
COUNTS = np.array([1, 2, 3], "int32")


def test_names_sort_by_their_number_not_as_text():
    names = ["output_10", "output_2", "args_0_10", "output_1", "args_0_2", "logits"]
    assert sorted(names, key=_natural_order) == [
        "args_0_2",
        "args_0_10",
        "logits",
        "output_1",
        "output_2",
        "output_10",
    ]


def test_inputs_are_fed_by_name_in_the_runtimes_order_and_cast_to_its_dtypes():
    declared = {"count:0": np.int64, "x:0": np.float32}  # TensorFlow's tensor names
    feed = _feed(declared, endpoint("serve", X_SPEC, COUNT_SPEC), [X, COUNTS])
    assert list(feed) == ["count:0", "x:0"]
    assert feed["count:0"].dtype == np.int64 and feed["count:0"].tolist() == [1, 2, 3]
    assert feed["x:0"].dtype == np.float32
    np.testing.assert_array_equal(feed["x:0"], X)


def test_inputs_of_other_names_are_fed_in_order_and_strings_and_unknown_dtypes_kept():
    texts = np.array([b"a cat", b"a dog"], object)
    declared = {"inputs": None, "inputs_1": np.float32, "inputs_2": np.int32}
    specs = (tf.TensorSpec([None], tf.string, name="texts"), X_SPEC, COUNT_SPEC)
    feed = _feed(declared, endpoint("serve", *specs), [texts, X, COUNTS])
    assert list(feed) == ["inputs", "inputs_1", "inputs_2"]
    assert feed["inputs"] is texts  # no dtype said: as it was
    assert feed["inputs_1"].dtype == np.float32 and feed["inputs_2"].dtype == np.int32

    strings = _feed({"texts": np.float32}, endpoint("serve", specs[0]), [texts])
    assert strings["texts"] is texts  # a string array is never cast to a number


def test_a_litert_export_without_an_interpreter_names_the_extra(monkeypatch):
    monkeypatch.setattr(runtimes, "litert_interpreter", lambda: None)
    with pytest.raises(TapefitError, match=r'litert needs ai_edge_litert: pip install "tapefit'):
        RUNTIMES["litert"]()


class Counting(tf.Module):
    @tf.function(input_signature=[X_SPEC, COUNT_SPEC])
    def scaled(self, x, count):
        return {"sum": tf.reduce_sum(x, axis=1), "twice": 2 * count}


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("runtimes") / "saved"
    tf.saved_model.save(Counting(), str(folder))
    return folder


def test_a_saved_model_endpoint_is_called_by_name_with_the_signatures_dtypes(saved_model, tmp_path):
    label, run = RUNTIMES["saved_model"]()
    assert label.startswith("tensorflow ")
    copy = shutil.copytree(saved_model, tmp_path / "saved")
    outputs = run(copy / "saved_model.pb", endpoint("scaled", X_SPEC, COUNT_SPEC), [X, COUNTS])
    assert [o.tolist() for o in outputs] == [[1.0, 5.0, 9.0], [2, 4, 6]]  # sum, twice
    shutil.rmtree(copy)  # loaded once per folder: a second call does not read it again
    again = run(copy / "saved_model.pb", endpoint("scaled", X_SPEC, COUNT_SPEC), [X * 0, COUNTS])
    assert again[0].tolist() == [0.0, 0.0, 0.0]


def onnx_file(path):
    """`sum = x + x` (float32) and `twice = count + count` (int64), inputs declared in the
    order count, x."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "x"], ["sum"]), helper.make_node("Add", ["c", "c"], ["n"])],
        "counting",
        [
            helper.make_tensor_value_info("count", TensorProto.INT64, [None]),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 2]),
        ],
        [
            helper.make_tensor_value_info("sum", TensorProto.FLOAT, [None, 2]),
            helper.make_tensor_value_info("n", TensorProto.INT64, [None]),
        ],
    )
    graph.node[1].input[:] = ["count", "count"]
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("runtime", ["onnx", "openvino"])
def test_an_onnx_file_is_fed_by_input_name_in_its_declared_dtypes(tmp_path, runtime):
    pytest.importorskip("onnxruntime" if runtime == "onnx" else "openvino")
    path = onnx_file(tmp_path / "serve.onnx")
    label, run = RUNTIMES[runtime]()
    outputs = run(path, endpoint("serve", X_SPEC, COUNT_SPEC), [X, COUNTS])
    assert outputs[0].dtype == np.float32 and outputs[0].tolist() == (2 * X).tolist()
    assert outputs[1].tolist() == [2, 4, 6]
    if runtime == "openvino":
        assert label.endswith(" (CPU, INFERENCE_PRECISION_HINT=f32)")
