"""A user's subclass of a tapefit model, named by `model._target_` in the user's own `conf/`,
trains like the built-in with nothing else configured: the signature check follows the
arguments it passes on to the parent, and the model brings its own loss and metrics."""

import importlib
import json
import textwrap

import keras
import pytest

from tapefit.config.targets import accepted_arguments
from tapefit.models import Classifier
from tests.helpers import run_cli

MODELS = textwrap.dedent(
    '''
    import keras

    import tapefit
    from tapefit.models import Classifier


    class PenalisedClassifier(Classifier):
        """The digits classifier plus an L2 penalty on its output layer in the loss."""

        def __init__(self, *args, penalty=0.01, **kwargs):
            super().__init__(*args, **kwargs)
            self.penalty = penalty

        def forward(self, data, training):
            out = super().forward(data, training)
            l2 = keras.ops.mean(keras.ops.square(self.logits.kernel))
            return out._replace(loss=out.loss + self.penalty * l2)

        def get_config(self):
            return {**super().get_config(), "penalty": self.penalty}


    class Lossless(tapefit.TapeModel):
        """Built in __init__, no loss in forward, none compiled."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.flat = keras.layers.Flatten()
            self.out = keras.layers.Dense(10)
            self.build((None, 8, 8, 1))

        def build(self, input_shape):
            self.out.build((None, 64))
            self.built = True

        def call(self, x, training=False):
            return self.out(self.flat(x))
    '''
)


CONF = ["--config-dir", "conf"]  # the project's own configs, as its user runs them


@pytest.fixture(scope="session")
def subclass_project(tmp_path_factory):
    root = tmp_path_factory.mktemp("subclass_project")
    (root / "my_models.py").write_text(MODELS)
    (root / "conf" / "model").mkdir(parents=True)
    (root / "conf" / "model" / "my_classifier.yaml").write_text(
        "# A subclass of tapefit's classifier, one extra loss term.\n"
        "_target_: my_models.PenalisedClassifier\n"
        "image_shape: [8, 8, 1]  # the digits: 8x8 grey images\n"
        "penalty: 0.05  # weight of the L2 term on the output layer\n"
    )
    (root / "conf" / "model" / "lossless.yaml").write_text("_target_: my_models.Lossless\n")
    return root


def test_a_subclass_of_the_classifier_trains_with_nothing_else_configured(
    subclass_project, tmp_path, monkeypatch
):
    overrides = ["model=my_classifier", "trainer.epochs=2", f"hydra.run.dir={tmp_path}"]
    result = run_cli(*CONF, *overrides, cwd=subclass_project)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["test_accuracy"] > 0.8  # its own loss and accuracy metric, from the model
    monkeypatch.syspath_prepend(str(subclass_project))
    users = importlib.import_module("my_models")
    reloaded = keras.models.load_model(
        tmp_path / "model.keras", custom_objects={"PenalisedClassifier": users.PenalisedClassifier}
    )
    assert type(reloaded).__name__ == "PenalisedClassifier" and reloaded.penalty == 0.05


def test_a_model_with_no_loss_is_refused_before_training(subclass_project, tmp_path):
    result = run_cli(*CONF, "model=lossless", f"hydra.run.dir={tmp_path}", cwd=subclass_project)
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("tapefit: error:")]
    assert errors == [
        "tapefit: error: model._target_=my_models.Lossless has no loss: set compile.loss "
        "(e.g. compile.loss=mse), return the loss from forward(), add it with add_loss(), or "
        "write train_step"
    ]
    assert "Epoch 1" not in result.stdout and not (tmp_path / "history.json").exists()


def test_the_signature_check_follows_arguments_passed_on_to_the_parent():
    class Penalised(Classifier):
        def __init__(self, *args, penalty=0.01, **kwargs):
            super().__init__(*args, **kwargs)

    class Closed(Classifier):
        def __init__(self, penalty=0.01):
            super().__init__(image_shape=(8, 8, 1))

    names, takes_any = accepted_arguments(Penalised)
    assert {"penalty", "image_shape", "architecture", "name"} <= set(names) and not takes_any
    assert "functional_network" not in names  # TapeModel's own
    assert accepted_arguments(Closed) == (["penalty"], False)
