"""The cached (GradCache) step of `in_batch_negatives` and `triplet`: its gradients equal the
ordinary step's on the same batch for every chunk size (one-way, symmetric, with hard
negatives); with dropout, the second pass draws the first pass's masks; `fit` with it
updates the weights as the ordinary step does, also with gradient accumulation, under
mixed_float16's loss scaling and under MirroredStrategy with negatives gathered across
replicas; settings it cannot honour are refused in one line."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tapefit import SiameseModel, TapefitError
from tapefit.models.cached_step import cached_step_gradients, seed_states

WORDS = [
    "a",
    "cat",
    "dog",
    "sat",
    "ran",
    "the",
    "big",
    "small",
    "red",
    "blue",
    "green",
    "fox",
    "hen",
    "owl",
    "bee",
]
BATCH = 8
SLOW = [pytest.mark.slow]


def texts(count, seed):
    rng = np.random.default_rng(seed)
    return np.array([" ".join(rng.choice(WORDS, 4)) for _ in range(count)])


SIDES = [texts(BATCH, seed) for seed in (1, 2, 3)]  # anchors, positives, hard negatives


# The bag of embeddings (no recurrent graph: a fit in about 40 % of the LSTM's time), for the
# fits whose subject is what reaches the cached gradients (accumulation, the loss scale, the
# replicas); the LSTM's own while loop inside the step's chunk loop is traced by the plain fit
# and the evaluation, and run eagerly by every gradient comparison.
BAG = {"rnn": "none", "pooling": "mean"}


def model_for(loss, chunk=None, dropout=0.0, optimizer="sgd", encoder=None, **compile_options):
    keras.utils.set_random_seed(7)
    # 6 tokens: the 4 words of each text and 2 masked padding positions (32, the default, made
    # the eager chunk-by-chunk LSTM loops about four times as long, for 28 padding steps)
    model = SiameseModel.from_texts(
        [t for side in SIDES for t in side],
        sequence_length=6,
        encoder=encoder or {"units": 4, "recurrent_dropout": dropout},
        loss={**loss, "cache_chunk_size": chunk},
    )
    model.compile(optimizer, **model.compile_defaults(), **compile_options)
    return model


def batch(sides=3):
    return tuple(tf.constant(side) for side in SIDES[:sides]), tf.zeros(BATCH)


def ordinary_gradients(model, data):
    with tf.GradientTape() as tape:
        loss = model.forward(data, training=True).loss
    return loss, tape.gradient(loss, model.trainable_variables)


def cached_gradients(model, data, size):
    sides = model.checked_sides(data[0])

    def loss_of(embeddings):
        return model.output_of(sides, data[1], None, embeddings, True).loss

    loss, _, gradients = cached_step_gradients(
        model, sides, loss_of, size, model.trainable_variables
    )
    return loss, gradients


def assert_close(got, want, rtol=1e-5):
    for g, w in zip(got, want, strict=True):
        g, w = np.asarray(tf.convert_to_tensor(g)), np.asarray(tf.convert_to_tensor(w))
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * np.abs(w).max())


LOSSES = {
    "one_way_hard_negatives": ({"name": "in_batch_negatives"}, 3),
    "symmetric": ({"name": "in_batch_negatives", "symmetric": True}, 2),
    "symmetric_hard_negatives": ({"name": "in_batch_negatives", "symmetric": True}, 3),
    "triplet": ({"name": "triplet", "mining": "all"}, 3),
}


# one case in `make test-fast`, every loss and chunk size (1, uneven, the whole batch) in the
# full suite
CASES = [
    pytest.param(case, size, marks=[] if (case, size) == ("symmetric_hard_negatives", 3) else SLOW)
    for case in LOSSES
    for size in (1, 3, 5, BATCH)
]


@pytest.mark.parametrize(("case", "size"), CASES)
def test_cached_gradients_equal_the_ordinary_steps(case, size):
    loss, sides = LOSSES[case]
    model = model_for(loss)
    want_loss, want = ordinary_gradients(model, batch(sides))
    got_loss, got = cached_gradients(model, batch(sides), size)
    assert float(got_loss) == pytest.approx(float(want_loss), rel=1e-6)
    assert_close(got, want)


@pytest.mark.slow
def test_with_dropout_the_second_pass_draws_the_first_pass_masks():
    model = model_for(LOSSES["symmetric"][0], dropout=0.4)
    states = seed_states(model)
    assert states, "the LSTM's recurrent dropout draws from a seed generator"
    start = [np.array(state.value) for state in states]
    _, got = cached_gradients(model, batch(2), 3)
    after_cached = [np.array(state.value) for state in states]
    # the reference: the same chunks, one tape over all of them, from the same seeds
    for state, value in zip(states, start, strict=True):
        state.assign(value)
    sides = model.checked_sides(batch(2)[0])
    with tf.GradientTape() as tape:
        chunks = [model.embed_aligned([s[i : i + 3] for s in sides], True) for i in (0, 3, 6)]
        loss = model.output_of(sides, None, None, tf.concat(chunks, 0), True).loss
    want = tape.gradient(loss, model.trainable_variables)
    assert_close(got, want)
    # the generators end where one pass leaves them
    ended = [np.array(state.value) for state in states]
    assert all(np.array_equal(a, b) for a, b in zip(after_cached, ended, strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(start, ended, strict=True))
    # and the masks matter: the whole batch at once draws other masks, other gradients
    for state, value in zip(states, start, strict=True):
        state.assign(value)
    _, whole = ordinary_gradients(model, batch(2))
    assert not np.allclose(np.asarray(got[0]), np.asarray(tf.convert_to_tensor(whole[0])))


def repeated_batch():
    """Two positive pairs share an anchor, and a positive is another row's anchor: the loss
    masks such rows out of each other's negatives."""
    anchors, positives = SIDES[0].copy(), SIDES[1].copy()
    anchors[5], positives[6], positives[7] = anchors[0], positives[2], anchors[1]
    return (tf.constant(anchors), tf.constant(positives)), tf.zeros(BATCH)


def test_repeated_texts_are_masked_in_the_cached_step_as_in_the_ordinary_one():
    model = model_for({"name": "in_batch_negatives", "symmetric": True})
    data = repeated_batch()
    want_loss, want = ordinary_gradients(model, data)
    got_loss, got = cached_gradients(model, data, 3)
    np.testing.assert_allclose(float(got_loss), float(want_loss), rtol=1e-6)
    assert_close(got, want)


def fitted_weights(model, data, steps=2):
    dataset = tf.data.Dataset.from_tensors(data).repeat(steps)
    model.fit(dataset, epochs=1, verbose=0)
    return [np.array(v) for v in model.trainable_variables]


@pytest.mark.slow
@pytest.mark.parametrize("accumulate", [None, 2])
def test_fit_with_the_cached_step_updates_as_the_ordinary_step(accumulate):
    loss = LOSSES["symmetric_hard_negatives"][0]
    encoder = BAG if accumulate else None  # the LSTM traced once, without accumulation
    weights = []
    for chunk in (None, 3):
        optimizer = keras.optimizers.SGD(0.5, gradient_accumulation_steps=accumulate)
        model = model_for(loss, chunk, optimizer=optimizer, encoder=encoder)
        weights.append(fitted_weights(model, batch(), 4))
    assert_close(weights[1], weights[0])
    moved = model_for(loss, encoder=encoder).trainable_variables
    assert not np.allclose(weights[1][0], np.array(moved[0]))  # the steps did update


@pytest.mark.slow
def test_under_mixed_float16_the_loss_scale_reaches_the_cached_gradients():
    keras.mixed_precision.set_global_policy("mixed_float16")
    weights = []
    for chunk in (None, 2):
        model = model_for(LOSSES["one_way_hard_negatives"][0], chunk, encoder=BAG)
        assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
        weights.append(fitted_weights(model, batch()))
    assert_close(weights[1], weights[0], rtol=1e-3)


@pytest.mark.slow
def test_under_mirrored_strategy_negatives_gathered_across_replicas(mirrored_strategy):
    loss = {"name": "in_batch_negatives", "symmetric": True, "across_replicas": True}
    weights = []
    for chunk in (None, 2):
        with mirrored_strategy.scope():
            model = model_for(loss, chunk, encoder=BAG)
        weights.append(fitted_weights(model, repeated_batch()))
    assert_close(weights[1], weights[0])


@pytest.mark.parametrize(
    ("loss", "message"),
    [
        ({"name": "cosine_mse", "cache_chunk_size": 4}, "model.loss.name=cosine_mse scores each"),
        ({"name": "in_batch_negatives", "cache_chunk_size": 0}, "must be a whole number >= 1"),
    ],
)
def test_a_chunk_size_the_step_cannot_use_is_refused(loss, message):
    with pytest.raises(TapefitError, match=message):
        SiameseModel(vocabulary=["a"], loss=loss)


@pytest.mark.slow
def test_evaluation_in_chunks_equals_the_whole_batchs():
    loss = LOSSES["symmetric_hard_negatives"][0]
    results = [model_for(loss, chunk).evaluate(*batch(), verbose=0) for chunk in (None, 3)]
    assert results[1] == pytest.approx(results[0], rel=1e-6)
