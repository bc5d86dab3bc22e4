"""Two engine defects kvrules must keep out of every verdict.

* durable-rules compares strings on a 16-bit length (``reduceString`` and the ``$mt`` path
  of its ``events.c``): a string of 65,536 + n bytes compares equal to an n-byte constant it
  starts with. kvrules refuses every string longer than the engine compares whole, measured
  in bytes as the engine holds it, on every path to the engine.
* durable-rules leaves a stored fact's ``id`` pointing into the caller's JSON text
  (``copyMessage`` in its ``state.c``), and a join on ``id`` reads it later. The lowered
  rules join on ``fid``, which the engine copies, so no join reads freed memory.

The engine-only checks run durable-rules without kvrules and prove each defect still exists
(were it fixed upstream, they say so rather than pass vacuously).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvrules.backend.durable import encode, host, lower

ENGINE = Path(__file__).parent / "files" / "engine"
PAD = "\u00e9" * 32_768
"""65,536 bytes of UTF-8 in 32,768 characters (far under a limit counted in characters)."""


def _fired_by_size(pads: list[str]) -> dict[str, list[str]]:
    """What durable-rules alone fires for ``"s:skip:abc" + pad`` against an equality and a
    ``$mt`` prefix rule, by the value's size in bytes."""
    done = subprocess.run([sys.executable, str(ENGINE / "compare_16_bits.py")],
                          input=json.dumps(pads), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out: dict[str, list[str]] = json.loads(done.stdout)
    return out


def test_the_engine_still_compares_strings_on_16_bits() -> None:
    fired = _fired_by_size(["", "\u00e9", PAD, "x" * 65_536])
    assert fired["10"] == ["eq", "mt"] and fired["12"] == ["mt"]
    assert fired["65546"] == ["eq", "mt"], "the engine no longer truncates: revisit the guard"


@pytest.mark.parametrize("value, refused", [
    ("s" * encode.MAX_STRING_BYTES, False), ("s" * (encode.MAX_STRING_BYTES + 1), True),
    ("\u00e9" * (encode.MAX_STRING_BYTES // 2), False),
    ("skip:dense_model_content_insensitive" + PAD, True),
    ("\U0001f600" * 16_384, True), ("\\" * 32_767, True), ("\x01" * 10_923, True),
])
def test_a_string_the_engine_would_truncate_is_refused_before_it(value: str,
                                                                 refused: bool) -> None:
    assert (encode.value_problem(value) is not None) is refused
    fact = {"fact_": "x", "id": "s:f", "v": "s:" + value}
    if refused:
        with pytest.raises(host.StringTooLong):
            host.engine_safe(host.dumps(fact))
    else:
        assert host.engine_safe(host.dumps(fact))


def test_the_same_fact_through_kvrules_host_never_reaches_the_engine() -> None:
    """What fires on the engine alone (above) is refused by kvrules' host on every path:
    a batch, a single fact, a derived fact (all written by the JSON shim)."""
    fired: list[str] = []
    name = "strings_guard_test"
    definition = {"eq": {"all": [{"m": {"v": "s:skip:abc"}}], "run": "strings#eq"},
                  "mt": {"all": [{"m": {"$mt": {"v": "s:skip:abc.*"}}}], "run": "strings#eq"}}
    host.ensure_registered(name, definition, {"strings#eq": lambda c: fired.append("x")})
    engine = host.host()
    fact = {"id": "f", "v": "s:skip:abc" + PAD}
    for n, call in enumerate((engine.assert_facts, engine.assert_fact)):
        with host.texts_kept(), pytest.raises(host.StringTooLong):
            sent = [dict(fact, sid=f"g{n}")]
            call(name, sent if call is engine.assert_facts else sent[0])
    assert fired == []


def test_a_rule_literal_the_engine_would_truncate_is_refused() -> None:
    lower._check_strings({"r": {"all": [{"m": {"v": "s:" + "\u00e9" * 32_766}}]}})
    for literal in ("s:" + PAD, "s:" + "\\" * 32_768):
        with pytest.raises(ValueError, match="rule literal"):
            lower._check_strings({"r": {"all": [{"m": {"$mt": {"v": literal}}}]}})


def _joins_fired(way: str, *extra: str) -> int:
    """Joins on a fact id fired in 20 sessions, every engine text freed once its call
    returned, under Python's debug allocator (it overwrites freed memory at once)."""
    done = subprocess.run([sys.executable, str(ENGINE / "join_on_freed_ids.py"), way, "20",
                           *extra], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONMALLOC": "debug"})
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.split()[-1])


def test_joins_on_fact_ids_do_not_read_memory_python_freed() -> None:
    """kvrules' lowering joins on ``fid``: every join fires with every text freed. The
    same join on ``id`` misses every time (the engine reads the freed text), and fires when
    the texts are kept: the test still sees the defect it guards against."""
    assert _joins_fired("guarded") == 20
    assert _joins_fired("bare", "kept") == 20
    assert _joins_fired("bare") == 0, "joins on id no longer read freed memory: revisit"


def test_a_session_with_an_over_long_fact_fails_closed_without_the_engine() -> None:
    """The per-fact guard (``fact_invalid``) is the first line; were a fact past it, its
    session would record a failure (the cell fails closed) and never call the engine."""
    from kvrules.backend.durable import session
    from kvrules.backend.events import Evaluation

    ctx = session._Context.__new__(session._Context)
    ctx.encoded = [{"fact_": "point", "id": "s:p", "v": "s:skip:abc" + PAD}]
    ctx.texts = []
    ctx.result = Evaluation()

    class NoEngine:
        def __getattr__(self, name: str) -> None:
            pytest.fail(f"the engine was called ({name})")

    session._session(NoEngine(), "no_such_ruleset", ctx, None)
    assert len(ctx.result.failures) == 1 and "65546 bytes" in ctx.result.failures[0]
    assert not session.tainted()


def test_rules_check_refuses_a_literal_the_engine_would_truncate(tmp_path: Path) -> None:
    """A policy literal of 65,536 more bytes after ``skip:...``: ``rules check`` (and so
    ``classify``, the same passes) names the rule instead of letting it match any value
    that merely starts alike."""
    from kvrules.resources import rules_dir
    for entry in rules_dir().iterdir():
        if entry.name.endswith(".yaml"):
            (tmp_path / entry.name).write_text(entry.read_text(encoding="utf-8"),
                                               encoding="utf-8")
    regime = (tmp_path / "regime.yaml").read_text(encoding="utf-8")
    literal = '"skip:dense_model_content_insensitive"]'
    assert literal in regime
    regime = regime.replace(literal, literal[:-2] + PAD + '"]', 1)
    (tmp_path / "regime.yaml").write_text(regime, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "kvrules", "rules", "check", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "regime.yaml" in done.stdout and "rule literal is a string of 65574 bytes" \
        in done.stdout
