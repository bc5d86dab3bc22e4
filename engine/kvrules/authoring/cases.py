"""Policy test files: find them, validate them, and turn compact facts into a cell.

A test file is YAML (``schemas/policy-tests.schema.json``) with optional ``defaults`` and a
list of ``cases``. A case comes in one of three forms:

* an *overlay* (``campaign`` and/or ``edits``): a real example campaign with JSON-pointer
  edits, run through the extractor (:mod:`kvrules.authoring.overlay`);
* ``artifacts``: a campaign or cell folder read exactly like ``classify``;
* ``facts`` in a compact form, merged over the ``defaults``.

What every file of a test folder shares lives once, in that folder's ``defaults.yaml``
(``defaults`` for compact facts, ``campaign`` for overlays, ``campaigns`` for the folder
that campaign names resolve in); a test file's own keys are merged over it. In a file with
a default ``campaign``, a case without ``facts`` or ``artifacts`` is an overlay.

Compact facts name each fact by what identifies it: ``cell``, ``plan``, ``provenance`` and
``launch`` are single facts; ``warmup`` and ``rank`` are keyed by rank (``0:``),
``cache_spec`` by ``rank.group`` or ``rank.group.spec``, ``model_section`` by section and
``points`` by benchmark_id. Merging is per key; the value ``<absent>`` removes a field or a
whole fact (absent is not null). The runner fills in only what the extractor computes
rather than reads: the identifying fields, ``cell.ranks``, the cell's ``kvwarm`` (K, the
lowest rank's warmup), a kvwarm ``block``'s triple when only the block is given, a point's
``rank``/``on_ranks``/``views`` (one rank holding it, agreeing with itself),
``native_skip_reason`` and empty ``sample_reasons``; point coordinates default to the cell's
workload kind, batch size 1, no prefill tokens and 128 (decode) or 0 (prefill) KV tokens.
Objects and lists are written as values (``block: {}``, ``groups: [...]``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from importlib.abc import Traversable
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from kvrules.authoring.overlay import Edit, Overlay
from kvrules.diagnostics import Diagnostic, KvrulesUsageError
from kvrules.facts.extract import WARMUP_KEYS
from kvrules.facts.points import VIEW_KEYS
from kvrules.facts.model import CellFacts, Fact, PointRow
from kvrules.policy.catalogue import base_catalogue, check_fact_fields
from kvrules.policy.yamlpos import (MAX_FILE_BYTES, Positions, YamlSyntaxError,
                                    decode_rule_file, load_with_positions, position_of)
from kvrules.resources import load_schema, rules_dir

ABSENT = "<absent>"
"""The value that removes a field or a fact in compact facts."""
TESTS_DIR = "tests"
SHARED_FILE = "defaults.yaml"
"""The file of a test folder that holds what its test files share (not a test file)."""
CAMPAIGNS_DIR = "examples"
"""Where campaign names resolve without ``campaigns:``: the nearest such folder upwards."""
FORMS = ("overlay", "artifacts", "facts")
RULE_TEST_ERROR = "rule_test_error"
"""A policy test file is not YAML, breaks its schema, or gives facts outside the catalogue."""


@dataclass(frozen=True)
class Case:
    """One test case, located in its file."""

    file: str
    line: int
    note: str
    want: dict[str, Any]
    todo: str | None = None
    params: dict[str, bool] = field(default_factory=dict)
    cell: CellFacts | None = None
    artifacts: Path | None = None
    cell_id: str | None = None
    plan: Path | None = None
    overlay: Overlay | None = None

    @property
    def form(self) -> str:
        """``overlay`` or ``artifacts`` (through the extractor), or ``facts`` (compact)."""
        if self.overlay is not None:
            return "overlay"
        return "artifacts" if self.artifacts is not None else "facts"


@dataclass(frozen=True)
class Shared:
    """What the cases of one file start from: compact defaults, campaign, campaign folder."""

    defaults: dict[str, Any] = field(default_factory=dict)
    campaign: str | None = None
    campaigns: Path | None = None

    def over(self, data: dict[str, Any], folder: Path | None) -> Shared:
        """These values with a file's own ``defaults``/``campaign``/``campaigns`` over them."""
        base = Path(folder) if folder is not None else Path(".")
        return Shared(merge(self.defaults, data.get("defaults", {})),
                      data.get("campaign", self.campaign),
                      base / data["campaigns"] if "campaigns" in data else self.campaigns)


@lru_cache(maxsize=2)
def _validator(shared: bool = False) -> Draft202012Validator:
    schema = load_schema("policy-tests.schema.json")
    if shared:
        return Draft202012Validator({"$defs": schema["$defs"], "$ref": "#/$defs/shared"})
    return Draft202012Validator(schema)


def read_bounded(path: Path | Traversable) -> str:
    """A test file's text: at most MAX_FILE_BYTES, strict UTF-8 (YamlSyntaxError if not)."""
    try:
        with path.open("rb") as fh:
            return decode_rule_file(fh.read(MAX_FILE_BYTES + 1))
    except OSError as exc:
        raise YamlSyntaxError(f"cannot read: {exc.strerror or exc}", 1, 1) from None


def _text(path: Path | Traversable, label: str) -> str:
    try:
        return read_bounded(path)
    except YamlSyntaxError as exc:
        raise KvrulesUsageError("invalid policy test files", [Diagnostic(
            label, exc.line, exc.column, str(exc), RULE_TEST_ERROR)]) from None


def find_test_files(policy: str | None,
                    tests: str | None) -> list[tuple[str, str, Path | None]]:
    """(label, text, folder) of every test file: ``tests`` (a file or folder) or the policy's
    ``tests/`` folder (the shipped one when ``policy`` is None). A folder's ``defaults.yaml``
    is not a test file: :func:`load_cases` reads it as what the folder's files share."""
    if tests is not None:
        path = Path(tests)
        if path.is_file():
            return [(str(path), _text(path, str(path)), path.parent)]
        root: Traversable = path
        label = str(path)
        if not path.is_dir():
            raise KvrulesUsageError(f"no such test file or folder: {tests}")
    elif policy is None:
        root, label = rules_dir() / TESTS_DIR, f"rules/{TESTS_DIR}"
    else:
        root, label = Path(policy) / TESTS_DIR, str(Path(policy) / TESTS_DIR)
    if not root.is_dir():
        raise KvrulesUsageError(f"no test folder {label}")
    entries = sorted((e for e in root.iterdir() if e.is_file() and e.name.endswith(
        (".yaml", ".yml")) and e.name != SHARED_FILE), key=lambda e: e.name)
    if not entries:
        raise KvrulesUsageError(f"no test files (*.yaml) in {label}")
    return [(f"{label}/{e.name}", _text(e, f"{label}/{e.name}"), Path(str(e)).parent)
            for e in entries]


def load_cases(files: list[tuple[str, str, Path | None]]) -> list[Case]:
    """Every case of every file; any invalid file raises one usage error listing all."""
    cases: list[Case] = []
    problems: list[Diagnostic] = []
    shared: dict[Path | None, Shared] = {}
    for label, text, folder in files:
        if folder not in shared:
            shared[folder] = _shared(folder, problems)
        cases += _load_file(label, text, folder, problems, shared[folder])
    if problems:
        raise KvrulesUsageError(f"invalid policy test files: {len(problems)} problem(s)",
                                problems)
    return cases


def _shared(folder: Path | None, problems: list[Diagnostic]) -> Shared:
    """The folder's ``defaults.yaml`` (nothing shared when there is none)."""
    start = Shared(campaigns=_nearest_campaigns(folder))
    path = Path(folder) / SHARED_FILE if folder is not None else None
    if path is None or not path.is_file():
        return start
    label = str(path)
    try:
        data, positions = load_with_positions(read_bounded(path))
    except YamlSyntaxError as exc:
        problems.append(Diagnostic(label, exc.line, exc.column, str(exc), RULE_TEST_ERROR))
        return start
    if _schema_problems(label, data, positions, problems, shared=True):
        return start
    return start.over(data, folder)


def _nearest_campaigns(folder: Path | None) -> Path | None:
    """The nearest ``examples/`` folder at or above the test folder, if any."""
    if folder is None:
        return None
    start = Path(folder).resolve()
    for parent in (start, *start.parents):
        if (parent / CAMPAIGNS_DIR).is_dir():
            return parent / CAMPAIGNS_DIR
    return None


def _problem(label: str, positions: Positions, pointer: str, message: str) -> Diagnostic:
    line, column = position_of(positions, pointer)
    return Diagnostic(file=label, line=line, column=column, message=message,
                      code=RULE_TEST_ERROR, pointer=pointer)


def _schema_problems(label: str, data: Any, positions: Positions,
                     problems: list[Diagnostic], shared: bool = False) -> bool:
    """Append a diagnostic per schema error; True when there was any."""
    errors = sorted(_validator(shared).iter_errors(data),
                    key=lambda e: ([str(p) for p in e.absolute_path], e.message))
    for err in errors:
        ptr = "".join(f"/{p}" for p in err.absolute_path)
        problems.append(_problem(label, positions, ptr, f"{ptr or '/'}: {err.message}"))
    return bool(errors)


def _load_file(label: str, text: str, folder: Path | None, problems: list[Diagnostic],
               shared: Shared | None = None) -> list[Case]:
    try:
        data, positions = load_with_positions(text)
    except YamlSyntaxError as exc:
        problems.append(Diagnostic(label, exc.line, exc.column, str(exc), RULE_TEST_ERROR))
        return []
    if _schema_problems(label, data, positions, problems):
        return []
    start = (shared or Shared()).over(data, folder)
    out = []
    for i, raw in enumerate(data["cases"]):
        ptr = f"/cases/{i}"
        try:
            out.append(_case(label, positions, ptr, raw, start, folder))
        except ValueError as exc:
            problems.append(_problem(label, positions, ptr, str(exc)))
    return out


def _case(label: str, positions: Positions, ptr: str, raw: dict[str, Any],
          shared: Shared, folder: Path | None) -> Case:
    base = Path(folder) if folder is not None else Path(".")
    common = dict(file=label, line=position_of(positions, ptr)[0], note=raw["note"],
                  want=raw["want"], todo=raw.get("todo"), params=raw.get("params", {}))
    if "artifacts" in raw:
        plan = base / raw["plan"] if "plan" in raw else None
        return Case(**common, artifacts=base / raw["artifacts"], cell_id=raw.get("cell"),
                    plan=plan)
    if "facts" not in raw and ("edits" in raw or "campaign" in raw or shared.campaign):
        return Case(**common, overlay=_overlay(raw, shared))
    return Case(**common, cell=cell_facts(merge(shared.defaults, raw.get("facts", {}))))


def _overlay(raw: dict[str, Any], shared: Shared) -> Overlay:
    name = raw.get("campaign", shared.campaign)
    if name is None:
        raise ValueError("an overlay case needs 'campaign' (here or in defaults.yaml)")
    if shared.campaigns is None:
        raise ValueError(f"campaign '{name}': no '{CAMPAIGNS_DIR}/' folder above the test "
                         "file; say where campaigns are with 'campaigns:'")
    return Overlay(shared.campaigns / name, raw.get("cell"),
                   tuple(Edit.from_dict(e) for e in raw.get("edits", [])))


def merge(base: Any, over: Any) -> Any:
    """``over`` merged into ``base`` key by key; ``<absent>`` removes a key."""
    if not isinstance(base, dict) or not isinstance(over, dict):
        return over
    out = dict(base)
    for key, value in over.items():
        if value == ABSENT:
            out.pop(key, None)
        else:
            out[key] = merge(base.get(key), value)
    return out


def _clean(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v != ABSENT}


def cell_facts(compact: dict[str, Any]) -> CellFacts:
    """The cell the extractor would have produced for these facts (see module docstring)."""
    c = {k: v for k, v in compact.items() if v != ABSENT}
    warmups = {int(k): _clean(v) for k, v in c.get("warmup", {}).items() if v != ABSENT}
    ranks = {int(k): _clean(v) for k, v in c.get("rank", {}).items() if v != ABSENT}
    specs = {k: _clean(v) for k, v in c.get("cache_spec", {}).items() if v != ABSENT}
    all_ranks = sorted(set(ranks) | set(warmups))
    cell = {"cell_id": "cell", "ranks": all_ranks, **_clean(c.get("cell", {}))}
    facts = [_fact("cell", "cell", cell)]
    if warmups:
        low = min(warmups)
        facts.append(_fact("kvwarm", "kvwarm", _warmup_fields(low, warmups[low])))
    for r in all_ranks:
        if r in warmups:
            facts.append(_fact("warmup", f"warmup{r}", _warmup_fields(r, warmups[r])))
        if r in ranks:
            facts.append(_fact("rank", f"rank{r}", {"rank": r, **ranks[r]}))
    facts += [_fact("cache_spec", f"spec{k}", _spec_fields(k, v))
              for k, v in sorted(specs.items())]
    for name in ("plan", "provenance"):
        if name in c:
            facts.append(_fact(name, name, _clean(c[name])))
    facts += [_fact("model_section", f"section.{k}", {"section": k, **_clean(v)})
              for k, v in c.get("model_section", {}).items() if v != ABSENT]
    facts.append(_fact("launch", "launch", _clean(c.get("launch", {}))))
    kind = cell.get("workload_kind")
    points = [PointRow(_fact("point", f"p{k}", _point_fields(int(k), v, kind, all_ranks)))
              for k, v in c.get("points", {}).items() if v != ABSENT]
    points.sort(key=lambda p: p.benchmark_id)
    return CellFacts("facts", str(cell["cell_id"]), kind if isinstance(kind, str) else None,
                     facts, points)


def _warmup_fields(r: int, fields: dict[str, Any]) -> dict[str, Any]:
    """A rank's warmup as the extractor copies it: the triple comes out of an object block
    unless the case gives it."""
    out = {"rank": r, **fields}
    block = out.get("block")
    if isinstance(block, dict):
        for key in WARMUP_KEYS:
            if key in block:
                out.setdefault(key, block[key])
    return out


def _spec_fields(key: str, fields: dict[str, Any]) -> dict[str, Any]:
    parts = [int(p) for p in key.split(".")]
    out: dict[str, Any] = {"rank": parts[0], "group_index": parts[1]}
    if len(parts) == 3:
        out["spec_index"] = parts[2]
    out.update(fields)
    return out


def _point_fields(bid: int, fields: dict[str, Any], kind: Any,
                  ranks: list[int]) -> dict[str, Any]:
    point_type = fields.get("point_type", kind if isinstance(kind, str) else "decode")
    out = {"benchmark_id": bid, "point_type": point_type, "batch_size": 1,
           "total_prefill_tokens": 0, "sample_reasons": [], "rank": min(ranks, default=0),
           "on_ranks": ranks, "total_kv_read_tokens": 0 if point_type == "prefill" else 128,
           **fields}
    if "views" not in out:
        out["views"] = [{k: out[k] for k in VIEW_KEYS + ("native_regime",) if k in out}]
    native = out.get("native_regime")
    if isinstance(native, str) and native.startswith("skip:"):
        out.setdefault("native_skip_reason", native[len("skip:"):])
    return out


def _fact(kind: str, fact_id: str, fields: dict[str, Any]) -> Fact:
    problems = check_fact_fields(base_catalogue()[kind], fields)
    if problems:
        raise ValueError("; ".join(problems))
    return Fact(kind, fact_id, fields)
