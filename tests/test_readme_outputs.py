"""Every documentation example that shows ``$ kvrules ...`` and its output is the real output.

The pages are README.md and every ``docs/*.md`` (``doc_pages.pages``). A fenced block whose first line starts with ``$ kvrules`` is a transcript: each ``$`` line is
run from the repository root (stdout, then stderr, as a terminal shows them) and must print
the lines that follow it. Policy digests are compared as ``sha256:...`` (they change with
every rule edit, which is not what these examples are about).

Regenerate after an intended change: ``python tests/test_readme_outputs.py --update``.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from doc_pages import ROOT, pages
FENCE = re.compile(r"^```\n(\$ kvrules .*?)^```\n", re.S | re.M)
DIGEST = re.compile(r"sha256:[0-9a-f]{6,64}")


def transcripts(text: str) -> list[tuple[str, str]]:
    """(command, shown output) pairs of every transcript block of one page, in order."""
    pairs = []
    for block in FENCE.finditer(text):
        for chunk in re.split(r"^(?=\$ )", block.group(1), flags=re.M):
            if chunk:
                command, _, output = chunk.partition("\n")
                pairs.append((command[2:], output))
    return pairs


def run(command: str) -> str:
    """What ``command`` prints in the repository root (a wide terminal, no colour)."""
    argv = shlex.split(command)
    done = subprocess.run([sys.executable, "-m", "kvrules", *argv[1:]], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"})
    return done.stdout + done.stderr


def _normal(text: str) -> str:
    return DIGEST.sub("sha256:...", text)


def shows(shown: str, printed: str) -> bool:
    """``printed`` is what ``shown`` shows: equal, except that a line holding only ``...``
    (indented as it likes) stands for any lines there (a long output, cut on the page)."""
    parts = [re.escape(part) for part in re.split(r"^ *\.\.\.\n", _normal(shown), flags=re.M)]
    return re.fullmatch("(?:.*\n)*?".join(parts), _normal(printed)) is not None


PAIRS = [(page.relative_to(ROOT).as_posix(), command, shown) for page in pages()
         for command, shown in transcripts(page.read_text(encoding="utf-8"))]


def test_the_documentation_has_transcripts() -> None:
    commands = [c.split()[1] for _, c, _ in PAIRS]
    assert {"classify", "rules", "explain", "diff"} <= set(commands)
    assert any(page == "README.md" for page, _, _ in PAIRS)


@pytest.mark.parametrize("page, command, shown", PAIRS, ids=[f"{p}: {c}" for p, c, _ in PAIRS])
def test_a_documented_transcript_is_the_real_output(page: str, command: str,
                                                    shown: str) -> None:
    printed = run(command)
    assert shows(shown, printed), f"{page}:\n{printed}"


def update() -> None:
    """Rewrite every transcript whose output changed with what its command prints now."""
    for page in pages():
        _update(page)


def _update(page: Path) -> None:
    text = page.read_text(encoding="utf-8")

    def block(match: re.Match[str]) -> str:
        out = []
        for chunk in (c for c in re.split(r"^(?=\$ )", match.group(1), flags=re.M) if c):
            command, _, shown = chunk.partition("\n")
            printed = run(command[2:])
            out.append(f"{command}\n{shown if shows(shown, printed) else printed}")
        return "```\n" + "".join(out) + "```\n"

    new = FENCE.sub(block, text)
    if new != text:
        page.write_text(new, encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] == ["--update"]:
        update()
    else:
        sys.exit("usage: python tests/test_readme_outputs.py --update")
