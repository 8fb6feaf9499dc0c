"""Run-directory artefacts a person reads after a run: curves.png's panels, lines and marks."""

import numpy as np


def test_curves_draw_every_metric_with_its_validation_twin_from_epoch_0_and_mark_the_best():
    from tapefit.training.run_files import curves_figure

    history = {  # a Siamese run's History: val_spearman has no training counterpart
        "loss": [0.9, 0.7, 0.6, 0.55],
        "val_loss": [0.8, 0.7, 0.72, 0.75],
        "val_spearman": [0.2, 0.5, 0.6, 0.58],
        "val_pearson": [0.1, 0.4, 0.5, 0.5],
        "learning_rate": [0.001] * 4,  # never changed: not worth a panel
    }
    figure = curves_figure(history, "val_spearman", best_epoch=3, tested_epoch=3)
    panels = {axis.get_title(): axis for axis in figure.axes if axis.get_visible()}
    assert set(panels) == {"loss", "spearman", "pearson"}
    lines = {
        (title, line.get_label()): line for title, axis in panels.items() for line in axis.lines
    }
    np.testing.assert_array_equal(lines["loss", "train"].get_xdata(), [0, 1, 2, 3])
    np.testing.assert_array_equal(lines["loss", "validation"].get_ydata(), history["val_loss"])
    np.testing.assert_array_equal(
        lines["spearman", "validation"].get_ydata(), [0.2, 0.5, 0.6, 0.58]
    )
    star = lines["spearman", "best val_spearman (objective_epoch 3)"]
    assert (list(star.get_xdata()), list(star.get_ydata())) == ([2], [0.6])
    for title in panels:  # the tested epoch marked on every panel, integer ticks
        tested = lines[title, "tested weights (tested_epoch 3)"]
        assert list(tested.get_xdata()) == [2, 2]
    for axis in panels.values():
        assert all(float(tick).is_integer() for tick in axis.get_xticks())


def test_a_changing_learning_rate_gets_its_panel():
    from tapefit.training.run_files import curve_panels

    panels = curve_panels({"loss": [1.0, 0.5], "learning_rate": [0.1, 0.05]})
    assert panels == [("loss", ["loss"]), ("learning_rate", ["learning_rate"])]
