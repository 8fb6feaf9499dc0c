"""The docs site builds in strict mode (broken links, missing pages and bad references fail)
and shows what a reader comes for: the tutorials' plots, the API of TapeModel, every key."""

import os
import sys

import pytest

from tests import processes
from tests.helpers import REPO, built_once_per_session

pytestmark = pytest.mark.slow
# Material and a plugin print banners about MkDocs 2 on every build; these switch them off.
QUIET = {
    "NO_MKDOCS_2_WARNING": "1",
    "DISABLE_MKDOCS_2_WARNING": "true",
    "TF_CPP_MIN_LOG_LEVEL": "2",
}


@pytest.fixture(scope="session")
@built_once_per_session
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    # forked from the tests' warm interpreter (tests/processes.py): the config reference's
    # generator imports tapefit, 6 s of imports in a fresh one
    done = processes.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        env={**os.environ, **QUIET},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def test_config_reference_lists_every_group(site):
    page = (site / "reference" / "config" / "index.html").read_text()
    for key in ("trainer.epochs", "data.batch_size", "model.architecture", "tune.max_trials"):
        assert f"<code>{key}</code>" in page


def test_api_reference_shows_tape_model_and_its_helpers(site):
    page = (site / "reference" / "api" / "index.html").read_text()
    for name in ("TapeModel", "apply_tape_gradients", "forward", "on_nonfinite"):
        assert name in page


def test_tutorials_embed_their_plots(site):
    pngs = sorted(p.name for p in (site / "tutorials" / "img").glob("*.png"))
    assert len(pngs) >= 2
    for page in ("mnist", "siamese"):
        html = (site / "tutorials" / page / "index.html").read_text()
        assert '<img alt="' in html and "img/" in html
