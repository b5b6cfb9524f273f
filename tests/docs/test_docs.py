"""The documentation holds together: every page of ``docs/`` is on the README's map and in ``mkdocs.yml``, in one
order; every relative link of the README and the pages leads to a file (and a heading, where it names one); the
README stays a first hour (at most 400 lines) and prose lines stay readable; ``mkdocs build --strict`` passes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest
import yaml

from tests.conftest import ROOT
from tests.fixtures.docs_pages import mapped_pages

DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
MAX_PROSE = 160


def without_fences(text: str) -> str:
    """The text with fenced blocks blanked (line breaks kept): a ``# comment`` in a block is no heading."""
    return re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)


def without_code(text: str) -> str:
    """The text with fenced blocks and code spans blanked (line breaks kept), so links in examples do not count."""
    return re.sub(r"`[^`]*`", lambda m: "\n" * m.group(0).count("\n"), without_fences(text))


def slug(heading: str) -> str:
    """A heading's anchor as GitHub and MkDocs' toc both make it for these pages."""
    plain = re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower())
    return plain.replace(" ", "-")


def anchors(page: Path) -> List[str]:
    return [slug(h) for h in re.findall(r"^#{1,6} (.+)$", without_fences(page.read_text()), re.M)]


def links(page: Path) -> Iterator[Tuple[str, str]]:
    """``(path, anchor)`` of every relative link of a page (external ones left out)."""
    for target in LINK.findall(without_code(page.read_text())):
        if not re.match(r"[a-z]+:", target):
            path, _, anchor = target.partition("#")
            yield path, anchor


def nav_pages() -> List[Path]:
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    return [DOCS / next(iter(entry.values())) for entry in nav]


def test_every_page_is_on_the_readme_map_and_in_mkdocs_nav_in_one_order():
    pages = sorted(DOCS.glob("*.md"))
    assert sorted(mapped_pages()) == pages, (
        "a page of docs/ is missing from the README's map, or the map names a missing page"
    )
    assert nav_pages() == mapped_pages(), "mkdocs.yml's nav and the README's map list the pages in another order"


def test_every_relative_link_leads_to_a_file_and_a_heading():
    broken = []
    for page in PAGES:
        for path, anchor in links(page):
            target = (page.parent / path).resolve() if path else page
            if not target.exists():
                broken.append(f"{page.relative_to(ROOT)}: {path} does not exist")
            elif anchor and target.suffix == ".md" and anchor not in anchors(target):
                broken.append(f"{page.relative_to(ROOT)}: {path}#{anchor} names no heading of {target.name}")
    assert broken == []


def test_the_readme_is_a_first_hour_and_prose_lines_are_wrapped():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 400
    long = []
    for page in PAGES:
        for number, line in enumerate(without_code(page.read_text()).splitlines(), 1):
            if len(line) > MAX_PROSE and not line.startswith(("|", "![")):
                long.append(f"{page.relative_to(ROOT)}:{number}")
    assert long == [], f"prose lines over {MAX_PROSE} characters (wrap them; table rows may be long)"


def test_mkdocs_builds_the_pages_strictly(tmp_path):
    """Every warning (a link to a missing page or heading, a page left out of nav) fails the build."""
    pytest.importorskip("mkdocs", reason='mkdocs is not installed: pip install -e ".[docs]"')
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    build(load_config(str(ROOT / "mkdocs.yml"), site_dir=str(tmp_path / "site"), strict=True))
    assert (tmp_path / "site" / "index.html").is_file()
    assert all(
        (tmp_path / "site" / page.stem / "index.html").is_file() for page in mapped_pages() if page.stem != "index"
    )
