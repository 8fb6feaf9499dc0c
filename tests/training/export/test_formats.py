"""`tapefit.training.export.formats`: the formats and the tolerance a config names, checked."""

import keras
import pytest
from hydra.errors import ConfigCompositionException

import tapefit


def test_an_unknown_format_or_tolerance_is_refused():
    from tapefit.training.export.formats import normalize_formats, resolve_tolerance

    with pytest.raises(ConfigCompositionException) as refused:
        tapefit.compose(["trainer.export=true", "trainer.export_formats=[pickle]"])
    assert "expected one of [saved_model, onnx, litert, openvino]" in str(refused.value.__cause__)
    with pytest.raises(tapefit.TapefitError, match="unknown format 'pickle'; choose from"):
        normalize_formats(["onnx", "pickle"])
    with pytest.raises(tapefit.TapefitError, match=r"export_formats=\[\] exports nothing"):
        normalize_formats([])
    assert normalize_formats(["onnx", "onnx", "saved_model"]) == ["onnx", "saved_model"]
    dense = keras.layers.Dense(1)
    assert resolve_tolerance(dense, None) == 1e-4
    assert resolve_tolerance(keras.layers.Dense(1, dtype="mixed_bfloat16"), None) == 1e-2
    assert resolve_tolerance(dense, 0.5) == 0.5
    with pytest.raises(tapefit.TapefitError, match="export_tolerance=-1 must be a number"):
        resolve_tolerance(dense, -1)
