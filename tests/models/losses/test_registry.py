"""tapefit/models/losses/registry.py: every registered pair loss documented alike."""


def test_every_loss_says_its_formula_source_inputs_and_example():
    """One loss per file, each documented as sentence-transformers documents its losses: the
    formula, the paper it comes from (a year), what `y_true` and `y_pred` hold, an example."""
    import re

    from tapefit.models.losses.matryoshka import MatryoshkaLoss
    from tapefit.models.losses.registry import PAIR_LOSSES

    for loss in [*PAIR_LOSSES.values(), MatryoshkaLoss]:
        text = loss.__doc__ or ""
        module_text = f"{text}\n{__import__(loss.__module__, fromlist=['_']).__doc__}"
        assert re.search(r"(19|20)\d\d", module_text), f"{loss.__name__}: no paper"
        assert "Inputs:" in text and "`y_pred`" in text, f"{loss.__name__}: no inputs"
        assert ">>> " in text, f"{loss.__name__}: no example"
        assert re.search(r"`[^`]*(=|log\(|max\(|sum)[^`]*`", text), f"{loss.__name__}: no formula"
