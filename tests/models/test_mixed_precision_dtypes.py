"""Mixed precision in every model tapefit ships keeps the numerically delicate parts in float32:
layer normalisation, softmax, the pooling's sums and divisions, and the loss. Each model's
forward pass and loss (what its train step differentiates) is traced under `mixed_float16`
and `mixed_bfloat16`, and every such operation must compute in float32."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tapefit import SiameseModel
from tapefit.models import BackboneClassifier, Classifier
from tapefit.models.losses.registry import PAIR_LOSSES

POLICIES = ["mixed_float16", "mixed_bfloat16"]
# Operations that lose too much in 16 bits: normalisation statistics, softmax, sums and
# divisions (means, norms), exponentials and logarithms (log-sum-exp in the losses).
DELICATE = {"Softmax", "LogSoftmax", "RealDiv", "DivNoNan", "Sqrt", "Rsqrt", "Mean", "Sum",
            "Exp", "Log"}  # fmt: skip
WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "in", "park"]
TEXTS_A = np.array(["the cat sat on a mat", "a dog ran", "the park", "cat in the park"])
TEXTS_B = np.array(["a cat sat", "the dog ran in the park", "a mat", "the dog"])


@pytest.fixture(params=POLICIES)
def policy(request):
    keras.config.set_dtype_policy(request.param)
    try:
        yield request.param
    finally:
        keras.config.set_dtype_policy("float32")


def half_operations(model, batch) -> list[str]:
    """The delicate operations of `model`'s forward pass and loss, as its train step runs
    them (`TapeModel.forward` inside the tape; the gradient's own are left out), that
    compute in 16 bits. The loss the step differentiates must be a float32 scalar."""
    step = tf.function(lambda data: model.forward(data, training=True).loss)
    function = step.get_concrete_function(batch)
    assert function.structured_outputs.dtype == tf.float32
    found = []
    for operation in function.graph.get_operations():
        name = operation.name
        if operation.type not in DELICATE:
            continue
        dtypes = {output.dtype for output in operation.outputs}
        if dtypes & {tf.float16, tf.bfloat16}:
            found.append(f"{operation.type} {name}")
    return found


def compiled(model):
    model.compile(optimizer="adam", **model.compile_defaults())
    return model


@pytest.mark.parametrize(
    "encoder",
    [
        {"rnn": "lstm", "pooling": "last"},
        {"rnn": "lstm", "pooling": "mean", "bidirectional": True},
        {"rnn": "gru", "pooling": "max"},
        {"rnn": "lstm", "pooling": "mean_sqrt_len", "projection": 8},
        {"rnn": "transformer", "pooling": "mean", "num_heads": 2},
        {"rnn": "none", "pooling": "mean"},
    ],
    ids=lambda encoder: "-".join(str(v) for v in encoder.values()),
)
def test_the_siamese_encoders_keep_delicate_operations_in_float32(policy, encoder):
    model = compiled(
        SiameseModel(
            vocabulary=WORDS,
            sequence_length=8,
            encoder={"embedding_dim": 16, "units": 16, "recurrent_dropout": 0.1, **encoder},
        )
    )
    batch = ((TEXTS_A, TEXTS_B), np.array([4.0, 1.0, 2.5, 0.0], "float32"))
    assert half_operations(model, batch) == []
    embeddings = model.encoder(model.vectorizer(TEXTS_A))
    pools = encoder["pooling"] not in ("last",) and not encoder.get("projection")
    assert embeddings.dtype == ("float32" if pools else keras.config.dtype_policy().compute_dtype)


@pytest.mark.parametrize("loss", sorted(PAIR_LOSSES))
def test_every_pair_loss_is_float32(policy, loss):
    binary = PAIR_LOSSES[loss].label_type == "binary"
    options = {"name": loss}
    model = compiled(
        SiameseModel(
            vocabulary=WORDS,
            sequence_length=8,
            # the loss is the subject, not the encoder (whose operations the test above
            # checks): a bag of embeddings traces no LSTM, and its projection hands the loss
            # 16-bit vectors, as the default LSTM's last state does
            encoder={"rnn": "none", "pooling": "mean", "embedding_dim": 16, "projection": 16},
            loss=options,
            label_type="binary" if binary else "graded",
            hard_negatives=loss == "triplet",
        )
    )
    labels = np.array([1.0, 0.0, 1.0, 1.0] if binary else [4.0, 1.0, 2.5, 0.0], "float32")
    texts = (TEXTS_A, TEXTS_B, TEXTS_B[::-1]) if loss == "triplet" else (TEXTS_A, TEXTS_B)
    batch = (texts, labels)
    assert half_operations(model, batch) == []
    compute = keras.config.dtype_policy().compute_dtype
    assert model.encoder(model.vectorizer(TEXTS_A)).dtype == compute  # the loss casts them


@pytest.mark.parametrize("architecture", ["cnn", "mlp"])
def test_the_classifier_keeps_its_softmax_and_loss_in_float32(policy, architecture):
    model = compiled(Classifier((8, 8, 1), 3, architecture=architecture))
    batch = (np.random.default_rng(0).random((4, 8, 8, 1)).astype("float32"), np.arange(4) % 3)
    assert half_operations(model, batch) == []
    assert model(batch[0]).dtype == "float32"


@pytest.fixture(scope="module")
def bert_preset(tmp_path_factory):
    """A KerasHub preset folder of a one-layer BERT (tests/text/pretrained_checkpoints.py's
    tiny backbone and tokenizer): one attention softmax to find, one layer to trace, written
    once for both policies."""
    pytest.importorskip("keras_hub")
    import keras_hub

    from tests.text.pretrained_checkpoints import VOCABULARY, tiny_backbone

    folder = tmp_path_factory.mktemp("bert")
    tiny_backbone(num_layers=1).save_to_preset(str(folder))
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=VOCABULARY, lowercase=True)
    tokenizer.save_to_preset(str(folder))
    return str(folder)


def test_a_pretrained_text_encoder_pools_and_scores_in_float32(bert_preset, policy):
    model = compiled(SiameseModel(encoder={"preset": bert_preset}, sequence_length=12))
    batch = ((TEXTS_A, TEXTS_B), np.array([4.0, 1.0, 2.5, 0.0], "float32"))
    # KerasHub's attention takes its softmax in the compute dtype (Keras' explicit path, with
    # attention dropout), inside the backbone; its layer norms are Keras', in float32
    half = half_operations(model, batch)
    assert len(half) == 1  # one per transformer layer of the one-layer BERT
    assert all(op.startswith("Softmax ") and "backbone" in op and "attention" in op for op in half)
    assert model.encoder.backbone.compute_dtype == keras.config.dtype_policy().compute_dtype


@pytest.mark.parametrize("pooling", ["avg", "max"])
def test_the_backbone_classifier_pools_and_scores_in_float32(policy, pooling):
    pytest.importorskip("keras_hub")
    import keras_hub

    from tests.models.image_checkpoints import tiny_resnet

    model = compiled(
        BackboneClassifier(
            (20, 24, 3),
            3,
            {"pooling": pooling},
            backbone_layer=tiny_resnet(),
            converter=keras_hub.layers.ImageConverter(image_size=(16, 16), scale=1 / 255),
        )
    )
    images = np.random.default_rng(0).random((4, 20, 24, 3)).astype("float32")
    assert half_operations(model, (images, np.arange(4) % 3)) == []
    assert model(images).dtype == "float32"
