"""Every relative link of the README and the docs points at a file or folder of the repository, so a moved record,
plan or guide cannot leave a published figure pointing at nothing."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md")), *sorted((REPO / "examples").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # https:, mailto:, ...


def relative_links(page: Path) -> list[str]:
    """The targets of ``page``'s markdown links that are neither external nor anchors within the page."""
    return [t for t in LINK.findall(page.read_text()) if not EXTERNAL.match(t) and not t.startswith("#")]


def broken_links(pages: list[Path], root: Path) -> list[str]:
    """``page: target`` for each relative link whose target (without its anchor) is missing or lies outside ``root``."""
    broken = []
    for page in pages:
        for target in relative_links(page):
            path = (page.parent / target.split("#", 1)[0]).resolve()
            if not path.is_relative_to(root.resolve()) or not path.exists():
                broken.append(f"{page.relative_to(root)}: {target}")
    return broken


def test_the_pages_link_to_what_the_repository_holds():
    assert sum(len(relative_links(page)) for page in PAGES) > 50  # the pages' links are found at all
    assert broken_links(PAGES, REPO) == []


def test_a_missing_target_or_one_outside_the_repository_is_reported(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "plan.md").write_text("plan")
    page = tmp_path / "README.md"
    page.write_text("[plan](docs/plan.md#test) [gone](docs/record/run.json) [web](https://example.org) "
                    "[here](#results) [outside](../elsewhere/notes.md)")  # fmt: skip
    assert broken_links([page], tmp_path) == ["README.md: docs/record/run.json", "README.md: ../elsewhere/notes.md"]
