"""Mutation classes at kvrules' value bounds: deep nesting and long non-ASCII strings.

The rule engine compares strings on a 16-bit length, so a fact string longer than 65,533
bytes of UTF-8 (65,535 tagged) would compare equal to a constant it merely starts with;
every decoded file is refused past 64 levels of nesting. These mutations put values on
both sides of those bounds in every JSON file kvrules reads and in rule literals, and
:func:`check` adds the oracle: a cell whose native regime or skip reason was made longer
than the bound has no eligible point. Kept apart from ``mutations.py`` (registered at its
end) so other classes are added there without touching these.
"""
from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import yaml

from . import mutations as mut
from .oracle import Finding, Run

STRING_BOUND = 65_533
"""Longest fact string (bytes of UTF-8) the engine compares whole."""
NESTING_BOUND = 64
"""Deepest nesting of any decoded file."""
SIZES = (65_532, 65_533, 65_534, 65_535, 65_536, 65_537, 65_600, 131_072)
"""UTF-8 sizes tried: on both sides of 65,533 (the tagged 65,535) and of 65,536."""
PADDING = ("\u00e9", "\u20ac", "\U0001f600", '"', "\x01", "a")
"""Padding characters: 2, 3 and 4 bytes of UTF-8, and two that JSON escapes (the engine
holds the escaped text, so these grow past the bound at fewer bytes of UTF-8)."""
READ_KEYS = frozenset({"kv_seed_regime", "skip_reason"})
"""Fields kvrules certainly reads as facts: over the bound, the cell must be an error."""
REFUSE = re.compile(r"\[refuse ([^\]]*)\]")


def long_string(rnd: random.Random, start: str) -> tuple[str, int]:
    """``start`` padded with one character class to about a size of :data:`SIZES`, and
    its UTF-8 size."""
    size = rnd.choice(SIZES)
    pad = rnd.choice(PADDING)
    width = len(pad.encode("utf-8"))
    need = max(0, size - len(start.encode("utf-8", "surrogatepass")))
    text = start + pad * (need // width) + "a" * (need % width)
    return text, len(text.encode("utf-8", "surrogatepass"))


def _over(text: str) -> bool:
    """Longer than the bound as the engine holds it (UTF-8, JSON escapes written out)."""
    import json
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass")) - 2 \
        > STRING_BOUND


def m_long_string(rnd: random.Random, root: Path) -> mut.Applied | None:
    """A string value (or any value) of any JSON file made a long non-ASCII string that
    starts with its old text (the fail-open: it starts with the approved literal)."""
    picked = mut._pick_object_file(rnd, root)
    if picked is None:
        return None
    path, doc = picked
    nodes = mut._nodes(doc)[1:]
    strings = [(p, v) for p, v in nodes if isinstance(v, str)]
    read = [(p, v) for p, v in strings if p and p[-1] in READ_KEYS]
    pool = read if read and rnd.random() < 0.5 else (strings or nodes)
    if not pool:
        return None
    at, old = rnd.choice(pool)
    text, size = long_string(rnd, old if isinstance(old, str) else "")
    mut._set(doc, at, text)
    path.write_text(mut.dumps(doc), encoding="utf-8")
    touched = mut.touched_by(root, path)
    refuse = f" [refuse {touched[0]}/{touched[1]}]" if at[-1] in READ_KEYS and _over(text) \
        and touched != mut.ALL else ""
    return mut.Applied(f"set {mut._pointer(at)} in {mut._rel(root, path)} to a string of "
                       f"{size} bytes{refuse}", {touched})


def _nested(rnd: random.Random, depth: int) -> mut.Raw:
    """A list or object nesting ``depth`` levels (the value itself is level 1)."""
    if rnd.random() < 0.5:
        return mut.Raw("[" * depth + "1" + "]" * depth)
    return mut.Raw('{"a":' * depth + "1" + "}" * depth)


def m_deep_nesting(rnd: random.Random, root: Path) -> mut.Applied | None:
    """Any value of any JSON file made a list or object nested around the bound (or far
    past it, where recursive code would raise)."""
    picked = mut._pick_object_file(rnd, root)
    if picked is None:
        return None
    path, doc = picked
    nodes = mut._nodes(doc)[1:]
    if not nodes:
        return None
    at, _ = rnd.choice(nodes)
    depth = rnd.choice([NESTING_BOUND - len(at) - 1, NESTING_BOUND - len(at),
                        NESTING_BOUND - len(at) + 1, NESTING_BOUND + 1, 500, 5000])
    mut._set(doc, at, _nested(rnd, max(1, depth)))
    path.write_text(mut.dumps(doc), encoding="utf-8")
    return mut.Applied(f"set {mut._pointer(at)} in {mut._rel(root, path)} to a value "
                       f"nested {max(1, depth)} deep", {mut.touched_by(root, path)})


def r_long_literal(rnd: random.Random, root: Path) -> mut.Applied | None:
    """A rule literal made a long non-ASCII string that starts with its old text."""
    docs = mut._rule_docs(root)
    if not docs:
        return None
    path, doc = rnd.choice(docs)
    leaves = [(p, v) for p, v in mut._nodes(doc)[1:]
              if isinstance(v, str) and "where" in p]
    if not leaves:
        return None
    at, old = rnd.choice(leaves)
    text, size = long_string(rnd, old)
    mut._set(doc, at, text)
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return mut.Applied(f"long literal: {mut._pointer(at)} of {path.name} set to a string of "
                       f"{size} bytes")


def r_deep_literal(rnd: random.Random, root: Path) -> mut.Applied | None:
    """A rule leaf made a value nested around the bound (PyYAML's writer recurses, so no
    deeper: ``mutations.r_deep_nesting`` writes deep YAML as text)."""
    depth = rnd.choice([NESTING_BOUND - 1, NESTING_BOUND, NESTING_BOUND + 1, NESTING_BOUND + 8])
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return mut._yaml_leaf_mutation(rnd, root, "deep literal", [(f"nested {depth}", value)])


CAMPAIGN: dict[str, tuple[float, mut.Mutation]] = {
    "long_string": (2, m_long_string),
    "deep_nesting": (1.5, m_deep_nesting),
}
RULES: dict[str, tuple[float, mut.Mutation]] = {
    "long_literal": (1, r_long_literal),
    "deep_literal": (0.5, r_deep_literal),
}


def check(descriptions: list[str], run: Run) -> list[Finding]:
    """The bound's oracle: a cell given a native regime or skip reason longer than the
    engine compares has no eligible point (whatever it starts with)."""
    wanted = {m.group(1) for d in descriptions for m in REFUSE.finditer(d)}
    if not wanted or not run.report_expected or run.returncode not in (0, 1):
        return []
    try:
        import json
        cells = json.loads(run.stdout).get("cells", [])
    except (ValueError, AttributeError):
        return []  # the general oracle reports an unreadable report
    out = []
    for cell in cells if isinstance(cells, list) else []:
        if not isinstance(cell, dict):
            continue
        name = f"{Path(str(cell.get('campaign'))).name}/{cell.get('cell_id')}"
        points = cell.get("points") if isinstance(cell.get("points"), list) else []
        bad = [p.get("benchmark_id") for p in points
               if isinstance(p, dict) and p.get("eligible") is True]
        if name in wanted and bad:
            out.append(Finding("eligible_in_error", f"{run.label}: cell {name} has a string "
                               f"over {STRING_BOUND} bytes and eligible points {bad[:5]}"))
    return out


mut.CAMPAIGN_MUTATIONS.update(CAMPAIGN)  # registered on import (run.py imports this module)
mut.RULE_MUTATIONS.update(RULES)
