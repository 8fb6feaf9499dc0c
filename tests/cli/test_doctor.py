"""`python -m tapefit.doctor`: the readiness report of a composed run, from a user's project
through the real entry point, nothing trained and no run directory written; bad input is one
line."""

import json

from tests.cli.test_user_project import project  # noqa: F401 (the tutorial's project)
from tests.helpers import run_cli_batch

SIAMESE = ["experiment=siamese", "data.train_size=256", "data.val_size=64", "data.test_size=64"]


def test_the_doctor_reports_from_a_users_project(project, tmp_path):  # noqa: F811
    before = sorted(p.name for p in project.iterdir())
    report = tmp_path / "report.json"
    with_dropout, without, float16, own, misspelt = run_cli_batch(
        [
            (
                "tapefit.doctor",
                [*SIAMESE, "model.encoder.recurrent_dropout=0.1", "--json", str(report)],
            ),
            ("tapefit.doctor", [*SIAMESE, "model.encoder.recurrent_dropout=0"]),
            ("tapefit.doctor", ["experiment=classifier", "trainer.precision=mixed_float16"]),
            ("tapefit.doctor", ["--config-dir", "conf", "experiment=waves"]),
            ("tapefit.doctor", ["trainer.epoch=3"]),
        ],
        cwd=project,
    )
    for result in (with_dropout, without, float16, own):
        assert result.returncode == 0, result.stderr[-2000:]
    assert (
        "cuDNN on a GPU: no (recurrent_dropout=0.1); XLA: blocked on a GPU" in with_dropout.stdout
    )
    assert "(LSTM): cuDNN on a GPU: yes" in without.stdout
    assert "tokenized inside the model to" in without.stdout
    written = json.loads(report.read_text())
    assert written["recurrent"][0]["blockers"] == ["recurrent_dropout=0.1"]
    assert written["xla"]["here"] is False and "without a GPU" in written["xla"]["here_why"]
    lines = float16.stdout.splitlines()
    assert "dtype policy: mixed_float16 (compute float16, variables float32)" in lines
    assert "loss scale: on (dynamic LossScaleOptimizer: optimizer)" in lines
    assert own.stdout.startswith("devices: ") and "steps_per_execution: " in own.stdout
    assert misspelt.returncode == 2
    assert misspelt.stderr.strip().splitlines() == [
        line for line in misspelt.stderr.splitlines() if line.startswith("tapefit: error:")
    ]
    assert "trainer.epoch is not a config key (did you mean trainer.epochs?)" in misspelt.stderr
    assert sorted(p.name for p in project.iterdir()) == before  # no run directory
