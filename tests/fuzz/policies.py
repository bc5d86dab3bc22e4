"""Differential fuzzing of the rule engine against the reference evaluation.

Random small policies within the language (a few rules over a few fact types, joins on
shared fields, ``none``, derived facts across strata, verdict actions, an ordered decision)
and random facts; each case is compiled and lowered for the real durable backend, evaluated
by the engine and by :mod:`kvrules.policy.reference`, and the two evaluations compared::

    python -m tests.fuzz.policies --cases 5000 --seed 1 --jobs 2
    python -m tests.fuzz.policies --seed 1 --only 123 --show     # one case: policy, facts, diff

Case ``I`` of seed ``S`` is drawn from ``random.Random("kvrules-policy-fuzz:S:I")``, so it does
not depend on ``--cases`` or ``--jobs``. A case the compiler refuses (a negation cycle, say) is
counted as ``refused``, not run. A case whose facts the pipeline would refuse to send to the
engine (``pipeline.value_problems``) is ``skipped``. The exit status is 1 when the engine and the
reference disagreed on any case.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ABSENT = object()
INPUTS = ("a", "b", "c")
DERIVED = ("d1", "d2", "d3")
RANK = {"a": 0, "b": 0, "c": 0, "point": 0, "d1": 1, "d2": 2, "d3": 3}
FIELDS = {t: {"k": "any", "v": "any", "w": "any", "tags": "string_list"} for t in INPUTS}
FIELDS.update({t: {"k": "any", "v": "any"} for t in DERIVED})
FIELDS["point"] = {"point_type": "string", "native_regime": "any",
                   "sample_reasons": "string_list", "batch_size": "integer"}
REGIMES = ("r1", "r2", "r3")
SCALARS: list[Any] = [0, 1, 2, -1, 1.0, 2.5, 0.0, True, False, None, "", "x", "y", "xy", "s:x"]
VALUES: list[Any] = SCALARS + [[], ["x"], ["x", "y"], [{"p": 1}, {"p": 1}],
                               [{"p": 1}, {"p": 2}], [{"p": 1}, {}], {"p": 1}, {}, ABSENT, ABSENT]
RARE: list[Any] = [2**63 - 1, -2**63, 2**63, 2**64, 1e-05, 1.5e-07, 1e16, "x" * 70_000,
                   "x" * 4464, "é", "\u0000x", 3.0000000000000004, -0.0]
STRINGS = ["x", "y", "xy", "", "s:x"]
TAGS: list[Any] = [[], ["x"], ["y"], ["x", "y"], ["x", "x"], ABSENT]

HEADER = {
    "policy": {
        "name": "fuzz", "version": "1",
        "parameters": {"dense_synthetic_kv": {"type": "boolean", "default": True}},
        "qualifications": {"g": {"description": "d", "conditions": {"C1": "c1", "C2": "c2"}}},
        "derived": {t: {"fields": {f: {"type": k} for f, k in FIELDS[t].items()}}
                    for t in INPUTS + DERIVED},
        "regimes": list(REGIMES),
        "error_codes": ["e1", "e2"],
    }
}


@dataclass
class Case:
    """One generated case: rule file text and facts as (type, id, fields)."""

    seed: str
    rules: dict[str, Any]
    facts: list[tuple[str, str, dict[str, Any]]]


KNOWN = False
"""Set by ``--skip-known``: generate no test the engine is known to get wrong (presence and
equality tests of list-valued fields, see the module's README section), so a run looks for
new defects."""


class Gen:
    def __init__(self, rng: random.Random) -> None:
        self.r = rng
        self.n = 0

    def value(self) -> Any:
        if self.r.random() < 0.03:
            return self.r.choice(RARE)
        return self.r.choice(VALUES)

    def literal(self, kind: str) -> Any:
        if kind == "string":
            return self.r.choice(STRINGS)
        if kind == "integer":
            return self.r.choice([0, 1, 2, -1])
        v = self.r.choice(SCALARS)
        return v

    # --- conditions -------------------------------------------------------------------

    def test(self, kind: str, env: dict[str, str], negated: bool) -> Any:
        """One operator test of a field of declared type ``kind``."""
        r = self.r
        refs = [(a, f) for a, t in env.items() for f, k in FIELDS.get(t, {}).items()
                if k == kind or (k == "any" and kind != "string_list")
                or (kind == "any" and k != "string_list")]
        if refs and r.random() < 0.35:
            alias, f = r.choice(refs)
            ops = ["same_as", "differs_from", "eq", "ne"]
            if not negated and kind in ("any", "integer") and FIELDS[env[alias]][f] in (
                    "any", "integer"):
                ops += ["lt", "gt", "le", "ge"]
            if kind == "string_list":
                ops = ["eq"] if KNOWN else ["same_as", "differs_from"]
            op = r.choice(ops)
            if KNOWN and kind == "string_list":
                return {"contains": "x"}
            return {op: {"ref": f"{alias}.{f}"}}
        if kind == "string_list":
            op = r.choice(["contains", "contains_any", "contains_none", "length", "empty"]
                          + ([] if KNOWN else ["exists", "is"]))
            if op == "contains":
                return {"contains": r.choice(["x", "y", "z"])}
            if op in ("contains_any", "contains_none"):
                return {op: r.sample(["x", "y", "z"], r.randint(1, 2))}
        else:
            ops = ["lit", "eq", "ne", "in", "not_in", "exists", "truthy", "is", "length",
                   "empty"]
            if kind in ("any", "integer"):
                ops += ["lt", "le", "gt", "ge"]
            if kind in ("any", "string") and not negated:
                ops.append("starts_with")
            if kind == "any":
                ops.append("agree_on")
            op = r.choice(ops)
            if op == "lit":
                return self.literal(kind)
            if op in ("eq", "ne"):
                return {op: self.literal(kind)}
            if op in ("in", "not_in"):
                return {op: [self.literal(kind) for _ in range(r.randint(1, 3))]}
            if op in ("lt", "le", "gt", "ge"):
                return {op: r.choice([0, 1, 2, 1.5, -1])}
            if op == "starts_with":
                return {op: r.choice(["x", "s:", ""])}
            if op == "agree_on":
                return {op: ["p"]}
        if op == "exists":
            return {op: r.random() < 0.5}
        if op == "truthy":
            return {op: r.random() < 0.5}
        if op == "is":
            return {op: r.choice(["object", "array", "string", "integer", "number", "boolean",
                                  "null", "absent"])}
        if op == "length":
            return {op: {r.choice(["eq", "ne", "lt", "le", "gt", "ge"]): r.randint(0, 2)}}
        return {"empty": r.random() < 0.5}

    def where(self, fact: str, env: dict[str, str], negated: bool = False,
              depth: int = 0) -> dict[str, Any]:
        r = self.r
        fields = FIELDS[fact]
        out: dict[str, Any] = {}
        for name in r.sample(sorted(fields), r.randint(1, 2)):
            out[name] = self.test(fields[name], env, negated)
        if depth < 1 and r.random() < 0.25:
            key = r.choice(["all", "any", "not"])
            if key == "not":
                out["not"] = self.where(fact, env, not negated, depth + 1)
            else:
                out[key] = [self.where(fact, env, negated, depth + 1)
                            for _ in range(r.randint(1, 2))]
        return out

    def pattern(self, fact: str, alias: str, env: dict[str, str],
                negated: bool = False) -> dict[str, Any]:
        p: dict[str, Any] = {"fact": fact, "as": alias}
        if self.r.random() < 0.8:
            own = dict(env)
            if not negated:
                own[alias] = fact  # a test may compare two fields of the fact itself
            p["where"] = self.where(fact, own if self.r.random() < 0.2 else env)
        return {"none": p} if negated else p

    # --- rules ------------------------------------------------------------------------

    def rule(self, i: int) -> dict[str, Any]:
        r = self.r
        produces = r.choice(list(DERIVED) + ["error", "fail", "qualify", "eligible"])
        top = RANK[produces] if produces in DERIVED else 4
        usable = [t for t, k in RANK.items() if k < top]
        when: list[dict[str, Any]] = []
        env: dict[str, str] = {}
        if produces == "eligible":
            when.append(self.pattern("point", "pt", env))
            env["pt"] = "point"
        for j in range(r.randint(1, 3) - (1 if produces == "eligible" else 0)):
            fact = r.choice(usable)
            when.append(self.pattern(fact, f"x{j}", env))
            env[f"x{j}"] = fact
        if not when:
            fact = r.choice(usable)
            when.append(self.pattern(fact, "x0", env))
            env["x0"] = fact
        for j in range(r.choice([0, 0, 1, 1, 2])):
            when.append(self.pattern(r.choice(list(RANK)), f"n{j}", env, negated=True))
        aliases = [a for a in env]
        shown = " ".join(f"{{{a}.{r.choice(sorted(FIELDS[env[a]]))}}}" for a in aliases)
        then = [self.action(produces, env)]
        if r.random() < 0.15:
            then.append(self.action(r.choice(["error", "fail", "qualify"]), env))
        return {"id": f"r.rule{i}", "description": "d", "when": when,
                "then": then[0] if len(then) == 1 else then, "reason": f"fired {shown}"}

    def operand(self, env: dict[str, str]) -> Any:
        if env and self.r.random() < 0.7:
            alias = self.r.choice(sorted(env))
            return {"ref": f"{alias}.{self.r.choice(sorted(FIELDS[env[alias]]) + ['id'])}"}
        return self.literal("any")

    def action(self, produces: str, env: dict[str, str]) -> dict[str, Any]:
        r = self.r
        alias = r.choice(sorted(env))
        if produces in DERIVED:
            return {"derive": {"fact": produces, "set": {
                f: self.operand(env) for f in r.sample(["k", "v"], r.randint(0, 2))}}}
        if produces == "error":
            return {"error": {"code": r.choice(["e1", "e2"]),
                              "at": f"{alias}.{r.choice(sorted(FIELDS[env[alias]]))}",
                              "message": f"at {{{alias}.id}}"}}
        if produces == "fail":
            return {"fail": {"group": "g", "condition": r.choice(["C1", "C2"]),
                             "reason": f"because {{{alias}.{r.choice(sorted(FIELDS[env[alias]]))}}}"}}
        if produces == "qualify":
            return {"qualify": {"group": "g"}}
        return {"eligible": {"point": {"ref": "pt.id"}}}

    def decision(self) -> dict[str, Any]:
        r = self.r
        steps = []
        for k in range(r.randint(1, 4)):
            when: list[dict[str, Any]] = [self.pattern("point", "point", {})]
            env = {"point": "point"}
            if r.random() < 0.4:
                fact = r.choice(["a", "b", "d1", "d2"])
                when.append(self.pattern(fact, "o", env))
                env["o"] = fact
            if r.random() < 0.2:
                when.append(self.pattern(r.choice(["a", "d1"]), "nn", env, negated=True))
            step: dict[str, Any] = {"id": f"dec.step{k}", "description": "d",
                                    "then": r.choice(REGIMES), "reason": f"step {k}"}
            if not (k and r.random() < 0.2):
                step["when"] = when
            steps.append(step)
        return {"id": "dec", "description": "d", "subject": "point", "result": "regime",
                "steps": steps}

    # --- facts ------------------------------------------------------------------------

    def fields(self, fact: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, kind in FIELDS[fact].items():
            v: Any
            if kind == "string_list":
                v = self.r.choice(TAGS)
            elif kind == "string":
                v = self.r.choice(STRINGS + [ABSENT])
            elif kind == "integer":
                v = self.r.choice([0, 1, 2, ABSENT])
            else:
                v = self.value()
            if v is not ABSENT:
                out[name] = v
        return out

    def case(self, seed: str) -> Case:
        r = self.r
        doc: dict[str, Any] = {"rules": [self.rule(i) for i in range(r.randint(1, 5))]}
        if r.random() < 0.4:
            doc["decisions"] = [self.decision()]
        facts = []
        for t in INPUTS:
            for i in range(r.choice([0, 1, 1, 2, 2, 3, 4])):
                facts.append((t, f"{t}{i}", self.fields(t)))
                if facts and r.random() < 0.25:  # a copy with another id: joins that tie
                    facts.append((t, f"{t}{i}c", dict(facts[-1][2])))
        for i in range(r.choice([0, 1, 2, 3])):
            fields = self.fields("point")
            fields.update(benchmark_id=i + 1, rank=0)
            facts.append(("point", f"p{i}", fields))
        return Case(seed, doc, facts)


def generate(seed: int, index: int) -> Case:
    key = f"kvrules-policy-fuzz:{seed}:{index}"
    return Gen(random.Random(key)).case(key)


# --- running a case ----------------------------------------------------------------------

@dataclass
class Outcome:
    index: int
    status: str  # agree | disagree | refused | skipped | crashed
    detail: str = ""
    seconds: tuple[float, float] = (0.0, 0.0)
    firings: int = 0


def write_policy(case: Case, folder: Path) -> Path:
    (folder / "policy.yaml").write_text(yaml.safe_dump(HEADER, sort_keys=False))
    (folder / "rules.yaml").write_text(yaml.safe_dump(case.rules, sort_keys=False,
                                                      allow_unicode=True))
    return folder


def run_case(case: Case, index: int = 0) -> Outcome:
    """Compile, evaluate on the supervised engine (a fresh worker per policy: an engine
    error or crash never leaks into the next case) and by the reference, and compare."""
    from kvrules.backend import durable
    from kvrules.diagnostics import KvrulesUsageError
    from kvrules.facts.model import Fact
    from kvrules.pipeline import compile_policy, value_problems
    from kvrules.policy import reference

    with tempfile.TemporaryDirectory(prefix="kvrules-policy-fuzz-") as tmp:
        try:
            cp = compile_policy(write_policy(case, Path(tmp)))
        except KvrulesUsageError as exc:
            return Outcome(index, "refused", str(exc)[:200])
    facts = [Fact(t, i, dict(f)) for t, i, f in case.facts]
    if value_problems(facts):
        return Outcome(index, "skipped")
    backend = durable.Backend(cp)
    try:
        backend.start()
        t0 = time.perf_counter()
        engine, _ = backend.evaluate(facts, f"case{index}")
        t1 = time.perf_counter()
    finally:
        backend.close()
    ref = reference.evaluate(cp, facts)
    t2 = time.perf_counter()
    diff = reference.first_difference(engine, ref)
    status = "agree"
    if diff is not None:  # an engine failure fails the cell closed; a difference is silent
        status = "engine_failed" if engine.failures and not ref.failures else "disagree"
    return Outcome(index, status, diff if status == "disagree" else "; ".join(engine.failures),
                   (t1 - t0, t2 - t1), len(ref.events))


def _run_index(args: tuple[int, int]) -> Outcome:
    seed, index = args
    try:
        return run_case(generate(seed, index), index)
    except Exception as exc:  # a crash of either side is a finding, not the end of the run
        return Outcome(index, "crashed", f"{type(exc).__name__}: {exc}"[:300])


def _worker(seed: int, indices: list[int], queue: Any) -> None:
    for index in indices:
        queue.put(_run_index((seed, index)))
    queue.put(None)


def _parallel(seed: int, indices: list[int], jobs: int) -> Any:
    """Outcomes of ``indices`` from ``jobs`` plain (non-daemon) processes: each case's engine
    runs in a supervised worker of its own, which a pool's daemon processes cannot fork."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(seed, indices[j::jobs], queue))
             for j in range(jobs)]
    for proc in procs:
        proc.start()
    running = len(procs)
    while running:
        out = queue.get()
        if out is None:
            running -= 1
        else:
            yield out
    for proc in procs:
        proc.join()


def show(seed: int, index: int) -> None:
    case = generate(seed, index)
    print(yaml.safe_dump(case.rules, sort_keys=False, allow_unicode=True, width=120))
    for t, i, f in case.facts:
        print(f"fact {t} {i} {json.dumps(f)[:200]}")
    out = _run_index((seed, index))
    print(f"=> {out.status}: {out.detail}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz.policies", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=multiprocessing.cpu_count())
    ap.add_argument("--only", type=str, default=None, help="comma-separated case indices")
    ap.add_argument("--show", action="store_true", help="print the case(s) of --only")
    ap.add_argument("--skip-known", action="store_true",
                    help="generate no test the engine is known to get wrong")
    args = ap.parse_args(argv)
    global KNOWN
    KNOWN = args.skip_known
    indices = ([int(i) for i in args.only.split(",")] if args.only else range(args.cases))
    if args.show:
        for i in indices:
            show(args.seed, i)
        return 0
    counts: dict[str, int] = {}
    bad: list[Outcome] = []
    engine_s = ref_s = 0.0
    firings = 0
    started = time.perf_counter()
    # one worker process per 100 cases: the engine never frees a deleted ruleset's memory
    for out in _parallel(args.seed, list(indices), args.jobs):
        if True:
            counts[out.status] = counts.get(out.status, 0) + 1
            engine_s += out.seconds[0]
            ref_s += out.seconds[1]
            firings += out.firings
            if out.status in ("disagree", "crashed", "engine_failed"):
                bad.append(out)
    for out in sorted(bad, key=lambda o: o.index):
        print(f"case {out.index}: {out.status}: {out.detail}")
    total = time.perf_counter() - started
    print(f"seed {args.seed}: {sum(counts.values())} cases in {total:.0f} s: "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
          + f"; {firings} firings compared; engine {engine_s:.2f} s, reference {ref_s:.2f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
