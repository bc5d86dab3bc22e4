"""kvrules.facts.points and the point classes built on it, against their plain definitions.

The table reads fields column by column and builds facts on demand; point classes key
copies column by column. Both are checked here against the one-fact-at-a-time meaning on
generated rank documents: repeated and missing benchmark ids, absent and odd native
regimes, mixed JSON types, copies that disagree with their row.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kvrules import api
from kvrules.artifacts.model import Document, ResultColumns
from kvrules.facts.model import CellFacts, Fact, PointRow
from kvrules.facts.points import PointTable, point_table
from kvrules.pointclasses import (MISSING, point_classes, point_key, projection,
                                     projection_key)

FIELDS = ("benchmark_id", "point_type", "batch_size", "total_prefill_tokens",
          "total_kv_read_tokens", "sample_reasons", "rank", "on_ranks", "views",
          "native_regime", "native_skip_reason", "no_such_field")

_odd = st.one_of(st.none(), st.booleans(), st.floats(allow_nan=False), st.just([]),
                 st.just({}), st.text(max_size=3))
_int = st.one_of(st.integers(0, 3), st.integers(0, 3), _odd)
_regime = st.one_of(st.sampled_from(["fake_fallback", "real_kv", "skip:dense",
                                     "skip:", "skipx", "fake_prefix"]), _odd)
_reasons = st.one_of(st.lists(st.sampled_from(["kvwarm_fake_fallback", "kvwarm_real_kv",
                                               "prefill_real_seed"]), max_size=2), _odd)


@st.composite
def _result(draw) -> dict[str, Any]:
    point = {"benchmark_id": draw(st.integers(1, 6)),
             "point_type": draw(st.sampled_from(["decode", "prefill"]) | _odd),
             "batch_size": draw(_int), "total_prefill_tokens": draw(_int),
             "total_kv_read_tokens": draw(_int)}
    if draw(st.booleans()):
        point["sample_reasons"] = draw(_reasons)
    result: dict[str, Any] = {"point": point}
    if draw(st.integers(0, 3)):
        result["kv_seed_regime"] = draw(_regime)
    return result


def _retyped(result: dict[str, Any]) -> dict[str, Any]:
    """The result with its coordinates as equal values of another type (1 -> True ...)."""
    other = {0: 0.0, 1: True, 2: 2.0, 3: 3.0, True: 1, False: 0}
    point = {k: other.get(v, v) if k != "benchmark_id" and not isinstance(v, (list, dict))
             else v for k, v in result["point"].items()}
    return {**result, "point": point}


@st.composite
def _ranks(draw) -> list[Document]:
    count = draw(st.integers(1, 3))
    base = draw(st.lists(_result(), max_size=6))
    docs = []
    for rank in range(count):
        # other ranks repeat rank 0's results, or equal values of another JSON type
        # (1 and true, 0 and 0.0), or hold their own
        how = "same" if rank == 0 else draw(st.sampled_from(["same", "retyped", "own"]))
        results = {"same": base, "retyped": [_retyped(r) for r in base],
                   "own": draw(st.lists(_result(), max_size=6))}[how]
        docs.append(Document(Path(f"r{rank}.json"), f"raw/r{rank}.json",
                             {"dp": {"rank": rank}, "results": results}))
    return docs


def _facts_by_hand(ranks: list[Document]) -> tuple[list[Any], list[Any]]:
    """The point facts as the spec reads them, one copy at a time: the lowest rank's copy
    of each benchmark_id is its row; every copy lists the ranks holding its id."""
    holders: dict[int, list[int]] = {}
    for doc in ranks:
        for result in doc.data["results"]:
            held = holders.setdefault(result["point"]["benchmark_id"], [])
            if doc.data["dp"]["rank"] not in held:
                held.append(doc.data["dp"]["rank"])
    rows: dict[int, dict[str, Any]] = {}
    peers = []
    for r, doc in enumerate(ranks):
        for i, result in enumerate(doc.data["results"]):
            p = result["point"]
            view = {k: p[k] for k in ("point_type", "batch_size", "total_prefill_tokens",
                                      "total_kv_read_tokens")}
            if "kv_seed_regime" in result:
                view["native_regime"] = result["kv_seed_regime"]
            fields = {k: p[k] for k in ("benchmark_id", "point_type", "batch_size",
                                        "total_prefill_tokens", "total_kv_read_tokens")}
            fields.update(sample_reasons=p.get("sample_reasons") or [],
                          rank=doc.data["dp"]["rank"], on_ranks=holders[p["benchmark_id"]])
            native = result.get("kv_seed_regime", MISSING)
            if native is not MISSING:
                fields["native_regime"] = native
                if isinstance(native, str) and native.startswith("skip:"):
                    fields["native_skip_reason"] = native[5:]
            bid = p["benchmark_id"]
            if bid not in rows:
                rows[bid] = {**fields, "views": [view], "id": f"p{bid}",
                             "source": (doc.relpath, f"/results/{i}")}
            else:
                peers.append({**fields, "views": [rows[bid]["views"][0], view],
                              "id": f"p{bid}@{r}.{i}", "source": (doc.relpath, f"/results/{i}")})
    return [rows[b] for b in sorted(rows)], peers


def _as_fact(fact) -> dict[str, Any]:
    return {**fact.fields, "id": fact.id, "source": fact.source()}


@settings(max_examples=300, deadline=None, derandomize=True)
@given(_ranks())
def test_the_table_holds_the_facts_the_spec_describes(ranks) -> None:
    table = PointTable.of_ranks(ranks)
    rows, peers = _facts_by_hand(ranks)
    assert [_as_fact(r.fact) for r in table.rows] == rows
    assert [_as_fact(r.fact) for r in table.peers] == peers
    fresh = PointTable.of_ranks(ranks)  # columns read before any fact is built
    for name in FIELDS:
        expected = [f.get(name, MISSING) for f in rows + peers]
        assert fresh.column(name, MISSING) == expected, name
        assert table.column(name, MISSING) == expected, name


def test_an_edited_fact_is_what_columns_read_afterwards() -> None:
    ranks = [Document(Path("r0.json"), "raw/r0.json", {"dp": {"rank": 0}, "results": [
        {"point": {"benchmark_id": b, "point_type": "decode", "batch_size": 1,
                   "total_prefill_tokens": 0, "total_kv_read_tokens": 8}}
        for b in (2, 1)]})]
    table = PointTable.of_ranks(ranks)
    table.rows[1].fact.fields["point_type"] = "prefill"
    assert table.column("point_type") == ["decode", "prefill"]
    assert table.column("benchmark_id") == [1, 2]


def _classes_by_hand(cp, facts) -> tuple[list[str], dict[Any, str]]:
    """One class per distinct point key, represented by its first copy."""
    reps: dict[Any, Any] = {}
    of = [reps.setdefault(point_key(cp, f.fields), f).id for f in facts]
    return [f.id for f in reps.values()], of


POLICY = api.load_policy()


@settings(max_examples=300, deadline=None, derandomize=True)
@given(_ranks())
def test_point_classes_group_copies_by_their_whole_key(ranks) -> None:
    cp = POLICY.compiled
    table = PointTable.of_ranks(ranks)
    facts = [r.fact for r in PointTable.of_ranks(ranks).rows] + [
        r.fact for r in PointTable.of_ranks(ranks).peers]
    reps, of = _classes_by_hand(cp, facts)
    classes, class_of = point_classes(cp, table)
    assert [f.id for f in classes] == reps
    assert class_of == {f.fields["benchmark_id"]: c for f, c in zip(facts, of)
                        if "@" not in f.id}
    cell = CellFacts("c", "c", "decode", [], [PointRow(f) for f in facts if "@" not in f.id],
                     peer_points=[PointRow(f) for f in facts if "@" in f.id])
    by_rows = point_classes(cp, point_table(cell))  # hand-built rows: the same classes
    assert ([f.id for f in by_rows[0]], by_rows[1]) == (reps, class_of)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(_ranks())
def test_the_usual_layout_gives_the_table_of_any_layout(ranks) -> None:
    """Ranks holding the same ids once each take a shortcut; it builds the same table."""
    ids = [[r["point"]["benchmark_id"] for r in doc.data["results"]] for doc in ranks]
    if any(i != ids[0] for i in ids) or len(set(ids[0])) != len(ids[0]):
        ranks = [Document(d.path, d.relpath, {**d.data, "results": _unique(
            ranks[0].data["results"])}) for d in ranks]
    numbers = [doc.data["dp"]["rank"] for doc in ranks]
    ids = [r["point"]["benchmark_id"] for r in ranks[0].data["results"]]
    usual = PointTable._same_points(ranks, ids, numbers)
    anyway = PointTable._any_points(ranks, numbers)
    assert [_as_fact(f.fact) for f in usual.rows] == [_as_fact(f.fact) for f in anyway.rows]
    assert [_as_fact(f.fact) for f in usual.peers] == [_as_fact(f.fact) for f in anyway.peers]
    for name in FIELDS:
        assert usual.column(name, MISSING) == anyway.column(name, MISSING), name


@settings(max_examples=200, deadline=None, derandomize=True)
@given(_ranks())
def test_columns_gathered_by_the_structural_check_give_the_same_table(ranks) -> None:
    """Rank documents carry the columns their structural check gathered; the table built
    from those is the table built from the results themselves."""
    ids = [[r["point"]["benchmark_id"] for r in doc.data["results"]] for doc in ranks]
    if any(i != ids[0] for i in ids) or len(set(ids[0])) != len(ids[0]):
        ranks = [Document(d.path, d.relpath, {**d.data, "results": _unique(
            ranks[0].data["results"])}) for d in ranks]
    timed = []
    for doc in ranks:
        results = [{**r, "fpms": [{"wall_time": 1.0}]} for r in doc.data["results"]]
        timed.append(Document(doc.path, doc.relpath, {**doc.data, "results": results},
                              ResultColumns.read(results)))
    by_results, by_columns = PointTable.of_ranks(ranks), PointTable.of_ranks(timed)
    assert [_as_fact(f.fact) for f in by_columns.rows] == \
        [_as_fact(f.fact) for f in by_results.rows]
    assert [_as_fact(f.fact) for f in by_columns.peers] == \
        [_as_fact(f.fact) for f in by_results.peers]
    for name in FIELDS:
        assert by_columns.column(name, MISSING) == by_results.column(name, MISSING), name


def _unique(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[Any, dict[str, Any]] = {}
    for r in results:
        seen.setdefault(r["point"]["benchmark_id"], r)
    return list(seen.values())


@settings(max_examples=100, deadline=None, derandomize=True)
@given(_ranks())
def test_a_table_sent_to_another_process_is_the_same_table(ranks) -> None:
    """--jobs sends tables back pickled: absent stays absent, every column, fact and source
    equal, a fact built before sending included."""
    import pickle
    table = PointTable.of_ranks(ranks)
    if len(table):
        table.fact(len(table) - 1)
    sent = pickle.loads(pickle.dumps(table, pickle.HIGHEST_PROTOCOL))
    for name in FIELDS:
        assert sent.column(name, MISSING) == table.column(name, MISSING), name
    assert [sent.source(i) for i in range(len(sent))] == \
        [table.source(i) for i in range(len(table))]
    assert [_as_fact(r.fact) for r in sent.rows] == [_as_fact(r.fact) for r in table.rows]
    assert [_as_fact(r.fact) for r in sent.peers] == [_as_fact(r.fact) for r in table.peers]


@settings(max_examples=100, deadline=None, derandomize=True)
@given(_ranks())
def test_the_reported_rows_alone_are_the_rows_of_the_whole_table(ranks) -> None:
    """A worker sends only the reported rows (the verdict reads nothing else): each of their
    columns and facts is the whole table's, a row built before the cut included."""
    table = PointTable.of_ranks(ranks)
    if table.n_rows:
        table.fact(0)
    rows = table.reported()
    assert len(rows) == rows.n_rows == table.n_rows and len(rows.peers) == 0
    for name in FIELDS:
        assert rows.column(name, MISSING) == table.column(name, MISSING)[:table.n_rows], name
    assert [_as_fact(r.fact) for r in rows.rows] == [_as_fact(r.fact) for r in table.rows]
    assert [rows.source(i) for i in range(len(rows))] == \
        [table.source(i) for i in range(table.n_rows)]


def test_a_cell_prepared_in_a_worker_gets_the_verdict_of_the_whole_cell() -> None:
    """``Prepared.reported`` (what workers send) and the whole prepared cell give one verdict,
    on every bundled example (two ranks and more among them)."""
    from kvrules.artifacts.discover import discover
    from kvrules.backend import durable
    from kvrules.pipeline import prepare
    from kvrules.verdicts.build import build_cell
    from kvrules.workers import extract_ref
    cp = api.load_policy().compiled
    examples = Path(__file__).resolve().parents[1] / "examples"
    refs = list(discover([examples]))
    assert any(len(point_table(extract_ref(r)).peers) for r in refs)  # peers to drop
    for ref in refs:
        whole = prepare(cp, extract_ref(ref))
        sent = whole.reported()
        ev = durable.evaluate_in_process(cp, whole.facts)
        assert sent.facts == whole.facts
        assert build_cell(cp, sent.cell, ev, sent.class_of, sent.classes) == \
            build_cell(cp, whole.cell, ev, whole.class_of, whole.classes)


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(1 << 70), max_value=1 << 70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["point", "rank"]), _JSON_VALUES), min_size=1,
                max_size=3),
       st.lists(st.tuples(st.sampled_from(["point", "rank"]), _JSON_VALUES), min_size=1,
                max_size=3))
def test_the_memo_key_is_equal_exactly_when_what_the_rules_read_is(a, b) -> None:
    """Two cells share an evaluation only when the rules read the same values of the same
    JSON types (``1`` is not ``true`` nor ``1.0``), whichever encoder wrote the key."""
    cp = POLICY.compiled

    def facts(spec: list[tuple[str, Any]]) -> list[Fact]:
        field = {"point": "batch_size", "rank": "architectures"}
        return [Fact(kind, f"f{n}", {field[kind]: value}) for n, (kind, value) in
                enumerate(spec)]
    assert (projection_key(cp, facts(a)) == projection_key(cp, facts(b))) == \
        (projection(cp, facts(a)) == projection(cp, facts(b)))


_values = st.one_of(_odd, st.integers(-3, 2_000_000), _regime, _reasons, st.just(MISSING),
                    st.lists(st.dictionaries(st.sampled_from(["point_type", "batch_size"]),
                                             _int, max_size=2), max_size=2))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(_values)
def test_a_test_of_one_value_is_its_atom_on_a_fact_holding_that_value(value) -> None:
    """Point classes test a field's distinct values with ``value_test``: it gives what
    ``eval_atom`` gives on a fact holding the value (absent for MISSING), for every test the
    shipped policy applies to points."""
    from kvrules.policy.evaluate import eval_atom, value_test
    atoms = POLICY.compiled.point_atoms
    assert atoms
    for atom in atoms:
        fields = {} if value is MISSING else {atom.field: value}
        assert value_test(atom)(value) == eval_atom(atom, fields), atom.describe()
