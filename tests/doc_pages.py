"""The user documentation as the tests read it: README.md and every ``docs/*.md`` page.

Examples, transcripts and named blocks may live on any page; the tests that check them find
them wherever they are, so moving a section between pages keeps it checked.
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def pages() -> list[Path]:
    """README.md, then every Markdown page of docs/ in name order."""
    return [README, *sorted(DOCS.glob("*.md"))]


def all_text() -> str:
    """Every page's text, one after the other (README first)."""
    return "\n".join(page.read_text(encoding="utf-8") for page in pages())


def named_block(name: str, lang: str = "[a-z]*") -> tuple[Path, str]:
    """The page holding the fenced block between ``<!-- name -->`` and ``<!-- /name -->``
    and the block's text; exactly one page may hold it."""
    pattern = re.compile(rf"<!-- {name} -->\n```{lang}\n(.*?)```\n<!-- /{name} -->", re.S)
    found = [(page, m.group(1)) for page in pages()
             for m in pattern.finditer(page.read_text(encoding="utf-8"))]
    assert len(found) == 1, f"the {name} block is on {len(found)} pages, not one: " \
                            f"{[str(p.relative_to(ROOT)) for p, _ in found]}"
    return found[0]


def block(name: str, lang: str = "[a-z]*") -> str:
    """The text of the named block (see :func:`named_block`)."""
    return named_block(name, lang)[1]
