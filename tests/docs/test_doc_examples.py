"""The documentation's examples run as written, so they cannot rot.

Every page under `docs/` is read for its fenced blocks, in page order:

- A ```` ```python ```` block is executed. A page's blocks run in order in one namespace (as
  cells of one notebook), in a fresh temporary working directory that is also on `sys.path`
  (a notebook started in a project folder). One test per page that has such blocks.
- A ```` ```py ```` block is shown, never run (GPU or cluster code, snippets out of context).
  When its first line names a relative file (`# my_project/data.py`), the block is written
  to that file before the blocks after it run; so are ```` ```yaml ```` and other data blocks
  headed the same way (`# conf/data/waves.yaml`; a Hydra `# @package` line may come first, as
  Hydra reads it only there). Blocks in a language with `#` comments (Python, YAML, TOML)
  are written as shown, so what a user copies is what runs; CSV, TSV, JSON and text blocks
  without the line naming the file. A page's Python can then use the project files it shows.
- ```` ```bash ```` blocks are not run.
- A `--8<-- "path"` or `--8<-- "path:section"` line in a ```` ```python ```` block (a
  pymdownx snippet, as the site includes it) stands for that file, or its section between
  `# --8<-- [start:section]` and `# --8<-- [end:section]`, paths from the repository root.
- `<!-- check: EXPRESSION -->` after a block (invisible on the site) is evaluated in the
  page's namespace when the page reaches it, and must be truthy: the example did what the
  page says it does (wrote the file it names, trained, reloaded).

A fast test, not marked slow, compiles every ```` ```python ```` block and every check
without running anything.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.pages import Item, items_of, page_id, pages, runnable_pages
from tests.helpers import REPO


def _compiled(item: Item, page: Path) -> types.CodeType:
    """The code object of a block or check, its line numbers those of the page."""
    where = str(page.relative_to(REPO))
    if item.kind == "check":
        return compile("\n" * (item.line - 1) + f"({item.text})", where, "eval")
    return compile("\n" * (item.line - 1) + item.text, where, "exec")


def _forget_modules_under(folder: Path) -> None:
    """Drop the modules imported from `folder` (a page's project files) from `sys.modules`."""
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and Path(file).resolve().is_relative_to(folder.resolve()):
            del sys.modules[name]


@pytest.fixture
def restored_process_state() -> Iterator[None]:
    """Put back the process-wide TensorFlow switches a page may flip (op determinism)."""
    from tensorflow.python.framework import config as tf_config

    deterministic = tf_config.is_op_determinism_enabled()
    yield
    if deterministic:
        tf_config.enable_op_determinism()
    else:
        tf_config.disable_op_determinism()


@pytest.mark.parametrize("page", [pytest.param(p, id=page_id(p)) for p in pages()])
def test_page_blocks_compile(page: Path) -> None:
    """Every ```` ```python ```` block and check of `page` is valid Python, and every check
    follows a block it can check."""
    items = items_of(page)
    for item in items:
        if item.kind in ("python", "check"):
            _compiled(item, page)
        if item.kind == "check":
            assert any(i.kind == "python" and i.line < item.line for i in items), (
                f"{page_id(page)}:{item.line}: a check before any python block checks nothing"
            )


@pytest.mark.slow
@pytest.mark.parametrize("page", [pytest.param(p, id=page_id(p)) for p in runnable_pages()])
def test_page_examples_run(
    page: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    restored_process_state: None,
) -> None:
    """Run `page`'s ```` ```python ```` blocks in order in one namespace in a fresh folder,
    write its project files, and assert its checks."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    # A package of the same name another test imported from its own folder (my_project) must
    # not stand in for this page's files.
    packages = {
        Path(i.path).parts[0].removesuffix(".py") for i in items_of(page) if i.kind == "file"
    }
    for name in list(sys.modules):
        if name.split(".")[0] in packages:
            del sys.modules[name]
    namespace: dict[str, object] = {"__name__": "__main__"}
    try:
        for item in items_of(page):
            if item.kind == "file":
                target = tmp_path / item.path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(item.text, encoding="utf-8")
            elif item.kind == "python":
                exec(_compiled(item, page), namespace)
            elif item.kind == "check":
                value = eval(_compiled(item, page), namespace)
                assert value, f"{page_id(page)}:{item.line}: check failed: {item.text}"
    finally:
        _forget_modules_under(tmp_path)
