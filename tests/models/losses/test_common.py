"""`tapefit.models.losses.common`: the pair cosine and the dtype the pair losses compute in."""

import numpy as np
import pytest
import tensorflow as tf

from tapefit.models.losses.common import computing_dtype, pair_cosine


def test_pair_cosine_is_the_dot_product_of_each_pairs_two_embeddings():
    pairs = tf.constant(
        [
            [[1.0, 0.0], [1.0, 0.0]],  # the same direction
            [[1.0, 0.0], [0.0, 1.0]],  # orthogonal
            [[0.6, 0.8], [-0.6, -0.8]],  # opposite
            [[0.6, 0.8], [1.0, 0.0]],
        ]
    )
    cosine = pair_cosine(pairs)
    assert cosine.shape == (4,)
    np.testing.assert_allclose(cosine.numpy(), [1.0, 0.0, -1.0, 0.6], atol=1e-6)


def test_pair_cosine_keeps_the_embeddings_dtype():
    pairs = tf.constant([[[0.6, 0.8], [0.8, 0.6]]], tf.float64)
    cosine = pair_cosine(pairs)
    assert cosine.dtype == tf.float64 and cosine.numpy().tolist() == [pytest.approx(0.96)]


@pytest.mark.parametrize(
    ("dtype", "computed_in"),
    [
        (tf.float16, tf.float32),
        (tf.bfloat16, tf.float32),
        (tf.float32, tf.float32),
        (tf.float64, tf.float64),
    ],
    ids=["float16", "bfloat16", "float32", "float64"],
)
def test_half_precision_computes_in_float32_and_other_dtypes_in_their_own(dtype, computed_in):
    assert computing_dtype(tf.zeros((2, 2), dtype)) == computed_in
