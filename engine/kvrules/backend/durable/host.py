"""The one durable-rules host of a process, with every known pitfall closed.

* no background timer threads (the stock Host dispatches from threads and segfaults);
* a JSON shim so floats written with an exponent reach the engine;
* every JSON text the engine is given stays alive until its session ends (see
  :func:`texts_kept`), and none holds a string longer than the engine compares whole (see
  :func:`engine_safe`);
* actions looked up by name in a registry the runtime controls;
* one evaluation at a time (the engine has no locks), one short-lived session each.
"""
from __future__ import annotations

import copy
import json
import re
import threading
import time
import traceback
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import orjson

from kvrules.backend.durable.encode import ENGINE_STRING_BYTES


_EXPONENT = re.compile(r'"(?:[^"\\]|\\.)*"|(?<![\d.])(-?\d+)([eE][+-]?\d+)')


def _maybe_exponent(text: str) -> bool:
    """Whether ``text`` may hold a float with an exponent. ``json.dumps`` writes every such
    float as ``repr`` does, a digit then ``e-`` or ``e+`` (``1e-05``, ``1e+16``); a string
    that holds the same only costs the full scan. (str.find: a regex starting with a
    character class steps through the text in Python's matcher, ~50x slower.)"""
    for mark in ("e-", "e+"):
        at = text.find(mark, 1)
        while at > 0:
            if text[at - 1].isdigit():
                return True
            at = text.find(mark, at + 2)
    return False


class StringTooLong(ValueError):
    """A text for the engine holds a string the engine would compare on a truncated length
    (its 16-bit length): refused before the engine sees it, whatever path made it."""


_STRING_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_SAFE_TEXT = ENGINE_STRING_BYTES // 4 - 2
"""Characters a text may have without being scanned: UTF-8 takes at most 4 bytes per
character, so no string inside such a text reaches the engine's limit."""


def engine_safe(text: str) -> str:
    """``text`` when no string in it (JSON-escaped, as the engine holds it) is longer than
    ENGINE_STRING_BYTES bytes; else raise :class:`StringTooLong`. Checked on every text
    given to the engine (facts, derived facts, session state, ruleset definitions): the
    per-fact guard names file and pointer, this one keeps any path from getting past it."""
    if len(text) <= _SAFE_TEXT:  # the common case: one length test
        return text
    for token in _STRING_TOKEN.finditer(text):
        if token.end() - token.start() - 2 > _SAFE_TEXT:
            size = len(token.group().encode("utf-8", "surrogatepass")) - 2
            if size > ENGINE_STRING_BYTES:
                raise StringTooLong(f"a string of {size} bytes for the rule engine (it "
                                    f"compares at most {ENGINE_STRING_BYTES}); not sent")
    return text


class Batch(list[dict[str, Any]]):
    """Facts for one ``assert_facts`` call, with their JSON already written (by
    :func:`dumps`, each fact's text checked by :func:`engine_safe`): a session's facts are
    asserted once per stratum, and writing them again each time was the engine worker's
    largest cost."""

    def __init__(self, facts: list[dict[str, Any]], text: str) -> None:
        super().__init__(facts)
        self.text = text


def dumps(obj: Any) -> str:
    """The JSON durable-rules is given for ``obj`` (as the engine writes it itself)."""
    return _write(obj, {"ensure_ascii": False})


_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_NINETEEN = b"0" * 19


def _loads(text: str) -> Any:
    """json.loads, through orjson when that reads the same values: not for a text with a
    run of 19 digits or more (orjson reads an integer beyond 64 bits as a float), nor for
    what it refuses (a lone surrogate). (bytes.translate and a substring search: a regex
    for the digit run costs 20x more than the decoding.)"""
    if _NINETEEN not in text.encode("utf-8", "surrogatepass").translate(_DIGITS_AS_ZERO):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)


_NOT_FLOATS = frozenset({str, int, bool, type(None)})
_SCALARS_OR_LISTS = _NOT_FLOATS | {list}


def _flat_without_floats(obj: Any) -> bool:
    """Whether ``obj`` is an object of scalars and lists of scalars, none a float: what an
    engine fact or session state is, unless it holds a float. (Classes gathered by
    ``set(map(type, ...))``: the test runs in C, a few times per engine action.)"""
    if obj.__class__ is not dict:
        return False
    classes = set(map(type, obj.values()))
    if classes <= _NOT_FLOATS:
        return True
    if not classes <= _SCALARS_OR_LISTS:
        return False
    return all(set(map(type, value)) <= _NOT_FLOATS for value in obj.values()
               if value.__class__ is list)


def _compact(obj: Any) -> str | None:
    """``obj`` as compact JSON from orjson when it holds no float (orjson writes floats in
    other notations than ``repr``), else None. A flat object is looked at; anything else is
    looked for floats in the text: the digit mask shows one as ``0.`` or ``0e`` (a string
    holding either, such as a version ``0.11.3``, only costs the standard encoder)."""
    try:
        out = orjson.dumps(obj)
    except (TypeError, orjson.JSONEncodeError):  # a lone surrogate, an int beyond 64 bits
        return None
    if not _flat_without_floats(obj):
        masked = out.translate(_DIGITS_AS_ZERO)
        if b"0." in masked or b"0e" in masked:
            return None
    return out.decode()


_KEPT: list[list[str]] = [[]]
"""The texts given to the engine, kept alive: the innermost list is the current session's
(released when it ends), the outermost the process's (ruleset definitions)."""


@contextmanager
def texts_kept() -> Iterator[None]:
    """Keep every JSON text given to the engine alive until this block (one session) ends.

    durable-rules copies a stored fact's JSON text but leaves its ``id`` and ``sid`` pointing
    into the caller's text (``copyMessage`` in its ``state.c``), and reads them in later
    joins. A text Python frees right after the call is then read after free (valgrind:
    ``reduceString`` from ``isBetaMatch``), and a join on ``id`` depends on what reused the
    memory: the same cell derived one error fewer when only the length of ``PATH``
    changed. The lowered rules join on ``fid`` instead (a copy of the id the engine
    re-points, see ``lower.JOIN_ID``), so this is a second line: no join reads ``id``."""
    _KEPT.append([])
    try:
        yield
    finally:
        _KEPT.pop()


class _JsonShim:
    """json.dumps for durable-rules: compact through orjson when no float is written, and
    ``1e-05`` as ``1.0e-05`` (the engine rejects the former); no string longer than the
    engine compares (see :func:`engine_safe`; a :class:`Batch` was checked fact by fact);
    every text is kept (see :func:`texts_kept`)."""

    loads = staticmethod(_loads)

    @staticmethod
    def dumps(obj: Any, **kwargs: Any) -> str:
        text = _write(obj, kwargs)
        if type(obj) is not Batch:
            engine_safe(text)
        _KEPT[-1].append(text)
        return text


def _write(obj: Any, kwargs: dict[str, Any]) -> str:
    if type(obj) is Batch:
        return obj.text
    fast = _compact(obj)
    if fast is not None:
        return fast
    text = json.dumps(obj, **kwargs)
    if not _maybe_exponent(text):  # the common case: nothing to rewrite
        return text
    return _EXPONENT.sub(lambda m: m.group(0) if m.group(1) is None
                         else f"{m.group(1)}.0{m.group(2)}", text)


Action = Callable[[Any], None]


def _flush_actions(ruleset: Any, state: dict[str, Any], pending: dict[str, Any],
                   state_offset: int, complete: Callable[[Any, Any], None]) -> None:
    """durable's action loop, for actions that are plain one-argument functions (the
    runtime's, from :class:`QuietHost`'s registry), with the engine calls of the stock
    loop in the same order: run the action, store the session state, take the next one.
    The stock loop also runs promise chains and asynchronous actions, which cost a chain
    walk, a lease check and a callback closure per action (~37 actions per cell): 3-4% of
    the engine's time, measured on 200 diverse cells."""
    import durable.engine as durable_engine
    import durable_rules_engine as engine
    while "message" in pending:
        name, message = next(iter(pending.pop("message").items()))
        c = durable_engine.Closure(ruleset._host, ruleset, state, message, state_offset)
        action = ruleset._actions[name]
        if not action._sync or action._next is not None:
            raise TypeError(f"action {name!r} is not a plain function (not from QuietHost)")
        try:
            action._func(c)
        except BaseException as error:  # as the stock loop records it (and goes on)
            c.s.exception = f"exception caught {error}, traceback " \
                            f"{traceback.format_tb(error.__traceback__)}"
        try:
            engine.update_state(ruleset._handle, _JsonShim.dumps(c.s._d, ensure_ascii=False))
            following = engine.complete_and_start_action(ruleset._handle, c._handle)
        except BaseException as error:
            engine.abandon_action(ruleset._handle, c._handle)
            complete(error, None)
            return
        if not following:
            complete(None, state)
            return
        pending["message"] = _loads(following)


def _copied(definition: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of a ruleset definition (durable-rules edits the one it is given):
    orjson's round trip, in C, when it gives back an equal value (not for what JSON cannot
    hold as it is: a non-finite float, a tuple, an integer beyond 64 bits), else
    ``copy.deepcopy``, four times slower on the shipped policy."""
    try:
        copied = orjson.loads(orjson.dumps(definition))
    except (TypeError, orjson.JSONEncodeError):
        return copy.deepcopy(definition)
    return copied if copied == definition else copy.deepcopy(definition)


def _quiet_host_class() -> type:
    """QuietHost, defined on first use: durable-rules is imported only by the process that
    runs the engine (the supervised worker), never merely by importing kvrules."""
    import durable.engine as durable_engine
    from durable.engine import Host

    durable_engine.json = _JsonShim
    durable_engine._unix_now = time.time  # its own builds two datetimes per action; only
    # differences of it are used (action leases), and time.time gives the same ones
    durable_engine.Ruleset._flush_actions = _flush_actions

    class QuietHost(Host):  # type: ignore[misc]  # durable ships no types: Host is Any
        """A durable Host without timer threads whose actions come from a registry."""

        def __init__(self) -> None:
            self.actions: dict[str, Action] = {}
            super().__init__()

        def _run(self) -> None:  # no dispatcher / pulse threads
            return None

        def get_action(self, action_name: str) -> Action:
            return self.actions[action_name]

        def register(self, name: str, definition: dict[str, Any],
                     actions: dict[str, Action]) -> None:
            """Register one ruleset under a unique name; ``definition`` is deep-copied."""
            self.actions.update(actions)
            self.register_rulesets({name: _copied(definition)})

    return QuietHost


_HOST: Any = None
_REGISTERED: set[str] = set()
LOCK = threading.RLock()
"""Held for every engine call: durable-rules is not thread-safe."""


def host() -> Any:
    """The process-wide QuietHost (created lazily, also in forked/spawned workers)."""
    global _HOST
    if _HOST is None:
        _HOST = _quiet_host_class()()
    return _HOST


def ensure_registered(name: str, definition: dict[str, Any], actions: dict[str, Action]) -> None:
    """Register a ruleset once per process (names are versioned by policy digest)."""
    with LOCK:
        if name not in _REGISTERED:
            host().register(name, definition, actions)
            _REGISTERED.add(name)
