"""`tapefit.data.unlabelled`: a split without labels refused in one line where labels are needed."""

from types import SimpleNamespace

import pytest

from tapefit.data.unlabelled import require_labels
from tapefit.errors import TapefitError

WHY = "data.validation_path=new.csv has no column 'label'"


@pytest.mark.parametrize(
    "data",
    [object(), SimpleNamespace(unlabelled=None), SimpleNamespace(unlabelled={})],
    ids=["no_attribute", "none", "empty"],
)
def test_data_without_unlabelled_splits_pass(data):
    require_labels(data, ["train", "val", "test"], "a run trains on labelled images")


def test_only_the_splits_asked_for_are_checked():
    data = SimpleNamespace(unlabelled={"test": "data.test_path=new.csv has no labels"})
    require_labels(data, ["train", "val"], "a run trains on labelled images")


def test_an_unlabelled_split_is_refused_with_its_reason_the_need_and_predict():
    data = SimpleNamespace(unlabelled={"test": "data.test_path has none", "val": WHY})
    with pytest.raises(TapefitError) as refused:
        require_labels(data, ["train", "val", "test"], "tapefit.evaluate scores labelled images")
    assert str(refused.value) == (  # the first unlabelled split in the order asked for
        f"{WHY}: tapefit.evaluate scores labelled images; "
        "python -m tapefit.predict takes images without labels"
    )
