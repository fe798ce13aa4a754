"""The documentation pages, as installed: the wheel ships docs/*.md as the package ptxdsl.docs (a checkout
reads <repo>/docs). `ptxdsl docs` prints them; the verifier's messages name a rule's section by its anchor.

    page_names()                     ['api', 'compile', 'isa', ...]
    lookup('verifier')               the whole page
    lookup('expect-tx-mismatch')     the section with that anchor (<a id="..."> or a heading's slug), any page
    lookup('verifier#loop-parity')   the section of that page
"""
from __future__ import annotations

import re
from pathlib import Path

from .errors import PtxdslError

_HEADING = re.compile(r"^(?P<hashes>#{1,6})\s+(?P<title>.*)$")
_ANCHOR = re.compile(r'<a id="(?P<id>[^"]+)"></a>')


class DocError(PtxdslError):
    """A documentation page or section that does not exist."""


def docs_dir() -> Path:
    """The folder of the .md pages: ptxdsl/docs in an installed wheel, else <repo>/docs in a checkout."""
    here = Path(__file__).resolve().parent
    for folder in (here / "docs", here.parent / "docs"):
        if any(folder.glob("*.md")):
            return folder
    raise DocError(f"no documentation pages in {here / 'docs'} (this installation has none)", rule="docs.page")


def page_names() -> list[str]:
    """Every page, by name (the file name without .md), sorted."""
    return sorted(p.stem for p in docs_dir().glob("*.md"))


def page_path(name: str) -> Path:
    """The file of page `name` ('verifier', 'verifier.md' or 'docs/verifier.md')."""
    stem = _stem(name)
    path = docs_dir() / f"{stem}.md"
    if not stem or "/" in stem or not path.is_file():
        raise DocError(f"no page {name!r}; the pages are {', '.join(page_names())}", rule="docs.page")
    return path


def _stem(name: str) -> str:
    return name.removeprefix("docs/").removesuffix(".md")


def slug(title: str) -> str:
    """A heading's anchor as GitHub spells it: lower case, punctuation dropped, spaces as '-'."""
    title = _ANCHOR.sub("", title).strip().lower()
    return re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", title))


def sections(text: str) -> dict[str, str]:
    """anchor -> the section it heads (down to the next heading of the same or a higher level). A heading
    answers to its explicit `<a id>` and to its slug."""
    lines = text.split("\n")
    heads = [(i, len(m["hashes"]), m["title"]) for i, line in enumerate(lines) if (m := _HEADING.match(line))]
    heads = [h for h in heads if not _in_code(lines, h[0])]
    out: dict[str, str] = {}
    for n, (i, level, title) in enumerate(heads):
        end = next((j for j, lv, _ in heads[n + 1:] if lv <= level), len(lines))
        body = "\n".join(lines[i:end]).rstrip() + "\n"
        for anchor in [m["id"] for m in _ANCHOR.finditer(title)] + [slug(title)]:
            out.setdefault(anchor, body)
    return out


def _in_code(lines: list[str], i: int) -> bool:
    """Whether line i lies inside a ``` fence (a '# comment' in a code block is no heading)."""
    return sum(1 for line in lines[:i] if line.startswith("```")) % 2 == 1


def lookup(topic: str) -> str:
    """The text `ptxdsl docs TOPIC` prints: a page, `page#anchor`, or an anchor looked up in every page."""
    if not isinstance(topic, str) or not topic.strip():
        raise DocError(f"topic={topic!r}: expected a page name or an anchor", rule="docs.page")
    page, sep, anchor = topic.partition("#")
    if page and sep:
        found = sections(page_path(page).read_text(encoding="utf-8")).get(anchor)
        if found is None:
            raise DocError(f"no section {anchor!r} in {page_path(page).name}", rule="docs.section")
        return found
    if page and (docs_dir() / f"{_stem(page)}.md").is_file():
        return page_path(page).read_text(encoding="utf-8")
    for name in page_names():
        found = sections(page_path(name).read_text(encoding="utf-8")).get(anchor or page)
        if found is not None:
            return found
    raise DocError(f"no page or section {topic!r}; the pages are {', '.join(page_names())} (a verifier "
                   f"rule's name shows its section)", rule="docs.section")
