"""`tapefit.models.hf_image_processor`: a Hugging Face `preprocessor_config.json` read as
KerasHub `ImageConverter` settings, or refused in one line."""

import json

import pytest

from tapefit.errors import TapefitError
from tapefit.models.hf_image_processor import FILE, processor_settings

IMAGENET_MEAN, IMAGENET_STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def write_processor(folder, **config):
    (folder / FILE).write_text(json.dumps(config))
    return folder


def test_a_folder_without_the_file_has_no_settings(tmp_path):
    assert processor_settings(tmp_path) is None


def test_imagenet_normalisation_becomes_scale_and_offset_per_channel(tmp_path):
    write_processor(
        tmp_path,
        size={"height": 32, "width": 48},
        rescale_factor=1 / 255,
        image_mean=IMAGENET_MEAN,
        image_std=IMAGENET_STD,
    )
    settings = processor_settings(tmp_path)
    assert settings["image_size"] == (32, 48)  # height first
    assert settings["scale"] == pytest.approx([1 / 255 / s for s in IMAGENET_STD])
    assert settings["offset"] == pytest.approx(
        [-m / s for m, s in zip(IMAGENET_MEAN, IMAGENET_STD, strict=True)]
    )


def test_a_shortest_edge_resize_then_centre_crop_is_read_as_a_resize_to_the_crop(tmp_path):
    """DINOv2's processor: shortest edge 256, then the 224 centre."""
    write_processor(
        tmp_path,
        size={"shortest_edge": 256},
        do_center_crop=True,
        crop_size={"height": 224, "width": 224},
        do_normalize=False,
    )
    assert processor_settings(tmp_path)["image_size"] == (224, 224)


@pytest.mark.parametrize(
    ("config", "size"),
    [
        ({"size": {"shortest_edge": 256}, "crop_size": {"height": 224, "width": 224}}, (256, 256)),
        ({"size": 96}, (96, 96)),
        ({"size": {"shortest_edge": 64}, "do_center_crop": True, "crop_size": 56}, (56, 56)),
    ],
    ids=["crop_size_without_do_center_crop", "one_number", "crop_as_one_number"],
)
def test_the_image_size_is_the_crop_only_when_the_processor_crops(tmp_path, config, size):
    write_processor(tmp_path, do_normalize=False, **config)
    assert processor_settings(tmp_path)["image_size"] == size


def test_without_normalisation_only_the_rescale_is_kept(tmp_path):
    write_processor(
        tmp_path, size=8, rescale_factor=0.5, do_normalize=False, image_mean=[0.5], image_std=[0.5]
    )
    assert processor_settings(tmp_path) == {"image_size": (8, 8), "scale": 0.5}


def test_without_rescaling_the_scale_is_one_over_the_std(tmp_path):
    write_processor(
        tmp_path, size=8, rescale_factor=1 / 255, do_rescale=False, image_mean=0.5, image_std=0.25
    )
    settings = processor_settings(tmp_path)
    assert settings["scale"] == [4.0, 4.0, 4.0]  # one number: the same for the three channels
    assert settings["offset"] == [-2.0, -2.0, -2.0]


def test_a_processor_without_mean_keeps_the_default_rescale(tmp_path):
    write_processor(tmp_path, size=8)
    assert processor_settings(tmp_path) == {"image_size": (8, 8), "scale": pytest.approx(1 / 255)}


def test_a_file_that_is_not_json_is_one_line(tmp_path):
    (tmp_path / FILE).write_text("{size: 224")
    with pytest.raises(
        TapefitError, match=r"preprocessor_config\.json: not readable JSON"
    ) as error:
        processor_settings(tmp_path)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    "config",
    [{}, {"size": {"longest_edge": 224}}, {"size": "224"}],
    ids=["no_size", "longest_edge_only", "size_as_text"],
)
def test_a_processor_without_an_image_size_names_the_option_to_set(tmp_path, config):
    write_processor(tmp_path, **config)
    with pytest.raises(TapefitError, match=r"says no image size .*model\.backbone\.image_size"):
        processor_settings(tmp_path)
