"""`tune.space` as keras-tuner hyperparameters (`tapefit.sweeps.search_space`), applied."""

from tests.sweeps.searches import mlp_space


def test_conditional_entries_reach_only_the_trials_where_they_apply(compose):
    """keras-tuner's conditional scope: bn_momentum is set only in trials that pick the CNN."""
    from tapefit.sweeps.search_space import active_values, apply_values, declare
    from tapefit.sweeps.spec import SearchSpec

    cfg = mlp_space(
        compose(["tune=grid"]),
        **{
            "model.architecture": {"type": "choice", "values": ["mlp", "cnn"]},
            "model.bn_momentum": {
                "type": "choice",
                "values": [0.5],
                "when": {"model.architecture": ["cnn"]},
            },
        },
    )
    space = SearchSpec.of(cfg).tune.space
    hp = declare(space)
    for architecture, expected in (("mlp", 0.9), ("cnn", 0.5)):
        hp.values.update({"model.architecture": architecture, "model.bn_momentum": 0.5})
        values = active_values(hp, space)
        assert ("model.bn_momentum" in values) == (architecture == "cnn")
        trial = apply_values(cfg, values)
        assert trial.model.architecture == architecture and trial.model.bn_momentum == expected
