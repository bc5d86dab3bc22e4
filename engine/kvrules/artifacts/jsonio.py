"""Read evidence files without ever trusting or modifying them.

Every failure to decode is turned into an ``artifact_unreadable`` Diagnostic instead of an
exception, so one corrupt file makes one cell an error and never aborts a corpus run.
"""
from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path, PurePath
from typing import Any

from kvrules.artifacts.model import NonFiniteNumber, TextFile
from kvrules.diagnostics import ARTIFACT_UNREADABLE, FACT_INVALID, Diagnostic, evidence_error

MAX_FILE_BYTES = 256 * 1024 * 1024
"""Largest evidence file read (256 MiB): a bigger one is ``artifact_unreadable`` unread.

Real rank artifacts are a few MiB; the limit keeps a runaway or hostile file from exhausting
memory. Every evidence read (JSON and ``run.sh``) goes through :func:`read_bounded`.
"""

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


class DuplicateKeyError(ValueError):
    """A JSON object names the same key twice (Python would silently keep the last one)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {render(key)} in a JSON object")
        self.key = key


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook``: a dict, refusing duplicate keys instead of keeping the last."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return out


def decode_json(raw: bytes) -> Any:
    """Decode JSON bytes (UTF-8/16/32, BOM tolerated) with non-finite tokens as markers.

    Duplicate object keys raise :class:`DuplicateKeyError` (a ``ValueError``). The result
    is always the standard library's; orjson only gets there faster when it provably
    agrees (see :func:`_fast_decode`).
    """
    fast = _fast_decode(raw)
    if fast is not _DISAGREES:
        return fast
    return json.loads(raw, parse_constant=_parse_constant, object_pairs_hook=_object)


_DISAGREES = object()
_LONG_INTEGER = re.compile(rb"-?[0-9]{19,}")
DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
"""``bytes.translate`` table: every digit reads ``0``, so number shapes are found by a plain
substring search (a regex starting with a character class is ~50x slower)."""
_NINETEEN = b"0" * 19
ESCAPED_COLONS = (b"\\u003a", b"\\u003A")
"""A colon written as an escape: the colon counts that prove no member was dropped would
miss it (a file holding one is decoded the reference way)."""


def _fast_decode(raw: bytes) -> Any:
    """orjson's decoding of ``raw`` when it equals the standard library's, else _DISAGREES.

    orjson refuses what the standard library would decode differently (BOMs, UTF-16/32,
    NaN/Infinity tokens, lone surrogates, 1e400): those fall back. Two differences it does
    not refuse are checked here. Duplicate keys (orjson keeps the last): every colon of
    ``raw`` outside a string separates one object member, so re-encoding the result gives
    as many colons exactly when no member was dropped (an escaped colon would break the
    count, so such a file falls back). Integers beyond 64 bits (orjson makes them floats of
    at least 9.2e18, which it re-encodes with an ``e+`` exponent): when the re-encoding has
    an ``e+`` anywhere, any digit run of such an integer falls back.
    """
    try:
        import orjson
    except ImportError:  # pragma: no cover - orjson is a dependency
        return _DISAGREES
    try:
        data = orjson.loads(raw)
    except (orjson.JSONDecodeError, TypeError):
        return _DISAGREES
    if b"\\" in raw and any(escape in raw for escape in ESCAPED_COLONS):  # one memchr
        return _DISAGREES
    try:
        encoded = orjson.dumps(data)
    except (orjson.JSONEncodeError, TypeError):  # nested deeper than orjson encodes
        return _DISAGREES
    if encoded.count(b":") != raw.count(b":"):
        return _DISAGREES
    if b"+" not in encoded or b"e+" not in encoded:  # orjson writes every float of 1e16 or
        return data  # more as "...e+NN"; "+" is rare elsewhere, and one memchr finds it
    if _NINETEEN in raw.translate(DIGITS_AS_ZERO):  # a digit run as long as 2**63: look closer
        for run in _LONG_INTEGER.finditer(raw):  # (a regex scan is ~50x slower than this)
            if not -(1 << 63) <= int(run.group()) < (1 << 64):
                return _DISAGREES
    return data


class UnreadableFile(Exception):
    """A file that is refused before or while reading it; ``reason`` is the user message."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _below(path: str, folder: str) -> bool:
    """``path`` is ``folder`` or lies below it (both absolute and normalised)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _inside(path: Path, root: Path) -> bool:
    """True when ``path`` (as given) lies below ``root``: only such files must stay inside."""
    return _below(os.path.abspath(path), os.path.abspath(root))


_REAL_ROOTS: dict[tuple[str, int, int], str] = {}
"""``realpath`` of campaign folders, keyed by path and identity (device, inode): a corpus
reads thousands of files below one root, and resolving it costs a syscall per component."""


def _real_root(root: Path) -> str:
    """``os.path.realpath(root)``, resolved once per folder identity (a root swapped for
    another folder is resolved again)."""
    st = os.stat(root)
    key = (os.fspath(root), st.st_dev, st.st_ino)
    real = _REAL_ROOTS.get(key)
    if real is None:
        if len(_REAL_ROOTS) > 1024:
            _REAL_ROOTS.clear()
        real = _REAL_ROOTS[key] = os.path.realpath(root)
    return real


def _real_path(fd: int, path: Path) -> str:
    """Where the open file ``fd`` really is: the kernel's own answer on Linux (one call,
    and about the file actually opened), else ``realpath`` of the name."""
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)
    return real if real.startswith(os.sep) else os.path.realpath(path)


def _read_to_end(fd: int, expected: int, limit: int) -> tuple[bytes, int]:
    """At most ``limit + 1`` bytes of ``fd``: one read when the file has its ``fstat`` size,
    more when it grew meanwhile (the caller refuses anything past ``limit``)."""
    first = os.read(fd, min(expected, limit) + 1)
    if len(first) <= expected:
        return first, len(first)
    chunks, size = [first], len(first)
    while size <= limit:
        chunk = os.read(fd, min(1 << 20, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), size


def read_bounded(path: Path, root: Path | None = None,
                 limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of one regular file, at most ``limit``; raise :class:`UnreadableFile`.

    Devices, FIFOs, sockets and directories are refused from ``stat`` without opening them
    (``/dev/zero`` never ends, a FIFO blocks forever); the file is opened non-blocking and
    re-checked with ``fstat`` in case it was swapped. A symlink loop is refused, and so is a
    file below ``root`` whose real location (symlinks resolved) leaves ``root``: nothing of
    it is read.
    """
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise UnreadableFile(f"cannot read file: not a regular file "
                                 f"({_file_kind(st.st_mode)}); refused without reading it")
        if st.st_size > limit:
            raise UnreadableFile(f"file is larger than {limit} bytes "
                                 f"({limit // (1024 * 1024)} MiB); refused without reading it")
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
        fd = os.open(path, flags)
        try:
            opened = os.fstat(fd)
            if not stat.S_ISREG(opened.st_mode):
                raise UnreadableFile("cannot read file: not a regular file; refused "
                                     "without reading it")
            if root is not None and _inside(path, root) and \
                    not _below(_real_path(fd, path), _real_root(root)):
                raise UnreadableFile("cannot read file: refusing a symbolic link that "
                                     "leads outside the campaign folder")
            data, size = _read_to_end(fd, opened.st_size, limit)
        finally:
            os.close(fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnreadableFile("cannot read file: symbolic link loop; refused") from None
        raise UnreadableFile(f"cannot read file: {exc.strerror or exc}") from None
    except ValueError as exc:  # NUL byte or unencodable character in the path
        raise UnreadableFile(f"cannot read file: invalid file name ({exc})") from None
    if size > limit:
        raise UnreadableFile(f"file is larger than {limit} bytes "
                             f"({limit // (1024 * 1024)} MiB); refused")
    return data


def _file_kind(mode: int) -> str:
    """A readable name of a non-regular file type."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_json(path: Path, relpath: str, root: Path | None = None
              ) -> tuple[dict[str, Any] | None, Diagnostic | None]:
    """Decode one JSON object file; on failure return an ``artifact_unreadable`` diagnostic.

    ``root`` is the campaign (or cell) folder: a file below it must not leave it by symlink.
    """
    raw, diag = read_evidence(path, relpath, root)
    return (None, diag) if raw is None else decode_document(raw, relpath)


def read_evidence(path: Path, relpath: str, root: Path | None = None
                  ) -> tuple[bytes | None, Diagnostic | None]:
    """The bytes of one evidence file, or the ``artifact_unreadable`` diagnostic saying why
    there are none (see :func:`read_bounded`)."""
    try:
        return read_bounded(path, root), None
    except UnreadableFile as exc:
        return None, evidence_error(ARTIFACT_UNREADABLE, exc.reason, relpath)


def decode_document(raw: bytes, relpath: str
                    ) -> tuple[dict[str, Any] | None, Diagnostic | None]:
    """The JSON object ``raw`` holds, or the ``artifact_unreadable`` diagnostic saying why
    it holds none."""
    try:
        data = decode_json(raw)
    except json.JSONDecodeError as exc:
        return None, Diagnostic(file=relpath, line=exc.lineno, column=exc.colno,
                                message=f"not valid JSON: {exc.msg}", code=ARTIFACT_UNREADABLE)
    except DuplicateKeyError as exc:
        return None, evidence_error(ARTIFACT_UNREADABLE, f"not valid JSON: {exc}", relpath)
    except (UnicodeDecodeError, RecursionError, ValueError, MemoryError) as exc:
        return None, evidence_error(ARTIFACT_UNREADABLE,
                                    f"not valid JSON: {str(exc)[:200]}", relpath)
    if not isinstance(data, dict):
        return None, evidence_error(ARTIFACT_UNREADABLE,
                                    f"top-level JSON value is {_json_kind(data)}, "
                                    "expected an object", relpath)
    deep = nesting_error(data, relpath)
    return (None, deep) if deep is not None else (data, None)


MAX_NESTING = 64
"""Deepest nesting of lists and objects in any decoded file (spec section 3: a value nested
deeper than 64 levels cannot be held and compared exactly). Checked as soon as a file is
decoded, before any other code walks, copies or pickles the value (recursive code would
raise ``RecursionError`` on a few hundred levels)."""


def too_deep(data: Any, limit: int = MAX_NESTING) -> bool:
    """Whether a list or object of ``data`` lies more than ``limit`` levels deep (the
    document itself is level 1). Iterative: any depth is measured without recursion."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        for child in node.values() if node.__class__ is dict else node:
            cls = child.__class__
            if cls is dict or cls is list:
                if depth >= limit:
                    return True
                stack.append((child, depth + 1))
    return False


def deep_path(data: Any, limit: int = MAX_NESTING) -> list[Any]:
    """The keys down to the first list or object more than ``limit`` levels deep (called
    once :func:`too_deep` found one)."""
    stack: list[tuple[Any, list[Any]]] = [(data, [])]
    while stack:
        node, path = stack.pop()
        pairs = node.items() if node.__class__ is dict else enumerate(node)
        for key, child in pairs:
            if child.__class__ is dict or child.__class__ is list:
                if len(path) + 1 >= limit:
                    return path + [key]
                stack.append((child, path + [key]))
    return []


def nesting_error(data: Any, relpath: str) -> Diagnostic | None:
    """A ``fact_invalid`` diagnostic naming the file and JSON pointer of a value nested
    deeper than MAX_NESTING levels, or None."""
    if not too_deep(data):
        return None
    return evidence_error(FACT_INVALID, f"a value nested deeper than {MAX_NESTING} levels; "
                          "refused before it is read", relpath, pointer(deep_path(data)))


def read_text(path: Path, relpath: str, root: Path | None = None
              ) -> tuple[TextFile | None, Diagnostic | None]:
    """Read a small launch script literally as UTF-8 (it is parsed, never executed)."""
    try:
        text = read_bounded(path, root).decode("utf-8")
    except UnreadableFile as exc:
        return None, evidence_error(ARTIFACT_UNREADABLE, exc.reason, relpath)
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
    try:
        text = json.dumps(value, default=repr, ensure_ascii=False, allow_nan=True)
    except (RecursionError, ValueError, TypeError):
        text = f"<{_json_kind(value)}>"
    # a lone surrogate (valid in JSON text, not in UTF-8) is shown as its \u escape
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= limit else text[: limit - 3] + "..."
