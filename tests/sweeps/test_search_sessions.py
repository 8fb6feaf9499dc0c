"""What a person reads of a search: every trial an HParams session read back from TensorBoard,
a failed trial's error, and shipped search entries that change the model (`tapefit.sweeps`:
search_space, records, tuning)."""

import json

import keras
import pytest
import tensorflow as tf

from tests.helpers import built_once_per_session


def layer_configs(model: keras.Model) -> str:
    """Every layer's config inside `model`: what the model is made of, minus its own config
    (which echoes every constructor argument, used or not)."""

    def unnamed(node):  # Keras numbers layer names per process: dense_3, dense_4, ...
        if isinstance(node, dict):
            return {k: unnamed(v) for k, v in node.items() if k != "name"}
        return [unnamed(v) for v in node] if isinstance(node, list) else node

    layers = [keras.saving.serialize_keras_object(layer) for layer in model._flatten_layers(False)]
    return json.dumps(unnamed(layers), sort_keys=True, default=str)


@pytest.mark.parametrize("experiment", ["classifier", "siamese"])
def test_every_shipped_search_entry_changes_the_model_wherever_it_is_active(compose, experiment):
    """A searched model key must change the model in every trial it is active in: the MLP has
    no dropout layer, so `model.dropout` is searched only `when` the architecture is `cnn`."""
    from tapefit.runner.model_from_config import build_model_from_config
    from tapefit.runner.train import build_data
    from tapefit.sweeps.search_space import active_values, apply_values, declare
    from tapefit.sweeps.spec import SearchSpec

    # few pairs: a small vocabulary, which every model build carries through Hydra's
    # instantiate (60 builds: 11.7 s with 256 training pairs, 8.1 s with 32, measured)
    small = ["data.train_size=32", "data.val_size=16", "data.test_size=16"]
    cfg = compose(
        [f"experiment={experiment}", "tune=random", *(small if experiment == "siamese" else [])]
    )
    space = cfg.tune.space
    data = build_data(cfg)
    hp = declare(SearchSpec.of(cfg).tune.space)
    parents = [name for name, entry in space.items() if entry.type in ("choice", "bool")]
    checked = 0
    for name, entry in space.items():
        if not name.startswith("model."):
            continue
        extremes = {
            "float": (entry.min, entry.max),
            "int": (entry.min, entry.max),
            "choice": (entry["values"][0], entry["values"][-1]) if entry["values"] else (),
            "bool": (False, True),
        }[entry.type.value]
        for parent in [p for p in parents if p != name] or [None]:
            # every value of every choice the entry could meet
            choices = [None] if parent is None else hp_choices(space[parent])
            for choice in choices:
                setting = {} if parent is None else {parent: choice}
                hp.values.update(setting, **{name: extremes[0]})
                if name not in active_values(hp, space):
                    continue
                low, high = (apply_values(cfg, {**setting, name: value}) for value in extremes)
                assert layer_configs(build_model_from_config(low.model, data)) != layer_configs(
                    build_model_from_config(high.model, data)
                ), f"{name} has no effect when {parent}={choice}"
                checked += 1
    assert checked >= len([name for name in space if name.startswith("model.")])


def hp_choices(entry) -> list:
    return list(entry["values"]) if entry.type.value == "choice" else [False, True]


@pytest.fixture(scope="session")
@built_once_per_session
def finished_search(tmp_path_factory):
    """A grid search over a conditional space (bn_momentum only for the CNN), two executions
    a trial, the second of its two trials failing (a learning rate that diverges)."""
    from tapefit.config.schemas import SpaceEntry
    from tapefit.runner.composition import compose
    from tapefit.sweeps.tuning import search

    search_dir = tmp_path_factory.mktemp("search")
    cfg = compose(
        [
            "tune=grid",
            "tune.executions_per_trial=2",
            "tune.max_consecutive_failures=4",
            "trainer.epochs=1",
            "trainer.verbose=0",
            "data.train_limit=128",
        ]
    )
    cfg.tune.space = {
        "model.architecture": SpaceEntry(type="choice", values=["mlp", "cnn"]),
        "model.bn_momentum": SpaceEntry(
            type="choice", values=[0.5, 0.8], when={"model.architecture": ["cnn"]}
        ),
        "data.batch_size": SpaceEntry(type="int", min=16, max=64, step=32),
        "optimizer.learning_rate": SpaceEntry(type="choice", values=[0.003, 1e9]),
    }
    # keras-tuner's grid changes the last entry fastest, from the first values: the MLP with
    # batches of 16 at 3e-3 (completed, two runs), then at 1e9 (failed in its first run); the
    # CNN never trains. Three runs: the four trials (six runs) of before held no other kind of
    # session.
    cfg.tune.max_trials = 2
    search(cfg, search_dir)
    return search_dir


def test_every_trial_of_a_search_is_an_hparams_session_read_back_from_tensorboard(
    finished_search,
):
    from tests.helpers import TensorBoardServer

    records = {
        trial.name: json.loads((trial / "execution-0" / "trial.json").read_text())
        for trial in (finished_search / "trials").iterdir()
    }
    with TensorBoardServer(finished_search) as server:
        experiment, groups = server.hparams_sessions(expected=len(records))
    # typed columns with their domains; the inactive bn_momentum's placeholder (the config's
    # 0.9) is in its domain
    infos = {info["name"]: info for info in experiment["hparamInfos"]}
    assert sorted(infos["model.architecture"]["domainDiscrete"]) == ["cnn", "mlp"]
    assert infos["model.architecture"]["type"] == "DATA_TYPE_STRING"
    assert sorted(infos["model.bn_momentum"]["domainDiscrete"]) == [0.5, 0.8, 0.9]
    assert infos["data.batch_size"]["domainInterval"] == {"minValue": 16, "maxValue": 64}
    assert infos["data.batch_size"]["type"] == "DATA_TYPE_FLOAT64"
    # every trial, failed ones and MLP ones (no bn_momentum) included, is one session
    # with a value for every column, so parallel coordinates draw it
    assert len(groups) == len(records) == 2
    assert any("model.bn_momentum" not in r["values"] for r in records.values())  # inactive
    assert {r["status"] for r in records.values()} == {"completed", "failed"}
    sessions = {group["sessions"][0]["name"]: group for group in groups}
    assert set(sessions) == {f"trials/{trial}" for trial in records}
    for trial, record in records.items():
        group = sessions[f"trials/{trial}"]
        assert set(group["hparams"]) == set(infos)
        values = record["values"]
        assert group["hparams"]["model.architecture"] == values["model.architecture"]
        expected_momentum = values.get("model.bn_momentum", 0.9)
        assert group["hparams"]["model.bn_momentum"] == pytest.approx(expected_momentum)
        status = group["sessions"][0]["status"]
        assert status == ("STATUS_SUCCESS" if record["status"] == "completed" else "STATUS_FAILURE")
        served = {
            (m["name"].get("group", ""), m["name"]["tag"]): m["value"]
            for m in group["metricValues"]
        }
        if record["status"] != "completed":
            assert ("", "trial/val_accuracy") not in served
            continue
        # the trial's objective is the mean over its executions
        second = json.loads(
            (finished_search / "trials" / trial / "execution-1" / "trial.json").read_text()
        )
        mean = (record["objective_value"] + second["objective_value"]) / 2
        assert served["", "trial/val_accuracy"] == pytest.approx(mean, rel=1e-6)
        # and its curves are its own run's (execution 0): the last epoch's values
        history = json.loads(
            (finished_search / "trials" / trial / "execution-0" / "history.json").read_text()
        )
        group_path = "execution-0/tensorboard/validation"
        assert served[group_path, "epoch_accuracy"] == pytest.approx(history["val_accuracy"][-1])
    # best/ is a copy without TensorBoard files: no trial's curves are shown twice
    assert not list((finished_search / "best").rglob("events.out.tfevents.*"))


def test_a_failed_trial_session_carries_its_error(finished_search):
    failed = [
        trial
        for trial in (finished_search / "trials").iterdir()
        if json.loads((trial / "execution-0" / "trial.json").read_text())["status"] == "failed"
    ]
    assert failed
    for trial in failed:
        texts = [
            value.tensor.string_val[0].decode()
            for events in trial.glob("events.out.tfevents.*")
            for event in tf.compat.v1.train.summary_iterator(str(events))
            for value in event.summary.value
            if value.tag.startswith("error")
        ]
        assert texts and "NaN/inf" in texts[0]
