"""Pictures of a trained model's quality that go into its run directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tapefit.files import atomic_write


def plot_similarity(scores: Any, gold: Any, label_type: str, path: Path) -> Path:
    """Predicted cosine against the gold label on the test split (a box per class if binary)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scores, gold = np.asarray(scores).ravel(), np.asarray(gold).ravel()
    figure, axis = plt.subplots(figsize=(5.5, 4.2))
    if label_type == "binary":
        axis.boxplot([scores[gold == 0], scores[gold == 1]])
        axis.set_xticks([1, 2], ["different (0)", "same (1)"])
    else:
        axis.scatter(gold, scores, s=8, alpha=0.5)
        axis.set_xlabel("gold label")
    axis.set_ylabel("predicted cosine")
    axis.set_title(f"test split, {len(scores)} pairs")
    axis.grid(alpha=0.3)
    figure.tight_layout()
    atomic_write(path, lambda file: figure.savefig(file, format="png", dpi=110), mode="wb")
    plt.close(figure)
    return path
