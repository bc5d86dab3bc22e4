"""Facts: the only thing rules see. A fact is a typed record plus where each field came from."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from kvrules.diagnostics import Diagnostic

Source = tuple[str, str]
"""(file relative to the input, JSON pointer) of a fact field."""


@dataclass(slots=True)
class Fact:
    """One fact of a cell session. ``id`` is stable: it depends on structure, not content."""

    type: str
    id: str
    fields: dict[str, Any]
    sources: dict[str, Source] = field(default_factory=dict)
    base: Source | None = None
    paths: dict[str, str] | None = None

    def source(self, field_name: str | None = None) -> Source:
        """Where a field (or, failing that, the whole fact) came from.

        Facts made in bulk (points) keep one ``base`` location plus a shared table of
        per-field pointer suffixes instead of a dict of their own.
        """
        if self.base is not None:
            suffix = (self.paths or {}).get(field_name or "", "")
            return (self.base[0], self.base[1] + suffix)
        if field_name and field_name in self.sources:
            return self.sources[field_name]
        return self.sources.get("", ("", ""))


class PointRow:
    """One benchmark_id of a cell as the report shows it: a thin view over its point fact."""

    __slots__ = ("fact",)

    def __init__(self, fact: Fact) -> None:
        self.fact = fact

    benchmark_id = property(lambda self: self.fact.fields["benchmark_id"])
    point_type = property(lambda self: self.fact.fields["point_type"])
    batch_size = property(lambda self: self.fact.fields["batch_size"])
    total_prefill_tokens = property(lambda self: self.fact.fields["total_prefill_tokens"])
    total_kv_read_tokens = property(lambda self: self.fact.fields["total_kv_read_tokens"])

    @property
    def native_regime(self) -> str | None:
        """The native regime when it is a string (absent and null both report None)."""
        value = self.fact.fields.get("native_regime")
        return value if isinstance(value, str) else None


@dataclass
class CellFacts:
    """Everything the engine needs about one cell, plus its structural diagnostics."""

    campaign: str
    cell_id: str
    workload_kind: str | None
    facts: list[Fact]
    points: Sequence[PointRow]
    """One row per benchmark_id (a :class:`kvrules.facts.points.PointRows` once extracted:
    facts built as they are read)."""
    diagnostics: list[Diagnostic] = field(default_factory=list)
    peer_points: Sequence[PointRow] = field(default_factory=list)
    """The same benchmark_ids on the other ranks: checked by the rules, not reported."""
