"""Re-deriving published cells with the classification they were published with (spec 6.3).

A table's ``kv_seed_classification`` marker names the cells published with dense synthetic KV
classification on; every other cell of the table was published with it off (the legacy
classification, D1 off). Re-deriving a cell with today's default instead would turn a legacy
``fake_fallback`` row into a dense one and the next publish into a conflict, so each cell is
classified again with its own published classification.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from kvrules import api
from kvrules.artifacts.discover import discover
from kvrules.consumers.aggregate import Aggregation, aggregate_cells
from kvrules.consumers.marker import read_marker
from kvrules.consumers.verify import inspect, known_policy_versions
from kvrules.diagnostics import KvrulesUsageError
from kvrules.verdicts.model import CellVerdict, PolicyIdentity

PARAMETER = "dense_synthetic_kv"


def published_classification(table_dir: str | Path,
                             policy: api.Policy) -> tuple[frozenset[str], frozenset[str]]:
    """``(cells published dense, every published cell)`` of a verified table.

    Raises KvrulesUsageError when the table does not verify or its marker names another
    policy version than ``policy``'s.
    """
    folder = Path(table_dir)
    found = inspect(folder, folder, known_policy_versions([policy]))
    if not found.check.ok or found.table is None or found.record is None:
        first = found.check.problems[0] if found.check.problems else None
        why = f": {first.code}: {first.message}" if first else ""
        raise KvrulesUsageError(f"{table_dir}: the published table does not verify{why}",
                                list(found.check.problems))
    version, dense = read_marker(found.record)
    if version is not None and version != policy.identity.version:
        raise KvrulesUsageError(f"{table_dir}: the dense cells were published by policy "
                                f"{version}, not {policy.identity.version}")
    return dense, frozenset(found.table.column("cell_id").to_pylist())


def classification_policies(policy: api.Policy) -> tuple[api.Policy, api.Policy]:
    """``(dense, legacy)``: ``policy`` with dense synthetic KV classification on and off."""
    value = policy.compiled.parameters.get(PARAMETER)
    dense = policy if value is True else policy.with_parameters(**{PARAMETER: True})
    legacy = policy if value is False else policy.with_parameters(**{PARAMETER: False})
    return dense, legacy


def rederive_cells(paths: Sequence[str], table_dir: str | Path, policy: api.Policy,
                   plan: str | None = None) -> list[CellVerdict]:
    """Verdicts of the published cells found under ``paths``, each classified as published.

    Cells under ``paths`` that the table does not hold are not classified.
    """
    return _rederive(paths, table_dir, policy, plan)[0]


def rederive(paths: Sequence[str], table_dir: str | Path, policy: api.Policy,
             plan: str | None = None) -> Aggregation:
    """The formal rows of the published cells under ``paths``, re-derived as published.

    The rows carry the identity of the dense classification when the marker names a cell,
    else of the legacy one (both have ``policy``'s version, which the marker records).
    """
    cells, identity = _rederive(paths, table_dir, policy, plan)
    return aggregate_cells(cells, identity, plan)


def _rederive(paths: Sequence[str], table_dir: str | Path, policy: api.Policy,
              plan: str | None) -> tuple[list[CellVerdict], PolicyIdentity]:
    dense_cells, published = published_classification(table_dir, policy)
    dense, legacy = classification_policies(policy)
    cells = [(dense if ref.cell_id in dense_cells else legacy).classifier.classify_ref(ref)
             for ref in discover(paths, plan) if ref.cell_id in published]
    return cells, (dense.identity if dense_cells else legacy.identity)
