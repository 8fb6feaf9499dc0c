"""Structured-config schemas: Hydra checks every key and type against these before any work.

Each group option in `conf/` extends one of the schemas stored here (`defaults: [<schema>]`),
so a misspelt key (`trainer.epocs=3`) or a wrong type (`trainer.epochs=three`) fails at compose
time with Hydra's own message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from tapefit.errors import TapefitError


class Precision(str, Enum):
    """Keras dtype policies tapefit supports."""

    float32 = "float32"
    mixed_float16 = "mixed_float16"
    mixed_bfloat16 = "mixed_bfloat16"


class Strategy(str, Enum):
    """`tf.distribute` strategies selectable from config."""

    default = "default"
    one_device = "one_device"
    mirrored = "mirrored"
    multi_worker = "multi_worker"


class Architecture(str, Enum):
    """Classifier bodies."""

    cnn = "cnn"
    mlp = "mlp"


@dataclass
class ImageDataConfig:
    """`data=digits` / `data=mnist`."""

    name: str = "digits"
    path: str | None = None  # mnist: a local mnist.npz; null downloads through keras.datasets
    batch_size: int = 32
    val_fraction: float = 0.15
    test_fraction: float = 0.2  # digits only: MNIST ships its own test split
    train_limit: int | None = None  # keep only the first N training samples (quick runs)
    cache: bool = True


@dataclass
class ClassifierConfig:
    """`model=classifier`."""

    name: str = "classifier"
    architecture: Architecture = Architecture.cnn
    dropout: float = 0.5
    bn_momentum: float = 0.9
    hidden_units: list[int] = field(default_factory=lambda: [64, 64])


class LabelType(str, Enum):
    """Pair labels: graded similarity scores or binary same/different."""

    graded = "graded"
    binary = "binary"


class PairLoss(str, Enum):
    """Pair losses of `tapefit.losses`."""

    cosine = "cosine"
    cosine_mse = "cosine_mse"
    contrastive = "contrastive"
    in_batch_negatives = "in_batch_negatives"


@dataclass
class PairDataConfig:
    """Keys every pair dataset has."""

    name: str = "pairs_synthetic"
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
class PairFilesConfig(PairDataConfig):
    """`data=pairs_file`: CSV/TSV/JSONL files; missing val/test parts are split off train."""

    name: str = "pairs_file"
    train_path: str | None = None
    validation_path: str | None = None
    test_path: str | None = None
    val_fraction: float = 0.1
    test_fraction: float = 0.1
    format: str = "auto"  # auto (from the extension) | csv | tsv | jsonl
    text1_column: str = "text1"  # header name, or 0-based index with header=false
    text2_column: str = "text2"
    label_column: str = "label"
    header: bool = True
    delimiter: str | None = None  # default "," for csv, tab for tsv
    quoting: str = "minimal"  # minimal | none | all | nonnumeric
    label_range: list[float] = field(default_factory=lambda: [0.0, 5.0])
    on_bad_line: str = "error"  # error | skip (skipped lines are counted in metrics.json)


@dataclass
class EncoderConfig:
    """The shared text encoder (`tapefit.models.layers.TextEncoder`)."""

    embedding_dim: int = 100
    rnn: str = "lstm"  # lstm | gru
    units: int = 64
    num_layers: int = 1
    bidirectional: bool = False
    pooling: str = "last"  # last | mean
    recurrent_dropout: float = 0.1
    mask_padding: bool = True


@dataclass
class PairLossConfig:
    """The pair loss and its options (each loss reads only its own)."""

    name: PairLoss = PairLoss.cosine_mse
    target_range: list[float] = field(default_factory=lambda: [0.0, 1.0])  # cosine_mse
    margin: float = 0.5  # contrastive
    scale: float = 20.0  # in_batch_negatives


@dataclass
class SiameseConfig:
    """`model=siamese`."""

    name: str = "siamese"
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    loss: PairLossConfig = field(default_factory=PairLossConfig)


@dataclass
class OptimizerConfig:
    """Any `keras.optimizers` class by name; unset options keep Keras' defaults."""

    name: str = "adam"
    learning_rate: float = 1e-3
    weight_decay: float | None = None
    momentum: float | None = None
    clipnorm: float | None = None
    global_clipnorm: float | None = None


@dataclass
class TrainerConfig:
    """How `fit` runs: epochs, compilation, precision and distribution."""

    epochs: int = 10
    steps_per_epoch: int | None = None
    validation_steps: int | None = None
    steps_per_execution: int = 1
    jit_compile: str = "auto"  # auto | true | false
    run_eagerly: bool = False
    verbose: int = 1  # 0 silent, 1 progress bar, 2 one line per epoch
    precision: Precision = Precision.float32
    strategy: Strategy = Strategy.default
    deterministic: bool = False  # TF op determinism: reproducible, slower
    save_model: bool = True


@dataclass
class TensorBoardConfig:
    enabled: bool = True
    update_freq: str = "epoch"  # epoch | batch
    histogram_freq: int = 0
    write_graph: bool = False
    profile_batch: int = 0


@dataclass
class EarlyStoppingConfig:
    enabled: bool = False
    monitor: str = "val_loss"
    mode: str = "auto"
    patience: int = 3
    min_delta: float = 0.0
    restore_best_weights: bool = True


@dataclass
class ModelCheckpointConfig:
    enabled: bool = False
    monitor: str = "val_loss"
    mode: str = "auto"
    save_best_only: bool = True
    filename: str = "checkpoints/best.weights.h5"


@dataclass
class ReduceLROnPlateauConfig:
    enabled: bool = False
    monitor: str = "val_loss"
    mode: str = "auto"
    factor: float = 0.5
    patience: int = 2
    min_lr: float = 1e-6


@dataclass
class CSVLoggerConfig:
    enabled: bool = True
    filename: str = "history.csv"


@dataclass
class CallbacksConfig:
    """Keras callbacks built from config; files they write land in the run directory."""

    tensorboard: TensorBoardConfig = field(default_factory=TensorBoardConfig)
    early_stopping: EarlyStoppingConfig = field(default_factory=EarlyStoppingConfig)
    model_checkpoint: ModelCheckpointConfig = field(default_factory=ModelCheckpointConfig)
    reduce_lr_on_plateau: ReduceLROnPlateauConfig = field(default_factory=ReduceLROnPlateauConfig)
    csv_logger: CSVLoggerConfig = field(default_factory=CSVLoggerConfig)


@dataclass
class TapefitConfig:
    """The whole run: `data` and `model` take the schema of the option their group picked."""

    seed: int = 0
    experiment_name: str = "classifier"
    objective: str | None = None  # a metrics.json key the CLI returns to Hydra sweepers
    data: Any = MISSING
    model: Any = MISSING
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    callbacks: CallbacksConfig = field(default_factory=CallbacksConfig)


SCHEMAS: dict[tuple[str | None, str], Any] = {
    (None, "tapefit_schema"): TapefitConfig,
    ("data", "images_schema"): ImageDataConfig,
    ("data", "synthetic_pairs_schema"): SyntheticPairsConfig,
    ("data", "pair_files_schema"): PairFilesConfig,
    ("model", "classifier_schema"): ClassifierConfig,
    ("model", "siamese_schema"): SiameseConfig,
    ("optimizer", "optimizer_schema"): OptimizerConfig,
    ("trainer", "trainer_schema"): TrainerConfig,
    ("callbacks", "callbacks_schema"): CallbacksConfig,
}


def register_schemas() -> None:
    """Store every schema in Hydra's ConfigStore (idempotent)."""
    store = ConfigStore.instance()
    for (group, name), node in SCHEMAS.items():
        store.store(group=group, name=name, node=node)


def config_dir(package: Path | None = None) -> Path:
    """`conf/` beside the package in a checkout, or the copy packaged as `tapefit/conf`."""
    package = package or Path(__file__).resolve().parent
    for candidate in (package.parent / "conf", package / "conf"):
        if (candidate / "config.yaml").is_file():
            return candidate
    raise TapefitError(f"tapefit's conf/ with config.yaml was not found next to {package}")


def compose(overrides: list[str] | None = None, config_name: str = "config") -> Any:
    """Compose the config tree as the CLI would, for tests, notebooks and the tuner."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    register_schemas()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        return hydra_compose(config_name=config_name, overrides=list(overrides or []))
