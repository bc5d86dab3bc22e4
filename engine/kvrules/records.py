"""Frozen value classes (``@record``) that cost a third of a frozen ``@dataclass`` to define.

Python 3.11's ``@dataclass`` compiles every method it writes from source text: six
compilations for a frozen class (``__init__``, ``__repr__``, ``__eq__``, ``__hash__``,
``__setattr__``, ``__delattr__``), about 0.5 ms a class. ``kvrules classify`` defines 42 of
them before its first cell can start, 23 ms of a 50-cell run's serial start-up (Python 3.13
compiles a class's methods in one go). ``@record`` has ``dataclasses`` write the
``__init__`` only and gives the other methods as closures over the field names, with the
behaviour of a frozen dataclass: the same equality, hash, order and ``repr``, and no field
assigned or deleted once ``__init__`` has set it (``FrozenInstanceError``). The model's few
mutable classes are ``@record(frozen=False)``: a plain dataclass, from one compilation
instead of three. A record is a dataclass to ``dataclasses.fields``, ``replace`` and
``asdict``, to pickle and to type checkers (``dataclass_transform``). Methods the class body
defines are kept, as ``@dataclass`` keeps them.
"""
from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass, field, fields
from operator import attrgetter
from reprlib import recursive_repr
from typing import Any, Callable, TypeVar, dataclass_transform, overload

T = TypeVar("T", bound=type)


@overload
def record(cls: T, /) -> T: ...
@overload
def record(*, frozen: bool = True, order: bool = False) -> Callable[[T], T]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def record(cls: T | None = None, /, *, frozen: bool = True,
           order: bool = False) -> T | Callable[[T], T]:
    """``@dataclass(frozen=True)``; ``@record(order=True)`` orders as ``order=True`` does,
    and ``@record(frozen=False)`` is a plain (mutable, unhashable) ``@dataclass``."""
    if cls is None:
        return lambda c: _make(c, frozen, order)
    return _make(cls, frozen, order)


def _make(cls: T, frozen: bool, order: bool) -> T:
    own = dict(cls.__dict__)  # before dataclass adds anything: what the body defines
    dataclass(eq=False, repr=False)(cls)  # in place: a class without __slots__ is kept
    every = fields(cls)
    compared = _tuple_of([f.name for f in every if f.compare])
    hashed = _tuple_of([f.name for f in every if (f.compare if f.hash is None else f.hash)])
    shown = [f.name for f in every if f.repr]
    names = frozenset(f.name for f in every)
    methods: dict[str, Any] = {"__repr__": _repr(shown),
                               "__eq__": _compare(compared, tuple.__eq__)}
    if frozen:
        methods.update(__setattr__=_setattr(names), __delattr__=_delattr)
    if not _explicit_hash(own):
        methods["__hash__"] = (lambda self: hash(hashed(self))) if frozen else None
    if order:
        for name, test in (("__lt__", tuple.__lt__), ("__le__", tuple.__le__),
                           ("__gt__", tuple.__gt__), ("__ge__", tuple.__ge__)):
            if name in own:
                raise TypeError(f"cannot overwrite attribute {name} in class {cls.__name__}")
            methods[name] = _compare(compared, test)
    for name, method in methods.items():
        if name not in own:
            if method is not None:
                method.__qualname__ = f"{cls.__qualname__}.{name}"
            setattr(cls, name, method)
    return cls


def _tuple_of(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The values of ``names`` as a tuple, in C (``attrgetter`` of one name gives the bare
    value: it is wrapped, so a record of one field hashes as ``@dataclass``'s does)."""
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    if not names:
        return lambda obj: ()
    return attrgetter(*names)  # a tuple for 2+ names


def _compare(values: Callable[[Any], tuple[Any, ...]],
             test: Callable[[tuple[Any, ...], tuple[Any, ...]], Any]) -> Callable[..., Any]:
    def method(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return test(values(self), values(other))
        return NotImplemented
    return method


def _repr(shown: list[str]) -> Callable[[Any], str]:
    @recursive_repr()
    def __repr__(self: Any) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
        return f"{self.__class__.__qualname__}({inner})"
    return __repr__


def _setattr(names: frozenset[str]) -> Callable[[Any, str, Any], None]:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if name in names and name not in self.__dict__:  # __init__ setting it
            object.__setattr__(self, name, value)
            return
        raise FrozenInstanceError(f"cannot assign to field {name!r}")
    return __setattr__


def _delattr(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _explicit_hash(own: dict[str, Any]) -> bool:
    """Whether the body defines ``__hash__`` (``__hash__ = None`` beside an ``__eq__`` is
    what Python adds itself, as ``@dataclass`` reads it)."""
    return "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)


__all__ = ["record"]
