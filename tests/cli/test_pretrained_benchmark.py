"""experiments/pretrained_benchmark.py runs end to end in its quick mode: the plain keras-hub
tape loop and tapefit (padded per batch and to a fixed length), each in a process of its own,
on a tiny Hugging Face checkpoint the test writes. The peer (sentence-transformers) needs an
environment of its own and is left out, with the note the script prints for it."""

import json

import pytest

pytest.importorskip("keras_hub")
pytest.importorskip("safetensors")

from tests import processes
from tests.helpers import load_experiment as load
from tests.text.pretrained_checkpoints import write_hf_folder

MEASURED = ("step_s", "step_min_s", "pairs_per_s", "encode_per_s", "first_step_s", "peak_rss_mb")


@pytest.mark.slow
def test_quick_run_measures_every_variant_but_the_peer(tmp_path, capsys, monkeypatch):
    write_hf_folder(tmp_path / "tiny", num_layers=1)
    benchmark = load("pretrained_benchmark")
    # each variant still in a process of its own, forked from the tests' warm interpreter
    monkeypatch.setattr(benchmark, "subprocess", processes)
    report = benchmark.main(
        [
            "--checkpoint",
            str(tmp_path / "tiny"),
            "--quick",
            "--sequence-length",
            "32",  # the tiny checkpoint has 64 positions
            "--encode-size",  # one batch of --quick's 64, each of its four passes
            "64",
            "--json",
            str(tmp_path / "bench.json"),
        ]
    )
    out = capsys.readouterr().out
    results = report["variants"]
    assert list(results) == ["plain", "tapefit", "tapefit_fixed"]
    for result in results.values():
        assert result["steps"] == 3
        assert all(result[key] > 0 for key in MEASURED), result
        assert result["step_min_s"] <= result["step_s"] <= result["step_max_s"]
        assert result["pairs_per_s"] == pytest.approx(16 / result["step_s"])
    # the plain loop and tapefit pack the same batches to the same lengths; fixed: 2 x 16 x 32
    assert results["tapefit"]["positions_per_step"] == results["plain"]["positions_per_step"]
    assert results["tapefit"]["positions_per_step"] < 2 * 16 * 32
    assert results["tapefit_fixed"]["positions_per_step"] == 2 * 16 * 32
    assert report["tapefit_over_plain"] == pytest.approx(
        results["tapefit"]["step_s"] / results["plain"]["step_s"]
    )
    assert "tapefit_over_peer" not in report
    for label in (
        "keras-hub + tf.function tape loop",
        "tapefit, padded per batch",
        "tapefit, padded to 32",
        "tapefit/plain step time",
        "tapefit padded to 32 / per batch",
        "peer: not run (no --peer-python given)",
    ):
        assert label in out
    saved = json.loads((tmp_path / "bench.json").read_text())
    assert saved["variants"]["tapefit"]["step_s"] == results["tapefit"]["step_s"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--checkpoint", "no/such/folder"], "--checkpoint no/such/folder: no config.json there"),
        (["--checkpoint", ".", "--steps", "0"], "--steps: '0' is not a whole number >= 1"),
    ],
)
def test_bad_options_stop_in_one_line(argv, message, capsys):
    benchmark = load("pretrained_benchmark")
    with pytest.raises(SystemExit) as stopped:
        benchmark.parse_args(argv)
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]
