"""Config composition: every experiment composes, and bad model and data values fail at once."""

import pytest
from omegaconf import OmegaConf

from tapefit.config.schemas import config_dir

EXPERIMENTS = sorted(p.stem for p in (config_dir() / "experiment").glob("*.yaml"))


def test_default_is_the_classifier_on_digits(compose):
    cfg = compose()
    assert cfg.experiment_name == "classifier"
    assert cfg.data._target_ == "tapefit.data.loaders.digits"
    assert cfg.model._target_ == "tapefit.models.Classifier"
    assert cfg.model.architecture == "cnn"
    assert OmegaConf.is_missing(cfg, "data") is False


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_composes_and_resolves(compose, experiment):
    cfg = compose([f"experiment={experiment}"])
    assert cfg.experiment_name == experiment
    OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)


def test_mnist_experiment_is_the_tutorial_setting(compose):
    cfg = compose(["experiment=mnist"])
    assert (cfg.data._target_, cfg.data.batch_size, cfg.trainer.epochs) == (
        "tapefit.data.loaders.mnist",
        64,
        1,
    )
    assert (cfg.optimizer._target_, cfg.optimizer.learning_rate) == ("keras.optimizers.Adam", 1e-3)
    assert cfg.model.architecture == "cnn"


@pytest.mark.parametrize(
    ("experiment", "steps_per_execution"),
    [("classifier", 8), ("mnist", 8), ("siamese", 1), ("sts", 1)],
)
def test_shipped_defaults_are_the_measured_ones(compose, experiment, steps_per_execution):
    # docs/explanation/benchmark.md: the figures behind each of these choices.
    cfg = compose([f"experiment={experiment}"])
    assert cfg.trainer.steps_per_execution == steps_per_execution
    # jit_compile null is Keras' "auto": no XLA on CPUs, where it measured 2.3x slower.
    assert (cfg.trainer.jit_compile, cfg.trainer.precision) == (None, "float32")
    assert cfg.data.cache is True and cfg.callbacks.tensorboard.enabled is True


def test_sts_preset_is_the_recipe_its_page_measured(compose):
    # docs/explanation/sts-preset.md: ranked first on STS-B validation among its candidates
    cfg = compose(["experiment=sts", "data.train_path=train.tsv"])
    encoder = cfg.model.encoder
    assert cfg.data._target_ == "tapefit.data.loaders.pair_files"
    assert cfg.data.tokenizer == "wordpiece"  # round 3: 0.7627 against 0.7251 with words
    assert (encoder.rnn, encoder.bidirectional, encoder.pooling, encoder.units) == (
        "lstm",
        True,
        "max",
        128,
    )
    assert (cfg.model.loss.name, cfg.trainer.epochs, cfg.optimizer.learning_rate) == (
        "cosine_mse",
        8,
        1e-3,
    )


@pytest.mark.parametrize("form", ["", "+", "++"])
def test_a_misspelt_key_from_python_is_tapefits_line(compose, form, tmp_path):
    """The ordinary form is refused while composing; `+`/`++` add the key, which the run's
    check refuses before anything trains (as the command line does)."""
    from tapefit import TapefitError, run

    with pytest.raises(TapefitError) as refused:
        run(compose([f"{form}trainer.epocs=3"]), tmp_path / "run")
    line = str(refused.value)
    assert "trainer.epocs" in line and "did you mean trainer.epochs?" in line, line
    assert "\n" not in line and "+trainer.epocs" not in line  # not Hydra's advice to append


def test_wheel_ships_every_config_file_and_module(tmp_path):
    """The wheel hatchling builds holds conf/ as tapefit/conf and every module of tapefit."""
    import zipfile

    from hatchling.builders.wheel import WheelBuilder

    root = config_dir().parent
    wheel = next(iter(WheelBuilder(str(root)).build(directory=str(tmp_path))))
    names = set(zipfile.ZipFile(wheel).namelist())
    configs = {
        f"tapefit/conf/{p.relative_to(config_dir()).as_posix()}"
        for p in config_dir().rglob("*.yaml")
    }
    modules = {p.relative_to(root).as_posix() for p in (root / "tapefit").rglob("*.py")}
    assert configs and configs <= names
    assert modules <= names
    assert not [n for n in names if "__pycache__" in n or n.startswith(("tests/", "docs/"))]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["model.architecture=resnet"], "model.architecture='resnet' must be one of cnn, mlp"),
        (["data.batch_size=1.5"], "data.batch_size=1.5 must be an integer"),
        (["model.dropout=high"], "model.dropout='high' must be a number"),
        (["model.hidden_units=[64,wide]"], "hidden_units=.* must be a list of integers"),
        (["model.dropout=1.5"], r"model.dropout=1.5 must lie in \[0, 1\)"),
        (["model.conv_blocks=[[8,wide]]"], "conv_blocks=.* must be a list of lists of integers"),
        (["model.conv_blocks=[[8,1,2]]"], r"model.conv_blocks=\[\[8, 1, 2\]\] must list \[filt"),
        (["+model.dropuot=0.1"], "did you mean model.dropout"),
        (["+data.batch_sise=8"], "did you mean data.batch_size"),
        (["experiment=siamese", "model.encoder.rnn=attention"], "must be one of lstm, gru, trans"),
        (["experiment=siamese", "model.encoder.pooling=median"], "must be one of last, mean, max"),
        (["experiment=siamese", "+model.encoder.unit=3"], "did you mean model.encoder.units"),
        (["experiment=siamese", "model.loss.name=quadruplet"], "model.loss.name='quadruplet' must"),
        (["experiment=siamese", "data.label_type=ordinal"], "must be one of graded, binary"),
        (["experiment=siamese", "data=pairs_file", "data.quoting=some"], "data.quoting='some'"),
        (["experiment=siamese", "data=pairs_file", "data.format=xlsx"], "data.format='xlsx'"),
        (["experiment=siamese", "data=pairs_file", "data.on_bad_line=warn"], "on_bad_line"),
        (["data=image_folder"], "data: image_folder needs train_path: set data.train_path"),
    ],
)
def test_bad_model_and_data_values_fail_before_anything_is_built(compose, overrides, message):
    """`model` and `data` are `_target_` nodes: their keys are checked against the signature
    and type hints of what they name (and its `check_options`), in one line."""
    from tapefit import TapefitError
    from tapefit.runner.validation import check_config

    with pytest.raises(TapefitError, match=message) as caught:
        check_config(compose(overrides))
    assert "\n" not in str(caught.value)
