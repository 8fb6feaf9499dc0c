"""`python -m tapefit.doctor`: the readiness report of a composed run, from a user's project
through the real entry point, nothing trained and no run directory written; bad input is one
line. The how-to page's commands run as the page shows them, and print the lines it quotes."""

import json
import re
import shlex

from tests.helpers import REPO, run_cli_batch

PAGE = (REPO / "docs" / "how-to" / "gpu-readiness.md").read_text()
# each doctor command of the page, with the ```text block that follows it (what it prints)
SHOWN = re.findall(
    r"```bash\n(python -m tapefit\.doctor [^\n]*)\n```\n\n(?:[^`]*\n)?```text\n(.*?)```", PAGE, re.S
)
SIAMESE = ["experiment=siamese", "data.train_size=256", "data.val_size=64", "data.test_size=64"]


def test_the_doctor_reports_from_a_users_project(project, tmp_path):
    assert len(SHOWN) == 2  # the page's two commands, each with its output
    before = sorted(p.name for p in project.iterdir())
    report = tmp_path / "report.json"
    page = [("tapefit.doctor", shlex.split(command)[3:]) for command, _ in SHOWN]
    results = run_cli_batch(
        [
            *page,
            (
                "tapefit.doctor",
                [*SIAMESE, "model.encoder.recurrent_dropout=0.1", "--json", str(report)],
            ),
            ("tapefit.doctor", ["--config-dir", "conf", "experiment=waves"]),
            ("tapefit.doctor", ["trainer.epoch=3"]),
        ],
        cwd=project,
    )
    *shown, written_run, own, misspelt = results
    for (command, output), result in zip(SHOWN, shown, strict=True):
        assert result.returncode == 0, result.stderr[-2000:]
        printed = result.stdout.splitlines()
        for line in output.strip().splitlines():
            assert line in printed, f"{command}: the page quotes {line!r}"
    assert written_run.returncode == 0 and own.returncode == 0, own.stderr[-2000:]
    written = json.loads(report.read_text())
    assert written["recurrent"][0]["blockers"] == ["recurrent_dropout=0.1"]
    assert written["recurrent"][0]["blocks_xla_on_gpu"] is True
    assert written["xla"]["here"] is False and "without a GPU" in written["xla"]["here_why"]
    assert own.stdout.startswith("devices: ") and "steps_per_execution: " in own.stdout
    assert misspelt.returncode == 2
    assert misspelt.stderr.strip().splitlines() == [
        line for line in misspelt.stderr.splitlines() if line.startswith("tapefit: error:")
    ]
    assert "trainer.epoch is not a config key (did you mean trainer.epochs?)" in misspelt.stderr
    assert sorted(p.name for p in project.iterdir()) == before  # no run directory
