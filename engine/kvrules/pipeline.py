"""The pipeline, in one place: load → extract → point classes → backend → verdicts.

Each stage is its own package and imports only the stages before it; this module is the
only one that wires them together (``api`` and the CLI call it).

A small bounded memo shares evaluations between cells whose rule-visible facts are
identical (the rules read no cell identity), so a campaign of similar cells costs one
engine run per distinct shape, not per cell.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace
from importlib.abc import Traversable
from pathlib import Path
from typing import Any

from kvrules.artifacts.discover import CellRef
from kvrules.artifacts.load import load_cell
from kvrules.artifacts.model import CellEvidence
from kvrules.facts.extract import extract_cell
from kvrules.diagnostics import FACT_INVALID, STRUCTURAL_CODES, Diagnostic, evidence_error
from kvrules.facts.model import CellFacts, Fact
from kvrules.policy.catalogue import FactType, check_fact_fields
from kvrules.policy.compiled import CompiledPolicy
from kvrules.policy.compiled import compile_rules
from kvrules.policy.compiler import PASSES as POLICY_PASSES, Pass
from kvrules.runtime.classes import point_classes, projection
from kvrules.backend import durable
from kvrules.backend.events import Evaluation
from kvrules.verdicts.build import build_cell
from kvrules.verdicts.model import CellVerdict

MEMO_SIZE = 256

PASSES: tuple[tuple[str, Pass], ...] = POLICY_PASSES + durable.PASSES
"""Every compiler pass: the policy's own, then the backend's (limits, lowering)."""


def compile_policy(source: str | Path | Traversable | None = None,
                   parameters: dict[str, Any] | None = None) -> CompiledPolicy:
    """Compile a policy for the durable-rules backend (raises KvrulesUsageError)."""
    return compile_rules(source, parameters, PASSES)


def catalogue_problems(cp: CompiledPolicy, facts: list[Fact]) -> list[Diagnostic]:
    """Facts that break the fact catalogue, as ``fact_invalid`` diagnostics."""
    out = []
    for fact in facts:
        declared = cp.fact_types.get(fact.type)
        if declared is None or fact.type in cp.policy.derived or fact.type == "params":
            problems = [f"unknown fact type '{fact.type}'"] if declared is None else []
        else:
            problems = check_fact_fields(FactType(fact.type, "", declared), fact.fields)
        out += [evidence_error(FACT_INVALID, p, *fact.source()) for p in problems]
    return out


def value_problems(facts: list[Fact]) -> list[Diagnostic]:
    """Values the engine must never see (non-JSON, non-finite, huge strings) and repeated
    fact ids (the engine rejects a repeated fact and then corrupts its session), as
    ``fact_invalid`` diagnostics naming the file and JSON pointer."""
    out = []
    seen: set[str] = {"params"}
    for fact in facts:
        if fact.id in seen:
            out.append(evidence_error(FACT_INVALID, f"{fact.type} fact id '{fact.id}' "
                                      "appears twice", *fact.source()))
        seen.add(fact.id)
        for name, problem in durable.refused_fields(fact.fields):
            out.append(evidence_error(FACT_INVALID, f"{fact.type}.{name}: {problem}; "
                                      "not sent to the rule engine", *fact.source(name)))
    return out


def _structural(diagnostics: list[Diagnostic]) -> bool:
    return any(getattr(d, "code", None) in STRUCTURAL_CODES for d in diagnostics)


class Classifier:
    """A compiled policy plus its evaluation memo; one per process (not shared by threads)."""

    def __init__(self, cp: CompiledPolicy) -> None:
        self.cp = cp
        self._memo: OrderedDict[str, Evaluation] = OrderedDict()
        self.evaluations = 0
        self.engine = durable.Backend(cp)

    def close(self) -> None:
        """Stop the engine worker (it restarts on the next cell)."""
        self.engine.close()

    def classify_facts(self, cell: CellFacts) -> CellVerdict:
        """Verdict of a cell from already extracted facts."""
        classes, class_of = point_classes(self.cp, cell.points, cell.peer_points)
        facts = cell.facts + classes
        if _structural(cell.diagnostics):  # broken evidence never reaches the engine
            return build_cell(self.cp, cell, Evaluation(), class_of, classes)
        refused = value_problems(facts)
        if refused:
            cell = replace(cell, diagnostics=cell.diagnostics + refused)
            return build_cell(self.cp, cell, Evaluation(), class_of, classes)
        problems = catalogue_problems(self.cp, facts)
        if problems:  # rules would read what the catalogue does not promise: fail closed
            cell = replace(cell, diagnostics=cell.diagnostics + problems)
        key = projection(self.cp, facts)
        ev = self._memo.get(key)
        if ev is None:
            ev, real = self.engine.evaluate(facts, cell.cell_id)
            self.evaluations += 1
            if real:  # a crash is not memoised: the next such cell gets a fresh worker
                self._memo[key] = ev
                if len(self._memo) > MEMO_SIZE:
                    self._memo.popitem(last=False)
        else:
            self._memo.move_to_end(key)
        return build_cell(self.cp, cell, ev, class_of, classes)

    def classify_evidence(self, evidence: CellEvidence) -> CellVerdict:
        return self.classify_facts(extract_cell(evidence))

    def classify_ref(self, ref: CellRef) -> CellVerdict:
        return self.classify_evidence(load_cell(ref))
