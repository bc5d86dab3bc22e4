"""What a rule reads from the facts it binds, shown as evidence (value, file, JSON pointer).

Shared by ``explain`` for fired rules (the facts the engine bound) and for rules that did not
fire (the fact that came closest). The location comes from :meth:`Fact.source`, so a value is
always shown where the extractor found it, never re-derived.
"""
from __future__ import annotations

from dataclasses import dataclass

from typing import Any

from kvrules.authoring.explain.joins import Traced
from kvrules.authoring.explain.phrases import absence_text, fact_label
from kvrules.facts.model import Fact
from kvrules.policy.compiler import template_refs
from kvrules.policy.evaluate import MISSING, atoms
from kvrules.policy.model import Ref, Rule


@dataclass(frozen=True)
class Evidence:
    """One field of one extracted fact as a rule read it."""

    fact: str
    field: str
    present: bool
    value: Any
    file: str
    pointer: str

    def to_dict(self) -> dict[str, Any]:
        out = {"fact": self.fact, "field": self.field, "present": self.present,
               "file": self.file, "pointer": self.pointer}
        if self.present:
            out["value"] = self.value
        return out


def read_fields(rule: Rule) -> dict[str, list[str]]:
    """Alias → fields the rule reads from the fact bound to it (conditions, refs, texts)."""
    out: dict[str, list[str]] = {}

    def add(alias: str, name: str) -> None:
        names = out.setdefault(alias, [])
        if name not in names and name != "id":
            names.append(name)
    refs: list[Ref] = template_refs(rule.reason)
    for p in rule.patterns:
        for a in atoms(p.where):
            if not p.negated:
                add(p.alias, a.field)
            if isinstance(a.operand, Ref):
                refs.append(a.operand)
    for action in rule.actions:
        values = list(action.args.values()) + list(action.args.get("set", {}).values())
        refs += [v for v in values if isinstance(v, Ref)]
        refs += [r for v in values if isinstance(v, str) for r in template_refs(v)]
    for ref in refs:
        add(ref.alias, ref.field)
    return out


def evidence_of(traced: Traced, rule: Rule, bound: dict[str, str],
                substitute: dict[str, Fact] | None = None,
                fields: dict[str, list[str]] | None = None) -> list[Evidence]:
    """Evidence for every extracted fact in ``bound`` (alias → fact id); derived facts are
    skipped (their own derivation explains them). ``substitute`` replaces a point-class
    representative by the point actually explained, so locations are that point's own."""
    reads = fields if fields is not None else read_fields(rule)
    out = []
    for alias, fid in bound.items():
        sf = traced.by_id(fid)
        if sf is None or sf.by is not None:
            continue
        fact = (substitute or {}).get(fid) or sf.fact
        values = fact.fields if fact is not None else sf.fields
        for name in reads.get(alias, []):
            value = values.get(name, MISSING)
            file, pointer = fact.source(name) if fact is not None else ("", "")
            out.append(Evidence(fact_label(sf.type, values), name, value is not MISSING,
                                None if value is MISSING else value, traced.shown_path(file),
                                pointer))
    return out


def negation_text(rule: Rule) -> list[str]:
    """``no plan`` / ``no condition_failed where group is "dense_synthetic_kv"`` per ``none``."""
    return [absence_text(p) for p in rule.negatives]
