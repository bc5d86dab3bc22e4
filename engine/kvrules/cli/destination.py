"""The one guard of every path a command writes (``--output``, ``publish --root``).

kvrules reads evidence and writes reports about it; a report written over or inside the
evidence destroys what it describes. So every command that writes checks its destination
here, before any work, with the same rules and the same messages:

* never equal to, inside, or holding an input (campaign, cell, archive, ``--plan``,
  ``--rules``), compared by real path (symbolic links resolved; globs expanded);
* a file needs an existing, writable parent folder and must not be a folder;
* a folder (``classify --format parquet``) is replaced as a whole only when it is empty or a
  dataset kvrules wrote (:data:`kvrules.verdicts.dataset.MARKER`), or with ``--overwrite``;
  never the current folder or one that holds it.

A failure is a :class:`KvrulesUsageError` (``kvrules: error: ...``, exit status 2). The
writers (:mod:`kvrules.cli.common`, :mod:`kvrules.verdicts.dataset`) turn an ``OSError`` at
write time into the same error through :func:`cannot_write`.
"""
from __future__ import annotations

import os
from enum import Enum
from pathlib import Path
from typing import Iterable, Iterator, Union

from kvrules.diagnostics import KvrulesUsageError

PathLike = Union[str, "os.PathLike[str]"]

STDOUT = "-"
"""``--output -``: standard output, which no guard concerns."""


class Kind(Enum):
    """What a command writes at its destination."""

    FILE = "file"  # one file, replaced atomically
    FOLDER = "folder"  # a dataset folder, replaced as a whole
    ROOT = "root"  # a folder written into and never replaced (publish --root)


def check_destination(output: PathLike | None, evidence: Iterable[PathLike] = (),
                      inputs: Iterable[PathLike | None] = (), kind: Kind = Kind.FILE,
                      overwrite: bool = False, option: str = "--output") -> None:
    """Refuse (usage error) a destination that would destroy an input or other data.

    ``evidence`` are the campaign, cell or archive paths as given (folders read through
    links below them count too); ``inputs`` other files or folders read (plan, rules)."""
    if output is None or os.fspath(output) == STDOUT:
        return
    target = Path(os.path.realpath(output))
    for label, source in _sources(evidence, inputs):
        _check_apart(output, target, label, source, kind, option)
    if kind is Kind.FILE:
        _check_file(output, target)
    elif kind is Kind.FOLDER:
        _check_folder(output, target, overwrite, option)
    else:
        _check_root(output, target)


def cannot_write(output: PathLike, exc: OSError) -> KvrulesUsageError:
    """The usage error of a write that failed (read-only, full disk, busy folder)."""
    return KvrulesUsageError(f"cannot write {os.fspath(output)}: {exc.strerror or exc}")


def _sources(evidence: Iterable[PathLike],
             inputs: Iterable[PathLike | None]) -> Iterator[tuple[str, Path]]:
    """(label, real path) of everything a run reads."""
    given = [os.fspath(p) for p in evidence]
    if given:
        from kvrules.artifacts.discover import read_folders
        yield from read_folders(given)
    for path in inputs:
        if path is not None:
            yield os.fspath(path), Path(os.path.realpath(path))


def _check_apart(output: PathLike, target: Path, label: str, source: Path, kind: Kind,
                 option: str) -> None:
    """The destination neither is, nor is inside, nor (unless it is only written into)
    holds what was read."""
    if target == source:
        relation = "is the input"
    elif target.is_relative_to(source):
        relation = "is inside the input"
    elif kind is not Kind.ROOT and source.is_relative_to(target):
        relation = "holds the input"
    else:
        return
    raise KvrulesUsageError(f"{option} {os.fspath(output)} {relation} {label}: kvrules never "
                            "writes over or inside what it reads")


def _check_parent(output: PathLike, target: Path) -> None:
    """The folder a destination is written in exists and can be written."""
    parent = target.parent
    if not parent.is_dir():
        shown = Path(os.fspath(output)).parent
        raise KvrulesUsageError(f"cannot write {os.fspath(output)}: {shown} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise KvrulesUsageError(f"cannot write {os.fspath(output)}: {parent} is not writable")


def _check_file(output: PathLike, target: Path) -> None:
    if target.is_dir():
        raise KvrulesUsageError(f"cannot write {os.fspath(output)}: it is a directory")
    _check_parent(output, target)


def _check_folder(output: PathLike, target: Path, overwrite: bool, option: str) -> None:
    """A dataset folder: never the current folder or one holding it; an existing folder is
    replaced only when it is empty, a kvrules dataset, or ``overwrite`` is given."""
    if Path.cwd().resolve().is_relative_to(target):
        raise KvrulesUsageError(f"{option} {os.fspath(output)} is the current folder or holds "
                                "it: give another folder for the dataset")
    from kvrules.verdicts.dataset import MARKER, replaceable
    _check_parent(output, target)
    if target.exists() and not target.is_dir():
        raise KvrulesUsageError(f"cannot write {os.fspath(output)}: it is not a directory")
    if not (overwrite or replaceable(target)):
        raise KvrulesUsageError(f"{option} {os.fspath(output)} is a folder kvrules did not "
                                f"write (no {MARKER} in it): it is kept; pass --overwrite "
                                "to replace it and everything in it")


def _check_root(output: PathLike, target: Path) -> None:
    if target.exists() and not target.is_dir():
        raise KvrulesUsageError(f"cannot write {os.fspath(output)}: it is not a directory")
