"""Text-pair data (`tapefit.data.pairs`): `synthetic_splits`' per-process cache hands out copies;
a missing file among several names the option that lists it."""

import numpy as np
import pytest

from tapefit.data.pairs import synthetic_splits
from tapefit.data.synthetic_pairs import PairGenerator
from tapefit.errors import TapefitError


def test_synthetic_splits_are_drawn_once_and_handed_out_as_copies():
    sizes = {"train": 64, "val": 16, "test": 16}
    first, _ = synthetic_splits(sizes, "graded", seed=11)
    first["train"].texts_a[0] = "changed by its user"
    first["train"].labels[0] = -1.0
    again, _ = synthetic_splits(sizes, "graded", seed=11)
    fresh = PairGenerator(seed=11).pairs(64)
    assert again["train"].texts_a.tolist() == fresh[0].tolist()
    np.testing.assert_array_equal(again["train"].labels, fresh[2])
    binary, label_range = synthetic_splits(sizes, "binary", seed=11)  # the same draws, binarised
    assert label_range == (0.0, 1.0)
    np.testing.assert_array_equal(binary["train"].labels, (fresh[2] >= 2.5).astype("float32"))


def test_a_missing_file_among_several_names_the_option_that_lists_it(tmp_path):
    from tapefit.data.pair_files import PairFileSpec
    from tapefit.data.pairs import read_pair_files

    present = tmp_path / "a.tsv"
    present.write_text("text1\ttext2\tlabel\nx\ty\t1\n")
    with pytest.raises(TapefitError) as refused:
        read_pair_files([present, tmp_path / "b.tsv"], PairFileSpec(), None, "validation_path")
    assert str(refused.value).endswith("b.tsv does not exist: check data.validation_path")
