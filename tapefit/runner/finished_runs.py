"""Using a finished run again: its config, its data (or other data given by the same keys) and
its model, for `python -m tapefit.evaluate` and `python -m tapefit.predict`.

A run directory holds everything needed: `.hydra/config.yaml` (the config it ran with, so its
loader rebuilds the same splits from the same seed) and `model.keras` (the model it tested).
`key=value` overrides change the data (`data.test_path=other.tsv`) as they would on the
training command line.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import keras
import yaml
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from tapefit.checkpointing.top_k import FOLDER, kept_checkpoints, resolve_checkpoint
from tapefit.config.targets import ensure_working_directory_importable, locate
from tapefit.data.unlabelled import require_labels
from tapefit.errors import TapefitError
from tapefit.files import read_json
from tapefit.protocols import hook
from tapefit.runner.data_from_config import load_data
from tapefit.training.runtime import seed_everything

log = logging.getLogger("tapefit")

MODEL_FILE = "model.keras"
WHAT = {
    "run": "name the run directory, run=<run dir>",
    "output": "name the file to write, output=preds.csv",
    "input": "name the pair file to mine, input=pairs.tsv",
}
CONFIG_FILE = ".hydra/config.yaml"
RETRIEVAL_FILES = ("queries", "corpus", "qrels")  # evaluate's keys for a search collection
# Every key `tapefit.evaluate` or `tapefit.predict` takes; each takes some of them.
OWN_KEYS = ("run", "ckpt", "output", "split", "name", "scale", "input", *RETRIEVAL_FILES)


def parse_arguments(
    argv: Sequence[str], required: Sequence[str], optional: Sequence[str] = (), program: str = ""
) -> tuple[dict[str, str], list]:
    """Split `key=value` arguments into the entry point's own keys and data overrides.

    Args:
        argv: The command line after the module name.
        required: The entry point's own keys that must be given (`run`).
        optional: Its other keys (`ckpt`, `split`, ...).
        program: Its name in messages (`tapefit.predict`).

    Returns:
        The entry point's keys and the other `key=value` pairs, which change the data only
        (`data.*` and `seed`, which draws the splits).

    Raises:
        TapefitError: an argument without `=`, a key the entry point does not take (another
            entry point's, or a setting of the model or training, which a finished run keeps),
            or a required key missing.

    Examples:
        >>> parse_arguments(["run=outputs/x", "data.batch_size=8"], ["run"])
        ({'run': 'outputs/x'}, ['data.batch_size=8'])
        >>> parse_arguments(["run=x", "trainer.epochs=3"], ["run"])
        Traceback (most recent call last):
        ...
        tapefit.errors.TapefitError: trainer.epochs=3: a finished run's model and training ...
    """
    own, overrides = {}, []
    takes = (*required, *optional)
    for argument in argv:
        key, equals, value = argument.partition("=")
        if not equals:
            raise TapefitError(f"{argument!r} is not key=value: e.g. run=outputs/classifier/<time>")
        if key in takes:
            own[key] = value
        elif key in OWN_KEYS:
            listed = ", ".join(f"{name}=" for name in takes)
            raise TapefitError(
                f"{key}= is not an argument of {program or 'this command'}: it takes "
                f"{listed} and data.* overrides"
            )
        elif key.lstrip("+").startswith("data.") or key == "seed":
            overrides.append(argument)
        else:
            raise TapefitError(
                f"{argument}: a finished run's model and training stay as they ran; only its "
                "data changes here (data.* and seed, which draws the splits)"
            )
    missing = [key for key in required if key not in own]
    if missing:
        raise TapefitError(f"{missing[0]}= is missing: {WHAT[missing[0]]}")
    return own, overrides


def run_config(run_dir: Path, overrides: Sequence[str]) -> Any:
    """The config `run_dir` was trained with, with `overrides` applied (dotted `key=value`)."""
    path = run_dir / CONFIG_FILE
    if not path.is_file():
        raise TapefitError(f"run={run_dir} has no {CONFIG_FILE}: name a tapefit run directory")
    cfg = OmegaConf.load(path)
    try:
        OmegaConf.set_struct(cfg, False)
        for override in overrides:
            key, _, value = override.partition("=")
            OmegaConf.update(cfg, key.lstrip("+"), _value(value), merge=True)
        OmegaConf.resolve(cfg)
    except OmegaConfBaseException as error:
        raise TapefitError(f"run={run_dir}: {str(error).splitlines()[0]}") from None
    return cfg


def _value(text: str) -> Any:
    """A command-line value as the training command line reads it: YAML (`120` an integer,
    `null`, `[a, b]`), else the text itself."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def model_file(run_dir: Path, ckpt: str) -> Path:
    """The model a `ckpt` choice names.

    `tested` (the default) is the run's `model.keras`, the model its test metrics come from;
    `best`, `last` or an epoch number name a checkpoint kept with `checkpoint.save_top_k`
    (`best` falls back to `model.keras` when none was kept and the run tested its best epoch);
    anything else is a `.keras` file inside the run directory.
    """
    tested = run_dir / MODEL_FILE
    metrics = read_json(run_dir / "metrics.json", {}) or {}
    kept = run_dir / FOLDER
    if ckpt == "best" and not kept_checkpoints(kept):
        if metrics.get("tested_weights") not in (None, "best"):
            raise TapefitError(
                f"run={run_dir} kept no checkpoints and tested its "
                f"{metrics['tested_weights']} epoch's weights: use ckpt=tested"
            )
        ckpt = "tested"
    if ckpt == "tested":
        if not tested.is_file():
            raise TapefitError(
                f"run={run_dir} has no {MODEL_FILE}: it did not complete, or ran with "
                "trainer.save_model=false; finish it with resume=true"
            )
        return tested
    if ckpt in ("best", "last") or ckpt.isdigit():
        return resolve_checkpoint(kept, ckpt, metrics.get("objective_direction", "max"))
    path = run_dir / ckpt
    if not path.is_file():
        raise TapefitError(
            f"ckpt={ckpt}: no such file in {run_dir}; use tested, best, last or an epoch"
        )
    return path


def load_run(run_dir: str | Path, overrides: Sequence[str], ckpt: str = "tested") -> tuple:
    """The run's config (with `overrides`), its data and its model, ready to evaluate.

    Args:
        run_dir: A finished run directory.
        overrides: Dotted `key=value` changes, e.g. `data.test_path=other.tsv`.
        ckpt: `tested` (default), `best`, `last`, an epoch, or a `.keras` file in the run.

    Returns:
        `(cfg, data, model)`.

    Raises:
        TapefitError: not a run directory, no model, or data that cannot load.
    """
    cfg, path = config_and_model_file(Path(run_dir), overrides, ckpt)
    seed_everything(cfg.seed, False)
    data = load_data(cfg.data, cfg.seed)
    model = keras.models.load_model(path)
    return cfg, data, model


def config_and_model_file(run_dir: Path, overrides: Sequence[str], ckpt: str) -> tuple:
    """The run's config and the model file `ckpt` names, the model's class imported."""
    if not run_dir.is_dir():
        raise TapefitError(f"run={run_dir} is not a directory: name a tapefit run directory")
    cfg = run_config(run_dir, overrides)
    path = model_file(run_dir, ckpt)
    ensure_working_directory_importable()
    locate(cfg.model._target_, "model._target_")  # imports (and registers) the model's class
    return cfg, path


def evaluation_folder(run_dir: Path, overrides: Sequence[str], name: str | None) -> Path:
    """Where an evaluation writes: `eval/` for the run's own test split, `eval/<name>/` for
    other data, so each data set keeps its own figures. `name` defaults to the test file's
    stem (`data.test_path=news.tsv`: `news`), else to the overrides themselves.

    Examples:
        >>> evaluation_folder(Path("run"), [], None).as_posix()
        'run/eval'
        >>> evaluation_folder(Path("run"), ["data.test_path=data/news.tsv"], None).as_posix()
        'run/eval/news'
        >>> evaluation_folder(Path("run"), ["data.test_size=120"], None).as_posix()
        'run/eval/data.test_size-120'
    """
    if name is None and not overrides:
        return run_dir / "eval"
    if name is None:
        paths = [o.split("=", 1)[1] for o in overrides if o.startswith("data.test_path=")]
        name = Path(paths[0]).stem if paths else "_".join(overrides).replace("=", "-")
    if not name or "/" in name or "\\" in name or name in (".", ".."):
        raise TapefitError(f"name={name!r} must be a plain folder name (no '/' and not '..')")
    return run_dir / "eval" / name


def evaluate_run(
    run_dir: str | Path,
    overrides: Sequence[str] = (),
    ckpt: str = "tested",
    name: str | None = None,
) -> dict:
    """Evaluate a run's model on the test split of its data (or of the data `overrides` give),
    writing `metrics.json` with the names the run's uses into `evaluation_folder`.

    Args:
        run_dir: A finished run directory.
        overrides: Data changes as `key=value` (`data.test_path=...`).
        ckpt: Which model (`tested`, `best`, `last`, an epoch, or a `.keras` file).
        name: The folder under `eval/` (default: see `evaluation_folder`).

    Returns:
        The `test_*` metrics (and what the model's `report` adds).

    Raises:
        TapefitError: no test split, or as `load_run`.
    """
    from tapefit.files import write_json

    _, data, model = load_run(run_dir, overrides, ckpt)
    if data.test is None:
        raise TapefitError("the data has no test split: give one, e.g. data.test_path=<file>")
    require_labels(data, ("test",), "tapefit.evaluate scores labelled images")
    out = evaluation_folder(Path(run_dir), overrides, name)
    out.mkdir(parents=True, exist_ok=True)
    test = model.evaluate(data.test, verbose=0, return_dict=True)
    results = {f"test_{name}": float(value) for name, value in test.items()}
    report = hook(model, "report")
    if report is not None:
        results.update(report(data, out))
    write_json(out / "metrics.json", results)
    return results


def retrieve_run(
    run_dir: str | Path, files: dict[str, str], ckpt: str = "tested", name: str | None = None
) -> dict[str, float]:
    """Evaluate a run's encoder as a search over a collection given by three files, writing
    `eval/<name>/retrieval.json`.

    Args:
        run_dir: A finished run of a model with `encode` (the Siamese model).
        files: `queries`, `corpus` and `qrels` paths (`tapefit.data.retrieval_files`).
        ckpt: Which model (`tested`, `best`, `last`, an epoch, or a `.keras` file).
        name: The folder under `eval/`; default: the folder holding the queries file (a
            BEIR collection's name, `scifact/queries.jsonl`: `scifact`).

    Returns:
        `recall_at_1`, `recall_at_5`, `recall_at_10`, `mrr_at_10`, `ndcg_at_10`, and the
        counts of queries and corpus texts.

    Raises:
        TapefitError: a file missing from `files`, a model without `encode`, or bad files.
    """
    from tapefit.data.retrieval_files import retrieval_files
    from tapefit.evaluation.retrieval import RetrievalTask, evaluate_task
    from tapefit.files import write_json

    missing = [key for key in RETRIEVAL_FILES if key not in files]
    if missing:
        raise TapefitError(
            f"{missing[0]}= is missing: retrieval needs queries=, corpus= and qrels= together"
        )
    run_dir = Path(run_dir)
    _, path = config_and_model_file(run_dir, [], ckpt)
    task = RetrievalTask(*retrieval_files(*(files[key] for key in RETRIEVAL_FILES)))
    model = keras.models.load_model(path)
    if not callable(getattr(model, "encode", None)):
        raise TapefitError(
            f"run={run_dir}'s model ({type(model).__name__}) has no encode(texts): retrieval "
            "needs a text encoder such as tapefit.models.SiameseModel"
        )
    results = {**evaluate_task(model, task), "queries": len(task.queries)}
    results["corpus"] = len(task.corpus)
    collection = name or Path(files["queries"]).expanduser().resolve().parent.name or "search"
    out = evaluation_folder(run_dir, [], collection)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "retrieval.json", results)
    return results


def command(
    argv: Sequence[str],
    required: Sequence[str],
    act: Any,
    optional: Sequence[str] = (),
    program: str = "",
) -> int:
    """What `python -m tapefit.evaluate` and `tapefit.predict` share: parse `key=value`
    arguments, call `act(own, overrides)` (it prints its result), and turn bad input into one
    `tapefit: error:` line and exit code 2.

    Args:
        argv: The arguments after the module name.
        required: The entry point's own keys that must be given.
        act: Called with the entry point's keys and the config overrides.
        optional: The entry point's other keys; any other key of either entry point is refused.
        program: The entry point's name in messages.

    Returns:
        The exit code: 0, or 2 for bad input.
    """
    import sys

    try:
        own, overrides = parse_arguments(argv, required, optional, program)
        act(own, overrides)
    except TapefitError as error:
        print(f"tapefit: error: {error}", file=sys.stderr)
        return 2
    return 0
