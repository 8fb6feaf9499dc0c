"""The Siamese family: text pairs -> `SiameseModel` (cosine of a shared encoder), a pair loss,
whole-split correlation or AUC metrics."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import keras
import numpy as np
import tensorflow as tf
from omegaconf import MISSING, OmegaConf

from tapefit.data.pair_files import LabelType, PairFileSpec, checked_file, expand_paths
from tapefit.data.pair_stream import StreamedPairData, streamed_pair_data
from tapefit.data.pairs import (
    PairData,
    file_splits,
    pair_data,
    read_pair_files,
    synthetic_splits,
)
from tapefit.errors import TapefitError
from tapefit.families.base import Dataset, Family, register
from tapefit.models.layers import Pooling, Rnn
from tapefit.models.losses import PairLoss, losses_for_labels, make_pair_loss
from tapefit.models.metrics import SplitMetrics, pair_metrics
from tapefit.models.siamese import SiameseModel
from tapefit.training.export import ENDPOINT, write_endpoints
from tapefit.training.outputs import plot_similarity


@dataclass
class PairDataConfig:
    """Keys every pair dataset has."""

    name: str = MISSING  # set by each conf/data/<name>.yaml
    label_type: LabelType = LabelType.graded
    batch_size: int = 64
    sequence_length: int = 16  # tokens per text after vectorisation (padded or cut)
    max_tokens: int | None = 20000  # vocabulary size cap, adapted on the training texts
    cache: bool = True


@dataclass
class SyntheticPairsConfig(PairDataConfig):
    """`data=pairs_synthetic`: generated pairs, graded label = 5 * concept overlap."""

    train_size: int = 8000
    val_size: int = 500
    test_size: int = 500


@dataclass
class PairFilesConfig(PairFileSpec, PairDataConfig):
    """`data=pairs_file`: the reading options of `PairFileSpec` plus paths and split fractions;
    missing val/test parts are split off train."""

    sequence_length: int = 32
    # Each path: a file, a glob ('shards/*.tsv') or a list of them.
    train_path: Any = None
    validation_path: Any = None
    test_path: Any = None
    val_fraction: float = 0.1
    test_fraction: float = 0.1
    # true: training rows stream from disk (never all in memory); needs data.validation_path.
    stream: bool = False
    shuffle_buffer: int = 10000  # stream: rows in the shuffle buffer
    vocabulary_pairs: int = 100000  # stream: the seeded sample of pairs the vocabulary learns
    max_held_out_pairs: int = 1000000  # stream: validation/test files are loaded up to this


@dataclass
class EncoderConfig:
    """The shared text encoder (`tapefit.models.layers.TextEncoder`)."""

    embedding_dim: int = 100
    rnn: Rnn = Rnn.lstm  # type: ignore[valid-type]
    units: int = 64
    num_layers: int = 1
    bidirectional: bool = False
    pooling: Pooling = Pooling.last
    recurrent_dropout: float = 0.1
    mask_padding: bool = True


@dataclass
class PairLossConfig:
    """The pair loss and its options (each loss reads only its own)."""

    name: PairLoss = PairLoss.cosine_mse  # type: ignore[valid-type]
    target_range: list[float] = field(default_factory=lambda: [0.0, 1.0])  # cosine_mse
    margin: float = 0.5  # contrastive
    scale: float = 20.0  # in_batch_negatives


@dataclass
class SiameseConfig:
    """`model=siamese`."""

    name: str = "siamese"
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    loss: PairLossConfig = field(default_factory=PairLossConfig)


def load_synthetic_pairs(options: Any, seed: int) -> PairData:
    """Generated pairs of the configured sizes."""
    sizes = {name: options[f"{name}_size"] for name in ("train", "val", "test")}
    splits, label_range = synthetic_splits(sizes, options.label_type, seed)
    return pair_data(
        splits,
        options.label_type,
        label_range,
        batch_size=options.batch_size,
        seed=seed,
        cache=options.cache,
    )


def load_pair_files(options: Any, seed: int) -> PairData:
    """Pairs read from the configured files, or streamed from them (`data.stream`)."""
    spec = PairFileSpec.from_config(options)
    paths = {
        "train": options.train_path,
        "val": options.validation_path,
        "test": options.test_path,
    }
    if options.stream:
        data = load_streamed_pairs(paths, spec, options, seed)
        labels = np.concatenate([data.vocabulary_sample[2], *(s[2] for s in data.splits.values())])
        check_label_type(labels, spec)
        return data
    splits, skipped = file_splits(paths, spec, options.val_fraction, options.test_fraction, seed)
    check_label_type(np.concatenate([split[2] for split in splits.values()]), spec)
    return pair_data(
        splits,
        spec.label_type,
        tuple(spec.label_range),
        batch_size=options.batch_size,
        seed=seed,
        cache=options.cache,
        skipped_lines=skipped,
    )


def load_streamed_pairs(
    paths: dict[str, Any], spec: PairFileSpec, options: Any, seed: int
) -> StreamedPairData:
    """The training files as a stream; validation (required) and test files in memory, up to
    `data.max_held_out_pairs` each."""
    if not paths["train"]:
        raise TapefitError("data=pairs_file needs data.train_path=/path/to/train.{csv,tsv,jsonl}")
    if not paths["val"]:
        raise TapefitError(
            "data.stream=true reads validation pairs from their own files: give "
            "data.validation_path (a held-out file or glob)"
        )
    train_files = [checked_file(f) for f in expand_paths(paths["train"], "train_path")]
    held_out, skipped = {}, 0
    for name, key in (("val", "validation_path"), ("test", "test_path")):
        if paths[name]:
            held_out[name], lost = read_pair_files(
                expand_paths(paths[name], key), spec, options.max_held_out_pairs, key
            )
            skipped += lost
    return streamed_pair_data(
        train_files,
        held_out,
        spec,
        batch_size=options.batch_size,
        seed=seed,
        shuffle_buffer=options.shuffle_buffer,
        vocabulary_pairs=options.vocabulary_pairs,
        held_out_skipped=skipped,
    )


def check_label_type(labels: np.ndarray, spec: PairFileSpec) -> None:
    """Refuse graded labels that are all 0 or 1: they are binary labels read as grades."""
    binary_looking = set(np.unique(labels)) <= {0.0, 1.0} and spec.label_range[1] > 1.0
    if spec.label_type == LabelType.graded and binary_looking:
        raise TapefitError(
            "every label in the pair files is 0 or 1, but data.label_type=graded would read them "
            "as grades: set data.label_type=binary model.loss.name=contrastive (or "
            "data.label_range=[0, 1] if they really are grades)"
        )


def check_pair_data(data: Any) -> None:
    """Keys every pair dataset has: the sequence length and the vocabulary cap."""
    if data.sequence_length < 1:
        raise TapefitError(f"data.sequence_length={data.sequence_length} must be at least 1")
    if data.max_tokens is not None and data.max_tokens < 3:
        raise TapefitError(f"data.max_tokens={data.max_tokens} must be at least 3 or null")


def check_synthetic_pairs(data: Any) -> None:
    """`data=pairs_synthetic`: the common keys and the split sizes."""
    check_pair_data(data)
    for split in ("train", "val", "test"):
        if data[f"{split}_size"] < 1:
            raise TapefitError(f"data.{split}_size={data[f'{split}_size']} must be at least 1")


def check_pair_file_options(data: Any) -> None:
    """The split fractions and the label range of `data=pairs_file`, before any file is read."""
    check_pair_data(data)
    for key in ("val_fraction", "test_fraction"):
        if not 0.0 <= data[key] < 1.0:
            raise TapefitError(f"data.{key}={data[key]} must lie in [0, 1)")
    if not 0.0 <= data.max_skipped_fraction <= 1.0:
        raise TapefitError(
            f"data.max_skipped_fraction={data.max_skipped_fraction} must lie in [0, 1]"
        )
    if data.val_fraction + data.test_fraction >= 1.0:
        raise TapefitError(
            f"data.val_fraction + data.test_fraction = {data.val_fraction + data.test_fraction}"
            " leaves no training pairs: keep their sum below 1"
        )
    for key in ("shuffle_buffer", "vocabulary_pairs", "max_held_out_pairs"):
        if data[key] < 1:
            raise TapefitError(f"data.{key}={data[key]} must be at least 1")
    low_high = list(data.label_range)
    if len(low_high) != 2 or not low_high[0] < low_high[1]:
        raise TapefitError(
            f"data.label_range={low_high} must be two numbers [low, high] with low < high, "
            "e.g. data.label_range=[0,5]"
        )


SIZES = ("embedding_dim", "units", "num_layers")
LABEL_WORDS = {LabelType.graded.value: "graded", LabelType.binary.value: "binary 0/1"}


@register
class SiameseFamily(Family):
    """Text pairs -> cosine similarity, a pair loss, whole-split correlation or AUC metrics."""

    name = "siamese"
    model_schema = SiameseConfig
    datasets: ClassVar[dict[str, Dataset]] = {
        "pairs_synthetic": Dataset(
            SyntheticPairsConfig, load_synthetic_pairs, check_synthetic_pairs
        ),
        "pairs_file": Dataset(PairFilesConfig, load_pair_files, check_pair_file_options),
    }

    def model(self, cfg: Any, data: PairData) -> keras.Model:
        return SiameseModel.from_texts(
            data.training_texts(),
            sequence_length=cfg.data.sequence_length,
            max_tokens=cfg.data.max_tokens,
            encoder=OmegaConf.to_container(cfg.model.encoder, enum_to_str=True),
        )

    def compile_arguments(self, cfg: Any, data: PairData) -> dict[str, Any]:
        options = OmegaConf.to_container(cfg.model.loss, enum_to_str=True)
        name = options.pop("name")
        loss = make_pair_loss(name, label_range=data.label_range, **options)
        if loss.label_type not in (None, data.label_type):
            others = losses_for_labels(data.label_type)
            raise TapefitError(
                f"loss={name} needs {LABEL_WORDS[loss.label_type]} labels: set "
                f"data.label_type={loss.label_type}, or use model.loss.name={others[0]} for "
                f"{data.label_type} labels"
            )
        return {"loss": loss}

    def check(self, cfg: Any) -> None:
        for key in SIZES:
            if cfg.model.encoder[key] < 1:
                raise TapefitError(
                    f"model.encoder.{key}={cfg.model.encoder[key]} must be at least 1"
                )
        if not 0.0 <= cfg.model.encoder.recurrent_dropout < 1.0:
            raise TapefitError(
                f"model.encoder.recurrent_dropout={cfg.model.encoder.recurrent_dropout} must lie "
                "in [0, 1)"
            )

    def validation_metrics(self, cfg: Any) -> list[str]:
        names = (
            ("pearson", "spearman") if cfg.data.label_type == "graded" else ("auc", "best_accuracy")
        )
        return [f"val_{name}" for name in names]

    def default_objective(self, cfg: Any) -> str:
        return "val_spearman" if cfg.data.label_type == "graded" else "val_auc"

    def callbacks(self, cfg: Any, data: PairData) -> list[keras.callbacks.Callback]:
        labels = data.splits["val"][2]
        return [SplitMetrics(data.inputs("val"), labels, data.label_type, prefix="val_")]

    def report(self, model: keras.Model, data: PairData, run_dir: Path) -> dict[str, Any]:
        report: dict[str, Any] = dict(data.read_counts())
        if "test" not in data.splits:  # streamed data without data.test_path
            return report
        scores = model.predict(data.inputs("test"), verbose=0)
        gold = data.splits["test"][2]
        plot_similarity(scores, gold, data.label_type, run_dir / "similarity.png")
        metrics = pair_metrics(scores, gold, data.label_type)
        report.update({f"test_{name}": value for name, value in metrics.items()})
        return report

    def export(self, model: keras.Model, data: PairData, path: Path) -> None:
        """`serve(texts_a, texts_b)`: two string tensors `(batch,)`, the raw texts of each pair
        -> float32 cosine similarity `(batch,)`; `encode(texts)`: strings `(batch,)` ->
        L2-normalised float32 embeddings `(batch, dim)`. The vectoriser is inside both."""
        texts = tf.TensorSpec((None,), tf.string)  # the family's models take raw strings

        def serve(texts_a: tf.Tensor, texts_b: tf.Tensor) -> tf.Tensor:
            return model((texts_a, texts_b), training=False)

        def encode(texts: tf.Tensor) -> tf.Tensor:
            return model.embed(texts, training=False)

        write_endpoints(
            model, path, {ENDPOINT: (serve, [texts, texts]), "encode": (encode, [texts])}
        )
