"""Whether each `LSTM` and `GRU` of a model will run on cuDNN on a GPU, and if not, which of
its options prevents it, decided by Keras' own code rather than a copy of its rules.

Keras 3 runs a recurrent layer on its fused cuDNN kernel only when two gates let it:

- `LSTM.inner_loop` (and `GRU`'s) tries the fused kernel only with `use_cudnn` "auto" or True
  and no `recurrent_dropout`. The probe runs a copy of the layer with Keras' fused kernels
  replaced by a recorder (`keras_compat.fused_kernel_calls`): if the copy tried them, this
  gate is open.
- The kernel then needs arguments cuDNN implements: `tanh`, `sigmoid`, `unroll=False`, a
  bias, and for a GRU `reset_after=True`. Keras' own rule function
  (`keras_compat.cudnn_argument_rule`) decides; each option that fails it on its own is
  named.

On a GPU, Keras also marks a layer whose arguments pass the second gate as not compilable by
XLA, whatever the first gate says (its `__init__`): a model with `jit_compile="auto"` then
runs without XLA. A layer that keeps `recurrent_dropout` thus gets neither cuDNN nor XLA.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import keras
import numpy as np

from tapefit.keras_compat import (
    cudnn_argument_rule,
    flatten_layers,
    fused_kernel_calls,
    name_counters_kept,
)

KINDS = {"LSTM": keras.layers.LSTM, "GRU": keras.layers.GRU}


@dataclass(frozen=True)
class RecurrentLayer:
    """One recurrent layer's verdict.

    Attributes:
        path: Where it sits in the model (`siamese_model/text_encoder/lstm`).
        kind: `LSTM` or `GRU`.
        cudnn_on_gpu: Whether it runs on cuDNN on a GPU.
        blockers: The options that prevent it (`recurrent_dropout=0.1`), empty when none.
        blocks_xla_on_gpu: Whether Keras marks it as not XLA-compilable on a GPU.
    """

    path: str
    kind: str
    cudnn_on_gpu: bool
    blockers: tuple[str, ...]
    blocks_xla_on_gpu: bool

    def line(self) -> str:
        """The report's line for it.

        Example:
            >>> RecurrentLayer("m/lstm", "LSTM", True, (), True).line()
            'm/lstm (LSTM): cuDNN on a GPU: yes (Keras keeps it out of XLA)'
            >>> RecurrentLayer("m/gru", "GRU", False, ("reset_after=False",), False).line()
            'm/gru (GRU): cuDNN on a GPU: no (reset_after=False)'
        """
        if self.cudnn_on_gpu:
            return f"{self.path} ({self.kind}): cuDNN on a GPU: yes (Keras keeps it out of XLA)"
        verdict = f"{self.path} ({self.kind}): cuDNN on a GPU: no ({', '.join(self.blockers)})"
        if self.blocks_xla_on_gpu:
            verdict += ", and Keras still keeps it out of XLA there: the generic loop, uncompiled"
        return verdict


def recurrent_layers(model: Any) -> list[RecurrentLayer]:
    """The verdict for every `LSTM` and `GRU` inside `model` (those in a `Bidirectional`
    wrapper too), in the order Keras walks its layers.

    Example:
        >>> inputs = keras.Input((5, 3))
        >>> model = keras.Model(inputs, keras.layers.LSTM(4, recurrent_dropout=0.1)(inputs))
        >>> [layer.blockers for layer in recurrent_layers(model)]
        [('recurrent_dropout=0.1',)]
    """
    found = []
    for path, layer in _walk(model, model.name):
        kind = next((k for k, cls in KINDS.items() if isinstance(layer, cls)), None)
        if kind is not None:
            found.append(_verdict(path, kind, layer))
    return found


def _walk(layer: Any, path: str) -> list[tuple[str, Any]]:
    found = []
    for child in flatten_layers(layer, include_self=False, recursive=False):
        child_path = f"{path}/{child.name}"
        found.append((child_path, child))
        found.extend(_walk(child, child_path))
    return found


def _verdict(path: str, kind: str, layer: Any) -> RecurrentLayer:
    cell = layer.cell
    arguments = {
        "activation": cell.activation,
        "recurrent_activation": cell.recurrent_activation,
        "unroll": layer.unroll,
        "use_bias": cell.use_bias,
        **({"reset_after": cell.reset_after} if kind == "GRU" else {}),
    }
    rule = cudnn_argument_rule(kind)
    arguments_fit = bool(rule(**arguments))
    blockers = [] if _inner_loop_tries_kernel(layer) else _gate_options(layer)
    if not arguments_fit:
        blockers += _failing_arguments(rule, arguments)
    use_cudnn = getattr(layer, "use_cudnn", "auto")
    return RecurrentLayer(
        path=path,
        kind=kind,
        cudnn_on_gpu=not blockers,
        blockers=tuple(blockers),
        blocks_xla_on_gpu=arguments_fit and use_cudnn in ("auto", True),
    )


_TRIED: dict[tuple[type, str, Any], bool] = {}  # one probe per kind of layer and config


def _inner_loop_tries_kernel(layer: Any) -> bool:
    """Run a copy of the layer in training mode, Keras' fused kernels recorded and refused
    (once per kind of layer and config: every run logs the report)."""
    config = {key: value for key, value in layer.get_config().items() if key != "name"}
    use_cudnn = getattr(layer, "use_cudnn", "auto")  # not in Keras 3.15's config
    key = (type(layer), json.dumps(config, sort_keys=True, default=repr), use_cudnn)
    if key not in _TRIED:
        with name_counters_kept():
            copy = type(layer).from_config(layer.get_config())
            copy.use_cudnn = use_cudnn
            with fused_kernel_calls() as calls:
                copy(np.zeros((1, 2, 2), "float32"), training=True)
        _TRIED[key] = bool(calls)
    return _TRIED[key]


def _gate_options(layer: Any) -> list[str]:
    """Which option closed `inner_loop`'s gate."""
    named = []
    if getattr(layer, "use_cudnn", "auto") is False:
        named.append("use_cudnn=False")
    if layer.cell.recurrent_dropout:
        named.append(f"recurrent_dropout={layer.cell.recurrent_dropout:g}")
    return named or ["Keras' inner_loop does not try its cuDNN kernel"]


FRIENDLY = {
    "activation": keras.activations.tanh,
    "recurrent_activation": keras.activations.sigmoid,
    "unroll": False,
    "use_bias": True,
    "reset_after": True,
}


def _failing_arguments(rule: Any, arguments: dict[str, Any]) -> list[str]:
    """Each argument that fails Keras' rule when every other one is cuDNN's choice."""
    friendly = {name: FRIENDLY[name] for name in arguments}
    failing = []
    for name, value in arguments.items():
        if not rule(**{**friendly, name: value}):
            shown = getattr(value, "__name__", value)
            failing.append(f"{name}={shown}")
    return failing
