"""`StepTensorBoard`: TensorBoard's scalars on the optimizer-step axis step telemetry uses, the
traced training step as its graph, histograms and the profile, and no graph collection left on
after tracing (issue 22)."""

import pytest
import tensorflow as tf

from tests.helpers import built_once_per_session

pytestmark = pytest.mark.slow  # a whole run with every TensorBoard option on


def scalar_points(log_dir):
    """tag -> [(step, value)] of every scalar in `log_dir`'s event files."""
    points = {}
    for events in sorted(log_dir.glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(events)):
            for value in event.summary.value:
                tensor = value.tensor
                if (
                    value.HasField("tensor")
                    and tensor.dtype in (1, 2)
                    and not tensor.tensor_shape.dim
                ):
                    number = float(tf.make_ndarray(value.tensor))
                    points.setdefault(value.tag, []).append((event.step, number))
    return points


@pytest.fixture(scope="session")
@built_once_per_session
def tensorboard_run(tmp_path_factory):
    """A run with every TensorBoard option of the config on, 8 steps per execution."""
    from tapefit.runner.composition import compose
    from tapefit.runner.train import run

    run_dir = tmp_path_factory.mktemp("tensorboard")
    options = [
        "model.architecture=mlp",
        "trainer.epochs=2",
        "trainer.verbose=0",
        "data.train_limit=320",  # 10 steps an epoch
        "trainer.steps_per_execution=4",
        "callbacks.tensorboard.update_freq=batch",
        "callbacks.tensorboard.write_graph=true",
        "callbacks.tensorboard.histogram_freq=1",
        "callbacks.tensorboard.profile_batch=2",
        "callbacks.step_telemetry.every_n_steps=4",
    ]
    run(compose(options), run_dir)
    return run_dir / "tensorboard"


def test_batch_scalars_share_the_optimizer_step_axis_with_step_telemetry(tensorboard_run):
    points = scalar_points(tensorboard_run / "train")
    batch_steps = [step for step, _ in points["batch_loss"]]
    # Keras calls back after steps 4, 8, 10 of each epoch (10 steps, 4 per execution)
    assert batch_steps == [4, 8, 10, 14, 18, 20]
    assert {step for step, _ in points["step/gradient_norm"]} <= set(batch_steps)
    validation = scalar_points(tensorboard_run / "validation")
    assert [step for step, _ in validation["evaluation_loss_vs_iterations"]] == [10, 20]


def test_write_graph_writes_the_traced_training_step(tensorboard_run):
    """What TensorBoard's Graphs tab reads: a run-metadata graph summary of the step."""
    graphs = [
        value
        for events in (tensorboard_run / "train").glob("events.out.tfevents.*")
        for event in tf.compat.v1.train.summary_iterator(str(events))
        for value in event.summary.value
        if value.metadata.plugin_data.plugin_name == "graph_run_metadata_graph"
    ]
    # the profiled execution (profile_batch=2) exports its own graph, as Keras names it
    assert [value.tag for value in graphs] == ["train_step", "batch_2"]
    assert b"one_step_on_data" in graphs[0].tensor.string_val[0]


def test_histograms_and_the_profile_are_written(tensorboard_run):
    tags = set()
    for events in (tensorboard_run / "train").glob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(events)):
            tags.update(value.tag for value in event.summary.value)
    assert any(tag.endswith("/histogram") for tag in tags), sorted(tags)
    assert list((tensorboard_run / "train" / "plugins" / "profile").glob("*/*.xplane.pb"))


def test_a_traced_run_leaves_no_graph_collection_on(tensorboard_run):
    """`write_graph` and `profile_batch` trace with `tf.summary.trace_on(graph=True)`, whose
    export leaves graph collection on: every later function call kept its graph (5 MB a sweep
    trial, measured). The run turns it off."""
    from tensorflow.python.eager import context

    context.context().export_run_metadata()  # drops what was collected so far

    @tf.function
    def double(x):
        return 2 * x

    double(tf.constant(1.0))
    metadata = context.context().export_run_metadata()
    assert metadata is None or not metadata.function_graphs
