"""tapefit/models/image_backbone.py: timm and Hugging Face ViT folders load with their weights
and preprocessing; a folder KerasHub cannot read is refused in one line."""

import numpy as np
import pytest

pytest.importorskip("keras_hub")

from tapefit import TapefitError
from tapefit.models import BackboneClassifier


def loaded_exactly(folder, source, kind: str):
    """The folder's parts through `load_image_backbone`, checked: a backbone of `kind`
    holding every weight of `source`, and a converter to 32 by 32 pixels."""
    from tapefit.models.image_backbone import load_image_backbone

    parts = load_image_backbone(str(folder))
    assert type(parts.backbone).__name__ == kind
    for got, want in zip(parts.backbone.weights, source.weights, strict=True):
        np.testing.assert_array_equal(np.array(got), np.array(want), err_msg=want.path)
    assert tuple(parts.converter.image_size) == (32, 32)
    return parts


def test_a_timm_folder_loads_with_its_weights_and_preprocessing(tmp_path):
    pytest.importorskip("safetensors")
    from tests.models.image_checkpoints import write_timm_resnet18

    source = write_timm_resnet18(tmp_path / "timm", input_size=32)
    parts = loaded_exactly(tmp_path / "timm", source, "ResNetBackbone")
    np.testing.assert_allclose(parts.converter.scale, [1 / 255 / s for s in (0.229, 0.224, 0.225)])
    model = BackboneClassifier(
        (40, 30, 1), 4, backbone_layer=parts.backbone, converter=parts.converter
    )
    assert tuple(model(np.zeros((2, 40, 30, 1), "float32")).shape) == (2, 4)


def test_a_hugging_face_vit_folder_loads_with_its_weights_and_preprocessing(tmp_path):
    """A folder as `ViTForImageClassification.save_pretrained` writes it: every weight in
    place, and its processor's normalisation (mean and deviation 0.5: pixels to [-1, 1]),
    which KerasHub's ViT converter does not read, inside the model."""
    pytest.importorskip("safetensors")
    from tests.models.image_checkpoints import write_hf_vit

    source = write_hf_vit(tmp_path / "vit", image_size=32)
    parts = loaded_exactly(tmp_path / "vit", source, "ViTBackbone")
    pixels = np.stack([np.zeros((32, 32, 3)), np.full((32, 32, 3), 255.0)]).astype("float32")
    np.testing.assert_allclose(np.array(parts.converter(pixels))[:, 0, 0], [[-1] * 3, [1] * 3])
    model = BackboneClassifier(
        (40, 30, 1), 3, {"pooling": "cls"}, backbone_layer=parts.backbone, converter=parts.converter
    )
    assert tuple(model(np.zeros((2, 40, 30, 1), "float32")).shape) == (2, 3)


def test_a_bare_vit_model_folder_is_refused_in_one_line(tmp_path):
    """KerasHub reads ViT weights only under ViTForImageClassification's `vit.` prefix."""
    pytest.importorskip("safetensors")
    from tapefit.models.image_backbone import load_image_backbone
    from tests.models.image_checkpoints import write_hf_vit

    write_hf_vit(tmp_path / "bare", bare=True)
    with pytest.raises(TapefitError, match=r"not named as KerasHub's converter reads") as error:
        load_image_backbone(str(tmp_path / "bare"))
    assert "\n" not in str(error.value)
