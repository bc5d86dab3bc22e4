"""A data-only encoding of typed record trees (dataclasses, containers, scalars) as msgpack.

Cache files may sit in a folder others can write to, so reading one must never run code:
no pickle, no marshal, no eval. An entry is plain msgpack decoded by msgspec straight into
the annotated record types, which checks every field's type as it goes (in C: a compiled
policy decodes in ~2 ms), so a crafted entry with a value of the wrong type is refused like
a corrupt one (:class:`Refused`) and the caller recomputes.

Fields annotated ``Any`` are the exception msgspec cannot type: their values (an operand
that is a ``Ref``, a tuple, a frozenset) are stored tagged - every container a tagged array
(``["L", ...]`` list, ``["T", ...]`` tuple, ``["F", ...]`` frozenset, ``["D", k, v, ...]``
dict, ``["R", name, fields...]`` a record of a class the caller allows, ``["J", value]``
plain JSON-like data) - and rebuilt after decoding. Nothing but allowed records and builtin containers is ever constructed.
"""
from __future__ import annotations

import sys
import types
import typing
from dataclasses import fields, is_dataclass
from functools import lru_cache
from typing import Any, Iterable, Union

import msgspec

_SCALARS = (str, int, float, bool, type(None))


class Refused(ValueError):
    """The payload is not a well-formed encoding of an allowed value."""


def encode(value: Any, root: Any, classes: Iterable[type]) -> bytes:
    """``value`` (a ``root``) as msgpack; raises :class:`Refused` on a value it cannot hold."""
    try:
        return msgspec.msgpack.encode(_plain(value, root, frozenset(classes)))
    except (UnicodeEncodeError, OverflowError, TypeError, msgspec.EncodeError) as exc:
        raise Refused(str(exc)) from None  # e.g. a lone surrogate: not cached


def decode(payload: bytes, root: Any, classes: Iterable[type]) -> Any:
    """The ``root`` that ``payload`` encodes; raises :class:`Refused` for anything else,
    whatever the bytes."""
    allowed = frozenset(classes)
    try:
        value = _decoder(root).decode(payload)
        return _restore(value, root, allowed)
    except Refused:
        raise
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, TypeError,
            ValueError) as exc:
        raise Refused(str(exc)) from None


@lru_cache(maxsize=None)
def _decoder(root: Any) -> msgspec.msgpack.Decoder[Any]:
    return msgspec.msgpack.Decoder(root)


_SHAPES: dict[type, tuple[tuple[str, ...], dict[str, Any]]] = {}


def _shape(cls: type) -> tuple[tuple[str, ...], dict[str, Any]]:
    """A record's field names (constructor order) and their resolved annotations (worked
    out once per class)."""
    known = _SHAPES.get(cls)
    if known is None:
        hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
        names = tuple(f.name for f in fields(cls) if f.init)
        known = _SHAPES[cls] = (names, {n: hints[n] for n in names})
    return known


@lru_cache(maxsize=None)
def _holds_any(annotation: Any) -> bool:
    """Whether a value of ``annotation`` may hold an ``Any`` somewhere (records included)."""
    return _reaches(annotation, set())


def _reaches(annotation: Any, seen: set[Any]) -> bool:
    if annotation is Any:
        return True
    if is_dataclass(annotation):
        if annotation in seen:
            return False
        seen.add(annotation)
        return any(_reaches(h, seen) for h in _shape(annotation)[1].values())  # type: ignore[arg-type]
    return any(_reaches(a, seen) for a in typing.get_args(annotation) if a is not Ellipsis)


# ------------------------------------------------------------------ encoding

def _plain(value: Any, want: Any, allowed: frozenset[type]) -> Any:
    """``value`` as msgspec encodes a ``want``, with ``Any`` parts tagged."""
    if want is Any:
        return _tag(value, allowed)
    if not _holds_any(want):
        return value
    if is_dataclass(want) or typing.get_origin(want) in (Union, types.UnionType):
        if value is None or type(value) in _SCALARS:
            return value
        if type(value) not in allowed:
            raise Refused(f"cannot encode a {type(value).__qualname__}")
        names, hints = _shape(type(value))
        return {n: _plain(getattr(value, n), hints[n], allowed) for n in names}
    if isinstance(value, dict):
        return {k: _plain(v, typing.get_args(want)[1], allowed) for k, v in value.items()}
    return [_plain(v, w, allowed) for v, w in zip(value, _item_types(want, len(value)))]


def _tag(value: Any, allowed: frozenset[type]) -> Any:
    kind = type(value)
    if kind in _SCALARS:
        return value
    if _json(value):
        return ["J", value]
    if kind is list:
        return ["L", *(_tag(v, allowed) for v in value)]
    if kind is tuple:
        return ["T", *(_tag(v, allowed) for v in value)]
    if kind is frozenset:
        return ["F", *(_tag(v, allowed) for v in sorted(value, key=repr))]
    if kind is dict:
        out: list[Any] = ["D"]
        for k, v in value.items():
            out += (_tag(k, allowed), _tag(v, allowed))
        return out
    if kind in allowed:
        return ["R", kind.__qualname__,
                *(_tag(getattr(value, name), allowed) for name in _shape(kind)[0])]
    raise Refused(f"cannot encode a {kind.__qualname__}")


def _json(value: Any) -> bool:
    """Only dicts of strings, lists and scalars: msgspec decodes it back as it was (a
    backend's lowered rules are thousands of such nodes: untagged in C, not here)."""
    kind = type(value)
    if kind is dict:
        return all(type(k) is str and _json(v) for k, v in value.items())
    if kind is list:
        return all(map(_json, value))
    return kind in _SCALARS


def _item_types(want: Any, count: int) -> list[Any]:
    """The annotation of each of ``count`` items of a list, set or tuple ``want``."""
    args = typing.get_args(want)
    if typing.get_origin(want) is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        return list(args)
    return [args[0]] * count


# ------------------------------------------------------------------ decoding

def _restore(value: Any, want: Any, allowed: frozenset[type]) -> Any:
    """``value`` as msgspec decoded it, with its ``Any`` parts untagged (records are
    updated in place; containers holding an ``Any`` directly are rebuilt)."""
    if want is Any:
        return _untag(value, allowed)
    if value is None or not _holds_any(want):
        return value
    kind = type(value)
    if kind in allowed:
        names, hints = _shape(kind)
        for n in names:
            if _holds_any(hints[n]):
                old = getattr(value, n)
                new = _restore(old, hints[n], allowed)
                if new is not old:
                    object.__setattr__(value, n, new)
        return value
    if kind is dict:
        return {k: _restore(v, typing.get_args(want)[-1], allowed) for k, v in value.items()}
    if kind in (list, tuple, frozenset):
        return kind(_restore(v, w, allowed) for v, w in zip(value, _item_types(want, len(value))))
    return value


def _untag(tree: Any, allowed: frozenset[type]) -> Any:
    """A value of an ``Any`` field: scalars, tagged containers and allowed records."""
    if type(tree) in _SCALARS:
        return tree
    if type(tree) is not list or not tree:
        raise Refused(f"an untagged {type(tree).__name__}")
    tag, items = tree[0], tree[1:]
    if tag == "J" and len(items) == 1:
        return items[0]  # whatever msgspec decoded: builtin data
    if tag == "L":
        return [_untag(v, allowed) for v in items]
    if tag == "T":
        return tuple(_untag(v, allowed) for v in items)
    if tag == "F":
        return frozenset(_untag(v, allowed) for v in items)
    if tag == "D" and len(items) % 2 == 0:
        return {_untag(items[i], allowed): _untag(items[i + 1], allowed)
                for i in range(0, len(items), 2)}
    if tag == "R" and items:
        return _record(items[0], items[1:], allowed)
    raise Refused(f"unknown tag {tag!r}")


def _record(name: Any, values: list[Any], allowed: frozenset[type]) -> Any:
    """A record held in an ``Any`` field, type-checked by msgspec."""
    cls = next((c for c in allowed if c.__qualname__ == name), None)
    if cls is None:
        raise Refused(f"not an allowed record: {name!r}")
    names = _shape(cls)[0]
    if len(values) != len(names):
        raise Refused(f"not a {name}")
    return msgspec.convert({n: _untag(v, allowed) for n, v in zip(names, values)}, cls,
                           strict=True)


def record_classes(root: type) -> tuple[type, ...]:
    """Every record class reachable from ``root``'s field annotations (``root`` first)."""
    found: list[type] = []

    def visit(annotation: Any) -> None:
        if is_dataclass(annotation):
            if annotation not in found:
                found.append(annotation)  # type: ignore[arg-type]
                for hint in _shape(annotation)[1].values():  # type: ignore[arg-type]
                    visit(hint)
            return
        for arg in typing.get_args(annotation):
            visit(arg)

    visit(root)
    return tuple(found)
