"""``@record`` behaves as ``@dataclass(frozen=True)``: each test builds the same class both
ways and compares what the two do (equality, hash, order, repr, immutability, the
dataclasses helpers, pickling), plus the shipped models' own methods that must survive."""
from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import FrozenInstanceError, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, strategies as st

from kvrules.artifacts.model import Document, NonFiniteNumber
from kvrules.diagnostics import Diagnostic
from kvrules.records import record


def _both(body: dict[str, Any], **options: Any) -> tuple[type, type]:
    """The same class body as a frozen dataclass and as a record."""
    made = []
    for kind in ("Dataclass", "Record"):
        cls = type(f"{kind}{body['__qualname__']}", (), dict(body))
        cls.__qualname__ = body["__qualname__"]  # the same repr for both
        cls.__module__ = __name__
        made.append(dataclass(frozen=True, **options)(cls) if kind == "Dataclass"
                    else record(**options)(cls) if options else record(cls))
    return made[0], made[1]


POINT = {"__qualname__": "Point", "__annotations__": {"x": "int", "y": "Any", "tags": "list[str]"},
         "tags": field(default_factory=list)}
HIDDEN = {"__qualname__": "Hidden", "__annotations__": {"key": "str", "cache": "Any"},
          "cache": field(default=None, compare=False, repr=False)}
ONE = {"__qualname__": "One", "__annotations__": {"value": "Any"}}


@pytest.mark.parametrize("body", [POINT, HIDDEN, ONE], ids=["point", "hidden", "one"])
def test_a_record_equals_hashes_and_shows_as_the_frozen_dataclass(body: dict[str, Any]) -> None:
    dc, rc = _both(body)
    names = [f.name for f in dataclasses.fields(dc)]
    assert names == [f.name for f in dataclasses.fields(rc)]
    args = [1, "a", ("t",)][:len(names)]
    a, b, other = dc(*args), rc(*args), rc(*([2] + args[1:]))
    assert repr(a) == repr(b)
    assert hash(a) == hash(b)  # the same tuple is hashed
    assert b == rc(*args) and b != other and (b == a) is False  # other class: not equal
    assert rc.__eq__(b, a) is NotImplemented
    assert dataclasses.asdict(b) == dataclasses.asdict(a)
    assert dataclasses.replace(b, **{names[0]: 5}) == rc(*([5] + args[1:]))
    assert rc.__match_args__ == dc.__match_args__
    assert copy.deepcopy(b) == b and copy.copy(b) == b


@record
class Pickled:
    name: str
    values: list[int] = field(default_factory=list)


def test_a_record_pickles_by_its_fields() -> None:
    p = Pickled("a", [1])
    back = pickle.loads(pickle.dumps(p, pickle.HIGHEST_PROTOCOL))
    assert back == p and back is not p and back.values == [1]
    with pytest.raises(FrozenInstanceError):
        back.name = "b"


def test_fields_left_out_of_comparison_are_left_out_of_eq_hash_and_repr() -> None:
    _, rc = _both(HIDDEN)
    a, b = rc("k", cache=[1]), rc("k", cache=[2])
    assert a == b and hash(a) == hash(b)
    assert repr(a) == "Hidden(key='k')"


@pytest.mark.parametrize("name", ["x", "tags", "not_a_field"])
def test_a_record_is_frozen_after_init(name: str) -> None:
    _, rc = _both(POINT)
    p = rc(1, 2)
    with pytest.raises(FrozenInstanceError, match=name):
        setattr(p, name, 3)
    with pytest.raises(FrozenInstanceError, match=name):
        delattr(p, name)
    assert (p.x, p.y, p.tags) == (1, 2, [])


@given(st.lists(st.tuples(st.integers(-3, 3), st.text(max_size=2)), min_size=2, max_size=6))
def test_order_is_the_dataclass_order(values: list[tuple[int, str]]) -> None:
    body = {"__qualname__": "Ordered", "__annotations__": {"n": "int", "s": "str"}}
    dc, rc = _both(body, order=True)
    ds, rs = [dc(*v) for v in values], [rc(*v) for v in values]
    assert [(r.n, r.s) for r in sorted(rs)] == [(d.n, d.s) for d in sorted(ds)]
    for (d1, r1) in zip(ds, rs):
        for (d2, r2) in zip(ds, rs):
            assert (r1 < r2, r1 <= r2, r1 > r2, r1 >= r2, r1 == r2) == \
                (d1 < d2, d1 <= d2, d1 > d2, d1 >= d2, d1 == d2)
    with pytest.raises(TypeError):
        rs[0] < ds[0]  # noqa: B015 - a record orders only with its own class


def test_methods_the_body_defines_are_kept() -> None:
    @record
    class Shown:
        value: int

        def __repr__(self) -> str:
            return "shown"

        def __hash__(self) -> int:
            return 7

        @cached_property
        def double(self) -> int:
            return self.value * 2

    s = Shown(4)
    assert repr(s) == "shown" and hash(s) == 7
    assert s.double == 8 and s.double == 8  # a cached property may fill the instance's dict
    with pytest.raises(TypeError, match="__lt__"):
        @record(order=True)
        class Clash:
            value: int

            def __lt__(self, other: object) -> bool:
                return True


def test_a_record_subclass_adds_fields_and_stays_frozen() -> None:
    @record
    class Base:
        a: int

    @record
    class Child(Base):
        b: int = 0

    c = Child(1, 2)
    assert (c.a, c.b) == (1, 2) and c != Base(1) and repr(c) == \
        "test_a_record_subclass_adds_fields_and_stays_frozen.<locals>.Child(a=1, b=2)"
    with pytest.raises(FrozenInstanceError):
        c.a = 3  # type: ignore[misc]


def test_the_shipped_models_keep_their_own_behaviour() -> None:
    assert repr(NonFiniteNumber("NaN")) == "NaN"  # its own repr, not the generated one
    first = Diagnostic("f", 1, None, "m", "a")
    second = Diagnostic("f", 1, None, "m", "b")
    assert sorted([second, first]) == [first, second]
    with pytest.raises(FrozenInstanceError):
        first.code = "c"  # type: ignore[misc]
    doc = Document(Path("rank.json"), "rank.json", {"k": 1})
    assert doc == Document(Path("rank.json"), "rank.json", {"k": 1}, columns=None)
    assert "columns" not in repr(doc)


def test_a_mutable_record_is_the_plain_dataclass() -> None:
    body = {"__qualname__": "Counter", "__annotations__": {"name": "str", "seen": "list[int]"},
            "seen": field(default_factory=list)}
    dc = dataclass(type("DataclassCounter", (), dict(body)))
    rc = record(frozen=False)(type("RecordCounter", (), dict(body)))
    for cls in (dc, rc):
        cls.__qualname__ = "Counter"
    a, b = dc("n"), rc("n")
    b.seen.append(1)
    b.name = "m"
    assert repr(b) == "Counter(name='m', seen=[1])" and repr(a) == "Counter(name='n', seen=[])"
    assert b == rc("m", [1]) and b != rc("m") and (b == a) is False
    assert rc.__hash__ is None and dc.__hash__ is None
    with pytest.raises(TypeError, match="unhashable"):
        hash(b)
    del b.name  # nothing frozen about it
