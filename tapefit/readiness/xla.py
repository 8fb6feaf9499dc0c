"""Whether Keras compiles a model's step functions with XLA, here and on a GPU, and why not.

Keras compiles `train_function`, `test_function` and `predict_function` alike with
`model.jit_compile`. `trainer.jit_compile=null` is Keras' "auto", which it resolves in
`Trainer._resolve_auto_jit_compile`: off on a machine with no GPU, off under a
`tf.distribute` strategy, off when a layer says it cannot be compiled (`supports_jit`), off
with op determinism. Here the answer is Keras' own resolved flag; on a GPU it is those same
conditions with the layers Keras marks as not compilable there (cuDNN-eligible RNNs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tensorflow as tf
from tensorflow.python.framework.config import is_op_determinism_enabled  # as Keras reads it

from tapefit.keras_compat import flatten_layers
from tapefit.readiness.recurrent import RecurrentLayer


@dataclass(frozen=True)
class XlaVerdict:
    """XLA for the train, evaluate and predict functions.

    Attributes:
        here: Whether they are compiled with XLA on this machine.
        here_why: Why (the setting, or what turned Keras' auto off).
        on_gpu: Whether they would be on a one-GPU machine.
        on_gpu_why: Why.
    """

    here: bool
    here_why: str
    on_gpu: bool
    on_gpu_why: str

    def line(self) -> str:
        """The report's line.

        Example:
            >>> XlaVerdict(False, "auto: no GPU", True, "auto").line()
            'XLA (train/evaluate/predict): here off (auto: no GPU); on a GPU on (auto)'
        """
        here = f"{'on' if self.here else 'off'} ({self.here_why})"
        gpu = f"{'on' if self.on_gpu else 'off'} ({self.on_gpu_why})"
        return f"XLA (train/evaluate/predict): here {here}; on a GPU {gpu}"


def xla_verdict(
    model: Any, setting: bool | None, recurrent: list[RecurrentLayer], distributed: bool = False
) -> XlaVerdict:
    """The verdict for a compiled `model`.

    Args:
        model: The compiled model (its `jit_compile` is Keras' resolved flag).
        setting: `trainer.jit_compile` (None: Keras' auto).
        recurrent: Its recurrent layers' verdicts (which block XLA on a GPU).
        distributed: Whether the model was built under a `tf.distribute` strategy other
            than the default one.

    Example:
        >>> import keras
        >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
        >>> model.compile(loss="mse")
        >>> verdict = xla_verdict(model, False, [])
        >>> verdict.here, verdict.on_gpu, verdict.on_gpu_why
        (False, False, 'trainer.jit_compile=false')
    """
    unable = [layer.name for layer in flatten_layers(model) if not layer.supports_jit]
    blocked_on_gpu = {r.path.rsplit("/", 1)[-1] for r in recurrent if r.blocks_xla_on_gpu}
    conditions = {
        "setting": setting,
        "distributed": distributed,
        "deterministic": is_op_determinism_enabled(),
        "eager": bool(model.run_eagerly),
    }
    here = bool(getattr(model, "jit_compile", False)) and not model.run_eagerly
    gpu_here = bool(tf.config.list_physical_devices("GPU"))
    on_gpu_why = _why(unable=sorted(set(unable) | blocked_on_gpu), gpu=True, **conditions)
    return XlaVerdict(
        here=here,
        here_why=_why(unable=unable, gpu=gpu_here, **conditions),
        on_gpu=on_gpu_why in ("auto", "jit_compile=true"),
        on_gpu_why=on_gpu_why,
    )


def _why(
    setting: bool | None,
    unable: list[str],
    gpu: bool,
    distributed: bool,
    deterministic: bool,
    eager: bool,
) -> str:
    """Keras' reasons, in the order `_resolve_auto_jit_compile` and `model_supports_jit`
    check them; just the setting when none holds."""
    if eager:
        return "trainer.run_eagerly=true: no compiled functions"
    if setting is False:
        return "trainer.jit_compile=false"
    if setting is None and not gpu:
        return "auto: Keras turns XLA off without a GPU"
    if setting is None and distributed:
        return "auto: Keras turns XLA off under a tf.distribute strategy"
    prefix = "auto" if setting is None else "jit_compile=true"
    if unable:
        more = f" and {len(unable) - 4} more" if len(unable) > 4 else ""
        return f"{prefix}: layers Keras cannot compile: {', '.join(unable[:4])}{more}"
    if deterministic:
        return f"{prefix}: Keras turns XLA off under op determinism (trainer.deterministic)"
    return prefix
