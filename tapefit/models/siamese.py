"""Siamese cosine-similarity model: one text encoder shared by two inputs, trained by the tape.

It is the model of the GradientTape tutorial (Embedding + LSTM, maximise the cosine of two
inputs) made complete: raw strings in (a `TextVectorization` saved with the model) or token ids,
pair losses that see both embeddings inside the tape, and `encode`/`similarity` for use. With
`tokenizer="wordpiece"` the strings become subword pieces (keras-hub's `WordPieceTokenizer`,
`tapefit.text.wordpiece`), so a word unseen in training is not lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import keras
import numpy as np
import tensorflow as tf

from tapefit.choices import parse_choice
from tapefit.errors import TapefitError
from tapefit.evaluation.matryoshka import leading_components
from tapefit.models.cached_step import (
    cached_test_step,
    cached_train_step,
    check_cache_chunk_size,
)
from tapefit.models.fine_tuning import (
    FineTuningOptions,
    apply_fine_tuning_gradients,
    check_fine_tuning,
    exclude_norms_and_biases,
    splits_the_step,
    variables_by_optimizer,
)
from tapefit.models.layers import TextEncoder
from tapefit.models.losses import pair_cosine
from tapefit.models.losses.matryoshka import check_matryoshka
from tapefit.models.siamese_inference import encode_in_batches
from tapefit.models.siamese_options import EncoderOptions, PairLossOptions, RetrievalOptions
from tapefit.models.siamese_pretrained import (
    check_no_vocabulary,
    pretrained_encoder_layer,
    uses_pretrained,
)
from tapefit.models.siamese_run_hooks import SiameseRunHooks
from tapefit.models.siamese_text import (
    learn_vocabulary,
    make_vectorizer,
    put_word_vectors,
    text_fingerprint,
)
from tapefit.step.tape_model import StepOutput, TapeModel
from tapefit.text.wordpiece import Tokenizer

# The methods that embed one batch of texts; `embed_aligned` keeps a subclass's overrides of them.
_ENCODING_HOOKS = ("embed", "pooled", "tokens")


@keras.saving.register_keras_serializable(package="tapefit")
class SiameseModel(SiameseRunHooks, TapeModel):
    """Cosine similarity of two texts encoded by one shared `TextEncoder`.

    The GradientTape tutorial's model made complete: its pair losses see both embeddings
    inside the tape (which Keras' compiled loss of `call`'s output cannot), and the model
    takes raw strings and saves with its vocabulary. Inputs are `(texts_a, texts_b)`:
    strings when `vocabulary` is given (a `TextVectorization` with that vocabulary lives in
    the model, or keras-hub's `WordPieceTokenizer` with `tokenizer="wordpiece"`), otherwise
    integer token ids below `vocab_size`. `call` returns the cosine of each pair; compile it
    with a loss from `tapefit.models.losses` (`compile_defaults` gives the configured one).

    Args:
        vocabulary: The tokens of a `TextVectorization` inside the model (string inputs),
            without its padding and OOV entries; with `tokenizer="wordpiece"`, a whole
            WordPiece vocabulary, `[PAD]` at id 0 and `[UNK]` in it. `from_texts` learns
            either.
        vocab_size: For token-id inputs, without a vocabulary: ids lie below it.
        sequence_length: Tokens per text after vectorisation (padded or cut).
        encoder: `TextEncoder`'s options (`embedding_dim`, `rnn`, `units`, `num_layers`,
            `bidirectional`, `pooling`, `recurrent_dropout`, `dropout`, `mask_padding`,
            `num_heads`, `train_embeddings`, `projection`), and `vectors`: a GloVe or
            word2vec text file read once to start the embedding (`start_from_vectors`), left
            out of the saved config.
        loss: The pair loss `compile_defaults` makes: `name` (cosine, cosine_mse, cosent,
            angle, contrastive, in_batch_negatives, triplet) and its options.
        label_type: `graded` scores or `binary` 0/1 labels: which losses fit.
        label_range: `[low, high]` of graded labels, which `cosine_mse` rescales.
        retrieval: `enabled` adds retrieval metrics (recall@1/5/10, MRR@10, NDCG@10) on the
            validation split each epoch and on the test split; `positive_label` (default 4.0)
            is the graded label from which a pair is relevant.
        hard_negatives: The training inputs are `(texts_a, texts_b, negatives)`: each pair
            brings a text its loss ranks below `texts_b` (the data set it with
            `data.negative_column`); only `in_batch_negatives` and `triplet` use it.
        tokenizer: How strings become ids: `word` (Keras' `TextVectorization`: whole words,
            an unseen word is the one OOV id) or `wordpiece` (keras-hub's
            `WordPieceTokenizer`, lowercased: an unseen word is split into known pieces;
            needs `pip install 'tapefit[text]'`). Id 0 is padding either way.
        pretrained_encoder: A saved model's `PretrainedTextEncoder` (or its config): what a
            `.keras` file rebuilds the encoder from; a run names `encoder.preset` instead.
        fine_tuning: With a pretrained encoder, `freeze_backbone_steps` and
            `decay_norms_and_biases` (`tapefit.models.fine_tuning`).
        **kwargs: `keras.Model`'s keyword arguments (`name`, `dtype`, ...).

    Raises:
        TapefitError: neither `vocabulary` nor `vocab_size`, an unknown `tokenizer`, a
            WordPiece vocabulary without `[PAD]` first or `[UNK]` (or keras-hub missing),
            or an encoder or loss option no model can use.

    Examples:
        >>> import numpy as np, tensorflow as tf
        >>> from tapefit import SiameseModel
        >>> texts_a = np.array(["a cat sat", "a dog ran", "the cat sat", "a bird flew"])
        >>> texts_b = np.array(["the cat sat", "a cat ran", "a cat sat", "the dog sat"])
        >>> labels = np.array([4.5, 2.0, 5.0, 0.5])
        >>> model = SiameseModel.from_texts(
        ...     np.concatenate([texts_a, texts_b]),
        ...     sequence_length=8,
        ...     encoder={"embedding_dim": 8, "units": 8},
        ... )
        >>> model.compile(optimizer="adam", **model.compile_defaults())  # cosine_mse
        >>> pairs = tf.data.Dataset.from_tensor_slices(((texts_a, texts_b), labels)).batch(2)
        >>> history = model.fit(pairs, epochs=5, verbose=0)  # doctest: +SKIP
        >>> model.similarity(["a cat sat"], ["a dog ran"]).shape
        (1,)
    """

    def __init__(
        self,
        vocabulary: Sequence[str] | None = None,
        vocab_size: int | None = None,
        sequence_length: int = 32,
        encoder: EncoderOptions | None = None,
        loss: PairLossOptions | None = None,
        label_type: Literal["graded", "binary"] = "graded",
        label_range: Sequence[float] = (0.0, 5.0),
        retrieval: RetrievalOptions | None = None,
        hard_negatives: bool = False,
        tokenizer: Literal["word", "wordpiece", "pretrained"] = "word",
        pretrained_encoder: Any = None,
        fine_tuning: FineTuningOptions | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.pretrained = uses_pretrained(encoder) or pretrained_encoder is not None
        self.fine_tuning = dict(fine_tuning or {})
        self.freeze_backbone_steps = int(self.fine_tuning.get("freeze_backbone_steps", 0) or 0)
        head = bool((encoder or {}).get("projection"))
        check_fine_tuning(self.fine_tuning, self.pretrained, head)
        if self.pretrained:
            self._init_pretrained(
                encoder, pretrained_encoder, vocabulary, vocab_size, sequence_length, tokenizer
            )
            self._init_common(loss, label_type, label_range, retrieval, hard_negatives)
            return
        if vocabulary is None and vocab_size is None:
            raise TapefitError(
                "SiameseModel needs a vocabulary (string inputs) or a vocab_size (token ids)"
            )
        self.check_options(
            {
                "encoder": encoder or {},
                "loss": loss or {},
                "retrieval": retrieval or {},
                "tokenizer": tokenizer,
            }
        )
        self.tokenizer = parse_choice(Tokenizer, tokenizer, "model.tokenizer").value
        if self.tokenizer == Tokenizer.pretrained:
            raise TapefitError(
                "tokenizer=pretrained needs a pretrained encoder to bring the tokenizer: set "
                "model.encoder.preset (model=siamese_pretrained)"
            )
        if self.tokenizer == Tokenizer.wordpiece and vocabulary is None:
            raise TapefitError(
                "tokenizer=wordpiece needs a vocabulary (string inputs); a model of token ids "
                "takes tokenizer=word"
            )
        self.vocabulary = list(vocabulary) if vocabulary is not None else None
        self.sequence_length = int(sequence_length)
        self.encoder_settings = dict(encoder or {})
        # read once, here; the vectors then live in the weights and the saved config leaves
        # the path out, so a .keras file reloads without the file
        vectors = self.encoder_settings.pop("vectors", None)
        self._init_common(loss, label_type, label_range, retrieval, hard_negatives)
        self.vectorizer = make_vectorizer(self.vocabulary, self.tokenizer, self.sequence_length)
        if self.vectorizer is not None:
            vocab_size = self.vectorizer.vocabulary_size()
        self.vocab_size = int(vocab_size)
        self.encoder = TextEncoder(self.vocab_size, **self.encoder_settings, name="encoder")
        self.encoder.build((None, self.sequence_length))
        if vectors:
            self.start_from_vectors(vectors)
        self.built = True

    def _init_common(
        self,
        loss: PairLossOptions | None,
        label_type: str,
        label_range: Sequence[float],
        retrieval: RetrievalOptions | None,
        hard_negatives: bool,
    ) -> None:
        self.loss_settings = dict(loss or {})
        # in_batch_negatives, triplet: the cached step's texts per side at once; None: off
        self.cache_chunk_size = check_cache_chunk_size(
            self.loss_settings.get("cache_chunk_size"),
            str(self.loss_settings.get("name", "cosine_mse")),
        )
        # the leading dimensions the loss also trains alone (Matryoshka); [] without
        nested = check_matryoshka(
            self.loss_settings.get("matryoshka_dims"),
            self.loss_settings.get("matryoshka_weights"),
        )
        self.matryoshka_dims = list(nested[0]) if nested else []
        self.label_type = str(label_type)
        self.label_range = [float(v) for v in label_range]
        self.retrieval_settings = dict(retrieval or {})
        self.hard_negatives = bool(hard_negatives)

    def _init_pretrained(
        self,
        encoder: EncoderOptions | None,
        layer: Any,
        vocabulary: Any,
        vocab_size: Any,
        sequence_length: int,
        tokenizer: str,
    ) -> None:
        """A pretrained backbone as the encoder: from `encoder.preset`, or (a reload) the
        saved layer `layer`; strings go to it as they are, its tokenizer runs inside it."""
        check_no_vocabulary(vocabulary, vocab_size)
        self.check_options({"retrieval": {}, "loss": {}, "encoder": {}, "tokenizer": tokenizer})
        self.tokenizer, self.vocabulary, self.vocab_size = "pretrained", None, None
        self.sequence_length, self.vectorizer = int(sequence_length), None
        self.encoder, self.encoder_settings = pretrained_encoder_layer(
            dict(encoder or {}), layer, self.sequence_length, tokenizer
        )
        self.built = True

    def start_from_vectors(self, path: str) -> None:
        """Put pretrained word vectors into the encoder's embedding for the vocabulary's words.

        The share of the vocabulary the file had is logged; the other words keep their
        random start (`tapefit.text.word_vectors`). With `tokenizer="wordpiece"` the
        pieces that begin a word (not `##` continuations, not `[PAD]`/`[UNK]`) are looked
        up as words: whole words get their vectors, and a piece that is only a word's start
        gets the vector of the word it spells, if the file has one.

        Args:
            path: A GloVe or word2vec text file, vectors `embedding_dim` wide.

        Raises:
            TapefitError: the model takes token ids (no vocabulary to look words up by), or
                the file is missing or of another width.
        """
        if self.vectorizer is None:
            raise TapefitError(
                "model.encoder.vectors needs string inputs (a vocabulary to look words up by); "
                "this model takes token ids"
            )
        embeddings = self.encoder.embedding.embeddings
        put_word_vectors(path, self.vectorizer.get_vocabulary(), embeddings, self.tokenizer)

    @classmethod
    def from_texts(
        cls,
        texts: Sequence[str],
        sequence_length: int = 32,
        max_tokens: int | None = 20000,
        encoder: EncoderOptions | None = None,
        tokenizer: Literal["word", "wordpiece"] = "word",
        wordpiece_vocabulary_size: int = 8000,
        **kwargs: Any,
    ) -> SiameseModel:
        """Learn a vocabulary on `texts` and build a model that takes raw strings.

        The vocabulary is learnt once here and then saved with the model, so a reloaded or
        exported model tokenises texts exactly as in training: a `TextVectorization`'s words
        (`tokenizer="word"`) or a WordPiece vocabulary (`"wordpiece"`, keras-hub's
        `compute_word_piece_vocabulary`, lowercased, `[PAD]` at id 0 and `[UNK]`).

        Args:
            texts: The training texts (both sides of every pair).
            sequence_length: Tokens (words or pieces) per text (padded or cut).
            max_tokens: `word`: vocabulary size cap (most frequent first); None: no cap.
            encoder: `TextEncoder`'s options.
            tokenizer: `word` or `wordpiece`.
            wordpiece_vocabulary_size: `wordpiece`: the most entries of the vocabulary.
            **kwargs: The constructor's other arguments (`loss`, `label_type`, ...).

        Returns:
            A model whose inputs are raw strings.

        Raises:
            TapefitError: an unknown tokenizer, or `wordpiece` without keras-hub.

        Examples:
            >>> from tapefit import SiameseModel
            >>> model = SiameseModel.from_texts(["a cat sat", "a dog ran"], sequence_length=4)
            >>> sorted(map(str, model.vocabulary))
            ['a', 'cat', 'dog', 'ran', 'sat']
            >>> pieces = SiameseModel.from_texts(
            ...     ["a cat sat", "a dog ran"] * 10, sequence_length=4, tokenizer="wordpiece"
            ... )
            >>> ids = pieces.tokens(["cats"]).numpy()[0]  # "cats" is not in the texts
            >>> [pieces.vocabulary[i] for i in ids if i]
            ['cat', '##s']
        """
        choice = parse_choice(Tokenizer, tokenizer, "tokenizer")
        vocabulary = learn_vocabulary(texts, choice, max_tokens, wordpiece_vocabulary_size)
        return cls(
            vocabulary=vocabulary,
            sequence_length=sequence_length,
            encoder=encoder,
            tokenizer=choice.value,
            **kwargs,
        )

    # -- fine-tuning a pretrained encoder (tapefit.models.fine_tuning) ------------------------
    @property
    def pretrained_backbone(self) -> keras.Model:
        """The pretrained encoder's backbone (which its own optimizer may update)."""
        return self.encoder.backbone

    def variables_by_optimizer(self) -> dict[str, list]:
        """`TapeModel.variables_by_optimizer`, split between the head and the backbone.

        With a pretrained encoder and a `backbone` optimizer, the first optimizer updates the
        head's variables and `backbone` the backbone's.

        Returns:
            Optimizer name to the variables it updates.
        """
        split = variables_by_optimizer(self) if self.pretrained else {}
        return split or super().variables_by_optimizer()

    def compile(self, *args: Any, **kwargs: Any) -> None:
        """`TapeModel.compile`, and no weight decay on a pretrained encoder's norms and biases.

        With a pretrained encoder, LayerNorm scales and offsets and biases are left out of the
        optimizers' weight decay unless `fine_tuning.decay_norms_and_biases`.

        Args:
            *args: `TapeModel.compile`'s positional arguments.
            **kwargs: `TapeModel.compile`'s keyword arguments.
        """
        super().compile(*args, **kwargs)
        if self.pretrained and not self.fine_tuning.get("decay_norms_and_biases", False):
            exclude_norms_and_biases(self.optimizers)

    def apply_tape_gradients(
        self, tape: Any, loss: Any, variables: Any = None, optimizer: str | None = None
    ) -> list:
        """`TapeModel.apply_tape_gradients`, with the fine-tuning recipe of a pretrained encoder.

        Its step updates the backbone with its own optimizer (named `backbone`) and not
        before `freeze_backbone_steps` steps.

        Args:
            tape: The tape that recorded the forward pass.
            loss: The step's loss.
            variables: The variables to update; None: all (with the recipe).
            optimizer: The optimizer's name; None: the first (with the recipe).

        Returns:
            The gradients.
        """
        if self.pretrained and variables is None and optimizer is None and splits_the_step(self):
            return apply_fine_tuning_gradients(self, tape, loss)
        return super().apply_tape_gradients(tape, loss, variables, optimizer)

    def train_step(self, data: Any) -> dict:
        """`TapeModel.train_step`, or with `loss.cache_chunk_size` the cached step.

        The cached (GradCache) step embeds the batch's texts a chunk at a time, so the
        encoder's activations take a chunk's memory, not the batch's
        (`tapefit.models.cached_step`).

        Args:
            data: One batch as the dataset yields it.

        Returns:
            The metrics' current results by name (`loss` first).

        Examples:
            >>> model = SiameseModel.from_texts(["a cat", "a dog", "the sun"],
            ...     encoder={"units": 4},
            ...     loss={"name": "in_batch_negatives", "cache_chunk_size": 2})
            >>> model.compile("sgd", **model.compile_defaults())
            >>> batch = ((tf.constant(["a cat", "the sun", "a dog"]),
            ...           tf.constant(["a dog", "a cat", "the sun"])), tf.zeros(3))
            >>> sorted(model.train_step(batch))
            ['loss']
        """
        if self.cache_chunk_size is None:
            return super().train_step(data)
        return cached_train_step(self, data, self.cache_chunk_size)

    def test_step(self, data: Any) -> dict:
        """`TapeModel.test_step`, or with `loss.cache_chunk_size` a chunk at a time.

        Validation batches are as large as training's, so with the cached step they are
        embedded a chunk at a time too (`tapefit.models.cached_step.cached_test_step`).

        Args:
            data: One batch as the dataset yields it.

        Returns:
            The metrics' current results by name (`loss` first).

        Examples:
            >>> texts = np.array(["a red fox", "a blue hen", "one owl"], dtype=object)
            >>> model = SiameseModel.from_texts(texts, encoder={"units": 4},
            ...     loss={"name": "triplet", "cache_chunk_size": 1})
            >>> model.compile("sgd", **model.compile_defaults())
            >>> scores = model.evaluate((texts, texts[::-1]), np.zeros(3), verbose=0,
            ...                         return_dict=True)
            >>> list(scores)
            ['loss']
        """
        if self.cache_chunk_size is None:
            return super().test_step(data)
        return cached_test_step(self, data, self.cache_chunk_size)

    # -- encoding ----------------------------------------------------------------------------
    def tokens(self, texts: Any) -> tf.Tensor:
        """Raw strings -> padded token ids (identity for token-id inputs).

        Args:
            texts: Strings `(batch,)`, or token ids for a model without a vocabulary.

        Returns:
            int64 token ids `(batch, sequence_length)` (word or piece ids; 0 is padding).
        """
        if self.pretrained:  # the encoder tokenises inside itself
            return tf.reshape(tf.convert_to_tensor(texts), [-1])
        if self.vectorizer is None:
            return texts
        return self.vectorizer(tf.reshape(texts, [-1]))

    def embed(self, texts: Any, training: bool | None = None) -> tf.Tensor:
        """L2-normalised embeddings of a batch of texts, in float32 (or float64).

        Args:
            texts: Strings `(batch,)`, or token ids for a model without a vocabulary.
            training: Whether the encoder's dropout runs in training mode.

        Returns:
            Unit-length vectors `(batch, dim)`.
        """
        return tf.math.l2_normalize(self.pooled(texts, training), axis=-1)

    def pooled(self, texts: Any, training: bool | None = None) -> tf.Tensor:
        """The encoder's vectors before normalisation, in float32 (or float64).

        Args:
            texts: Strings `(batch,)`, or token ids for a model without a vocabulary.
            training: Whether the encoder's dropout runs in training mode.

        Returns:
            The pooled (and projected) vectors `(batch, dim)`, of any length.
        """
        return self._vectors(self.tokens(texts), training)

    def _vectors(self, tokens: Any, training: bool | None) -> tf.Tensor:
        """The encoder's vectors of token ids, half precision lifted to float32."""
        vectors = self.encoder(tokens, training=training)
        if vectors.dtype != tf.float64:  # half precision is lifted to float32; float64 stays
            vectors = tf.cast(vectors, tf.float32)
        return vectors

    def embed_pairs(self, texts_a: Any, texts_b: Any, training: bool | None = None) -> tf.Tensor:
        """Both sides' embeddings stacked to `(batch, 2, dim)`, the form pair losses take.

        Args:
            texts_a: The first text of each pair.
            texts_b: The second text of each pair.
            training: Whether the encoder's dropout runs in training mode.

        Returns:
            The stacked embeddings, one encoder for both sides.
        """
        return self.embed_aligned([texts_a, texts_b], training)

    def embed_aligned(self, sides: Sequence[Any], training: bool | None = None) -> tf.Tensor:
        """The embeddings of aligned batches of texts, stacked to `(batch, len(sides), dim)`.

        Row i of every side belongs together (a pair's two texts, a hard negative).

        Why: the sides go through the encoder as one batch, their token ids concatenated,
        when those have one shape (always, for raw strings: the vectoriser pads them to
        `sequence_length`). The encoder's graph is then built once per step instead of once
        per side, and runs on one larger batch: a Siamese LSTM run starts and steps faster.
        Each row's vector is the one the side alone would give; token-id sides of different
        lengths are encoded one by one, and so is every side when a subclass overrides
        `embed`, `pooled` or `tokens` (its own way of embedding one text is kept).

        Args:
            sides: Batches of texts of one size: pairs' two sides, or anchor, positive and
                hard negative.
            training: Whether the encoder's dropout runs in training mode.

        Returns:
            Unit-length vectors, float32 (or float64).

        Example:
            >>> model = SiameseModel.from_texts(["a cat sat", "a dog ran"], encoder={"units": 4})
            >>> stacked = model.embed_aligned([["a cat", "a dog"], ["a dog", "sat"]])
            >>> alone = model.embed(["a dog", "sat"])
            >>> tuple(stacked.shape), bool(np.allclose(stacked[:, 1], alone, atol=1e-6))
            ((2, 2, 4), True)
        """
        if any(getattr(type(self), m) is not getattr(SiameseModel, m) for m in _ENCODING_HOOKS):
            # a subclass changed how one text is embedded: each side through its own method
            return tf.stack([self.embed(side, training) for side in sides], axis=1)
        tokens = [tf.convert_to_tensor(self.tokens(side)) for side in sides]
        shapes = {tuple(side.shape[1:]) for side in tokens}
        if len(shapes) > 1 or None in next(iter(shapes)):
            unit = [tf.math.l2_normalize(self._vectors(side, training), -1) for side in tokens]
            return tf.stack(unit, axis=1)
        vectors = self._vectors(tf.concat(tokens, axis=0), training)
        unit = tf.math.l2_normalize(vectors, axis=-1)
        by_side = tf.reshape(unit, [len(sides), -1, tf.shape(unit)[-1]])
        return tf.transpose(by_side, [1, 0, 2])

    def call(self, inputs: Any, training: bool | None = None) -> tf.Tensor:
        """Cosine similarity of each `(a, b)` pair, shape `(batch,)`.

        Args:
            inputs: `(texts_a, texts_b)`.
            training: Whether the encoder's dropout runs in training mode.

        Returns:
            The cosines, in [-1, 1].
        """
        texts_a, texts_b = inputs
        return pair_cosine(self.embed_pairs(texts_a, texts_b, training))

    # -- the tape hook -------------------------------------------------------------------------
    def forward(self, data: Any, training: bool) -> StepOutput:
        """Encode both sides inside the tape; the loss sees the stacked pair embeddings.

        The metrics still see the cosine scores, as `call` returns them. A loss with
        `uses_text_ids` gets the texts' fingerprints as targets instead of the labels.

        With hard negatives the inputs hold a third text per pair; the loss then sees
        `(batch, 3, dim)` embeddings (anchor, positive, negative) and three fingerprints.

        Args:
            data: `((texts_a, texts_b), labels)` or `((texts_a, texts_b, negatives), labels)`,
                optionally with sample weights; the labels may be missing for losses that
                need none.
            training: True in `train_step`, False in `test_step`.

        Returns:
            The loss and, for the metrics, the labels and the cosines of the pairs.
        """
        texts, labels, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        texts = self.checked_sides(texts)
        embeddings = self.embed_aligned(texts, training)  # (batch, 2 or 3, dim)
        return self.output_of(texts, labels, sample_weight, embeddings, training)

    def checked_sides(self, texts: Any) -> tuple:
        """The batch's sides as a tuple, checked: a third text only for a loss that uses it.

        Args:
            texts: The batch's inputs: `(texts_a, texts_b)` or, with hard negatives,
                `(texts_a, texts_b, negatives)`.

        Returns:
            The sides as a tuple.

        Raises:
            TapefitError: hard negatives for a loss that cannot use them.

        Examples:
            >>> model = SiameseModel(vocabulary=["a"], loss={"name": "in_batch_negatives"})
            >>> model.compile("sgd", **model.compile_defaults())
            >>> len(model.checked_sides([["a"], ["a"], ["a"]]))
            3
        """
        texts = tuple(texts)
        if len(texts) > 2 and not getattr(self.loss, "uses_negatives", False):
            raise TapefitError(
                f"{type(self.loss).__name__} cannot use hard negatives (a third text per "
                "pair): compile with InBatchNegativesLoss or TripletLoss"
            )
        return texts

    def output_of(
        self, texts: tuple, labels: Any, sample_weight: Any, embeddings: Any, training: bool
    ) -> StepOutput:
        """The step's loss and metric inputs from the batch's stacked embeddings.

        `forward`'s second half, which the cached step calls on embeddings it computed in
        chunks.

        Args:
            texts: The batch's sides.
            labels: The labels, or None.
            sample_weight: The sample weights, or None.
            embeddings: `(batch, len(texts), dim)` unit vectors.
            training: Whether this is a training step.

        Returns:
            As `forward`.

        Examples:
            >>> model = SiameseModel(vocabulary=["a"])
            >>> model.compile("sgd", **model.compile_defaults())
            >>> unit = tf.math.l2_normalize(tf.random.normal((2, 2, 4)), -1)
            >>> out = model.output_of((["a", "a"], ["a", "a"]), tf.ones(2), None, unit, False)
            >>> tuple(out.y_pred.shape)
            (2,)
        """
        pair = embeddings[:, :2]
        if getattr(self.loss, "uses_text_ids", False):
            targets = tf.stack([text_fingerprint(t) for t in texts], axis=1)
        elif labels is None:
            targets = tf.zeros(tf.shape(pair)[:1])
        else:
            targets = labels
        loss = self.compute_loss(
            x=texts, y=targets, y_pred=embeddings, sample_weight=sample_weight, training=training
        )
        return StepOutput(loss, labels, pair_cosine(pair), sample_weight)

    # -- use -------------------------------------------------------------------------------------
    def encode(
        self,
        texts: Sequence[Any],
        batch_size: int = 256,
        normalize: bool = True,
        dim: int | None = None,
    ) -> np.ndarray:
        """L2-normalised embeddings of `texts` as a NumPy array `(n, dim)`.

        For search or clustering after training; the texts are encoded in batches. Every
        loss and metric of the model is a cosine, so training sees unit vectors; with
        `normalize=False` you get the vectors before that last step (for a downstream model
        that wants their lengths, or an index that normalises by itself).

        Args:
            texts: Raw strings (or token-id rows for a model without a vocabulary).
            batch_size: Texts encoded per batch.
            normalize: False: the pooled (and projected) vectors, not scaled to length 1.
            dim: Keep the first `dim` components (a Matryoshka model's smaller embedding,
                `model.loss.matryoshka_dims`), normalised again; None: all.

        Returns:
            float32 array `(len(texts), dim)`.

        Examples:
            >>> from tapefit import SiameseModel
            >>> model = SiameseModel.from_texts(["a cat sat"], encoder={"units": 8})
            >>> model.encode(["a cat", "a dog", "sat"]).shape
            (3, 8)
        """
        if dim is None:
            return encode_in_batches(self, texts, batch_size, normalize)
        return leading_components(encode_in_batches(self, texts, batch_size, False), dim, normalize)

    def similarity(self, texts_a: Sequence[Any], texts_b: Sequence[Any]) -> np.ndarray:
        """Cosine similarity of each pair `(texts_a[i], texts_b[i])`.

        Args:
            texts_a: The first text of each pair.
            texts_b: The second text of each pair, as many.

        Returns:
            float32 array `(len(texts_a),)` of cosines in [-1, 1].

        Raises:
            TapefitError: the two lists differ in length.

        Examples:
            >>> from tapefit import SiameseModel
            >>> model = SiameseModel.from_texts(["a cat sat"], encoder={"units": 8})
            >>> round(float(model.similarity(["a cat sat"], ["a cat sat"])[0]), 4)
            1.0
        """
        if len(texts_a) != len(texts_b):
            raise TapefitError(
                f"similarity needs equal lengths; got {len(texts_a)}, {len(texts_b)}"
            )
        return pair_cosine(np.stack([self.encode(texts_a), self.encode(texts_b)], axis=1)).numpy()

    def get_config(self) -> dict:
        """Vocabulary and encoder settings: a `.keras` file reloads with no custom code.

        Returns:
            The constructor's arguments, JSON-serialisable.
        """
        return {
            "name": self.name,
            "vocabulary": self.vocabulary,
            "vocab_size": None if self.vocabulary is not None else self.vocab_size,
            "sequence_length": self.sequence_length,
            "encoder": self.encoder_settings,
            "loss": self.loss_settings,
            "label_type": self.label_type,
            "label_range": self.label_range,
            "retrieval": self.retrieval_settings,
            "hard_negatives": self.hard_negatives,
            "tokenizer": self.tokenizer,
            **(
                {
                    "pretrained_encoder": keras.saving.serialize_keras_object(self.encoder),
                    "fine_tuning": self.fine_tuning,
                }
                if self.pretrained
                else {}
            ),
        }
