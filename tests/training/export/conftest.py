"""Runs with `trainer.export=true` for the export tests, each trained once a session."""

import pytest

import tapefit
from tests.helpers import shared_once


@pytest.fixture(scope="session")
def export_run(tmp_path_factory):
    """`export_run(name, *overrides)`: (run directory, metrics) of a tiny in-process run with
    `trainer.export=true`, one epoch; a name is trained once a session, and its export was
    renamed into place (no `.export*` left beside it)."""

    def trained(name: str, *overrides: str):
        def train(run_dir):
            cfg = tapefit.compose(
                ["trainer.epochs=1", "trainer.verbose=0", "trainer.export=true", *overrides]
            )
            metrics = tapefit.run(cfg, run_dir)
            assert metrics["export"] == "export"
            assert not [p.name for p in run_dir.iterdir() if p.name.startswith(".export")]
            return run_dir, metrics

        return shared_once(tmp_path_factory, f"export_run-{name}", train)

    return trained


@pytest.fixture(scope="session")
def siamese_export(export_run):
    """The Siamese model's export (a SavedModel serving `serve` and `encode`): test_export.py
    serves it in a process without tapefit, test_export_formats.py reads its verify.json."""
    return export_run(
        "siamese",
        "experiment=siamese",
        "data.train_size=64",
        "data.val_size=32",
        "data.test_size=32",
    )
