"""A resumed run's history files (`tapefit.checkpointing.history_files`): history.csv rewritten
with exactly the checkpointed epochs, as Keras' CSVLogger writes it, and the epochs TensorBoard
lacks written with Keras' tags."""

import tensorflow as tf

from tapefit.checkpointing.history_files import fill_tensorboard, history_lists, rewrite_csv

EPOCHS = [
    {"loss": 1.0, "val_loss": 2.0, "accuracy": 0.25},
    {"loss": 0.5, "val_loss": 1.5, "accuracy": 0.75},
]


def scalars(log_dir) -> dict[str, list[tuple[int, float]]]:
    """tag -> [(step, value)] of the scalars in `log_dir`'s event files."""
    points: dict[str, list[tuple[int, float]]] = {}
    for events in sorted(log_dir.glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(events)):
            for value in event.summary.value:
                number = float(tf.make_ndarray(value.tensor))
                points.setdefault(value.tag, []).append((event.step, number))
    return points


def test_history_lists_is_keras_history_layout():
    assert history_lists(EPOCHS) == {
        "accuracy": [0.25, 0.75],
        "loss": [1.0, 0.5],
        "val_loss": [2.0, 1.5],
    }
    assert history_lists([{"loss": 1.0}, {"loss": 0.5, "val_loss": 0.7}]) == {
        "loss": [1.0, 0.5],
        "val_loss": [None, 0.7],
    }
    assert history_lists([]) == {}


def test_rewrite_csv_writes_exactly_the_checkpointed_epochs(tmp_path):
    path = tmp_path / "history.csv"
    path.write_text("epoch,loss\n0,1.0\n1,0.5\n2,0.4\n")  # epoch 2 was never checkpointed
    rewrite_csv(path, EPOCHS)
    want = b"epoch,accuracy,loss,val_loss\r\n0,0.25,1.0,2.0\r\n1,0.75,0.5,1.5\r\n"
    assert path.read_bytes() == want
    rewrite_csv(path, [{"loss": 1.0}, {"loss": 0.5, "val_loss": 0.7}])
    assert path.read_bytes() == b"epoch,loss,val_loss\r\n0,1.0,\r\n1,0.5,0.7\r\n"
    assert [p.name for p in tmp_path.iterdir()] == ["history.csv"]  # written atomically


def test_no_checkpointed_epoch_leaves_no_csv_for_the_logger_to_start(tmp_path):
    path = tmp_path / "history.csv"
    path.write_text("epoch,loss\n0,1.0\n")
    rewrite_csv(path, [])
    assert not path.exists()
    rewrite_csv(path, [])  # nothing to remove: fine


def test_fill_tensorboard_writes_only_the_epochs_it_lacks(tmp_path):
    first = EPOCHS[:1]
    assert fill_tensorboard(tmp_path, first) == 1
    assert fill_tensorboard(tmp_path, first) == 0  # all there
    assert fill_tensorboard(tmp_path, EPOCHS) == 1  # epoch 1 only
    train, validation = scalars(tmp_path / "train"), scalars(tmp_path / "validation")
    assert train == {"epoch_loss": [(0, 1.0), (1, 0.5)], "epoch_accuracy": [(0, 0.25), (1, 0.75)]}
    assert validation == {"epoch_loss": [(0, 2.0), (1, 1.5)]}


def test_a_rewritten_csv_continues_as_keras_csv_logger_writes_it(tmp_path):
    """The same bytes as Keras' CSVLogger's own file, after the logger appends the next epoch
    (a resumed run's history.csv, line endings included)."""
    import keras

    logs = [{"loss": 1.0, "val_loss": 2.0}, {"loss": 0.5, "val_loss": 1.5}]
    keras_file, rewritten = tmp_path / "keras.csv", tmp_path / "rewritten.csv"
    logger = keras.callbacks.CSVLogger(str(keras_file))
    logger.on_train_begin()
    for epoch, epoch_logs in enumerate(logs):
        logger.on_epoch_end(epoch, epoch_logs)
    logger.on_train_end()
    rewrite_csv(rewritten, logs[:1])
    resumed = keras.callbacks.CSVLogger(str(rewritten), append=True)
    resumed.on_train_begin()
    resumed.on_epoch_end(1, logs[1])
    resumed.on_train_end()
    assert rewritten.read_bytes() == keras_file.read_bytes()
