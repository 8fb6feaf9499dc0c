"""Pictures of a trained model's quality that go into its run directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tapefit.files import write_png

# inches around the one panel: the y label and ticks, the x label, the title
MARGIN_INCHES = {"left": 0.75, "right": 0.2, "bottom": 0.6, "top": 0.4}


def plot_similarity(scores: Any, gold: Any, label_type: str, path: Path) -> Path:
    """Predicted cosine against the gold label on the test split (a box per class if binary).

    A `matplotlib.figure.Figure` outside pyplot (no backend chosen for the caller, nothing left
    open), with fixed margins.

    Examples:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "similarity.png"
        >>> plot_similarity([0.9, 0.1, 0.8], [1, 0, 1], "binary", path).read_bytes()[:4]
        b'\\x89PNG'
    """
    from matplotlib.figure import Figure

    scores, gold = np.asarray(scores).ravel(), np.asarray(gold).ravel()
    width, height = 5.5, 4.2
    figure = Figure(figsize=(width, height))
    axis = figure.subplots()
    figure.subplots_adjust(
        left=MARGIN_INCHES["left"] / width,
        right=1 - MARGIN_INCHES["right"] / width,
        bottom=MARGIN_INCHES["bottom"] / height,
        top=1 - MARGIN_INCHES["top"] / height,
    )
    if label_type == "binary":
        axis.boxplot([scores[gold == 0], scores[gold == 1]])
        axis.set_xticks([1, 2], ["different (0)", "same (1)"])
    else:
        axis.scatter(gold, scores, s=8, alpha=0.5)
        axis.set_xlabel("gold label")
    axis.set_ylabel("predicted cosine")
    axis.set_title(f"test split, {len(scores)} pairs", y=1.0)  # fixed: no layout pass
    axis.grid(alpha=0.3)
    return write_png(figure, path)
