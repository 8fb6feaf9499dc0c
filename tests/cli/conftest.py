"""Fixtures of the command-line tests: the tutorial's user project, built once a session."""

import shutil

import pytest

from tests.cli.tutorial_project import FILES, KILL
from tests.helpers import REPO, built_once_per_session


@pytest.fixture(scope="session")
@built_once_per_session
def project(tmp_path_factory):
    """The tutorial's project files in a folder outside tapefit, plus a copy of the WGAN-GP."""
    root = tmp_path_factory.mktemp("user_project")
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)  # as the page shows it, the comments included
    shutil.copy(REPO / "experiments" / "wgan_gp.py", root / "wgan_gp.py")
    (root / "my_project" / "kill.py").write_text(KILL)
    return root
