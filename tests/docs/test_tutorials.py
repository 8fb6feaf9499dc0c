"""The tutorials' scripts (docs/tutorials/scripts) run, write their pictures, and show what
their pages say they show: the tape's gradients and gradcheck, a hand-written loop and
`TapeModel.fit` ending bit for bit equal, a Siamese model that ranks pairs. The pages include
the scripts with pymdownx snippets, so page, script and this test cannot drift apart."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import keras
import pytest

import tapefit
from tests.helpers import REPO

pytestmark = pytest.mark.slow  # the MNIST and Siamese scripts train

TUTORIALS = REPO / "docs" / "tutorials"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def script(name: str) -> ModuleType:
    """Import `docs/tutorials/scripts/<name>.py` by path, as a module of its own."""
    path = TUTORIALS / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"tutorial_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and pickling look the module up
    spec.loader.exec_module(module)
    return module


def assert_png(path: Path) -> None:
    """`path` is a PNG image of a reasonable size with a plausible width and height."""
    data = Path(path).read_bytes()
    assert data[:8] == PNG_SIGNATURE, path
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert 300 <= width <= 1200 and 200 <= height <= 800, (width, height)
    assert 5_000 < len(data) < 300_000, len(data)


def test_every_snippet_in_the_pages_names_an_existing_file_and_section():
    pages = sorted(TUTORIALS.glob("*.md"))
    assert {p.name for p in pages} >= {
        "index.md",
        "tape-basics.md",
        "mnist.md",
        "siamese.md",
        "your-own-model.md",
    }
    seen = 0
    for page in pages:
        for path, section in re.findall(r'--8<-- "([^":]+)(?::(\w+))?"', page.read_text()):
            source = REPO / path
            assert source.is_file(), f"{page.name}: {path}"
            if section:
                text = source.read_text()
                assert f"# --8<-- [start:{section}]" in text, f"{page.name}: {path}:{section}"
                assert f"# --8<-- [end:{section}]" in text, f"{page.name}: {path}:{section}"
            seen += 1
    assert seen >= 10


def test_every_image_the_pages_embed_is_committed():
    for page in sorted(TUTORIALS.glob("*.md")):
        for image in re.findall(r"!\[[^\]]*\]\((img/[^)\s]+)\)", page.read_text()):
            assert_png(TUTORIALS / image)


def test_tape_basics(tmp_path):
    results = script("tape_basics").main(tmp_path)
    assert results["first"] == 6.0
    assert results["persistent"] == {"dz_dx": 108.0, "dy_dx": 6.0}
    assert results["watch"] == {"watched": 6.0, "unwatched": None}
    assert results["intermediate"] == 18.0
    assert results["control_flow"] == {"steps=6": 12.0, "steps=4": 4.0}
    assert results["numpy"] == {"tensorflow": 6.0, "numpy": None}
    # float64 central differences agree with the tape to far below float32's 1e-7
    assert max(results["gradcheck"].values()) < 1e-8
    models = results["gradcheck_model"]
    correct, detached = models["correct"], models["detached"]
    assert correct["error"] < 1e-5 and correct["unreached"] == {}
    assert detached["error"] < 1e-5
    assert detached["unreached"] == {"tiny/hidden/kernel": "none", "tiny/hidden/bias": "none"}
    assert_png(results["png"])


@pytest.mark.tf_defaults  # compared with Keras: TensorFlow as users run it
def test_mnist_hand_written_loop_and_fit_end_bit_for_bit_equal(tmp_path):
    results = script("mnist_tape_vs_fit").main(tmp_path)
    for kind in ("mlp", "cnn"):
        run = results[kind]
        # same initial weights, same batches in the same order, same ops: equal, not close
        assert run["weight_difference"] == 0.0, kind
        assert run["same_history"] and run["loop"] == run["fit"], kind
        history = run["fit"]
        assert len(history["loss"]) == 6
        assert history["loss"][-1] < history["loss"][0] / 5, kind  # measured: /13 mlp, /12 cnn
        assert history["val_accuracy"][-1] > 0.9, kind  # measured 0.949 mlp, 0.977 cnn
        assert run["test"]["accuracy"] > 0.9, kind  # measured 0.953 mlp, 0.958 cnn
        assert list((tmp_path / "logs" / kind / "validation").glob("events.out.tfevents.*"))
        best = keras.models.load_model(tmp_path / f"{kind}_best.keras")  # the test's model
        assert isinstance(best, tapefit.TapeModel)
        assert best.count_params() == run["params"], kind
    assert results["cnn"]["test"]["accuracy"] > results["mlp"]["test"]["accuracy"] - 0.02
    assert_png(results["png"])


def test_siamese_trains_ranks_pairs_and_reloads(tmp_path):
    results = script("siamese_pairs").main(tmp_path)
    metrics = results["metrics"]
    assert metrics["epochs_run"] == 3 and metrics["samples"]["train"] == 3000
    assert metrics["test_spearman"] > 0.6  # measured 0.750 (0.69 on validation)
    # the reloaded model.keras scores the test pairs as the run did
    assert results["spearman"] == pytest.approx(metrics["test_spearman"], abs=1e-3)
    scores = results["new_pairs"]
    assert scores["the same sentence"] > 0.99
    assert scores["every word a synonym, reordered"] > scores["another topic"] + 0.3
    assert scores["4 of 8 concepts shared, synonyms"] > scores["another topic"]
    run_dir = results["run_dir"]
    for name in ("model.keras", "similarity.png", "metrics.json", "history.json"):
        assert (run_dir / name).is_file(), name
    assert_png(results["png"])
