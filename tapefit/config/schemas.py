"""The schemas of tapefit's own settings: root, optimizer, trainer, callbacks, tune.

Each of these group options in `conf/` extends a schema (`defaults: [<name>_schema]`) and
holds only what differs from it, so a misspelt key (`trainer.epocs=3`), a wrong type
(`trainer.epochs=three`) or an unknown choice (`trainer.precision=float8`) fails at compose
time with Hydra's own message. `model` and `data` have no schema here: they are `_target_`
nodes, checked against the signature and type hints of what they name
(`tapefit.config.targets`, `tapefit.config.typecheck`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from omegaconf import MISSING

from tapefit.errors import TapefitError
from tapefit.step.step_guards import OnMissingGradients, OnNonFinite


class Precision(str, Enum):
    """Keras dtype policies tapefit supports."""

    float32 = "float32"
    mixed_float16 = "mixed_float16"
    mixed_bfloat16 = "mixed_bfloat16"


class Strategy(str, Enum):
    """`tf.distribute` strategies selectable from config."""

    auto = "auto"  # mirrored over every GPU when there are several, else default
    default = "default"
    one_device = "one_device"
    mirrored = "mirrored"
    multi_worker = "multi_worker"


class ShardPolicy(str, Enum):
    """How multi-worker training splits the data (tf.data's AutoShardPolicy)."""

    auto = "auto"  # by file where the source reads files, else by element (tapefit: data)
    data = "data"  # every worker reads everything and keeps its share of each global batch
    file = "file"  # each worker reads its own input files
    off = "off"  # no sharding: every worker sees the whole dataset


class ObjectiveMode(str, Enum):
    """Which epoch's value a run reports for its objective."""

    best = "best"
    last = "last"


class MonitorMode(str, Enum):
    """Whether a monitored metric should go down or up; `auto` knows Keras' and tapefit's
    metrics by name and refuses any other."""

    auto = "auto"
    min = "min"
    max = "max"


class TestWeights(str, Enum):
    """Which weights the test split is evaluated with and `model.keras` holds."""

    best = "best"  # the epoch the objective selects (objective_mode=best), as Lightning's ckpt
    last = "last"  # the last epoch trained


class UpdateFreq(str, Enum):
    """When the TensorBoard callback writes the training scalars."""

    epoch = "epoch"
    batch = "batch"


class ExportFormat(str, Enum):
    """The formats `trainer.export=true` writes (`trainer.export_formats`)."""

    saved_model = "saved_model"  # TensorFlow SavedModel, export/ itself (tf.saved_model.load)
    onnx = "onnx"  # export/onnx/<endpoint>.onnx, for onnxruntime
    litert = "litert"  # export/litert/<endpoint>.tflite, for the LiteRT (TFLite) interpreter
    openvino = "openvino"  # export/openvino/<endpoint>.xml + .bin, OpenVINO IR


class DebugMode(str, Enum):
    """What a `debug=NAME` preset (conf/debug/) makes of the run."""

    none = "none"  # an ordinary run
    fast_dev_run = "fast_dev_run"  # `debug.batches` batches of every split, nothing kept
    overfit = "overfit"  # a few fixed batches: can the model drive its training loss down?
    profile = "profile"  # TensorBoard's profiler over a few steps
    numerics = "numerics"  # TensorFlow's check-numerics names the op that first made NaN/inf


@dataclass
class DebugConfig:
    """Set by the `debug` presets (conf/debug/*.yaml), as lightning-hydra-template's."""

    mode: DebugMode = DebugMode.none  # set by debug=NAME
    batches: int = 1  # fast_dev_run/overfit: batches of each split, at least 1
    # overfit: the run passes when its last epoch's training loss is below this share of
    # its first epoch's, in (0, 1)
    overfit_ratio: float = 0.1


@dataclass
class TrainerConfig:
    """How `fit` runs: epochs, compilation, precision and distribution."""

    epochs: int = 10  # passes over the training data, at least 1
    # optimizer steps per epoch; null: the whole training split (required for an endless stream)
    steps_per_epoch: int | None = None
    validation_steps: int | None = None  # batches per validation; null: the whole split
    # Validate every N training steps instead of at epoch ends: History, callbacks, checkpoints
    # and sweeps then count validation intervals as epochs. null: at epoch ends.
    val_check_interval: int | None = None
    # steps run inside one tf.function call (callbacks see every Nth); fewer when it does not
    # divide steps_per_epoch, validation_steps or val_check_interval (the log says so)
    steps_per_execution: int = 1
    jit_compile: bool | None = None  # null: Keras' "auto" (XLA where supported, never on CPU)
    run_eagerly: bool = False  # run the step eagerly (Python debugging; much slower)
    verbose: int = 1  # 0 silent, 1 progress bar, 2 one line per epoch
    # Keras dtype policy: float32 | mixed_float16 (GPUs; loss scaling) | mixed_bfloat16
    precision: Precision = Precision.float32
    # tf.distribute: default | one_device | mirrored | multi_worker | auto (mirrored over GPUs)
    strategy: Strategy = Strategy.default
    # Devices for one_device/mirrored/auto, e.g. [gpu:0, gpu:1] (default: every GPU, else CPU).
    devices: list[str] = field(default_factory=list)
    shard_policy: ShardPolicy = ShardPolicy.auto  # multi_worker: how the data is split
    deterministic: bool = False  # TF op determinism: reproducible, slower
    save_model: bool = True  # write model.keras (checked to load again before training)
    # The test metrics and model.keras come from the objective's best epoch (best) or the last.
    test_weights: TestWeights = TestWeights.best
    # Also write export/: a SavedModel for serving (Keras' model.export), loadable without tapefit.
    export: bool = False
    # With export=true: the formats written, each loaded in its own runtime and compared with the
    # Keras model on the first test batch: saved_model | onnx | litert | openvino (all but
    # saved_model need `pip install "tapefit[export]"`).
    export_formats: list[ExportFormat] = field(default_factory=lambda: [ExportFormat.saved_model])
    # The largest |export - Keras| allowed on that batch, above which nothing is exported;
    # null: 1e-4, or 1e-2 for a mixed_float16/mixed_bfloat16 model (16-bit arithmetic).
    export_tolerance: float | None = None
    checkpoints: bool = True  # a checkpoint per epoch (last 2 kept) so resume=true can continue
    checkpoint_every_steps: int | None = None  # also mid-epoch, every N optimizer steps
    # SIGINT/SIGTERM/SIGUSR1 write a checkpoint of the steps done, then stop (exit 128+signal).
    checkpoint_on_signal: bool = True
    # In a SLURM batch job: SIGUSR1 (sbatch --signal=USR1@90) also requeues the job, and the
    # requeued start resumes by itself in the same run directory (outputs/NAME/slurm-JOBID).
    requeue: bool = True
    # The tape step's policies (TapeModel.compile): what a NaN/inf step does, what a variable
    # without a gradient does, which variables may have none (fnmatch patterns of their paths).
    on_nonfinite: OnNonFinite = OnNonFinite.stop
    on_missing_gradients: OnMissingGradients = OnMissingGradients.error  # error | warn
    allow_missing_gradients: list[str] = field(default_factory=list)  # e.g. ["*/embeddings"]
    # Average the gradients of k batches before each update (Keras optimizers' own support).
    gradient_accumulation_steps: int | None = None


@dataclass
class TensorBoardConfig:
    """Keras' TensorBoard callback, writing to `<run dir>/tensorboard`."""

    _target_: str = "tapefit.callbacks.tensorboard.StepTensorBoard"
    enabled: bool = True
    update_freq: UpdateFreq = UpdateFreq.epoch
    histogram_freq: int = 0
    write_graph: bool = False
    profile_batch: Any = 0  # a batch, or "start,stop" (batches from 1); 0: none


@dataclass
class EarlyStoppingConfig:
    """Keras' EarlyStopping."""

    _target_: str = "keras.callbacks.EarlyStopping"
    enabled: bool = False
    monitor: str = "val_loss"
    mode: MonitorMode = MonitorMode.auto
    patience: int = 3
    min_delta: float = 0.0
    restore_best_weights: bool = True


@dataclass
class ModelCheckpointConfig:
    """Keras' ModelCheckpoint; `filename` (its `filepath`) is relative to the run directory."""

    _target_: str = "keras.callbacks.ModelCheckpoint"
    enabled: bool = False
    monitor: str = "val_loss"
    mode: MonitorMode = MonitorMode.auto
    save_best_only: bool = True
    filename: str = "checkpoints/best.weights.h5"


@dataclass
class ReduceLROnPlateauConfig:
    """Keras' ReduceLROnPlateau."""

    _target_: str = "keras.callbacks.ReduceLROnPlateau"
    enabled: bool = False
    monitor: str = "val_loss"
    mode: MonitorMode = MonitorMode.auto
    factor: float = 0.5
    patience: int = 2
    min_delta: float = 1e-4  # an improvement smaller than this is no improvement
    min_lr: float = 1e-6


@dataclass
class CSVLoggerConfig:
    """Keras' CSVLogger; `filename` is relative to the run directory."""

    _target_: str = "keras.callbacks.CSVLogger"
    enabled: bool = True
    filename: str = "history.csv"


@dataclass
class StepTelemetryConfig:
    """tapefit's StepTelemetry: gradient norm, learning rate, loss scale and skipped steps every
    N optimizer steps, to TensorBoard (`tensorboard/train`, tags `step/...`) and `steps.csv`."""

    _target_: str = "tapefit.callbacks.telemetry.StepTelemetry"
    enabled: bool = True
    every_n_steps: int = 10
    histograms: bool = False  # also every gradient as a TensorBoard histogram


@dataclass
class CallbacksConfig:
    """Keras callbacks built from config; files they write land in the run directory."""

    tensorboard: TensorBoardConfig = field(default_factory=TensorBoardConfig)
    early_stopping: EarlyStoppingConfig = field(default_factory=EarlyStoppingConfig)
    model_checkpoint: ModelCheckpointConfig = field(default_factory=ModelCheckpointConfig)
    reduce_lr_on_plateau: ReduceLROnPlateauConfig = field(default_factory=ReduceLROnPlateauConfig)
    csv_logger: CSVLoggerConfig = field(default_factory=CSVLoggerConfig)
    step_telemetry: StepTelemetryConfig = field(default_factory=StepTelemetryConfig)
    # More Keras callbacks by name, each a node with `_target_` and its arguments, e.g.
    # `extra: {lr_log: {_target_: keras.callbacks.LearningRateScheduler, ...}}`.
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class CheckpointConfig:
    """Checkpoints worth keeping after the run (the resume checkpoints are `trainer.*`)."""

    # keep the K best epochs' models by the objective in <run dir>/checkpoints/, named with
    # their epoch and value (evaluate ckpt=best|<epoch>); 0: none
    save_top_k: int = 0
    save_last: bool = True  # with save_top_k: also checkpoints/last.keras (evaluate ckpt=last)


@dataclass
class CompileConfig:
    """What `Model.compile` gets besides the optimizer: `loss` replaces the model's own loss
    (its `compile_defaults()`; for a model without one, the only source of a compiled loss),
    `metrics` are added to the model's own. Each is a Keras name (`mse`, `mae`) or a node with
    `_target_`."""

    loss: Any = None  # replaces the model's default loss: a Keras name or a _target_ node
    metrics: list[Any] = field(default_factory=list)  # added to the model's default metrics


class TuneAlgorithm(str, Enum):
    """keras-tuner's oracles and Optuna's study, picked with `tune=<name>`; `none` trains one
    run."""

    none = "none"
    random = "random"
    bayesian = "bayesian"
    hyperband = "hyperband"
    grid = "grid"
    optuna = "optuna"  # Optuna's own study (tapefit/sweeps/optuna_search.py): TPE, pruning
    lr_find = "lr_find"  # the learning-rate range test (tapefit/sweeps/lr_find.py), no search


class ParamType(str, Enum):
    """The kinds of searched value, as keras-tuner declares them."""

    float = "float"
    int = "int"
    choice = "choice"
    bool = "bool"


class Sampling(str, Enum):
    """How keras-tuner samples a float or int range."""

    linear = "linear"
    log = "log"
    reverse_log = "reverse_log"


@dataclass
class SpaceEntry:
    """One searched config key (the entry's name, dotted: `optimizer.learning_rate`): a
    `float`/`int` range (`min`, `max`, optional `step`, `sampling`), a `choice` of `values`,
    or a `bool`. `when: {other.key: [values]}` searches it only while that entry takes one of
    those values (keras-tuner's conditional scopes)."""

    type: ParamType = ParamType.float  # float | int | choice | bool
    min: float | None = None  # float/int: the range's low end
    max: float | None = None  # float/int: the range's high end
    step: float | None = None  # float/int: the grid's spacing; null: continuous (float)
    sampling: Sampling = Sampling.linear  # float/int: linear | log | reverse_log
    values: list[Any] | None = None  # choice: the values to pick from
    when: dict[str, list[Any]] | None = None  # search only while other keys take these values


class Sampler(str, Enum):
    """`tune.sampler`: how Optuna draws a trial's values (tune=optuna)."""

    tpe = "tpe"  # random for the first num_initial_points trials (null: 10), then TPE
    random = "random"


class Pruner(str, Enum):
    """`tune.pruner`: which of Optuna's pruners stops unpromising trials after an epoch."""

    median = "median"
    hyperband = "hyperband"
    none = "none"


# The keys only tune=optuna reads, with their defaults: another search refuses them if changed.
OPTUNA_KEYS = {
    "storage": None,
    "study_name": None,
    "sampler": Sampler.tpe,
    "pruner": Pruner.median,
    "pruner_startup_trials": 5,
    "pruner_warmup_epochs": 0,
}


@dataclass
class LrFindConfig:
    """`tune=lr_find`: the exponential learning-rate range test (Smith, 2017)."""

    min_lr: float = 1.0e-7  # the first step's learning rate, > 0
    max_lr: float = 10.0  # the last step's learning rate, above min_lr
    steps: int = 100  # training steps, the learning rate growing exponentially, at least 5
    smoothing: float = 0.98  # the loss's exponential moving average factor, in [0, 1)
    diverge_factor: float = 4.0  # stop once the smoothed loss exceeds this times its best


@dataclass
class TuneConfig:
    """`tune=<algorithm>`: a keras-tuner search or an Optuna study whose trials are ordinary
    tapefit runs."""

    # none | random | bayesian | hyperband | grid (keras-tuner) | optuna: set by tune=NAME
    algorithm: TuneAlgorithm = TuneAlgorithm.none
    max_trials: int = 10  # trials to run (grid: at most the grid's size)
    executions_per_trial: int = 1  # averaged; execution k runs with seed + k
    overwrite: bool = False  # start the search afresh instead of continuing it
    seed: int | None = None  # the oracle's seed; null: the run's seed
    max_consecutive_failures: int = 3  # the search stops after this many failed trials in a row
    max_epochs: int | None = None  # hyperband: the longest trial's epochs; null: trainer.epochs
    factor: int = 3  # hyperband: the reduction factor between rounds
    hyperband_iterations: int = 1  # hyperband: how many times the whole bracket runs
    num_initial_points: int | None = None  # bayesian: random trials first; null: keras-tuner's
    # optuna: the study's database URL, which processes on several machines may share
    # (postgresql://...); null: sqlite:///<search dir>/optuna.db
    storage: str | None = None
    study_name: str | None = None  # optuna: the study in the storage; null: experiment_name
    sampler: Sampler = Sampler.tpe  # optuna: tpe (random first: num_initial_points) or random
    pruner: Pruner = Pruner.median  # optuna: median, hyperband (max_epochs, factor) or none
    pruner_startup_trials: int = 5  # optuna median: trials that finish before any is pruned
    pruner_warmup_epochs: int = 0  # optuna median: epochs every trial runs before pruning
    space: dict[str, SpaceEntry] = field(default_factory=dict)  # conf/search_space/*.yaml
    lr_find: LrFindConfig = field(default_factory=LrFindConfig)  # tune=lr_find's settings


@dataclass
class TapefitConfig:
    """The whole run: `data` and `model` take the schema of the option their group picked."""

    seed: int = 0  # seeds Keras, NumPy, Python and TensorFlow, the data splits and shuffles
    experiment_name: str = "classifier"  # names outputs/<experiment_name>/ (set by experiment=)
    # The metric sweeps optimise, returned by the CLI to Hydra sweepers. null: the model's
    # default validation metric (val_accuracy, val_spearman, val_auc); test_* only if named
    # explicitly.
    objective: str | None = None
    objective_mode: ObjectiveMode = ObjectiveMode.best  # best epoch's value, or the last one's
    objective_direction: MonitorMode = MonitorMode.auto  # max/min; auto: known metrics only
    resume: bool = False  # continue the stopped run in hydra.run.dir from its last checkpoint
    # Start from another run's weights (fine-tuning): a run directory, a .keras or a
    # .weights.h5 file; matched layer by layer; the optimizer starts afresh. null: none.
    init_from: str | None = None
    init_from_strict: bool = True  # refuse layers whose shapes differ; false: skip them
    force_resume: bool = False  # resume even if the config differs from the checkpointed one
    data: Any = MISSING
    model: Any = MISSING
    # An optimizer class by `_target_` and its arguments (conf/optimizer/*.yaml).
    optimizer: Any = MISSING
    # Several optimizers by the names a train_step uses (apply_tape_gradients(optimizer=NAME)),
    # each a node like `optimizer`; when given, they replace `optimizer`, and the first one
    # counts the steps.
    optimizers: dict[str, Any] = field(default_factory=dict)
    # The learning rate over the run by `_target_` (conf/scheduler/): the optimizer's
    # learning_rate is its peak. null: the optimizer's own learning_rate, unchanged.
    scheduler: Any = None
    compile: CompileConfig = field(default_factory=CompileConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    # An experiment tracker by `_target_` (logger=mlflow, conf/logger/); null: none.
    logger: Any = None
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    debug: DebugConfig = field(default_factory=DebugConfig)  # debug=fast_dev_run|overfit|...
    callbacks: CallbacksConfig = field(default_factory=CallbacksConfig)
    tune: TuneConfig = field(default_factory=TuneConfig)


SCHEMAS: dict[tuple[str | None, str], Any] = {
    (None, "tapefit_schema"): TapefitConfig,
    ("trainer", "trainer_schema"): TrainerConfig,
    ("callbacks", "callbacks_schema"): CallbacksConfig,
    ("tune", "tune_schema"): TuneConfig,
}


def config_dir(package: Path | None = None) -> Path:
    """`conf/` beside the package in a checkout, or the copy packaged as `tapefit/conf`."""
    package = package or Path(__file__).resolve().parent.parent
    for candidate in (package.parent / "conf", package / "conf"):
        if (candidate / "config.yaml").is_file():
            return candidate
    raise TapefitError(f"tapefit's conf/ with config.yaml was not found next to {package}")
