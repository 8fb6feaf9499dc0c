"""A tiny pretrained image backbone and folders of photos the tests write themselves (no
network): a random ResNet saved with KerasHub's `save_to_preset` beside its image converter,
and class folders of JPEG photos of several sizes."""

from __future__ import annotations

import json
from pathlib import Path

import keras
import numpy as np

COLORS = {"red": (200, 40, 40), "blue": (40, 40, 200)}


def tiny_resnet(seed: int = 0):
    """A random two-stack ResNet (basic blocks, 89k parameters, BatchNorm)."""
    import keras_hub

    keras.utils.set_random_seed(seed)
    return keras_hub.models.ResNetBackbone(
        input_conv_filters=[64],
        input_conv_kernel_sizes=[3],
        stackwise_num_filters=[64, 16],
        stackwise_num_blocks=[1, 1],
        stackwise_num_strides=[1, 2],
        block_type="basic_block",
    )


def write_resnet_preset(folder: Path, image_size: tuple[int, int] = (32, 32), seed: int = 0):
    """A KerasHub preset folder: the backbone and a converter (resize, pixels to [0, 1],
    ImageNet's mean and deviation); returns the backbone written."""
    import keras_hub

    backbone = tiny_resnet(seed)
    backbone.save_to_preset(str(folder))
    converter = keras_hub.layers.ResNetImageConverter(
        image_size=image_size,
        scale=[1 / (255 * s) for s in (0.229, 0.224, 0.225)],
        offset=[-m / s for m, s in zip((0.485, 0.456, 0.406), (0.229, 0.224, 0.225), strict=True)],
    )
    converter.save_to_preset(str(folder))
    return backbone


def write_photos(root: Path, per_class: int, seed: int = 0) -> None:
    """`root/<class>/<i>.jpg`, RGB photos of 30-45 by 40 pixels, one colour per class."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    for name, color in COLORS.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            shape = (30 + i % 16, 40, 3)
            pixels = np.clip(np.array(color) + rng.normal(0, 50, shape), 0, 255)
            Image.fromarray(pixels.astype("uint8")).save(root / name / f"{i}.jpg")


def write_timm_resnet18(folder: Path, input_size: int = 32, seed: int = 0):
    """A timm `resnet18` folder as `timm` saves one (config.json with `architecture` and
    `pretrained_cfg`, model.safetensors with timm's PyTorch weight names and layouts), its
    weights those of a random KerasHub ResNet-18, which is returned."""
    import keras_hub
    from safetensors.numpy import save_file

    keras.utils.set_random_seed(seed)
    backbone = keras_hub.models.ResNetBackbone(
        input_conv_filters=[64],
        input_conv_kernel_sizes=[7],
        stackwise_num_filters=[64, 128, 256, 512],
        stackwise_num_blocks=[2, 2, 2, 2],
        stackwise_num_strides=[1, 2, 2, 2],
        block_type="basic_block",
    )
    rng = np.random.default_rng(seed)
    tensors = {}

    def conv(layer: str, key: str) -> None:  # Keras (h, w, in, out) -> PyTorch (out, in, h, w)
        kernel = np.array(backbone.get_layer(layer).kernel)
        tensors[f"{key}.weight"] = np.ascontiguousarray(kernel.transpose(3, 2, 0, 1))

    def norm(layer: str, key: str) -> None:
        bn = backbone.get_layer(layer)
        size = bn.gamma.shape[0]
        values = {  # statistics other than the initial ones, so that porting them shows
            "weight": rng.uniform(0.5, 1.5, size), "bias": rng.normal(0, 0.1, size),
            "running_mean": rng.normal(0, 0.1, size), "running_var": rng.uniform(0.5, 1.5, size),
        }  # fmt: skip
        for variable, name in zip(
            (bn.gamma, bn.beta, bn.moving_mean, bn.moving_variance), values, strict=True
        ):
            variable.assign(values[name].astype("float32"))
            tensors[f"{key}.{name}"] = values[name].astype("float32")

    conv("conv1_conv", "conv1")
    norm("conv1_bn", "bn1")
    for stack in range(4):
        for block in range(2):
            keras_name, timm_name = f"stack{stack}_block{block}", f"layer{stack + 1}.{block}"
            if block == 0 and stack > 0:
                conv(f"{keras_name}_0_conv", f"{timm_name}.downsample.0")
                norm(f"{keras_name}_0_bn", f"{timm_name}.downsample.1")
            for part in (1, 2):
                conv(f"{keras_name}_{part}_conv", f"{timm_name}.conv{part}")
                norm(f"{keras_name}_{part}_bn", f"{timm_name}.bn{part}")
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "model.safetensors"))
    config = {
        "architecture": "resnet18",
        "num_classes": 1000,
        "num_features": 512,
        "pretrained_cfg": {
            "input_size": [3, input_size, input_size],
            "interpolation": "bilinear",
            "mean": [0.485, 0.456, 0.406],
            "std": [0.229, 0.224, 0.225],
        },
    }
    (folder / "config.json").write_text(json.dumps(config))
    return backbone


def write_hf_vit(folder: Path, image_size: int = 32, seed: int = 0, bare: bool = False):
    """A Hugging Face ViT folder as `save_pretrained` writes one (config.json,
    model.safetensors with the PyTorch names and layouts, preprocessor_config.json with
    ViT's mean and deviation of 0.5), its weights those of a random KerasHub ViT, which is
    returned. `bare`: a `ViTModel`'s names (no `vit.` prefix) instead of
    `ViTForImageClassification`'s."""
    import keras_hub
    from safetensors.numpy import save_file

    keras.utils.set_random_seed(seed)
    hidden, heads, prefix = 32, 2, "" if bare else "vit."
    backbone = keras_hub.models.ViTBackbone(
        image_shape=(image_size, image_size, 3), patch_size=(8, 8), num_layers=2,
        num_heads=heads, hidden_dim=hidden, mlp_dim=64,
    )  # fmt: skip
    tensors: dict[str, np.ndarray] = {}

    def put(key: str, value, transpose=None, shape=None) -> None:
        value = np.asarray(value, dtype="float32")
        value = value.transpose(transpose) if transpose else value
        tensors[prefix + key] = np.ascontiguousarray(value.reshape(shape or value.shape))

    def norm(layer, key: str) -> None:
        put(f"{key}.weight", layer.gamma)
        put(f"{key}.bias", layer.beta)

    def dense(layer, key: str, flat: tuple[int, int] | None = None) -> None:
        kernel = np.asarray(layer.kernel).reshape(flat or layer.kernel.shape)
        put(f"{key}.weight", kernel, transpose=(1, 0))  # Keras (in, out) -> PyTorch (out, in)
        put(f"{key}.bias", layer.bias, shape=(-1,))

    embedding, encoder = backbone.layers[1], backbone.layers[2]
    put(
        "embeddings.patch_embeddings.projection.weight",
        embedding.patch_embedding.kernel,
        (3, 2, 0, 1),
    )
    put("embeddings.patch_embeddings.projection.bias", embedding.patch_embedding.bias)
    put("embeddings.cls_token", embedding.class_token, shape=(1, 1, hidden))
    put("embeddings.position_embeddings", np.asarray(embedding.position_embedding.embeddings)[None])
    for i, block in enumerate(encoder.encoder_layers):
        key = f"encoder.layer.{i}"
        for name in ("query", "key", "value"):
            projection = getattr(block.mha, f"{name}_dense")
            dense(projection, f"{key}.attention.attention.{name}", flat=(hidden, hidden))
        dense(block.mha.output_dense, f"{key}.attention.output.dense", flat=(hidden, hidden))
        norm(block.layer_norm_1, f"{key}.layernorm_before")
        norm(block.layer_norm_2, f"{key}.layernorm_after")
        dense(block.mlp.dense_1, f"{key}.intermediate.dense")
        dense(block.mlp.dense_2, f"{key}.output.dense")
    norm(encoder.layer_norm, "layernorm")
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "model.safetensors"))
    config = {
        "model_type": "vit", "architectures": ["ViTModel" if bare else "ViTForImageClassification"],
        "image_size": image_size, "patch_size": 8, "num_channels": 3, "num_hidden_layers": 2,
        "num_attention_heads": heads, "hidden_size": hidden, "intermediate_size": 64,
        "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, "qkv_bias": True,
    }  # fmt: skip
    processor = {
        "image_processor_type": "ViTImageProcessor", "do_resize": True, "do_rescale": True,
        "do_normalize": True, "rescale_factor": 1 / 255, "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5], "size": {"height": image_size, "width": image_size},
    }  # fmt: skip
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "preprocessor_config.json").write_text(json.dumps(processor))
    return backbone
