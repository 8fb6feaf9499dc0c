"""Siamese runs through the CLI that tests of several modules read, each trained once a
session (`built_once_per_session`); tests/conftest.py serves them as the session fixtures
`siamese_run` and `binary_contrastive_run`."""

from tests.helpers import SMALL_SIAMESE, built_once_per_session, run_cli


@built_once_per_session
def build_siamese_run(tmp_path_factory):
    """`experiment=siamese` (the LSTM) through the CLI: its run directory.
    tests/models/test_siamese.py reads its files, curves and TensorBoard logs;
    tests/runner/test_finished_runs.py evaluates it and predicts with it (into `eval/` and their own
    folders)."""
    run_dir = tmp_path_factory.mktemp("reuse") / "siamese"
    done = run_cli(
        "experiment=siamese",
        "trainer.epochs=2",
        "trainer.verbose=0",
        "data.train_size=600",
        "data.test_size=200",
        f"hydra.run.dir={run_dir}",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return run_dir


@built_once_per_session
def build_binary_contrastive_run(tmp_path_factory):
    """`experiment=siamese` on binary labels with the contrastive loss through the CLI: (its
    run directory, the finished process). tests/models/test_siamese.py reads its AUC figures,
    tests/runner/test_bad_input.py the objective it reports."""
    # The bag-of-embeddings encoder for 2 epochs (the loss and its threshold metrics are the
    # subject, not the LSTM): test AUC 0.93, best accuracy 0.86, 0.85 at the validation
    # threshold, measured; the mean-pooled LSTM for 4 epochs reached an AUC of 0.82.
    run_dir = tmp_path_factory.mktemp("binary") / "run"
    done = run_cli(
        "experiment=siamese",
        "model.loss.name=contrastive",
        "data.label_type=binary",
        "data.train_size=1500",
        "data.val_size=200",
        "data.test_size=300",
        "trainer.epochs=2",
        "trainer.verbose=0",
        *SMALL_SIAMESE,
        f"hydra.run.dir={run_dir}",
    )
    return run_dir, done
