"""Read evidence files without ever trusting or modifying them.

Every failure to decode is turned into an ``artifact_unreadable`` Diagnostic instead of an
exception, so one corrupt file makes one cell an error and never aborts a corpus run.
"""
from __future__ import annotations

import json
import os
from pathlib import Path, PurePath
from typing import Any

from kvrules.artifacts.model import NonFiniteNumber, TextFile
from kvrules.diagnostics import ARTIFACT_UNREADABLE, Diagnostic, evidence_error

_NON_FINITE = {token: NonFiniteNumber(token) for token in ("NaN", "Infinity", "-Infinity")}


def _parse_constant(token: str) -> NonFiniteNumber:
    """Keep NaN/Infinity as markers: as floats they would pass ``number`` schema checks."""
    return _NON_FINITE[token]


def relpath(path: Path, root: Path) -> str:
    """``path`` relative to the input root, POSIX style (``../x`` for a plan outside it)."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return PurePath(os.path.relpath(path, root)).as_posix()


def pointer(parts: Any) -> str:
    """An RFC 6901 JSON pointer from path components (``~`` and ``/`` escaped)."""
    out = ""
    for part in parts:
        out += "/" + str(part).replace("~", "~0").replace("/", "~1")
    return out


def decode_json(raw: bytes) -> Any:
    """Decode JSON bytes (UTF-8/16/32, BOM tolerated) with non-finite tokens as markers."""
    return json.loads(raw, parse_constant=_parse_constant)


def read_json(path: Path, relpath: str) -> tuple[dict[str, Any] | None, Diagnostic | None]:
    """Decode one JSON object file; on failure return an ``artifact_unreadable`` diagnostic."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return None, evidence_error(ARTIFACT_UNREADABLE,
                                    f"cannot read file: {exc.strerror or exc}", relpath)
    try:
        data = decode_json(raw)
    except json.JSONDecodeError as exc:
        diag = Diagnostic(file=relpath, line=exc.lineno, column=exc.colno,
                          message=f"not valid JSON: {exc.msg}", code=ARTIFACT_UNREADABLE)
        return None, diag
    except (UnicodeDecodeError, RecursionError, ValueError) as exc:
        return None, evidence_error(ARTIFACT_UNREADABLE, f"not valid JSON: {exc}", relpath)
    if not isinstance(data, dict):
        return None, evidence_error(ARTIFACT_UNREADABLE,
                                    f"top-level JSON value is {_json_kind(data)}, "
                                    "expected an object", relpath)
    return data, None


def read_text(path: Path, relpath: str) -> tuple[TextFile | None, Diagnostic | None]:
    """Read a small launch script literally as UTF-8 (it is parsed, never executed)."""
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        return None, evidence_error(ARTIFACT_UNREADABLE,
                                    f"cannot read file: {exc.strerror or exc}", relpath)
    except UnicodeDecodeError as exc:
        return None, evidence_error(ARTIFACT_UNREADABLE, f"not UTF-8 text: {exc.reason}",
                                    relpath)
    return TextFile(path=path, relpath=relpath, text=text), None


def _json_kind(value: Any) -> str:
    """The JSON type name of a decoded value, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float, NonFiniteNumber)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object" if isinstance(value, dict) else type(value).__name__


def render(value: Any, limit: int = 120) -> str:
    """A short JSON-like rendering of a value for diagnostic messages."""
    if isinstance(value, NonFiniteNumber):
        return value.token
    text = json.dumps(value, default=repr, ensure_ascii=False, allow_nan=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."
