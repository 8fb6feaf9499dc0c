"""`tapefit.text.traced_once`: a layer's string function traced once for every traced step."""

import copy

import tensorflow as tf

from tapefit.text.traced_once import TracedOnce


def counting_lengths():
    """`tf.strings.length`, counting how often its Python body runs (each trace, each eager
    call) and recording the shape it was handed."""
    calls = []

    def lengths(texts):
        calls.append(texts.shape.as_list())
        return tf.strings.length(texts)

    return lengths, calls


def test_every_traced_step_calls_the_one_graph_whatever_the_batch_size():
    once = TracedOnce()
    lengths, calls = counting_lengths()
    train_step = tf.function(lambda texts: once(lengths, texts) + 1)
    test_step = tf.function(lambda texts: once(lengths, texts) * 10)
    assert train_step(tf.constant(["ab", "abc"])).numpy().tolist() == [3, 4]
    assert test_step(tf.constant(["a", "b", "cdef"])).numpy().tolist() == [10, 10, 40]
    assert train_step(tf.constant(["abcde"])).numpy().tolist() == [6]  # a retrace of the step
    assert calls == [[None]]  # traced once, for strings of any batch size


def test_eagerly_the_function_runs_as_it_is_on_texts_reshaped_to_a_batch():
    once = TracedOnce()
    lengths, calls = counting_lengths()
    assert once(lengths, [["a"], ["bb"]]).numpy().tolist() == [1, 2]
    assert once(lengths, "abc").numpy().tolist() == [3]
    assert calls == [[2], [1]]  # each call, no graph
    assert once._graph is None


def test_a_copy_traces_its_own_graph():
    once = TracedOnce()
    lengths, calls = counting_lengths()
    tf.function(lambda texts: once(lengths, texts))(tf.constant(["a"]))
    copied = copy.deepcopy(once)
    assert copied is not once and copied._graph is None and once._graph is not None
    tf.function(lambda texts: copied(lengths, texts))(tf.constant(["a"]))
    assert calls == [[None], [None]]
