"""A docs page's fenced blocks and checks, read as the docs tests run them: which pages there
are, each block's language, line and code (with its `--8<--` snippets expanded)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import REPO

DOCS = REPO / "docs"
OPENING = re.compile(r"^(?P<indent>[ ]*)(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)")
LANGUAGE = re.compile(r"\s*\{?\.?(?P<lang>[\w+-]*)")
CHECK = re.compile(r"<!--\s*check:\s*(?P<expression>.*?)\s*-->", re.S)
FILE_HEADER = re.compile(
    r"^(?:#\s*@package\s+\S+\n)?#\s+(?P<path>[\w.-]+(?:/[\w.-]+)*\.[A-Za-z0-9]+)(?=[\s,:]|$)"
)
COMMENTED = {"py", "yaml", "yml", "toml", "ini"}  # their file keeps the comment naming it
SNIPPET = re.compile(
    r'^(?P<indent>[ ]*)-{1,}8<-{1,}\s+"(?P<path>[^":]+)(?::(?P<section>[\w-]+))?"\s*$'
)
DATA_LANGUAGES = {"py", "yaml", "yml", "toml", "json", "csv", "tsv", "text", "txt", "ini"}


@dataclass(frozen=True)
class Item:
    """One thing a page asks of the harness, where it stands in the page.

    Attributes:
        kind: `python` (run it), `file` (write it), `check` (evaluate it) or `shown`.
        line: The 1-based line of the page where the block's code or the check starts.
        text: The code, the file's content, or the check's expression.
        path: For a `file`, where it is written, relative to the working directory.
    """

    kind: str
    line: int
    text: str
    path: str = ""


def pages() -> list[Path]:
    """Every Markdown page under `docs/`, sorted."""
    return sorted(DOCS.rglob("*.md")) if DOCS.is_dir() else []


def page_id(page: Path) -> str:
    """The page's path relative to `docs/`, the test id."""
    return page.relative_to(DOCS).as_posix()


def _dedent(lines: list[str], indent: int) -> str:
    """The lines without the fence's indentation (a block inside an admonition or a list)."""
    return "".join(line[indent:] if not line[:indent].strip() else line for line in lines)


def _snippet(path: str, section: str | None) -> str:
    """The text pymdownx.snippets puts in place of `--8<-- "path:section"`."""
    text = (REPO / path).read_text(encoding="utf-8")
    if section is None:
        return text
    start, end = f"--8<-- [start:{section}]", f"--8<-- [end:{section}]"
    assert start in text and end in text, f"{path} has no section {section!r}"
    inside = text.split(start, 1)[1].split("\n", 1)[1].split(end, 1)[0]
    return inside.rsplit("\n", 1)[0] + "\n"


def _expand_snippets(code: str) -> str:
    """`code` with every snippet line replaced by the text it includes."""
    lines = []
    for line in code.splitlines(keepends=True):
        snippet = SNIPPET.match(line)
        lines.append(_snippet(snippet["path"], snippet["section"]) if snippet else line)
    return "".join(lines)


def _block_item(lang: str, line: int, body: str) -> Item:
    """A fenced block as a `python`, `file` or `shown` item (see the module docstring)."""
    if lang == "python":
        return Item("python", line, _expand_snippets(body))
    header = FILE_HEADER.match(body)
    if lang in DATA_LANGUAGES and header and ".." not in header["path"].split("/"):
        if lang in COMMENTED:  # written as shown: what a user copies is what is tested
            return Item("file", line, body, header["path"])
        return Item("file", line, body.split("\n", 1)[1] if "\n" in body else "", header["path"])
    return Item("shown", line, body)


def parse(text: str) -> list[Item]:
    """The fenced blocks and checks of a Markdown page, in page order.

    Args:
        text: The page's Markdown.

    Returns:
        One `Item` per fenced block and per `<!-- check: ... -->` outside blocks.

    Example:
        >>> [item.kind for item in parse("```python\\nx = 1\\n```\\n<!-- check: x == 1 -->\\n")]
        ['python', 'check']
    """
    lines = text.splitlines(keepends=True)
    items: list[Item] = []
    prose: list[tuple[int, str]] = []
    index = 0
    while index < len(lines):
        opening = _fence(lines[index])
        if not opening:
            prose.append((index + 1, lines[index]))
            index += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        closing = re.compile(rf"^[ ]{{0,{indent + 3}}}{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        end = index + 1
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        body = _dedent(lines[index + 1 : end], indent)
        language = LANGUAGE.match(opening["info"])["lang"].lower()
        items.append(_block_item(language, index + 2, body))
        index = end + 1
    for start, chunk in _paragraphs(prose):
        for match in CHECK.finditer(chunk):
            line = start + chunk[: match.start()].count("\n")
            items.append(Item("check", line, match["expression"]))
    return sorted(items, key=lambda item: item.line)


def _fence(line: str) -> re.Match[str] | None:
    """The opening fence on `line`, or None. As in CommonMark, a backtick fence's info string
    holds no backtick, so inline code at the start of a line (```` ```python ````) is prose."""
    opening = OPENING.match(line)
    if opening and opening["fence"][0] == "`" and "`" in opening["info"]:
        return None
    return opening


def _paragraphs(prose: list[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """Runs of consecutive prose lines joined, with the line number of their first line."""
    run: list[str] = []
    start = 0
    for number, line in prose:
        if run and number != start + len(run):
            yield start, "".join(run)
            run = []
        if not run:
            start = number
        run.append(line)
    if run:
        yield start, "".join(run)


def items_of(page: Path) -> list[Item]:
    """The items of one page."""
    return parse(page.read_text(encoding="utf-8"))


def runnable_pages() -> list[Path]:
    """The pages with at least one ```` ```python ```` block."""
    return [page for page in pages() if any(i.kind == "python" for i in items_of(page))]
