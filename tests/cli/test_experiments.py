"""The user-facing scripts in experiments/ keep working."""

import json
import sys

import pytest

from tests import processes
from tests.helpers import REPO, SMALL_SIAMESE, run_in, scalar_tags
from tests.helpers import load_experiment as load


def test_sweep_benchmark_measures_each_trials_overhead_against_ordinary_runs(tmp_path, capsys):
    sweep_benchmark = load("sweep_benchmark")
    report = sweep_benchmark.main(["--trials", "2", "--json", str(tmp_path / "s.json")])
    assert report["trials"] == 2
    for key in ("trial_overhead", "run_overhead", "trial_fit"):
        assert 0 < report[key]["min_s"] <= report[key]["median_s"] <= report[key]["max_s"]
    ratio = report["trial_overhead"]["median_s"] / report["run_overhead"]["median_s"]
    assert report["overhead_ratio"] == pytest.approx(ratio)
    out = capsys.readouterr().out
    assert f"{ratio:.2f}x the overhead of an ordinary run" in out
    growth = report["rss_growth_mb_per_trial"]
    assert f"+{growth:.2f} MB RSS (median)" in out
    assert "rss_growth_mb_per_trial_registry_kept" in report
    assert json.loads((tmp_path / "s.json").read_text())["trials"] == 2


def test_startup_benchmark_counts_one_trace_pre_built_and_two_without(capsys, monkeypatch):
    startup = load("startup_benchmark")
    # the MLP on 64 digits: the path and the counts, not the sizes
    mlp = ["model.architecture=mlp", "data.train_limit=64", "trainer.steps_per_execution=1"]
    monkeypatch.setattr(startup, "EXPERIMENTS", {"classifier (digits MLP)": mlp})
    startup.main(["--repeats", "1"])
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines()[2:]]
    cells = {row[1].strip(): (float(row[2]), row[3].strip()) for row in rows}
    assert cells["traced on first step"][1] == "2"  # the step built the optimizer: traced again
    assert cells["pre-built"][1] == "1"
    ratio = cells["pre-built"][0] / cells["traced on first step"][0]
    assert cells["ratio pre-built / traced on first step"][0] == pytest.approx(ratio, abs=0.01)


def test_composition_benchmark_counts_one_composition_against_hydras_two(tmp_path):
    # a command refused by tapefit's checks right after its composition: the path, not a run
    # (a process of its own: the entry point sets up Hydra's logging)
    script = REPO / "experiments" / "composition_benchmark.py"
    done = run_in(tmp_path, [sys.executable, str(script), "--repeats", "1", "trainer.epochs=0"])
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    rows = {
        row[1].strip(): (float(row[2]), int(row[3]))
        for row in (line.split("|") for line in lines if line.startswith("| composed"))
    }
    assert rows["composed once"][1] == 1 and rows["composed twice (Hydra alone)"][1] == 2
    ratio = rows["composed once"][0] / rows["composed twice (Hydra alone)"][0]
    assert float(lines[-1].removeprefix("ratio (once / twice): ")) == pytest.approx(ratio, abs=0.01)
    assert done.stderr.count("tapefit: error: trainer.epochs") == 4  # a warm-up and a round


def test_custom_step_example_learns_and_logs(tmp_path):
    custom_step = load("custom_step")
    history = custom_step.main(str(tmp_path))
    assert history.history["loss"][-1] < 0.5 * history.history["loss"][0]
    assert history.history["val_mae"][-1] < 0.4
    assert len(scalar_tags(tmp_path / "train")["epoch_loss"]) == 20


def test_benchmark_smoke_run_prints_and_saves_every_variant(tmp_path, capsys, monkeypatch):
    benchmark = load("benchmark")
    # two of the encoders (the table's LSTM baseline and the cheap bag): the path, not the sizes
    encoders = {name: benchmark.ENCODERS[name] for name in ("lstm", "bag")}
    monkeypatch.setattr(benchmark, "ENCODERS", encoders)
    # and the CNN of the recipe and full-epoch parts cut to one block (tests.helpers.SMALL_CNN):
    # its BatchNorm and Dropout still there, about half the tracing
    cnn = benchmark.cnn_layers
    monkeypatch.setattr(
        benchmark,
        "cnn_layers",
        lambda *args, **kwargs: cnn(*args, **kwargs, conv_blocks=[[8, 1]], dense_units=32),
    )
    # The smallest sizes the options take, but for 3 windows in rounds of 2 (an uneven last
    # round) and 2 epoch repeats (a median of more than one). Most of the time is tracing: the
    # recipes' four CNNs, the two full-epoch CNNs, the encoders and the MLP's four variants.
    report = benchmark.main(
        [
            "--models",  # the CNN runs in the recipe and full-epoch parts, the Siamese model
            "mlp",  # in the encoders' part: every workload, every variant, once
            "--steps",
            "1",
            "--windows",
            "3",
            "--windows-per-round",
            "2",
            "--eager-divisor",  # eager windows: max(2, steps // divisor) steps
            "2",
            "--full-epoch",
            "--epoch-samples",  # one batch
            "4",
            "--epoch-repeats",
            "2",
            "--recipes",
            "--updates",  # a warm-up of updates // 4 = 1, then 4 timed per repeat
            "4",
            "--encoders",
            "--retrieval-size",
            "20",
            "--batch-size",  # a sixteenth of the benchmark's: every workload's step, cheaper
            "4",
            "--json",
            str(tmp_path / "b.json"),
        ]
    )
    out = capsys.readouterr().out
    assert set(report["recipes"]) == {"constant", "cosine", "ema", "cosine+ema"}
    assert all(r["windows"] == 3 and r["median_ms"] > 0 for r in report["recipes"].values())
    assert "target: every recipe / constant <= 1.02, paired (worst " in out
    assert set(report["encoders"]) == {"lstm", "bag"}
    for encoder in report["encoders"].values():
        assert encoder["pairs_per_s"] == pytest.approx(4 / (encoder["median_ms"] / 1e3))
        assert encoder["encode_s"] > 0
    assert report["retrieval_s"] > 0 and "retrieval 20 x 20 (recall@1/5/10" in out
    ema, constant = report["recipes"]["ema"], report["recipes"]["constant"]
    assert len(ema["round_median_ms"]) == 2  # rounds of 2 windows then 1
    rounds = zip(ema["round_median_ms"], constant["round_median_ms"], strict=True)
    ratios = sorted(a / b for a, b in rounds)
    assert benchmark.paired_ratio(report["recipes"], "ema") == pytest.approx(sum(ratios) / 2)
    assert set(report["mlp"]) == set(benchmark.VARIANTS)
    for result in report["mlp"].values():
        assert 0 < result["min_ms"] <= result["median_ms"] <= result["max_ms"]
        assert result["first_step_s"] > 0 and result["peak_rss_mb"] > 100
        assert result["windows"] == 3  # rounds of 2 then 1: the count asked for
    assert "\nmlp\n" in out and "siamese" not in report
    assert out.count("targets: tapefit/builtin") == 1
    assert set(report["recipe_updates_ms"]) == set(report["recipes"])
    assert all(ms > 0 for ms in report["recipe_updates_ms"].values())
    for epoch in report["full_epoch"].values():
        assert 0 < epoch["min_s"] <= epoch["median_s"] <= epoch["max_s"]
    assert set(report["full_epoch"]) == {"tapefit", "builtin"}
    assert "\n4-sample CNN epoch, seconds, median of 2" in out
    saved = json.loads((tmp_path / "b.json").read_text())
    assert saved["mlp"]["tapefit"]["median_ms"] == report["mlp"]["tapefit"]["median_ms"]


def test_defaults_script_compares_candidates_with_the_default(capsys):
    defaults = load("defaults")
    results = defaults.main(
        [
            "--experiment",
            "classifier",
            "--repeats",
            "1",
            "--candidates",
            "steps_per_execution=8",
            "--",
            "trainer.epochs=2",
            "model.architecture=mlp",
            "callbacks.tensorboard.enabled=false",
        ]
    )
    assert list(results) == ["default", "steps_per_execution=8"]
    # steps_per_execution changes how often Python is entered, never the arithmetic.
    assert results["default"]["test_accuracy"] == results["steps_per_execution=8"]["test_accuracy"]
    assert all(r["train_s"] > 0 for r in results.values())
    assert "steps_per_execution=8" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--windows", "0"], "--windows: '0' is not a whole number >= 1"),
        (["--steps", "ten"], "--steps: 'ten' is not a whole number >= 1"),
        (["--json", "no/such/folder/b.json"], "folder no/such/folder does not exist"),
    ],
)
def test_benchmark_rejects_bad_options_in_one_line(argv, message, capsys):
    benchmark = load("benchmark")
    with pytest.raises(SystemExit) as stopped:
        benchmark.parse_args(argv)
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]


def test_wgan_gp_script_runs_from_the_command_line(tmp_path):
    import sys

    from tests.helpers import REPO

    result = processes.run(
        [sys.executable, str(REPO / "experiments" / "wgan_gp.py"), str(tmp_path), "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "critic_loss" in result.stdout and "generated radius: mean" in result.stdout
    assert (tmp_path / "wgan_gp.keras").is_file()


@pytest.mark.slow
def test_contrastive_benchmark_measures_memory_retrieval_and_the_mining_loop(
    tmp_path, capsys, monkeypatch
):
    benchmark = load("contrastive_benchmark")
    # each memory cell still in a process of its own, forked from the tests' warm interpreter
    monkeypatch.setattr(benchmark, "subprocess", processes)
    # --steps 2: the first step (tracing, timed apart) and the one the median is of; the
    # Transformer cut to one narrow block over 16 tokens (its two blocks of width 128 over 64
    # tokens traced for 4 s, 12 s cached: most of the test), still run through the cached step
    tiny = ["--chunk", "4", "--steps", "2", "--budget-mb", "100000"]
    narrow = ["model.encoder.num_layers=1", "model.encoder.embedding_dim=16"]
    narrow += ["model.encoder.units=32", "model.encoder.num_heads=2", "data.sequence_length=16"]
    report = benchmark.main(["memory", "--batches", "8", *tiny, "--set", *narrow])
    assert [(c["batch"], c["chunk"]) for c in report["cells"]] == [(8, None), (8, 4)]
    for cell in report["cells"]:
        assert 0 < cell["added_mb"] < cell["peak_rss_mb"] <= cell["ru_maxrss_mb"] + 1
        assert cell["median_step_s"] > 0 and cell["first_step_s"] > 0
    assert report["largest_batch"] == {"ordinary": 8, "cached": 8}
    assert "largest batch within 100000 MB peak RSS: ordinary 8, cached (chunk 4) 8" in (
        capsys.readouterr().out
    )
    sizes = ["--sizes", "80", "24", "24", "--epochs", "1", "--seeds", "1"]
    # the five runs of retrieval and mining with the bag-of-embeddings encoder
    # (tests.helpers.SMALL_SIAMESE): the same pair files, loss, mining and metrics, no LSTM
    sizes += ["--set", *SMALL_SIAMESE]
    report = benchmark.main(["retrieval", "--batches", "4", "8", "--chunk", "4", *sizes])
    assert list(report["medians"]) == ["4", "8"]
    for row in report["medians"].values():
        assert 0 < row["test_mrr_at_10"] <= 1 and 0 < row["test_ndcg_at_10"] <= 1
    report = benchmark.main(["mining", "--batch", "8", *sizes, "--json", str(tmp_path / "m.json")])
    assert list(report["medians"]) == ["first", "continued", "continued_on_mined"]
    out = capsys.readouterr().out
    assert "continued_on_mined | " in out and "mined: " in out
    saved = json.loads((tmp_path / "m.json").read_text())
    assert saved["medians"] == report["medians"]


@pytest.mark.slow
def test_image_benchmark_times_both_phases_against_the_keras_guide(tmp_path, capsys, monkeypatch):
    pytest.importorskip("keras_hub")
    benchmark = load("image_benchmark")
    # each variant still in a process of its own, forked from the tests' warm interpreter
    monkeypatch.setattr(benchmark, "subprocess", processes)
    # the random ResNet cut to one stack of one basic block (two of two: twice the layers to
    # trace in each variant's process); the phases, the recipe and the table stay
    report = benchmark.main(["--quick", "--blocks", "1", "--json", str(tmp_path / "image.json")])
    assert set(report["medians"]) == {"keras", "tapefit"}
    for row in report["medians"].values():
        assert row["frozen_step_s"] > 0 and row["tuned_step_s"] > 0
        assert 0 <= row["frozen_val_accuracy"] <= 1 and 0 <= row["tuned_val_accuracy"] <= 1
    (tapefit_round,), (keras_round,) = report["rounds"]["tapefit"], report["rounds"]["keras"]
    ratio = tapefit_round["frozen_step_s"] / keras_round["frozen_step_s"]
    assert report["frozen_ratio"] == pytest.approx(ratio)
    assert f"tapefit/keras step time, frozen {ratio:.3f} (goal <= 1.05)" in capsys.readouterr().out
    assert json.loads((tmp_path / "image.json").read_text())["medians"] == report["medians"]


def test_gpu_benchmark_smoke_run_says_it_measured_no_gpu(tmp_path, capsys):
    """Without a GPU the script still runs every kind of cell and says its figures are CPU
    figures; cuDNN and XLA columns are what Keras did."""
    gpu_benchmark = load("gpu_benchmark")
    arguments = ["--smoke", "--models", "lstm", "--precisions", "mixed_bfloat16", "--xla", "off"]
    report = gpu_benchmark.main([*arguments, "--json", str(tmp_path / "gpu.json")])
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("no GPU: TensorFlow sees none")
    assert report["gpu"] is False and report["smoke"] is True
    rows = report["rows"]
    assert [row["cudnn"] for row in rows] == ["yes", "no"]  # recurrent dropout 0, then 0.1
    assert not any(row["xla_used"] for row in rows)
    for row in rows:
        assert row["tapefit_ms"] > 0 and row["keras_ms"] > 0 and row["tapefit_over_keras"] > 0
        assert (
            f"lstm | mixed_bfloat16 | off | off | {row['cudnn']} | {row['tapefit_ms']:.2f}" in out
        )
    assert json.loads((tmp_path / "gpu.json").read_text())["rows"] == rows


def test_recurrent_dropout_measurement_runs_the_presets_variants(tmp_path, capsys):
    recurrent_dropout = load("recurrent_dropout")
    report = recurrent_dropout.main(
        ["--quick", "--presets", "siamese", "--variants", "no dropout", "input dropout 0.1"]
    )
    assert [row["variant"] for row in report["rows"]] == ["no dropout", "input dropout 0.1"]
    for row in report["rows"]:
        assert -1 <= row["val_spearman"] <= 1 and -1 <= row["test_spearman"] <= 1
        assert row["s_per_epoch"] > 0 and len(row["runs"]) == 1
    assert "siamese | input dropout 0.1 | " in capsys.readouterr().out


@pytest.mark.slow
def test_image_table_benchmark_measures_files_parquet_and_a_mapped_dataset(
    tmp_path, capsys, monkeypatch
):
    pytest.importorskip("datasets")
    benchmark = load("image_table_benchmark")
    monkeypatch.setattr(benchmark, "subprocess", processes)  # forked from the warm interpreter
    medians = benchmark.main(
        ["--images", "30", "--size", "16", "--repeats", "1", "--json", str(tmp_path / "t.json")]
    )
    assert set(medians) == set(benchmark.VARIANTS)
    for figures in medians.values():
        assert figures["images_per_s"] > 0 and figures["peak_rss_mb"] > figures["loading_rss_mb"]
    assert json.loads((tmp_path / "t.json").read_text())["medians"] == medians
    printed = capsys.readouterr().out
    assert "| dataset folder (memory-mapped) |" in printed and "vs files" in printed
