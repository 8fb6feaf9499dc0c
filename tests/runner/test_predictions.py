"""`tapefit.runner.predictions`: a finished run's predictions as CSV, column by column."""

import csv
from types import SimpleNamespace

import numpy as np
import pytest
from omegaconf import OmegaConf

from tapefit.errors import TapefitError
from tapefit.runner import predictions
from tapefit.runner.predictions import (
    input_column_names,
    label_scale,
    named_inputs,
    predict_run,
    prediction_columns,
)


class Doubler:
    """A model whose one output is twice its input."""

    def predict_on_batch(self, x):
        return np.asarray(x, "float32") * 2


class PairScorer:
    """A model with its own prediction columns and a label scale (five times the output)."""

    def predict_on_batch(self, x):
        return np.asarray(x["score"], "float32")

    def prediction_columns(self, x, y_pred):
        return {"text1": x["text1"], "text2": x["text2"], "similarity": y_pred}

    def similarity_to_label(self, similarities):
        return np.asarray(similarities) * 5


class Images:
    """Data whose test split names each row's image file."""

    def __init__(self, files):
        self.test = [(np.array([[1.0], [2.0]]), np.array([0, 1])), (np.array([[3.0]]), [1])]
        self.files = files

    def input_columns(self, split):
        return {"image": self.files}


def loaded(monkeypatch, data, model, data_node=None):
    """`load_run` giving `data` and `model` (and a config whose `data` is `data_node`)."""
    cfg = OmegaConf.create({"data": data_node or {}})
    monkeypatch.setattr(
        predictions, "load_run", lambda run_dir, overrides, ckpt: (cfg, data, model)
    )


def read_csv(path):
    with path.open(newline="") as file:
        return list(csv.reader(file))


def test_each_output_of_a_model_without_its_own_columns_is_a_column():
    one = prediction_columns(object(), None, np.array([[0.25], [0.75]]))
    assert list(one) == ["output"] and one["output"].tolist() == [0.25, 0.75]
    grid = prediction_columns(object(), None, np.arange(8).reshape(2, 2, 2))
    assert list(grid) == ["output_0", "output_1", "output_2", "output_3"]
    assert grid["output_3"].tolist() == [3, 7]  # each example's outputs, flattened in order


def test_a_models_own_prediction_columns_are_taken_as_arrays():
    x = {"text1": ["a", "b"], "text2": ["c", "d"], "score": [0.5, 0.1]}
    columns = prediction_columns(PairScorer(), x, [0.5, 0.1])
    assert list(columns) == ["text1", "text2", "similarity"]
    assert all(isinstance(values, np.ndarray) for values in columns.values())
    assert columns["text2"].tolist() == ["c", "d"]


def test_a_model_without_a_label_scale_is_refused_by_its_class_name():
    class Plain:
        pass

    with pytest.raises(TapefitError, match=r"^scale=label: the run's model \(Plain\) has no"):
        label_scale(Plain())
    assert label_scale(PairScorer())(np.array([0.5])).tolist() == [2.5]


def test_a_label_scale_the_loss_did_not_learn_is_refused_before_any_prediction():
    class RankedOnly:
        def similarity_to_label(self, similarities):
            raise TapefitError("the loss in_batch_negatives learnt no label scale")

    with pytest.raises(TapefitError, match="learnt no label scale"):
        label_scale(RankedOnly())


def test_the_datas_input_columns_come_first_unless_the_predictions_name_them():
    data = SimpleNamespace(input_columns=lambda split: {"image": ["a.png"], "label": [9]})
    assert named_inputs(data, "test", {"label": [3], "prob_0": [0.1]}) == {"image": ["a.png"]}
    assert named_inputs(object(), "test", {"output": [1.0]}) == {}


def test_input_columns_of_another_length_are_refused_in_one_line():
    data = SimpleNamespace(input_columns=lambda split: {"image": ["a.png", "b.png"]})
    with pytest.raises(
        TapefitError, match=r"input_columns\('val'\) gives 2 values of 'image' for 3"
    ):
        named_inputs(data, "val", {"output": [0.1, 0.2, 0.3]})


def test_only_text_columns_named_by_header_keep_the_inputs_names():
    node = OmegaConf.create({"text1_column": "question", "text2_column": "answer"})
    assert input_column_names(node) == {"text1": "question", "text2": "answer"}
    assert input_column_names({"text1_column": "0", "text2_column": ""}) == {}
    assert input_column_names(None) == {}


def test_predictions_are_written_after_the_inputs_that_name_each_row(monkeypatch, tmp_path):
    loaded(monkeypatch, Images([b"one.png", b"two.png", b"three.png"]), Doubler())
    out = predict_run("run", tmp_path / "p.csv")
    assert read_csv(out) == [
        ["image", "output"],
        ["one.png", "2.0"],  # bytes written as text
        ["two.png", "4.0"],
        ["three.png", "6.0"],
    ]


def test_pair_predictions_keep_the_files_column_names_and_add_the_label_scale(
    monkeypatch, tmp_path
):
    batch = {"text1": np.array([b"a", b"b"]), "text2": np.array([b"c", b"d"]), "score": [0.5, 1]}
    data = SimpleNamespace(val=[(batch, np.zeros(2))])
    loaded(monkeypatch, data, PairScorer(), {"text1_column": "question", "text2_column": "1"})
    out = predict_run("run", tmp_path / "p.csv", split="val", scale="label")
    assert read_csv(out) == [
        ["question", "text2", "similarity", "predicted_label"],
        ["a", "c", "0.5", "2.5"],
        ["b", "d", "1.0", "5.0"],
    ]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"scale": "logits"}, r"^scale=logits: choose one of similarity, label$"),
        ({"split": "dev"}, r"^split=dev: choose test, val or train$"),
        ({"output": "missing/p.csv"}, r"^output=.*p.csv: the folder .*missing does not exist$"),
    ],
)
def test_bad_arguments_are_refused_before_the_run_is_loaded(
    monkeypatch, tmp_path, arguments, message
):
    monkeypatch.setattr(predictions, "load_run", lambda *args: pytest.fail("loaded the run"))
    arguments = dict(arguments)
    output = tmp_path / arguments.pop("output", "p.csv")
    with pytest.raises(TapefitError, match=message):
        predict_run("run", output, **arguments)


def test_a_split_the_data_do_not_have_is_refused_and_nothing_is_written(monkeypatch, tmp_path):
    loaded(monkeypatch, SimpleNamespace(test=None), Doubler())
    with pytest.raises(TapefitError, match=r"^split=test: the run's data has no test split"):
        predict_run("run", tmp_path / "p.csv")
    assert not (tmp_path / "p.csv").exists()
