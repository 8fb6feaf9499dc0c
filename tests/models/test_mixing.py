"""tapefit/models/mixing.py: MixUp and CutMix mix the labels in the images' proportions."""

import numpy as np


def test_mixup_mixes_images_and_labels_in_the_same_proportions():
    from tapefit.models.mixing import BatchMixing

    images = np.random.default_rng(0).random((4, 6, 6, 3)).astype("float32")
    labels = np.eye(4, dtype="float32")  # row i is class i: a label row names the rows mixed
    mixed, soft = (np.asarray(t) for t in BatchMixing("mixup", alpha=0.4, seed=3)(images, labels))
    np.testing.assert_allclose(soft.sum(axis=1), 1.0, rtol=1e-6)
    assert not np.allclose(soft, labels)  # Keras 3.15's MixUp returns these unmixed
    for row in range(4):
        want = sum(weight * images[source] for source, weight in enumerate(soft[row]))
        np.testing.assert_allclose(mixed[row], want, rtol=1e-5, atol=1e-6)


def test_cutmix_pastes_a_box_and_weights_the_labels_by_its_area():
    from tapefit.models.mixing import BatchMixing

    images = np.stack([np.full((8, 8, 3), float(i), "float32") for i in range(4)])
    mixed, soft = (
        np.asarray(t) for t in BatchMixing("cutmix", alpha=1.0, seed=2)(images, np.eye(4))
    )
    assert not np.allclose(soft, np.eye(4))
    for row in range(4):  # each pixel comes from one image: the label is its share of pixels
        shares = [(mixed[row, ..., 0] == i).mean() for i in range(4)]
        np.testing.assert_allclose(soft[row], shares, atol=1e-6)
