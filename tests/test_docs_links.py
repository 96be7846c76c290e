"""Every link between the README and the pages of docs/ leads somewhere: the file exists,
and an anchor (``page.md#a-heading``) names a heading of that page, as GitHub makes them.
Two did not: a heading renamed ("Start-up"), and one that never was ("MEAN metrics: Student
t, bounded at the ends of the declared range")."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def anchors(page: Path) -> set[str]:
    """GitHub's anchors: the heading lower-cased, without its punctuation (hyphens and
    underscores stay), spaces made hyphens; a repeated one gets -1, -2, ..."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        heading = None if fenced else re.match(r"#{1,6} (.*)", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(f"{slug}-{count}" if count else slug)
    return found


def test_the_anchor_rule_reads_headings_as_github_does(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("# Title\n## `--assurance P`: deciding it\n```\n# not a heading\n```\n"
                    "## Title\n")
    assert anchors(page) == {"title", "--assurance-p-deciding-it", "title-1"}


def test_every_link_between_pages_and_every_anchor_resolves() -> None:
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, "\n".join(broken)
