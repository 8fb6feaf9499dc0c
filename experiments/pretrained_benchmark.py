"""Fine-tuning a pretrained encoder: tapefit against the peer a user would pick instead
(sentence-transformers on PyTorch) and against a plain keras-hub backbone trained by a
hand-written `tf.function` GradientTape loop, on the same checkpoint, pairs, batch and
sequence length, one after the other on one machine.

    python experiments/pretrained_benchmark.py --checkpoint DIR --peer-python PEER_PYTHON
    python experiments/pretrained_benchmark.py --checkpoint DIR --rounds 3 --json bench.json
    python experiments/pretrained_benchmark.py --checkpoint DIR --quick   # a smoke run

`DIR` is a Hugging Face-format BERT-style folder (config.json, model.safetensors,
tokenizer.json or vocab.txt), e.g. sentence-transformers' all-MiniLM-L6-v2 (how to get it:
docs/explanation/benchmark.md). Variants, each in a process of its own so that its peak
memory is its own:

- `plain`: `keras_hub.models.Backbone.from_preset(DIR)` and a WordPiece tokenizer, trained by
  a hand-written `tf.function` step: tokenise both sides as one batch, pad it to its longest
  text, mean-pool, L2-normalise, CoSENT, `tape.gradient`, AdamW.
- `tapefit`: `SiameseModel(encoder={"preset": DIR}, loss={"name": "cosent"})` through `fit`
  (packs each batch to its longest text).
- `tapefit_fixed`: the same with every batch padded to `--sequence-length` tokens (the
  benchmark wraps the encoder's `features`; tapefit itself always pads per batch).
- `peer`: sentence-transformers (`SentenceTransformer(DIR)`, its tokenizer padding per batch,
  `CoSENTLoss`, `torch.optim.AdamW`) in a PyTorch training loop, run by `--peer-python`: an
  interpreter of its own environment (torch is never a dependency of tapefit). Skipped,
  with a note, without that option.

Every variant trains from the checkpoint's weights with batch `--batch-size` pairs, texts cut
to `--sequence-length` tokens, CoSENT (scale 20), AdamW (`--learning-rate`, weight decay
`--weight-decay`, none on biases and LayerNorm), dropout on. Seconds per optimizer step are
timed from one step's end to the next's (data, tokenisation, forward, backward and update),
median over `--steps` steps after `--warmup`; the first step (tracing included) is shown
apart. Encode throughput: `--encode-size` sentences in batches of `--encode-batch`, median of
3 after one untimed pass. Peak RSS: `resource.getrusage` of the variant's own process.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Only the standard library up here: the peer's interpreter runs this file too (with torch
# and sentence-transformers, without TensorFlow and tapefit), so each variant imports its
# own stack inside its function.

REPO = Path(__file__).resolve().parents[1]
VARIANTS = ("plain", "tapefit", "tapefit_fixed", "peer")
RESULT = "RESULT "  # a child's last stdout line: this marker, then its measurements as JSON
NO_DECAY = ("bias", "gamma", "beta")  # Keras' names of biases and LayerNorm scales/offsets
QUICK = {"steps": 3, "warmup": 1, "pairs": 128, "encode_size": 128, "encode_batch": 64}
FULL = {"steps": 40, "warmup": 5, "pairs": 4096, "encode_size": 1024, "encode_batch": 64}

# English-like sentences: a pair's second sentence keeps some of the first's slots (adjective,
# subject, verb, object, place) and redraws the others; its label is 5 x the share kept.
ADJECTIVES = (
    "young", "old", "small", "tall", "happy", "tired", "little", "black", "white", "brown",
    "smiling", "busy", "quiet", "large", "hungry",
)  # fmt: skip
SUBJECTS = (
    "man", "woman", "boy", "girl", "child", "dog", "cat", "horse", "chef", "player",
    "student", "teacher", "musician", "farmer", "driver", "dancer", "doctor", "couple",
)  # fmt: skip
VERBS = (
    "is playing", "is riding", "is cutting", "is eating", "is reading", "is holding",
    "is cooking", "is painting", "is throwing", "is carrying", "is watching", "is slicing",
    "is washing", "is kicking", "is pushing",
)  # fmt: skip
OBJECTS = (
    "a guitar", "a horse", "a bicycle", "an onion", "an apple", "a book", "a ball",
    "a newspaper", "the piano", "a tomato", "a red car", "a wooden boat", "some bread",
    "a large box", "the flute",
)  # fmt: skip
PLACES = (
    "in the park", "on the street", "at the beach", "in a kitchen", "on a stage",
    "near the river", "in the snow", "at the station", "in a small room", "under a tree",
    "on the grass", "in front of an old building",
)  # fmt: skip
EXTRAS = (
    "while it is raining", "as people walk past", "on a sunny afternoon",
    "before the sun goes down", "with a friend nearby", "and smiles at the camera",
    "while a crowd of tourists watches from the other side of the road",
)  # fmt: skip
SLOTS = (ADJECTIVES, SUBJECTS, VERBS, OBJECTS, PLACES)


def english_pairs(count: int, seed: int = 0) -> tuple[list[str], list[str], list[float]]:
    """`count` seeded pairs of English-like sentences and graded labels in [0, 5].

    Why not `tapefit.data.synthetic_pairs`: its pseudo-words split into several WordPiece
    pieces each, so its texts would be longer in tokens than the sentence-length texts a
    MiniLM is fine-tuned on; with MiniLM's tokenizer these run 13 to 30 tokens, [CLS] and
    [SEP] included (median 14).

    Example:
        >>> a, b, labels = english_pairs(2, seed=1)
        >>> len(a), len(b), all(0.0 <= label <= 5.0 for label in labels)
        (2, 2, True)
    """
    rng = random.Random(seed)

    def sentence(words: list[str]) -> str:
        extra = f" {rng.choice(EXTRAS)}" if rng.random() < 0.4 else ""
        adjective, subject, verb, thing, place = words
        article = "An" if adjective[0] in "aeiou" else "A"
        return f"{article} {adjective} {subject} {verb} {thing} {place}{extra}."

    texts_a, texts_b, labels = [], [], []
    for _ in range(count):
        first = [rng.choice(slot) for slot in SLOTS]
        keep = rng.random()
        second = [
            w if rng.random() < keep else rng.choice(s) for w, s in zip(first, SLOTS, strict=True)
        ]
        kept = sum(a == b for a, b in zip(first, second, strict=True))
        texts_a.append(sentence(first))
        texts_b.append(sentence(second))
        labels.append(5.0 * kept / len(SLOTS))
    return texts_a, texts_b, labels


def batches(settings: dict[str, Any]) -> list[tuple[list[str], list[str], list[float]]]:
    """The pairs file's first `warmup + steps` batches, in order: every variant trains on
    exactly these."""
    pairs = json.loads(Path(settings["pairs"]).read_text())
    size, count = settings["batch_size"], settings["warmup"] + settings["steps"]
    rows = len(pairs["labels"])
    out = []
    for step in range(count):
        indices = [(step * size + i) % rows for i in range(size)]
        out.append(
            (
                [pairs["texts_a"][i] for i in indices],
                [pairs["texts_b"][i] for i in indices],
                [pairs["labels"][i] for i in indices],
            )
        )
    return out


def encode_texts(settings: dict[str, Any]) -> list[str]:
    """The `encode_size` sentences whose encoding is timed (both sides of the pairs)."""
    pairs = json.loads(Path(settings["pairs"]).read_text())
    texts = [t for pair in zip(pairs["texts_a"], pairs["texts_b"], strict=True) for t in pair]
    return (texts * (1 + settings["encode_size"] // len(texts)))[: settings["encode_size"]]


def summary(step_times: list[float], first_loss: float, settings: dict[str, Any]) -> dict:
    """Median, min and max seconds per step after the warm-up, pairs per second, the first
    step's time (tracing included) and loss (the same batch and weights in every variant)."""
    timed = step_times[settings["warmup"] :]
    median = statistics.median(timed)
    return {
        "first_step_s": step_times[0],
        "first_loss": first_loss,
        "step_s": median,
        "step_min_s": min(timed),
        "step_max_s": max(timed),
        "steps": len(timed),
        "pairs_per_s": settings["batch_size"] / median,
        "step_times_s": timed,
    }


def timed_encode(encode: Any, texts: list[str]) -> float:
    """Sentences per second of `encode(texts)`, median of 3 after one untimed pass."""
    encode(texts)
    times = []
    for _ in range(3):
        start = time.perf_counter()
        encode(texts)
        times.append(time.perf_counter() - start)
    return len(texts) / statistics.median(times)


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (`ru_maxrss`, KiB on Linux), in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# -- the TensorFlow variants ----------------------------------------------------------------------


def pair_dataset(settings: dict[str, Any]) -> Any:
    """`((texts_a, texts_b), labels)` batches in the order of `batches`, two prefetched: the
    input of both TensorFlow variants."""
    import tensorflow as tf

    pairs = json.loads(Path(settings["pairs"]).read_text())
    dataset = tf.data.Dataset.from_tensor_slices(
        ((pairs["texts_a"], pairs["texts_b"]), tf.constant(pairs["labels"], tf.float32))
    )
    return dataset.repeat().batch(settings["batch_size"], drop_remainder=True).prefetch(2)


def wordpiece_tokenizer(folder: Path) -> Any:
    """KerasHub's BERT tokenizer over the folder's WordPiece vocabulary (`tokenizer.json`, as
    sentence-transformers saves it, or `vocab.txt`), lowercasing as the folder says."""
    import keras_hub

    spec_file = folder / "tokenizer.json"
    if spec_file.is_file():
        spec = json.loads(spec_file.read_text(encoding="utf-8"))
        vocab = spec["model"]["vocab"]
        lowercase = bool((spec.get("normalizer") or {}).get("lowercase", True))
        vocabulary = sorted(vocab, key=vocab.get)
    else:
        vocabulary = (folder / "vocab.txt").read_text(encoding="utf-8").splitlines()
        lowercase = True
    return keras_hub.models.BertTokenizer(vocabulary=vocabulary, lowercase=lowercase)


def run_plain(settings: dict[str, Any]) -> dict[str, Any]:
    """A KerasHub backbone fine-tuned by a hand-written `tf.function` tape loop."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import keras
    import keras_hub
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    folder = Path(settings["checkpoint"])
    backbone = keras_hub.models.Backbone.from_preset(str(folder))
    backbone.get_layer("pooled_dense").trainable = False  # the [CLS] pooler: unused here
    tokenizer = wordpiece_tokenizer(folder)
    start_id, end_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    pad_id, length = tokenizer.pad_token_id, settings["sequence_length"]
    optimizer = keras.optimizers.AdamW(
        settings["learning_rate"], weight_decay=settings["weight_decay"], epsilon=1e-8
    )
    optimizer.exclude_from_weight_decay(var_names=list(NO_DECAY))
    variables = backbone.trainable_variables

    def pack(texts: tf.Tensor) -> dict[str, tf.Tensor]:
        """Token ids with [CLS] and [SEP], cut to `length`, padded to the longest text."""
        pieces = tf.cast(tokenizer(texts)[:, : length - 2], "int32")
        rows = tf.shape(texts)[0]
        ends = [tf.RaggedTensor.from_tensor(tf.fill([rows, 1], i)) for i in (start_id, end_id)]
        packed = tf.concat([ends[0], pieces, ends[1]], axis=1)
        ids = packed.to_tensor(default_value=pad_id)
        mask = tf.sequence_mask(packed.row_lengths(), tf.shape(ids)[1])
        return {"token_ids": ids, "padding_mask": mask, "segment_ids": tf.zeros_like(ids)}

    def embed(texts: tf.Tensor, training: bool) -> tf.Tensor:
        features = pack(texts)
        sequence = backbone(features, training=training)["sequence_output"]
        mask = tf.cast(features["padding_mask"], sequence.dtype)[:, :, None]
        mean = tf.reduce_sum(sequence * mask, axis=1) / tf.reduce_sum(mask, axis=1)
        return tf.math.l2_normalize(mean, axis=-1)

    @tf.function
    def step(texts_a: tf.Tensor, texts_b: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            unit = embed(tf.concat([texts_a, texts_b], axis=0), training=True)
            half = tf.shape(texts_a)[0]
            scores = 20.0 * tf.reduce_sum(unit[:half] * unit[half:], axis=-1)
            lower = labels[:, None] < labels[None, :]
            terms = tf.where(lower, scores[:, None] - scores[None, :], -1e12)
            loss = tf.reduce_logsumexp(tf.concat([[0.0], tf.reshape(terms, [-1])], axis=0))
        gradients = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(gradients, variables, strict=True))
        return loss

    iterator = iter(pair_dataset(settings))
    times, losses = [], []
    for _ in range(settings["warmup"] + settings["steps"]):
        start = time.perf_counter()
        (texts_a, texts_b), labels = next(iterator)
        losses.append(float(step(texts_a, texts_b, labels)))
        times.append(time.perf_counter() - start)
    result = summary(times, losses[0], settings)
    timed = batches(settings)[settings["warmup"] :]
    positions = tf.function(lambda texts: tf.size(pack(texts)["token_ids"]))  # eager: lists
    result["positions_per_step"] = statistics.mean(
        int(positions(tf.constant(a + b))) for a, b, _ in timed
    )
    encode_batch = tf.function(lambda texts: embed(texts, False), reduce_retracing=True)
    size = settings["encode_batch"]

    def encode(texts: list[str]) -> None:
        for start in range(0, len(texts), size):
            encode_batch(tf.constant(texts[start : start + size])).numpy()

    result["encode_per_s"] = timed_encode(encode, encode_texts(settings))
    result["versions"] = f"TensorFlow {tf.__version__}, Keras {keras.__version__}, " + (
        f"keras-hub {keras_hub.__version__}"
    )
    return result


class StepClock:
    """A Keras callback's clock: the time each batch of `fit` ends (from the start of fit)."""

    def __init__(self) -> None:
        import keras

        class Clock(keras.callbacks.Callback):
            def on_train_begin(inner, logs=None):  # noqa: N805
                self.ends.append(time.perf_counter())

            def on_train_batch_end(inner, batch, logs=None):  # noqa: N805
                self.ends.append(time.perf_counter())
                if batch == 0:
                    self.first_loss = float(logs["loss"])

        self.ends: list[float] = []
        self.first_loss = float("nan")
        self.callback = Clock()

    def step_times(self) -> list[float]:
        return [b - a for a, b in zip(self.ends, self.ends[1:], strict=False)]


def pad_to_fixed_length(encoder: Any, length: int) -> None:
    """Make a `PretrainedTextEncoder` pad every batch to `length` tokens instead of its
    longest text (the `tapefit_fixed` variant's only change)."""
    import tensorflow as tf

    per_batch, pad = encoder.features, encoder.special_ids["pad"]

    def fixed(texts: Any) -> dict[str, tf.Tensor]:
        features = per_batch(texts)
        extra = [[0, 0], [0, length - tf.shape(features["token_ids"])[1]]]
        return {
            name: tf.pad(value, extra, constant_values=pad if name == "token_ids" else 0)
            if value.dtype != tf.bool
            else tf.pad(value, extra, constant_values=False)
            for name, value in features.items()
        }

    object.__setattr__(encoder, "features", fixed)  # an instance attribute, untracked by Keras


def run_tapefit(settings: dict[str, Any], fixed: bool = False) -> dict[str, Any]:
    """`SiameseModel` over the checkpoint, compiled with AdamW and CoSENT, through `fit`."""
    from tapefit import SiameseModel  # first: sets the backend and TensorFlow's options

    # isort: split
    import keras
    import keras_hub
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    length = settings["sequence_length"]
    model = SiameseModel(
        encoder={"preset": settings["checkpoint"]}, sequence_length=length, loss={"name": "cosent"}
    )
    if fixed:
        pad_to_fixed_length(model.encoder, length)
    optimizer = keras.optimizers.AdamW(
        settings["learning_rate"], weight_decay=settings["weight_decay"], epsilon=1e-8
    )
    model.compile(optimizer=optimizer, **model.compile_defaults())
    clock = StepClock()
    steps = settings["warmup"] + settings["steps"]
    model.fit(
        pair_dataset(settings), steps_per_epoch=steps, epochs=1, verbose=0,
        callbacks=[clock.callback],
    )  # fmt: skip
    result = summary(clock.step_times(), clock.first_loss, settings)
    timed = batches(settings)[settings["warmup"] :]
    result["positions_per_step"] = statistics.mean(
        int(tf.size(model.encoder.features(tf.constant(a + b))["token_ids"])) for a, b, _ in timed
    )
    size = settings["encode_batch"]
    result["encode_per_s"] = timed_encode(
        lambda texts: model.encode(texts, batch_size=size), encode_texts(settings)
    )
    result["versions"] = f"TensorFlow {tf.__version__}, Keras {keras.__version__}, " + (
        f"keras-hub {keras_hub.__version__}"
    )
    return result


# -- the peer: sentence-transformers on PyTorch, in its own interpreter ----------------------------


def run_peer(settings: dict[str, Any]) -> dict[str, Any]:
    """sentence-transformers' model, tokenizer and `CoSENTLoss` in a PyTorch training loop.

    The loop is what `SentenceTransformerTrainer` runs per step (tokenise each column, padded
    to its longest text; the loss's forward; backward; AdamW) without the Hugging Face
    Trainer's bookkeeping around it, which could only add to the peer's time.
    """
    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer

    try:
        from sentence_transformers.sentence_transformer.losses import CoSENTLoss
    except ImportError:  # sentence-transformers before 6
        from sentence_transformers.losses import CoSENTLoss

    torch.set_num_threads(settings["threads"])
    torch.manual_seed(0)
    model = SentenceTransformer(settings["checkpoint"], device="cpu")
    model.max_seq_length = settings["sequence_length"]
    loss_fn = CoSENTLoss(model, scale=20.0)
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        plain = name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name
        (no_decay if plain else decay).append(parameter)
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": settings["weight_decay"]},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=settings["learning_rate"],
    )
    tokenize = getattr(model, "preprocess", None) or model.tokenize
    model.train()
    times, positions, losses = [], [], []
    for texts_a, texts_b, labels in batches(settings):
        start = time.perf_counter()
        features = [tokenize(texts_a), tokenize(texts_b)]
        loss = loss_fn(features, torch.tensor(labels, dtype=torch.float32))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        times.append(time.perf_counter() - start)
        positions.append(sum(int(f["input_ids"].numel()) for f in features))
    result = summary(times, losses[0], settings)
    result["positions_per_step"] = statistics.mean(positions[settings["warmup"] :])
    size = settings["encode_batch"]
    model.eval()
    result["encode_per_s"] = timed_encode(
        lambda texts: model.encode(texts, batch_size=size, show_progress_bar=False),
        encode_texts(settings),
    )
    attention = getattr(getattr(model[0], "auto_model", None), "config", None)
    result["versions"] = (
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), "
        f"sentence-transformers {sentence_transformers.__version__}, attention "
        f"{getattr(attention, '_attn_implementation', '?')}"
    )
    return result


def child(variant: str, settings_file: Path) -> None:
    """Run one variant in this process and print its measurements (the `RESULT` line)."""
    settings = json.loads(settings_file.read_text())
    if variant == "peer":
        result = run_peer(settings)
    elif variant == "plain":
        result = run_plain(settings)
    else:
        result = run_tapefit(settings, fixed=variant == "tapefit_fixed")
    result["peak_rss_mb"] = peak_rss_mb()
    print(RESULT + json.dumps(result), flush=True)


# -- the parent: one process per variant, one after the other -------------------------------------


def run_child(variant: str, python: str, settings_file: Path, log: Path) -> dict[str, Any]:
    """One variant in a fresh `python` process; its measurements, or SystemExit with the end
    of its log when it fails."""
    env = dict(os.environ)
    if variant == "peer":  # its own environment: nothing of this one's Python path or Keras
        env = {k: v for k, v in env.items() if not k.startswith(("PYTHON", "KERAS_"))}
        env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="true")
    else:  # tapefit's CLI defaults: TensorFlow quiet, oneDNN on
        path = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
        env.update(KERAS_BACKEND="tensorflow", PYTHONPATH=path)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        env.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
    command = [python, str(Path(__file__).resolve()), "--child", variant, str(settings_file)]
    with log.open("w") as output:
        done = subprocess.run(
            command, stdout=subprocess.PIPE, stderr=output, text=True, env=env, cwd=log.parent
        )
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT)]
    if done.returncode != 0 or not lines:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise SystemExit(
            f"variant {variant} ({python}) failed with exit status {done.returncode}:\n{tail}"
        )
    return json.loads(lines[-1][len(RESULT) :])


def combine(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One variant's rounds: per-step times pooled (median, min, max), throughputs and peak
    memory as medians over rounds, each round's median kept."""
    steps = [t for r in rounds for t in r["step_times_s"]]
    median = statistics.median(steps)
    batch = rounds[0]["pairs_per_s"] * rounds[0]["step_s"]
    return {
        "step_s": median,
        "step_min_s": min(steps),
        "step_max_s": max(steps),
        "steps": len(steps),
        "round_step_s": [r["step_s"] for r in rounds],
        "first_step_s": statistics.median(r["first_step_s"] for r in rounds),
        "first_loss": rounds[0]["first_loss"],
        "pairs_per_s": batch / median,
        "encode_per_s": statistics.median(r["encode_per_s"] for r in rounds),
        "positions_per_step": rounds[0]["positions_per_step"],
        "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in rounds),
        "versions": rounds[0]["versions"],
    }


def paired_ratio(results: dict[str, dict], name: str, base: str) -> float:
    """Median over rounds of `name`'s round median over `base`'s in the same round (drift
    between rounds cancels); with one round, the ratio of the medians."""
    pairs = zip(results[name]["round_step_s"], results[base]["round_step_s"], strict=True)
    return statistics.median(a / b for a, b in pairs)


def table(results: dict[str, dict], args: argparse.Namespace) -> str:
    """The variants side by side, then the ratios the benchmark is for."""
    names = {
        "plain": "keras-hub + tf.function tape loop",
        "tapefit": "tapefit, padded per batch",
        "tapefit_fixed": f"tapefit, padded to {args.sequence_length}",
        "peer": "sentence-transformers (PyTorch)",
    }
    lines = [
        f"{'variant':<36} {'s/step':>7} {'min':>6} {'max':>6} {'pairs/s':>8} "
        f"{'encode/s':>9} {'first s':>8} {'tokens/step':>11} {'peak RSS MB':>11}",
    ]
    for variant, r in results.items():
        lines.append(
            f"{names[variant]:<36} {r['step_s']:>7.3f} {r['step_min_s']:>6.3f} "
            f"{r['step_max_s']:>6.3f} {r['pairs_per_s']:>8.1f} {r['encode_per_s']:>9.1f} "
            f"{r['first_step_s']:>8.2f} {r['positions_per_step']:>11.0f} {r['peak_rss_mb']:>11.0f}"
        )
    if "tapefit" in results:
        for base, label in (("plain", "tapefit/plain"), ("peer", "tapefit/peer")):
            if base in results:
                ratio = paired_ratio(results, "tapefit", base)
                goal = f" (goal <= 1.05: {'met' if ratio <= 1.05 else 'missed'})"
                lines.append(f"{label} step time {ratio:.3f}{goal if base == 'plain' else ''}")
        if "tapefit_fixed" in results:
            ratio = paired_ratio(results, "tapefit_fixed", "tapefit")
            lines.append(f"tapefit padded to {args.sequence_length} / per batch {ratio:.3f}")
    if "peer" not in results:
        lines.append("peer: not run (no --peer-python given)")
    return "\n".join(lines)


def positive_int(text: str) -> int:
    """argparse type for counts and sizes: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--checkpoint", type=Path, required=True,
        help="a Hugging Face-format BERT-style folder (config.json, model.safetensors, "
        "tokenizer.json or vocab.txt)",
    )  # fmt: skip
    parser.add_argument(
        "--peer-python", help="the Python of an environment with torch and sentence-transformers"
    )
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--steps", type=positive_int, help="timed steps (default 40)")
    parser.add_argument("--warmup", type=positive_int, help="untimed steps first (default 5)")
    parser.add_argument("--pairs", type=positive_int, help="synthetic pairs (default 4096)")
    parser.add_argument("--batch-size", type=positive_int, default=16)
    parser.add_argument("--sequence-length", type=positive_int, default=128)
    parser.add_argument("--learning-rate", type=float, default=2e-5)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--encode-size", type=positive_int, help="sentences encoded (1024)")
    parser.add_argument("--encode-batch", type=positive_int, help="encode batch size (64)")
    parser.add_argument("--threads", type=positive_int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--rounds", type=positive_int, default=1,
        help="run every variant this many times, in turn (a fresh process each time)",
    )  # fmt: skip
    parser.add_argument(
        "--quick", action="store_true",
        help="a smoke run: 1 warm-up and 3 timed steps, 128 pairs and sentences encoded",
    )  # fmt: skip
    parser.add_argument("--json", type=Path, help="write the results here as JSON")
    args = parser.parse_args(argv)
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if not (args.checkpoint / "config.json").is_file():
        parser.error(f"--checkpoint {args.checkpoint}: no config.json there")
    if args.json and not args.json.parent.is_dir():
        parser.error(f"--json {args.json}: folder {args.json.parent} does not exist; create it")
    if args.peer_python and not Path(args.peer_python).is_file():
        parser.error(f"--peer-python {args.peer_python}: no such file")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the variants one after the other, print the table, return (and optionally save)
    the results."""
    args = parse_args(argv)
    variants = [v for v in args.variants if v != "peer" or args.peer_python]
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    print(
        f"{args.checkpoint.resolve().name}: batch {args.batch_size} pairs, sequence length "
        f"{args.sequence_length}, {args.steps} timed steps after {args.warmup}, encode "
        f"{args.encode_size} in batches of {args.encode_batch}, {args.rounds} round(s); "
        f"{machine}; {time.strftime('%Y-%m-%d')}",
        flush=True,
    )
    settings = {
        key: getattr(args, key)
        for key in (
            "batch_size", "sequence_length", "learning_rate", "weight_decay", "steps", "warmup",
            "encode_size", "encode_batch", "threads",
        )
    }  # fmt: skip
    settings["checkpoint"] = str(args.checkpoint.resolve())
    rounds: dict[str, list[dict]] = {v: [] for v in variants}
    report: dict[str, Any] = {
        "settings": {k: str(v) for k, v in vars(args).items()},
        "machine": machine,
        "complete": False,  # until every round has run: a run stopped half-way keeps its rounds
        "rounds": rounds,
    }
    with tempfile.TemporaryDirectory(prefix="pretrained-bench-") as folder:
        texts_a, texts_b, labels = english_pairs(args.pairs, seed=0)
        pairs_file = Path(folder) / "pairs.json"
        pairs_file.write_text(
            json.dumps({"texts_a": texts_a, "texts_b": texts_b, "labels": labels})
        )
        settings["pairs"] = str(pairs_file)
        settings_file = Path(folder) / "settings.json"
        settings_file.write_text(json.dumps(settings))
        for round_ in range(args.rounds):
            for variant in variants:
                python = args.peer_python if variant == "peer" else sys.executable
                log = Path(folder) / f"{variant}-{round_}.log"
                result = run_child(variant, python, settings_file, log)
                rounds[variant].append(result)
                if args.json:
                    args.json.write_text(json.dumps(report, indent=2) + "\n")
                print(
                    f"  round {round_ + 1} {variant}: {result['step_s']:.3f} s/step "
                    f"({result['versions']})",
                    flush=True,
                )
    results = {variant: combine(runs) for variant, runs in rounds.items()}
    print(table(results, args), flush=True)
    report.update(complete=True, variants=results)
    if "tapefit" in results:
        for base in ("plain", "peer"):
            if base in results:
                report[f"tapefit_over_{base}"] = paired_ratio(results, "tapefit", base)
        if "tapefit_fixed" in results:
            report["fixed_over_per_batch"] = paired_ratio(results, "tapefit_fixed", "tapefit")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        here = str(Path(__file__).resolve().parent)  # experiments/: shadows no module of theirs
        sys.path[:] = [entry for entry in sys.path if entry != here]
        child(sys.argv[2], Path(sys.argv[3]))
    else:  # a SIGTERM ends the running variant's process and removes the temporary files too
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
        main()
