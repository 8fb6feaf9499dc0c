"""tapefit/models/siamese_inference.py: the SavedModel serves each Matryoshka dimension."""

import numpy as np
import pytest
import tensorflow as tf

from tapefit import SiameseModel


@pytest.mark.slow
def test_the_saved_model_serves_each_dimension(tmp_path):
    from tapefit.training.export import export_for_serving

    # the bag of embeddings (8 wide): the export's signatures are the subject, not the encoder
    encoder = {"rnn": "none", "pooling": "mean", "embedding_dim": 8}
    model = SiameseModel.from_texts(
        ["a cat sat", "a dog ran"], encoder=encoder, loss={"matryoshka_dims": [8, 3]}
    )
    export_for_serving(model, tmp_path / "export")
    served = tf.saved_model.load(str(tmp_path / "export"))
    texts = ["a cat", "a dog ran"]
    for dim in (8, 3):
        got = served.signatures[f"encode_{dim}"](texts=tf.constant(texts))
        np.testing.assert_allclose(
            next(iter(got.values())).numpy(), model.encode(texts, dim=dim), rtol=1e-5, atol=1e-6
        )
