"""The `tf.data` recipe every split shares (`tapefit.data.pipeline`)."""

import numpy as np


def test_pipelines_run_without_the_autotuner_and_keep_every_sample():
    # The autotuner's thread made each iterator's teardown wait seconds
    # (docs/explanation/benchmark.md, Fast defaults).
    from tapefit.data.pipeline import make_pipeline

    arrays = (np.arange(10, dtype="float32"), np.arange(10))
    dataset = make_pipeline(arrays, 4, shuffle=True, seed=0)
    assert dataset.options().autotune.enabled is False
    assert sorted(float(v) for x, _ in dataset for v in x) == list(range(10))
