"""Load one cell: files on disk -> :class:`CellEvidence` with structural evidence errors.

Nothing here raises for bad evidence: every problem becomes a Diagnostic on the cell, so
one broken cell never stops a corpus. Files are only ever read, never written or executed.
Readable, schema-valid rank documents are kept even when the cell has errors, so its
points can still be listed in the report.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Literal

from kvrules.artifacts import checks
from kvrules.artifacts.discover import RAW_DIR, CellRef
from kvrules.artifacts.jsonio import (
    decode_document, read_evidence, read_json, read_text, relpath, too_deep,
)
from kvrules.artifacts.model import CellEvidence, Document
from kvrules.artifacts.plan import expected_dp, load_plan, plan_cell
from kvrules.artifacts.validate import checked, fields_vouched, validate
from kvrules.diagnostics import (
    ARTIFACT_INVALID, ARTIFACT_UNREADABLE, NO_RANK_ARTIFACTS, SIDECAR_INVALID, Diagnostic,
    evidence_error, sort_diagnostics,
)

__all__ = ["load_cell", "read_json"]

RANK_SCHEMA = "rank.schema.json"
PROVENANCE_SCHEMA = "provenance.schema.json"
SIDECAR_SCHEMA = "sidecar.schema.json"
PROVENANCE_NAME = "collector-provenance.json"
OVERRIDES_NAME = "generator-overrides.json"


def load_cell(ref: CellRef, keep_results: bool = False) -> CellEvidence:
    """Read and structurally check every evidence file of one cell.

    ``keep_results``: every rank document keeps its ``results`` in ``data``, for a caller
    that reads them result by result (the consumers join verdicts with results); otherwise
    a planned cell's are left out once their columns are gathered (see :func:`_load_rank`)."""
    ev = CellEvidence(campaign=ref.campaign, root=ref.root, cell_id=ref.cell_id,
                      cell_dir=ref.cell_dir)
    diags: list[Diagnostic] = []
    _load_plan(ref, ev, diags)
    _load_launch(ref, ev, diags)
    raw = _scan_raw(ref.cell_dir / RAW_DIR, ref.root)
    diags.extend(raw.errors)
    loaded_all = _load_ranks(ref, raw.ranks, ev, diags, listed=not raw.errors,
                             keep_results=keep_results)
    ev.sidecars = _load_documents(ref, raw.sidecars, SIDECAR_SCHEMA, SIDECAR_INVALID, diags)
    ev.provenance = _load_documents(ref, raw.provenance, PROVENANCE_SCHEMA, ARTIFACT_INVALID,
                                    diags)
    diags.extend(checks.provenance_mismatch(ev.provenance))
    _cross_checks(ref, ev, loaded_all, diags)
    ev.diagnostics = list(dict.fromkeys(sort_diagnostics(diags)))
    return ev


def _load_plan(ref: CellRef, ev: CellEvidence, diags: list[Diagnostic]) -> None:
    """Attach the plan and this cell's entry; a broken plan is an error of every cell."""
    if ref.plan_path is None:
        return
    plan = load_plan(ref.plan_path, relpath(ref.plan_path, ref.root), ref.root)
    if plan.document is None:
        diags.append(plan.diagnostic)  # type: ignore[arg-type]
        return
    ev.plan = plan.document
    index, problems = plan_cell(plan, ref.cell_id)
    diags.extend(problems)
    if index is not None:
        ev.plan_cell_index = index
        ev.plan_cell = plan.document.data["cells"][index]


def _load_launch(ref: CellRef, ev: CellEvidence, diags: list[Diagnostic]) -> None:
    """Optional launch evidence: overrides (beside the plan), request and run.sh (in the cell).

    Only their readability is checked here; what they say is judged by the dense rules.
    """
    campaign_dir = ref.plan_path.parent if ref.plan_path is not None else (
        ref.root if ref.cell_dir != ref.root else None)
    if campaign_dir is not None:
        ev.generator_overrides = _optional_json(ref, campaign_dir / OVERRIDES_NAME, diags)
    ev.generator_request = _optional_json(ref, ref.cell_dir / "generator-request.json", diags)
    script = ref.cell_dir / "run.sh"
    if _present(script):
        ev.run_sh, diag = read_text(script, relpath(script, ref.root), ref.root)
        diags.extend([diag] if diag else [])


def _optional_json(ref: CellRef, path: Path, diags: list[Diagnostic]) -> Document | None:
    """A JSON object file that may be absent; present but unreadable is an error."""
    if not _present(path):
        return None
    rel = relpath(path, ref.root)
    data, diag = read_json(path, rel, ref.root)
    if diag is not None:
        diags.append(diag)
        return None
    return Document(path, rel, data)  # type: ignore[arg-type]


def _present(path: Path) -> bool:
    """The name exists (a dangling or looping symlink too: reading it reports why)."""
    try:
        os.lstat(path)
        return True
    except (OSError, ValueError):
        return False


@dataclass
class RawFiles:
    """The evidence files found below ``raw/``, by kind, plus folders that could not be listed."""

    ranks: list[Path] = field(default_factory=list)
    sidecars: list[Path] = field(default_factory=list)
    provenance: list[Path] = field(default_factory=list)
    errors: list[Diagnostic] = field(default_factory=list)


def _scan_raw(raw: Path, root: Path) -> RawFiles:
    """Rank candidates, worker-probe sidecars and provenance files below ``raw/``, sorted.

    Merged artifacts named ``*_merged`` are skipped here without being read; a merged
    artifact recognised only by its ``artifact_type`` is skipped after reading. A folder
    that cannot be listed is an error (it may hide a rank); a missing ``raw/`` is not.
    """
    found = RawFiles()

    def unlistable(exc: OSError) -> None:
        if not (isinstance(exc, FileNotFoundError) and Path(exc.filename) == raw):
            found.errors.append(evidence_error(
                ARTIFACT_UNREADABLE, f"cannot list folder: {exc.strerror or exc}",
                relpath(Path(exc.filename or raw), root)))

    try:
        _walk(raw, root, found, unlistable)
    except ValueError as exc:  # a NUL or unencodable character in the folder name
        found.errors.append(evidence_error(
            ARTIFACT_UNREADABLE, f"cannot list folder: invalid folder name ({exc})",
            relpath(raw, root)))
    except RecursionError:
        found.errors.append(evidence_error(
            ARTIFACT_UNREADABLE, "cannot list folder: folders nested too deeply",
            relpath(raw, root)))
    return found


def _walk(raw: Path, root: Path, found: RawFiles,
          unlistable: Callable[[OSError], None]) -> None:
    """Sort the files below ``raw`` into ``found``.

    A symlinked folder is not followed (it could loop or leave the campaign) and is
    reported instead of silently hiding whatever evidence it holds.
    """
    for dirpath, dirnames, filenames in os.walk(raw, onerror=unlistable):
        for name in sorted(dirnames):
            if os.path.islink(os.path.join(dirpath, name)):
                found.errors.append(evidence_error(
                    ARTIFACT_UNREADABLE, "cannot list folder: refusing a symbolic link to "
                    "a folder (not followed)", relpath(Path(dirpath, name), root)))
                dirnames.remove(name)
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath, name)
            if name == PROVENANCE_NAME:
                found.provenance.append(path)
            elif name.startswith("benchmark") and name.endswith(".json"):
                stem = name[: -len(".json")]
                if stem.endswith("_worker_probe"):
                    found.sidecars.append(path)
                elif not stem.endswith("_merged"):
                    found.ranks.append(path)


def _load_ranks(ref: CellRef, paths: list[Path], ev: CellEvidence, diags: list[Diagnostic],
                listed: bool, keep_results: bool = False) -> bool:
    """Load rank artifacts into ``ev.ranks``; True when every candidate file was usable.

    ``listed`` is False when part of ``raw/`` could not be listed: then "no rank artifacts"
    is not claimed and neither is completeness (the unlisted folder has its own error).
    """
    docs: list[Document] = []
    found, loaded_all = 0, True
    for path in paths:
        doc = _load_rank(path, relpath(path, ref.root), ref.root,
                         drop_results=ev.plan_cell is not None and not keep_results)
        if doc is None:  # a merged artifact
            continue
        found += 1
        if isinstance(doc, Diagnostic):
            diags.append(doc)
            loaded_all = False
            continue
        docs.append(doc)
        diags.extend(checks.incomplete(doc))
    if not found and listed:
        raw = relpath(ref.cell_dir / RAW_DIR, ref.root)
        diags.append(evidence_error(NO_RANK_ARTIFACTS,
                                    f"no rank artifact (benchmark*.json) below {raw}", raw))
    ev.ranks = sorted(docs, key=lambda d: (d.data["dp"]["rank"], d.relpath))
    return loaded_all and listed


def _load_rank(path: Path, rel: str, root: Path,
               drop_results: bool) -> Document | Diagnostic | None:
    """One rank artifact: its document, or why it is unusable, or None for a merged
    artifact recognised by its ``artifact_type`` (skipped).

    With ``drop_results`` (a planned cell, a caller that reads columns), a valid document's
    ``results`` (most of a rank file, thousands of objects) are left out once the
    structural check has their columns and the cell's plan gives its kind: the
    next rank file then decodes into the memory they held, still in the cache, and the cell
    is read from the columns; the file's bytes are kept for the rare reader of the results
    themselves (:meth:`Document.results`). Without a plan the cell's kind is read from every
    result, so they stay. (A function of its own: its locals, the whole decoded file among
    them, are gone before the next file is read.)"""
    raw, diag = read_evidence(path, rel, root)
    if raw is None:
        return diag
    if drop_results:
        usual = _usual_rank(path, rel, raw)
        if usual is not False:
            return usual
    data, diag = decode_document(raw, rel)
    if data is not None and data.get("artifact_type") == "merged":
        return None
    columns = None
    if data is not None:
        diag, columns = checked(data, RANK_SCHEMA, rel, ARTIFACT_INVALID)
    if diag is not None:
        return diag
    assert data is not None
    if columns is None or not drop_results:
        return Document(path, rel, data, columns)
    return Document(path, rel, _without_results(data), columns, raw)


def _usual_rank(path: Path, rel: str, raw: bytes) -> Document | None | Literal[False]:
    """What :func:`_load_rank` gives for a usual rank file, decoded by
    :mod:`.rankfile` (about half the time); False when that decoder or the generated
    validator cannot vouch for it, and the reference path decides."""
    decode_usual = _usual_decoder()
    decoded = decode_usual(raw) if decode_usual is not None else None
    if decoded is None:
        return False
    fields, results, columns = decoded
    if fields.get("artifact_type") == "merged":
        return None
    if too_deep(fields):  # the results are structs of bounded depth; the reference path
        return False  # names the file and pointer
    if not fields_vouched({**fields, "results": results}, RANK_SCHEMA):
        return False
    return Document(path, rel, fields, columns, raw)


@lru_cache(maxsize=1)
def _usual_decoder() -> Callable[[bytes], Any] | None:
    """:func:`.rankfile.decode_usual`, imported on a worker's first rank file (msgspec's
    import is 5 ms the parent need not spend), or None without msgspec."""
    try:
        from kvrules.artifacts.rankfile import decode_usual
    except ImportError:  # pragma: no cover - msgspec is a dependency
        return None
    return decode_usual


def _without_results(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without its ``results`` (their columns and the file's bytes stand in)."""
    return {k: v for k, v in data.items() if k != "results"}


def _load_documents(ref: CellRef, paths: list[Path], schema: str, code: str,
                    diags: list[Diagnostic]) -> list[Document]:
    """Read and validate side files; keep the valid ones, record the rest."""
    docs = []
    for path in paths:
        rel = relpath(path, ref.root)
        data, diag = read_json(path, rel, ref.root)
        if data is not None:
            diag = validate(data, schema, rel, code)
        if diag is not None:
            diags.append(diag)
        else:
            docs.append(Document(path, rel, data))  # type: ignore[arg-type]
    return docs


def _cross_checks(ref: CellRef, ev: CellEvidence, loaded_all: bool,
                  diags: list[Diagnostic]) -> None:
    """Checks across results and ranks of the valid documents (spec section 3)."""
    kind = ev.plan_cell["workload_kind"] if ev.plan_cell is not None else None
    for doc in ev.ranks:
        diags.extend(checks.result_checks(doc, kind))
    if kind is None:
        diags.extend(checks.uniform_point_type(ev.ranks))
    dp, why = expected_dp(ev.plan_cell, ref.plan_path is not None)
    raw = relpath(ref.cell_dir / RAW_DIR, ref.root)
    diags.extend(checks.rank_set(ev.ranks, dp, why, raw, loaded_all))
    diags.extend(checks.run_identity(ev.ranks))

