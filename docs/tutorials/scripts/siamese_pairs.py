"""The Siamese Embedding + LSTM cosine-similarity model, trained from Python on generated
sentence pairs, evaluated with Spearman, and used to score new pairs. The tutorial "Siamese
similarity" runs this file step by step.

    python docs/tutorials/scripts/siamese_pairs.py /tmp/siamese-tutorial

It trains with `tapefit.compose` and `tapefit.run` (what `python -m tapefit experiment=siamese`
does), reloads `model.keras`, recomputes the test Spearman, scores pairs it writes itself, and
saves `siamese_similarity.png` (predicted cosine against the gold label) into the output folder.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import tapefit  # first: pins Keras to the TensorFlow backend

# isort: split
import keras
import numpy as np
from omegaconf import OmegaConf

from tapefit.data.synthetic_pairs import PairGenerator
from tapefit.evaluation.metrics import spearman
from tapefit.runner.train import build_data

# --8<-- [start:overrides]
OVERRIDES = [
    "experiment=siamese",  # conf/experiment/siamese.yaml: model=siamese, data=pairs_synthetic
    "trainer.epochs=3",
    "data.train_size=3000",  # fewer generated pairs than the 8,000 default: a quicker tutorial
    "trainer.verbose=0",  # no progress bar (1: a bar per epoch, 2: one line per epoch)
]
# --8<-- [end:overrides]


# --8<-- [start:train]
def train(run_dir: Path) -> dict[str, Any]:
    """Compose the config as the command line would and run it in `run_dir`.

    Args:
        run_dir: The run directory (`model.keras`, `metrics.json`, `similarity.png`, ...).

    Returns:
        The run's final metrics (`test_spearman`, `objective_value`, ...).
    """
    cfg = tapefit.compose(OVERRIDES)
    print(OmegaConf.to_yaml(cfg.model))  # the model node: _target_, encoder and loss
    metrics = tapefit.run(cfg, run_dir)
    print(
        f"val_spearman (best epoch) {metrics['objective_value']:.4f}, "
        f"test_spearman {metrics['test_spearman']:.4f}, test_loss {metrics['test_loss']:.4f}"
    )
    return metrics


# --8<-- [end:train]


# --8<-- [start:evaluate]
def evaluate(run_dir: Path) -> tuple[tapefit.SiameseModel, np.ndarray, np.ndarray, float]:
    """Reload the saved model and recompute the test split's Spearman correlation.

    Args:
        run_dir: The run directory `train` wrote.

    Returns:
        The model, its cosine for every test pair, the gold labels and the Spearman
        correlation between them.
    """
    model = keras.models.load_model(run_dir / "model.keras")  # a SiameseModel again
    data = build_data(tapefit.compose(OVERRIDES))  # the run's loader and seed: the run's pairs
    texts_a, texts_b, gold = data.splits["test"]
    scores = model.similarity(texts_a, texts_b)  # raw strings in: the vectoriser is inside
    correlation = spearman(scores, gold)
    print(f"reloaded model: test Spearman {correlation:.4f} over {len(gold)} pairs")
    return model, scores, gold, correlation


# --8<-- [end:evaluate]


# --8<-- [start:new_pairs]
def new_pairs() -> list[tuple[str, str, str, float]]:
    """Pairs the model never saw, written from the generator's lexicon, with their labels.

    The generator's lexicon has 8 topics of 25 concepts (0-24 are topic 0), and two
    synonyms for each concept. Every pair starts from the same sentence: concepts 0-5 of
    topic 0, each written with its first synonym.

    Returns:
        `(what, text_a, text_b, gold)`, gold = 5 x the share of their concepts the two texts
        have in common (the generator's own label).
    """
    words = PairGenerator(seed=0).surface  # words[concept] = its two synonyms (seed 0: the run's)
    first = [0, 1, 2, 3, 4, 5]
    others = {  # concepts of the second text, and which synonym writes them
        "the same sentence": ([0, 1, 2, 3, 4, 5], 0),
        "every word a synonym, reordered": ([3, 1, 0, 5, 4, 2], 1),
        "4 of 8 concepts shared, synonyms": ([0, 1, 2, 3, 6, 7], 1),
        "the same topic, no concept shared": ([10, 11, 12, 13, 14, 15], 0),
        "another topic": ([100, 101, 102, 103, 104, 105], 0),
    }
    text_a = " ".join(words[c, 0] for c in first)
    pairs = []
    for what, (concepts, synonym) in others.items():
        overlap = len(set(first) & set(concepts)) / len(set(first) | set(concepts))
        text_b = " ".join(words[c, synonym] for c in concepts)
        pairs.append((what, text_a, text_b, 5.0 * overlap))
    return pairs


def score_new_pairs(model: tapefit.SiameseModel) -> dict[str, float]:
    """Print and return the model's cosine for each pair of `new_pairs()`, by description."""
    pairs = new_pairs()
    scores = model.similarity([p[1] for p in pairs], [p[2] for p in pairs])
    print(f"first text: {pairs[0][1]}")
    for (what, _, text_b, gold), score in zip(pairs, scores, strict=True):
        print(f"cosine {score:+.3f}  gold {gold:.1f}  {what:<34} {text_b}")
    return {what: float(score) for (what, *_), score in zip(pairs, scores, strict=True)}


# --8<-- [end:new_pairs]


def plot_similarity(
    scores: np.ndarray, gold: np.ndarray, new_scores: dict[str, float], path: Path
) -> Path:
    """Predicted cosine against the gold label: the test split, and the new pairs as stars.

    Args:
        scores: The model's cosine for each test pair.
        gold: The test pairs' gold labels (0-5).
        new_scores: The model's cosine for each of `new_pairs()`.
        path: The PNG to write.

    Returns:
        `path`.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(5.5, 4))
    axis.scatter(gold, scores, s=8, alpha=0.4, label=f"test pairs ({len(gold)})")
    new_gold, new_cosines = [pair[3] for pair in new_pairs()], list(new_scores.values())
    axis.scatter(new_gold, new_cosines, marker="*", s=120, color="C3", label="new pairs")
    axis.set_xlabel("gold label: 5 x share of concepts in common")
    axis.set_ylabel("predicted cosine")
    axis.set_title(f"Spearman {spearman(scores, gold):.3f}", fontsize=10)
    axis.grid(alpha=0.3)
    axis.legend(loc="upper left", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path


def main(out_dir: Path) -> dict[str, Any]:
    """Train, evaluate, score new pairs, and write `siamese_similarity.png`.

    Args:
        out_dir: Folder for the run directory (`run/`) and the PNG (created if needed).

    Returns:
        The run's metrics, the reloaded model's test Spearman, the new pairs' scores and the
        PNG's path.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    metrics = train(out_dir / "run")
    model, scores, gold, correlation = evaluate(out_dir / "run")
    new_scores = score_new_pairs(model)
    return {
        "metrics": metrics,
        "spearman": correlation,
        "new_pairs": new_scores,
        "run_dir": out_dir / "run",
        "png": plot_similarity(scores, gold, new_scores, out_dir / "siamese_similarity.png"),
    }


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "."))
