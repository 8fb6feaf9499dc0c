"""What the search tests share: the fastest search settings, a search space set in place, and
readers of a search's files."""

import csv

import tensorflow as tf
from tensorboard.plugins.hparams import plugin_data_pb2

from tapefit.config.schemas import SpaceEntry

FAST = [
    "model.architecture=mlp",
    "trainer.epochs=1",
    "trainer.verbose=0",
    "trainer.deterministic=true",
    "data.train_limit=400",
    "callbacks.tensorboard.enabled=false",
]


def mlp_space(cfg, **entries):
    """Replace the classifier's search space with `entries` (dotted key -> entry)."""
    cfg.tune.space = {key: SpaceEntry(**entry) for key, entry in entries.items()}
    return cfg


def rows(path):
    with path.open() as file:
        return list(csv.DictReader(file))


def hparams_sessions(log_dir):
    """subfolder name -> the hyperparameter values its HParams session recorded."""
    sessions = {}
    for session_dir in (d for d in log_dir.iterdir() if d.is_dir()):
        for data in hparams_data(session_dir):
            if data.HasField("session_start_info"):
                sessions[session_dir.name] = {
                    k: v.WhichOneof("kind") and getattr(v, v.WhichOneof("kind"))
                    for k, v in data.session_start_info.hparams.items()
                }
    return sessions


def hparams_data(session_dir):
    """Every HParams plugin record (session start, end, experiment) in `session_dir`'s own
    event files."""
    for event_file in session_dir.glob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(event_file)):
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name == "hparams":
                    yield plugin_data_pb2.HParamsPluginData.FromString(
                        value.metadata.plugin_data.content
                    )
