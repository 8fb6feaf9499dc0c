"""What a search leaves (`tapefit.sweeps.search_results`): the command re-running its best trial."""


def test_a_searched_key_also_set_on_the_command_line_is_named_once_in_the_rerun_command():
    from tapefit.sweeps.search_results import best_command
    from tapefit.sweeps.trials import pinned

    overrides = ["model.architecture=mlp", "trainer.epochs=1", "tune=random"]
    space = {"model.architecture": None, "optimizer.learning_rate": None}
    assert pinned(overrides, space) == ["model.architecture"]  # warned about at the start
    command = best_command(overrides, {"model.architecture": "cnn"})
    assert command == "python -m tapefit trainer.epochs=1 model.architecture=cnn"
