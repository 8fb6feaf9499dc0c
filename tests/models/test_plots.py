"""The pictures a run writes leave the caller's matplotlib as it was: its backend, its figures."""

import numpy as np
import pytest


@pytest.fixture
def svg_backend():
    """The caller (a notebook, say) on a backend of its own, one pyplot figure open."""
    import matplotlib

    before = matplotlib.get_backend()
    matplotlib.use("svg")
    import matplotlib.pyplot as plt

    mine = plt.figure()
    yield plt, mine
    plt.close("all")
    matplotlib.use(before)


def test_similarity_and_lr_find_plots_keep_the_callers_backend_and_figures(svg_backend, tmp_path):
    from tapefit.models.plots import plot_similarity
    from tapefit.sweeps.lr_find import plot

    plt, mine = svg_backend
    plot_similarity([0.9, 0.2, 0.7, 0.1], [1, 0, 1, 0], "binary", tmp_path / "box.png")
    plot_similarity([0.9, 0.2, 0.7], [4.5, 0.5, 3.0], "score", tmp_path / "scatter.png")
    rates = np.geomspace(1e-5, 1.0, 20)
    plot(rates, list(np.linspace(2.0, 0.5, 20)), 1e-3, tmp_path / "lr_find.png")
    import matplotlib

    assert matplotlib.get_backend() == "svg"
    assert plt.get_fignums() == [mine.number]
    for name in ("box.png", "scatter.png", "lr_find.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG", name
