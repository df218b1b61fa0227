"""The docs against the source tree: the Layout page names every module of vision_factory/ once and nothing that
is not there; every page of docs/ is in mkdocs.yml's navigation and every page the navigation names exists (what
`mkdocs build --strict` also checks, here without MkDocs, in the unit tier)."""

from __future__ import annotations

import re
from collections import Counter

import yaml
from conftest import ROOT

DOCS = ROOT / "docs"
LAYOUT = DOCS / "develop" / "layout.md"
PACKAGE = ROOT / "vision_factory"
# A table row of the Layout page naming a module: "| `families/depth.py` | ... |".
ROW = re.compile(r"^\| `([\w/]+\.py)` \|", re.M)


def _modules() -> set[str]:
    return {str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py") if path.name != "__init__.py"}


def _layout_rows() -> list[str]:
    return ROW.findall(LAYOUT.read_text())


def test_the_layout_page_names_every_module_once():
    named = Counter(_layout_rows())
    missing = sorted(_modules() - set(named))
    assert missing == [], f"modules the Layout page ({LAYOUT.relative_to(ROOT)}) does not name: {missing}"
    twice = sorted(module for module, count in named.items() if count > 1)
    assert twice == [], f"modules the Layout page names more than once: {twice}"


def test_the_layout_page_names_no_module_that_does_not_exist():
    ghosts = sorted(set(_layout_rows()) - _modules())
    assert ghosts == [], f"the Layout page names modules that do not exist (moved, removed, or an __init__): {ghosts}"


def test_the_layout_rule_reads_the_pages_rows():
    """The rule above reads rows: a row in the page's format is found, prose naming a module is not an entry."""
    page = "| `models/yolo.py` | YOLO |\n| `tools/bench.py` | bench |\nSee `models/tracker.py` for the tracker.\n"
    assert ROW.findall(page) == ["models/yolo.py", "tools/bench.py"]
    assert len(_layout_rows()) >= 100  # the page's rows are read (about 120 modules today)


def _nav_pages(entries) -> list[str]:
    pages = []
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def test_every_docs_page_is_in_the_navigation_and_every_navigation_page_exists():
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)  # no tags resolved: no MkDocs
    nav = _nav_pages(config["nav"])
    pages = sorted(str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md"))
    assert sorted(set(nav) - set(pages)) == [], "the navigation names pages that do not exist"
    assert sorted(set(pages) - set(nav)) == [], "pages of docs/ missing from mkdocs.yml's nav"
    assert len(nav) == len(set(nav)), "a page in the navigation twice"
