"""`tapefit.training.build_from_data`: a user's model built from the dataset's element spec
before training, and refused in one line when its step never builds a layer, has no loss or
fails on the data's shape; datasets whose epochs would never end."""

import logging

import keras
import numpy as np
import pytest
import tensorflow as tf

import tapefit
from tapefit.data.splits import PipelineOptions, Splits
from tapefit.errors import TapefitError
from tapefit.training.build_from_data import (
    build_before_training,
    build_step_variables,
    check_epoch_lengths,
    keras_message,
    looks_unbatched,
    symbolic_batch,
    unbatched_hint,
)

X, Y = np.ones((8, 3), "float32"), np.ones((8, 1), "float32")
UNBATCHED = tf.data.Dataset.from_tensor_slices((X, Y))
BATCHED = UNBATCHED.batch(4)


class Regressor(tapefit.TapeModel):
    """Dense(1) on its inputs; `spare` more Dense layers its step never calls; `width` set: its
    layer built for that many features in __init__."""

    def __init__(self, spare=(), width=None, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(1)
        if width:
            self.dense.build((None, width))
        self.spares = [keras.layers.Dense(4, name=name) for name in spare]

    def call(self, x, training=False):
        return self.dense(x)


def compiled(model, loss="mse"):
    model.compile(optimizer="adam", loss=loss, metrics=["mae"])
    return model


def test_the_symbolic_batch_has_the_datasets_shapes_and_dtypes():
    x, y = symbolic_batch(BATCHED.map(lambda x, y: (x, tf.cast(y, "int64"))))
    assert isinstance(x, keras.KerasTensor) and isinstance(y, keras.KerasTensor)
    assert (x.shape, x.dtype, y.shape, y.dtype) == ((None, 3), "float32", (None, 1), "int64")


def test_a_model_is_built_from_the_data_with_every_weight_before_training():
    model = compiled(Regressor())
    build_before_training(model, BATCHED, "model")
    assert model.built and [tuple(w.shape) for w in model.weights] == [(3, 1), (1,)]
    build_step_variables(model, BATCHED)  # what the first step would create, made now
    assert model.optimizer.built and len(model.optimizer.variables) == 2 + 2 * 2
    assert [v.path for v in model.metrics_variables] == [
        "loss/total",
        "loss/count",
        "mean_absolute_error/total",
        "mean_absolute_error/count",
    ]


@pytest.mark.filterwarnings("ignore:`build\\(\\)` was called on layer")
@pytest.mark.parametrize(
    ("spare", "what"),
    [(["unused"], "layer unused is"), (["unused", "spare"], "layers unused, spare are")],
)
def test_layers_the_step_never_builds_are_named(spare, what):
    with pytest.raises(TapefitError) as refused:
        build_before_training(compiled(Regressor(spare)), BATCHED, "model")
    assert str(refused.value).startswith(
        f"model: {what} never built by the step, so its .keras file and checkpoints would miss "
        "those weights"
    )


def test_a_model_with_no_loss_at_all_is_refused_before_the_first_epoch():
    with pytest.raises(TapefitError, match=r"^model has no loss: set compile\.loss"):
        build_before_training(compiled(Regressor(), loss=None), BATCHED, "model")


def test_a_step_that_fails_on_the_datas_shape_says_so_and_suspects_a_missing_batch():
    with pytest.raises(TapefitError) as unbatched:
        build_before_training(compiled(Regressor()), UNBATCHED, "model")
    message = str(unbatched.value)
    assert message.startswith("model: its test step failed on a batch of the data's shape")
    assert (
        "the training dataset looks unbatched (no .batch() in its pipeline; its elements have "
        "shape (3,), with no batch axis)" in message
    )
    assert "\n" not in message
    with pytest.raises(TapefitError) as wrong_width:
        build_before_training(compiled(Regressor(width=4)), BATCHED, "model")
    assert "failed on a batch of the data's shape" in str(wrong_width.value)
    assert "unbatched" not in str(wrong_width.value)  # it has a batch axis: not the suspect


def test_a_dataset_is_unbatched_only_when_no_step_of_its_pipeline_batches():
    assert looks_unbatched(UNBATCHED) and looks_unbatched(UNBATCHED.map(lambda x, y: (x, y)))
    assert not looks_unbatched(BATCHED) and not looks_unbatched(BATCHED.prefetch(2))
    assert not looks_unbatched(UNBATCHED.padded_batch(2))
    assert unbatched_hint(BATCHED) == ""


def test_keras_wrapped_errors_give_their_cause_line_without_colours():
    wrapped = ValueError(
        "Exception encountered when calling Dense.call().\n\n"
        "\x1b[1mInput 0 of layer 'dense' is incompatible with the layer\x1b[0m\n\n"
        "Arguments received by Dense.call():\n  • inputs=tf.Tensor(shape=(3,), dtype=float32)"
    )
    assert keras_message(wrapped) == "Input 0 of layer 'dense' is incompatible with the layer"
    assert keras_message(ValueError("")) == ""


def data_of(train, val=None, given=False):
    """The run's data over `train`/`val`: datasets a loader returned (`given`), or tapefit's
    own pipelines over its arrays."""
    held = {"train": train, "val": val}
    arrays = {} if given else {name: None for name, split in held.items() if split is not None}
    return Splits(train, val, None, {}, arrays, PipelineOptions(), 0)


def test_a_dataset_repeating_forever_needs_the_steps_that_end_its_epoch(caplog):
    forever = BATCHED.repeat()
    with pytest.raises(TapefitError) as refused:
        check_epoch_lengths(data_of(forever, BATCHED), None, None)
    assert str(refused.value) == (
        "the training dataset repeats forever (.repeat()) and trainer.steps_per_epoch is not "
        "set, so its first epoch would never end: set trainer.steps_per_epoch=N (batches per "
        "epoch), or drop .repeat()"
    )
    with pytest.raises(TapefitError, match=r"^the validation dataset .* trainer\.validation_steps"):
        check_epoch_lengths(data_of(BATCHED, forever), None, None)
    check_epoch_lengths(data_of(forever, forever), 5, 2)  # both ended by their steps
    filtered = BATCHED.filter(lambda x, y: True)  # a length TensorFlow cannot know
    with caplog.at_level(logging.WARNING, logger="tapefit"):
        check_epoch_lengths(data_of(filtered), None, None)  # tapefit's own: no warning
        check_epoch_lengths(data_of(filtered, given=True), None, None)
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        "the training dataset's length is unknown to TensorFlow (a filter or a generator)"
    ]


def test_a_model_built_for_other_inputs_is_one_line_naming_it():
    """A model its constructor built already (the Classifier, from `model.image_shape`) for
    inputs the data do not have: one line, not Keras' traceback from the first step."""
    model = tapefit.Classifier(num_classes=3, image_shape=[8, 8, 3], architecture="mlp")
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    images = tf.data.Dataset.from_tensor_slices((np.zeros((4, 8, 8, 1), "float32"), [0, 1, 2, 0]))
    name = "model._target_=tapefit.models.Classifier"
    build_before_training(model, images.batch(2), name)  # built: its step is not run here
    with pytest.raises(TapefitError) as refused:
        build_step_variables(model, images.batch(2), name)
    message = str(refused.value)
    assert message.startswith(f"{name}: its test step failed on a batch of the data's shape (")
    assert "expected axis -1 of input shape to have value 192" in message
    assert "\n" not in message and "\x1b" not in message
