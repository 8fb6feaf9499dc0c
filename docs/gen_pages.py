"""Pages written at build time (mkdocs-gen-files), so none of them can drift from its source.

- reference/config.md: every config key, from conf/ and the schemas (tapefit.config.reference);
- index.md, changelog.md, contributing.md: README.md, CHANGELOG.md and CONTRIBUTING.md, their
  links rewritten to point inside the site.
"""

import re
from pathlib import Path

import mkdocs_gen_files

from tapefit.config.reference import render_markdown

ROOT = Path(__file__).resolve().parent.parent
TOP_LEVEL = {
    "README.md": "index.md",
    "CHANGELOG.md": "changelog.md",
    "CONTRIBUTING.md": "contributing.md",
}


def site_links(text: str) -> str:
    """`](docs/x.md)` -> `](x.md)`, `](CHANGELOG.md)` -> `](changelog.md)`."""
    text = re.sub(r"\]\(docs/", "](", text)
    for source, page in TOP_LEVEL.items():
        text = text.replace(f"]({source})", f"]({page})")
    return text


with mkdocs_gen_files.open("reference/config.md", "w") as page:
    page.write(render_markdown())

for source, target in TOP_LEVEL.items():
    with mkdocs_gen_files.open(target, "w") as page:
        page.write(site_links((ROOT / source).read_text()))
