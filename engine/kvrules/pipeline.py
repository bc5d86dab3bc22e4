"""The pipeline, in one place: load → extract → point classes → backend → verdicts.

Each stage is its own package and imports only the stages before it; this module is the
only one that wires them together (``api`` and the CLI call it).

A small bounded memo shares evaluations between cells whose rule-visible facts are
identical (the rules read no cell identity), so a campaign of similar cells costs one
engine run per distinct shape, not per cell.
"""
from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from kvrules.artifacts.discover import CellRef
from kvrules.artifacts.load import load_cell
from kvrules.facts.extract import extract_cell
from kvrules.diagnostics import FACT_INVALID, STRUCTURAL_CODES, Diagnostic, evidence_error
from kvrules.facts.model import CellFacts, Fact
from kvrules.facts.points import point_table
from kvrules.policy.catalogue import FactType, check_fact_fields
from kvrules.policy.compiled import CompiledPolicy
from kvrules.policy.compiled import compile_rules
from kvrules.policy import reference
from kvrules.pointclasses import point_classes, projection_key
from kvrules.backend import durable
from kvrules.backend.events import Evaluation, short
from kvrules.verdicts.build import build_cell
from kvrules.verdicts.model import CellVerdict

if TYPE_CHECKING:
    from importlib.abc import Traversable

    from kvrules.policy.compiler import Pass

MEMO_SIZE = 64
"""Evaluations kept for cells the rules cannot tell apart (least recently used first out).
An evaluation is ~25 KB; a campaign has a handful of distinct cells, an archive of distinct
cells gains nothing from a longer memory (256 cost 6 MiB of peak RSS and no hit)."""

def passes() -> tuple[tuple[str, Pass], ...]:
    """Every compiler pass: the policy's own, then the backend's (limits, lowering). The
    compiler is imported on this call: a run that finds its policy cached never needs it
    (``PASSES``, an attribute of this module, gives the same tuple)."""
    from kvrules.policy.compiler import PASSES as POLICY_PASSES
    return POLICY_PASSES + durable.PASSES


def __getattr__(name: str) -> Any:
    if name == "PASSES":
        return passes()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def compile_policy(source: str | Path | Traversable | None = None,
                   parameters: dict[str, Any] | None = None) -> CompiledPolicy:
    """Compile a policy for the durable-rules backend (raises KvrulesUsageError)."""
    return compile_rules(source, parameters, passes())


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
    return any(d.code in STRUCTURAL_CODES for d in diagnostics)


@dataclass(frozen=True)
class Prepared:
    """A cell ready for the backend: its facts, its point classes and the problems found.

    ``to_engine`` is False when the evidence is broken or holds values the engine must never
    see: the verdict is then built from the diagnostics alone.
    """

    cell: CellFacts
    classes: list[Fact]
    class_of: dict[int, str]
    to_engine: bool
    reference: tuple[Any, ...] | None = None
    """The reference evaluation of :attr:`facts` in its canonical form, when an extraction
    worker made it (it then costs the parent, which drives the engine, nothing)."""

    @property
    def facts(self) -> list[Fact]:
        """What the engine is given: the cell's facts plus one fact per point class."""
        return self.cell.facts + self.classes

    def reported(self) -> "Prepared":
        """What the verdict still needs once the point classes exist: the copies on other
        ranks are left out (a worker sends half as much to the parent)."""
        table = point_table(self.cell).reported()
        return replace(self, cell=replace(self.cell, points=table.rows, peer_points=table.peers))

    def with_reference(self, cp: CompiledPolicy) -> "Prepared":
        """This cell with its reference evaluation made now (in an extraction worker)."""
        if not self.to_engine:
            return self
        return replace(self, reference=reference.canonical(reference.evaluate(cp, self.facts)))


def prepare(cp: CompiledPolicy, cell: CellFacts) -> Prepared:
    """Group the points into classes and check every fact before the engine sees it."""
    classes, class_of = point_classes(cp, point_table(cell))
    facts = cell.facts + classes
    if _structural(cell.diagnostics):  # broken evidence never reaches the engine
        return Prepared(cell, classes, class_of, False)
    refused = value_problems(facts)
    if refused:
        return Prepared(replace(cell, diagnostics=cell.diagnostics + refused), classes,
                        class_of, False)
    problems = catalogue_problems(cp, facts)
    if problems:  # rules would read what the catalogue does not promise: fail closed
        cell = replace(cell, diagnostics=cell.diagnostics + problems)
    return Prepared(cell, classes, class_of, True)


@dataclass(frozen=True)
class CellRun:
    """One cell classified with everything kept (for explain, coverage and policy tests)."""

    prepared: Prepared
    evaluation: Evaluation
    verdict: CellVerdict


def checked(cp: CompiledPolicy, facts: list[Fact], ev: Evaluation,
            made: tuple[Any, ...] | None = None) -> Evaluation:
    """``ev`` as the engine gave it, with the first difference from the reference evaluation
    of ``facts`` (``made`` already, canonical, or made now) recorded; an evaluation that
    failed already is not compared."""
    if ev.failures:
        return ev
    expected = made if made is not None else reference.canonical(reference.evaluate(cp, facts))
    difference = reference.canonical_difference(reference.canonical(ev), expected)
    if difference is None:
        return ev
    return replace(ev, disagreements=[short(f"the rule engine and the reference evaluation "
                                            f"disagree: {difference}")])


def trace_cell(cp: CompiledPolicy, cell: CellFacts, verify: bool = True) -> CellRun:
    """Classify one cell as :class:`Classifier` does, without the memo, keeping the session.

    The engine runs in this process (authoring tools only; a crash is not contained).
    """
    prepared = prepare(cp, cell)
    ev = durable.evaluate_in_process(cp, prepared.facts) if prepared.to_engine else Evaluation()
    if prepared.to_engine and verify:
        ev = checked(cp, prepared.facts, ev)
    verdict = build_cell(cp, prepared.cell, ev, prepared.class_of, prepared.classes)
    return CellRun(prepared, ev, verdict)


@dataclass
class _Job:
    """A cell of :meth:`Classifier.classify_stream` between preparation and its verdict."""

    prepared: Prepared
    key: bytes | None = None
    evaluation: Evaluation | None = None


class Classifier:
    """A compiled policy plus its evaluation memo; one per process (not shared by threads).

    With ``verify`` (the default) every engine evaluation is checked against the reference
    evaluation of the policy (:mod:`kvrules.policy.reference`); a difference makes the cell an
    ``engine_disagreement`` error, so no point of it is eligible."""

    def __init__(self, cp: CompiledPolicy, verify: bool = True) -> None:
        self.cp = cp
        self.verify = verify
        self._memo: OrderedDict[bytes, Evaluation] = OrderedDict()
        self.evaluations = 0
        self.engine = durable.Backend(cp)

    def close(self, wait: bool = True) -> None:
        """Stop the engine worker (it restarts on the next cell); ``wait``: until it is gone."""
        self.engine.close(wait)

    def start(self) -> None:
        """Start the engine worker now, for a run that has cells to evaluate: it loads the
        engine and the rulesets while the first cell is prepared."""
        self.engine.start()

    def classify_facts(self, cell: CellFacts) -> CellVerdict:
        """Verdict of a cell from already extracted facts."""
        (verdict,) = self.classify_stream([cell])
        return verdict

    def _recall(self, key: bytes) -> Evaluation | None:
        ev = self._memo.get(key)
        if ev is not None:
            self._memo.move_to_end(key)
        return ev

    def _remember(self, key: bytes, prepared: Prepared) -> Evaluation:
        """Wait for the evaluation in flight, check it, and memoise it under ``key``."""
        ev, real = self.engine.result()
        self.evaluations += 1
        if real and self.verify:
            ev = checked(self.cp, prepared.facts, ev, prepared.reference)
        if real:  # a crash is not memoised: the next such cell gets a fresh worker
            self._memo[key] = ev
            if len(self._memo) > MEMO_SIZE:
                self._memo.popitem(last=False)
        return ev

    def classify_stream(self, cells: Iterable[CellFacts]) -> Iterator[CellVerdict]:
        """Verdicts of ``cells`` in input order, the same as :meth:`classify_facts` gives.

        The engine runs in its own process, so while it evaluates one cell this process
        loads, extracts and prepares the next (pulling ``cells`` lazily) and builds the
        verdicts before it: at most one evaluation in flight, at most two cells waiting.
        """
        return self.classify_prepared(prepare(self.cp, cell) for cell in cells)

    def classify_prepared(self, cells: Iterable[Prepared]) -> Iterator[CellVerdict]:
        """:meth:`classify_stream` of cells already prepared (by worker processes)."""
        waiting: deque[_Job] = deque()
        flight: _Job | None = None
        try:
            for prepared in cells:
                job = _Job(prepared)
                if job.prepared.to_engine:
                    flight = self._schedule(job, flight, len(waiting))
                else:
                    job.evaluation = Evaluation()
                waiting.append(job)
                while waiting and waiting[0].evaluation is not None:
                    yield self._verdict(waiting.popleft())
            self._land(flight)
            flight = None
        except BaseException:  # an interrupt or an abandoned stream: drop the evaluation
            if flight is not None:  # in flight with its worker (a fresh one serves next)
                self.engine.close()
            raise
        while waiting:
            yield self._verdict(waiting.popleft())

    def _schedule(self, job: "_Job", flight: "_Job | None", waiting: int) -> "_Job | None":
        """Give ``job`` its evaluation (memo) or send it to the engine; the job in flight."""
        job.key = projection_key(self.cp, job.prepared.facts)
        if flight is not None and (flight.key == job.key or waiting >= 2):
            self._land(flight)
            flight = None
        job.evaluation = self._recall(job.key)
        if job.evaluation is None:
            self._land(flight)
            flight = None
            job.evaluation = self._recall(job.key)
        if job.evaluation is None:
            self.engine.submit(job.prepared.facts, job.prepared.cell.cell_id)
            return job
        return flight

    def _land(self, flight: "_Job | None") -> None:
        """Receive the evaluation in flight, if any."""
        if flight is not None and flight.key is not None:
            flight.evaluation = self._remember(flight.key, flight.prepared)
        return None

    def _verdict(self, job: "_Job") -> CellVerdict:
        assert job.evaluation is not None
        p = job.prepared
        return build_cell(self.cp, p.cell, job.evaluation, p.class_of, p.classes)

    def classify_ref(self, ref: CellRef) -> CellVerdict:
        """Verdict of a discovered cell (loads and extracts it first)."""
        return self.classify_facts(extract_cell(load_cell(ref)))
