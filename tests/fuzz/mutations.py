"""Mutation operators: each takes a seeded ``random.Random`` and a mutant folder.

A mutant is a copy of ``examples/`` (a folder of campaigns, each with one cell) or a copy of
``rules/``. Every operator mutates files in place and returns a :class:`Applied` that says what
it did (a human readable description) and which cells it may have affected, so the oracle can
insist that every *other* cell is still classified. Everything random is drawn from the
``random.Random`` passed in, so a mutant is a pure function of ``(seed, index)``.
"""
from __future__ import annotations

import json
import os
import random
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
RULES = REPO / "rules"
RULES_CAMPAIGN = EXAMPLES / "dense-legacy-stamp-format"

ALL = ("*", "*")  # a touch of every campaign


@dataclass
class Applied:
    description: str
    touched: set[tuple[str, str]] = field(default_factory=set)


class Raw(str):
    """A JSON token written verbatim (NaN, 1e400, a lone surrogate escape, deep nesting)."""


class Pairs(list):
    """A JSON object as (key, value) pairs; may hold duplicate keys."""


def dumps(value: Any, indent: int = 0) -> str:
    """JSON text that may contain :class:`Raw` tokens and duplicate keys (:class:`Pairs`)."""
    pad, inner = "  " * indent, "  " * (indent + 1)
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, (dict, Pairs)):
        items = value.items() if isinstance(value, dict) else value
        body = [f"{inner}{json.dumps(k)}: {dumps(v, indent + 1)}" for k, v in items]
        return "{\n" + ",\n".join(body) + "\n" + pad + "}" if body else "{}"
    if isinstance(value, list):
        body = [inner + dumps(v, indent + 1) for v in value]
        return "[\n" + ",\n".join(body) + "\n" + pad + "]" if body else "[]"
    return json.dumps(value)


# ---------------------------------------------------------------- locating files and cells

def touched_by(root: Path, path: Path) -> tuple[str, str]:
    """(campaign, cell_id) a path under a mutant belongs to; ``cell_id`` ``*`` = campaign-wide."""
    parts = path.relative_to(root).parts
    if len(parts) == 1:
        return ALL
    if len(parts) >= 3 and parts[1] == "cells":
        return (parts[0], parts[2])
    return (parts[0], "*")


def _regular(paths: list[Path]) -> list[Path]:
    return [p for p in paths if p.is_file() and not p.is_symlink()]


def json_files(root: Path) -> list[Path]:
    return sorted(_regular(list(root.rglob("*.json"))))


def rank_files(root: Path) -> list[Path]:
    return [p for p in json_files(root) if p.name.startswith("benchmark")]


def raw_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("*/cells/*/raw/*") if p.is_dir() and not p.is_symlink())


def cell_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("*/cells/*") if p.is_dir() and not p.is_symlink()
                  and not p.name.startswith("."))


def _load(path: Path) -> Any | None:
    """A JSON file's value, or None when it is unreadable or too big to walk."""
    try:
        value = json.loads(path.read_bytes())
        _nodes(value)
        return value
    except (ValueError, UnicodeDecodeError, RecursionError, TooBig):
        return None


def _rel(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


# ---------------------------------------------------------------- JSON tree helpers

NODE_BUDGET = 200_000  # more nodes than any pristine file; an alias bomb has 9**12


class TooBig(Exception):
    """A document too large (or too deep) to walk: a previous mutation made it so."""


def _nodes(value: Any, path: tuple = (), out: list | None = None) -> list[tuple[tuple, Any]]:
    """Every (path, node) of a JSON/YAML tree, depth first; TooBig past NODE_BUDGET nodes."""
    out = [] if out is None else out
    if len(out) >= NODE_BUDGET or len(path) > 200:
        raise TooBig()
    out.append((path, value))
    if isinstance(value, dict):
        for k, v in value.items():
            _nodes(v, path + (k,), out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _nodes(v, path + (i,), out)
    return out


def _set(doc: Any, path: tuple, new: Any) -> None:
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = new


def _pointer(path: tuple) -> str:
    return "/" + "/".join(str(p) for p in path)


def _odd_value(rnd: random.Random) -> tuple[str, Any]:
    depth = rnd.choice([50, 2000, 100_000])
    choices: list[tuple[str, Any]] = [
        ("null", None), ("true", True), ("false", False), ("float 4.0", 4.0),
        ("huge int 2**70", 2 ** 70), ("-1", -1), ("0", 0), ("1e400", Raw("1e400")),
        ("NaN token", Raw("NaN")), ("Infinity token", Raw("-Infinity")),
        ("1e6-char string", "x" * 1_000_000), ("empty string", ""),
        (f"list nested {depth} deep", Raw("[" * depth + "]" * depth)),
        ("empty list", []), ("empty object", {}), ("string '1'", "1"),
        ("lone surrogate string", Raw('"\\ud800"')), ("list [1, 2]", [1, 2]),
    ]
    return rnd.choice(choices)


# ---------------------------------------------------------------- campaign mutations

Mutation = Callable[[random.Random, Path], "Applied | None"]


def _pick_object_file(rnd: random.Random, root: Path) -> tuple[Path, Any] | None:
    """A random JSON file of the mutant holding an object, decoded (None when there is none)."""
    files = [p for p in json_files(root) if isinstance(_load(p), dict)]
    if not files:
        return None
    path = rnd.choice(files)
    return path, _load(path)


def m_drop_key(rnd: random.Random, root: Path) -> Applied | None:
    picked = _pick_object_file(rnd, root)
    if picked is None:
        return None
    path, doc = picked
    holders = [(p, v) for p, v in _nodes(doc) if isinstance(v, dict) and v]
    if not holders:
        return None
    at, obj = rnd.choice(holders)
    key = rnd.choice(sorted(obj))
    del obj[key]
    path.write_text(dumps(doc), encoding="utf-8")
    return Applied(f"drop key {_pointer(at + (key,))} in {_rel(root, path)}",
                   {touched_by(root, path)})


def m_set_type(rnd: random.Random, root: Path) -> Applied | None:
    picked = _pick_object_file(rnd, root)
    if picked is None:
        return None
    path, doc = picked
    nodes = _nodes(doc)[1:]
    if not nodes:
        return None
    at, _ = rnd.choice(nodes)
    label, value = _odd_value(rnd)
    _set(doc, at, value)
    path.write_text(dumps(doc), encoding="utf-8")
    return Applied(f"set {_pointer(at)} in {_rel(root, path)} to {label}",
                   {touched_by(root, path)})


def m_lone_surrogate(rnd: random.Random, root: Path) -> Applied | None:
    files = [p for p in json_files(root) if isinstance(_load(p), dict)]
    strings = [(p, at) for p in files for at, v in _nodes(_load(p)) if isinstance(v, str)]
    if not strings:
        return None
    path, at = rnd.choice(strings)
    doc = _load(path)
    _set(doc, at, Raw(rnd.choice(['"\\ud800"', '"a\\udfffb"', '"\\ud800\\ud800"'])))
    path.write_text(dumps(doc), encoding="utf-8")
    return Applied(f"lone surrogate string at {_pointer(at)} in {_rel(root, path)}",
                   {touched_by(root, path)})


def m_dup_json_key(rnd: random.Random, root: Path) -> Applied | None:
    picked = _pick_object_file(rnd, root)
    if picked is None:
        return None
    path, doc = picked
    holders = [(p, v) for p, v in _nodes(doc) if isinstance(v, dict) and v]
    if not holders:
        return None
    at, obj = rnd.choice(holders)
    key = rnd.choice(sorted(obj))
    _, other = _odd_value(rnd) if rnd.random() < 0.5 else ("same", obj[key])
    pairs = Pairs(list(obj.items()) + [(key, other)])
    if at:
        _set(doc, at, pairs)
    else:
        doc = pairs
    path.write_text(dumps(doc), encoding="utf-8")
    return Applied(f"duplicate JSON key {_pointer(at + (key,))} in {_rel(root, path)}",
                   {touched_by(root, path)})


def m_dup_benchmark_id(rnd: random.Random, root: Path) -> Applied | None:
    files = [p for p in rank_files(root)
             if isinstance(d := _load(p), dict) and isinstance(d.get("results"), list)
             and d["results"]]
    if not files:
        return None
    path = rnd.choice(files)
    doc = _load(path)
    results = doc["results"]
    if len(results) >= 2 and rnd.random() < 0.5:
        i, j = rnd.sample(range(len(results)), 2)
        try:
            results[i]["point"]["benchmark_id"] = results[j]["point"]["benchmark_id"]
        except (TypeError, KeyError):
            return None
        what = f"results/{i} takes the benchmark_id of results/{j}"
    else:
        results.append(json.loads(json.dumps(results[0])))
        what = "results/0 appended again"
    path.write_text(dumps(doc), encoding="utf-8")
    return Applied(f"duplicate benchmark_id ({what}) in {_rel(root, path)}",
                   {touched_by(root, path)})


def m_dup_rank_file(rnd: random.Random, root: Path) -> Applied | None:
    files = rank_files(root)
    if not files:
        return None
    src = rnd.choice(files)
    if rnd.random() < 0.5:
        dst = src.with_name(f"benchmark_copy{rnd.randrange(100)}.json")
    else:
        worker = src.parent.with_name(src.parent.name + "-dup")
        worker.mkdir(exist_ok=True)
        dst = worker / src.name
    shutil.copyfile(src, dst)
    return Applied(f"duplicate rank file {_rel(root, src)} as {_rel(root, dst)} (same dp.rank)",
                   {touched_by(root, src)})


def m_truncate(rnd: random.Random, root: Path) -> Applied | None:
    files = json_files(root)
    if not files:
        return None
    path = rnd.choice(files)
    data = path.read_bytes()
    cut = rnd.randrange(len(data)) if data else 0
    path.write_bytes(data[:cut])
    return Applied(f"truncate {_rel(root, path)} to {cut} of {len(data)} bytes",
                   {touched_by(root, path)})


def m_encoding(rnd: random.Random, root: Path) -> Applied | None:
    files = json_files(root)
    if not files:
        return None
    path = rnd.choice(files)
    data = path.read_bytes()
    kind = rnd.choice(["utf-16", "utf-16-be", "utf-32", "bom", "double-bom", "invalid-utf8",
                       "latin-1"])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if kind in ("utf-16", "utf-16-be", "utf-32") and text is not None:
        new = text.encode(kind, errors="surrogatepass")
    elif kind == "bom":
        new = b"\xef\xbb\xbf" + data
    elif kind == "double-bom":
        new = b"\xef\xbb\xbf\xef\xbb\xbf" + data
    elif kind == "latin-1":
        new = data.replace(b'"', b'"\xe9', 1)
    else:
        kind = "invalid-utf8"
        at = rnd.randrange(len(data) + 1)
        new = data[:at] + rnd.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80"]) + data[at:]
    path.write_bytes(new)
    return Applied(f"re-encode {_rel(root, path)} as {kind}", {touched_by(root, path)})


def m_delete(rnd: random.Random, root: Path) -> Applied | None:
    kind = rnd.choice(["plan", "provenance", "rank"])
    pick = {"plan": lambda p: p.name == "collection-plan.json",
            "provenance": lambda p: p.name == "collector-provenance.json",
            "rank": lambda p: p.name.startswith("benchmark")}[kind]
    files = [p for p in json_files(root) if pick(p)]
    if not files:
        return None
    path = rnd.choice(files)
    path.unlink()
    return Applied(f"delete {kind} {_rel(root, path)}", {touched_by(root, path)})


def _link_place(rnd: random.Random, root: Path) -> Path | None:
    """Where a new special file goes: a rank/provenance name in a worker folder, or a plan."""
    raws = raw_dirs(root)
    choice = rnd.random()
    if choice < 0.15:
        campaigns = sorted(p for p in root.iterdir() if p.is_dir())
        return rnd.choice(campaigns) / "collection-plan.json" if campaigns else None
    if not raws:
        return None
    folder = rnd.choice(raws)
    name = rnd.choice(["benchmark.json", "benchmark_dp1.json", "benchmark_extra.json",
                       "collector-provenance.json", "benchmark_worker_probe.json"])
    return folder / name


def m_symlink(rnd: random.Random, root: Path) -> Applied | None:
    where = _link_place(rnd, root)
    if where is None:
        return None
    kind = rnd.choice(["/dev/zero", "outside", "loop", "dangling", "dir-loop"])
    if kind == "dir-loop":
        raws = raw_dirs(root)
        if not raws:
            return None
        where = rnd.choice(raws) / "loop"
    if where.exists() or where.is_symlink():
        where.unlink() if not where.is_dir() or where.is_symlink() else shutil.rmtree(where)
    if kind == "/dev/zero":
        where.symlink_to("/dev/zero")
    elif kind == "outside":
        # a readable file outside the campaign: the pristine rank of another example
        target = sorted(EXAMPLES.glob("*/cells/*/raw/*/benchmark.json"))
        where.symlink_to(rnd.choice(target))
    elif kind == "loop":
        other = where.with_name(where.name + ".loop")
        where.symlink_to(other.name)
        other.symlink_to(where.name)
    elif kind == "dangling":
        where.symlink_to(where.with_name("does-not-exist.json").name)
    else:
        where.symlink_to("..", target_is_directory=True)
    return Applied(f"symlink ({kind}) at {_rel(root, where)}", {touched_by(root, where)})


def m_fifo(rnd: random.Random, root: Path) -> Applied | None:
    where = _link_place(rnd, root)
    if where is None:
        return None
    if where.exists() or where.is_symlink():
        where.unlink()
    os.mkfifo(where)
    return Applied(f"FIFO at {_rel(root, where)}", {touched_by(root, where)})


def m_hide_cell(rnd: random.Random, root: Path) -> Applied | None:
    cells = cell_dirs(root)
    if not cells:
        return None
    cell = rnd.choice(cells)
    hidden = cell.with_name("." + cell.name)
    cell.rename(hidden)
    return Applied(f"rename cell folder {_rel(root, cell)} to {hidden.name}",
                   {touched_by(root, cell)})


CAMPAIGN_MUTATIONS: dict[str, tuple[float, Mutation]] = {
    "drop_key": (3, m_drop_key),
    "set_type": (5, m_set_type),
    "lone_surrogate": (1, m_lone_surrogate),
    "dup_json_key": (1.5, m_dup_json_key),
    "dup_benchmark_id": (1.5, m_dup_benchmark_id),
    "dup_rank_file": (1.5, m_dup_rank_file),
    "truncate": (1.5, m_truncate),
    "encoding": (1.5, m_encoding),
    "delete": (1.5, m_delete),
    "symlink": (1, m_symlink),
    "fifo": (0.5, m_fifo),
    "hide_cell": (0.5, m_hide_cell),
}


# ---------------------------------------------------------------- rule-file mutations

def yaml_files(root: Path) -> list[Path]:
    return sorted(_regular(list(root.rglob("*.yaml"))))


def policy_files(root: Path) -> list[Path]:
    return [p for p in yaml_files(root) if p.parent == root]


def _pick_yaml(rnd: random.Random, root: Path) -> Path | None:
    files = policy_files(root) if rnd.random() < 0.85 else yaml_files(root)
    return rnd.choice(files) if files else None


def _lines_insert(rnd: random.Random, text: str, insert: str) -> str:
    lines = text.splitlines(keepends=True)
    at = rnd.randrange(len(lines) + 1)
    return "".join(lines[:at] + [insert] + lines[at:])


def _text(path: Path) -> str:
    """A rule file's text, whatever an earlier mutation did to its encoding.

    Undecodable bytes survive as surrogate escapes, so writing the text back with
    ``errors="surrogateescape"`` keeps them: a re-encoded file stays re-encoded.
    """
    return path.read_bytes().decode("utf-8", errors="surrogateescape")


def r_broken_yaml(rnd: random.Random, root: Path) -> Applied | None:
    path = _pick_yaml(rnd, root)
    if path is None:
        return None
    junk = rnd.choice(["  - : : [\n", "{unclosed: [1, 2\n", "\t- tab indented\n", "key: 'open\n",
                       "- ]\n", "  badly:\n indented: x\n", "%YAML 9.9\n---\n"])
    path.write_text(_lines_insert(rnd, _text(path), junk), encoding="utf-8", errors="surrogateescape")
    return Applied(f"broken YAML {junk.strip()!r} inserted in {path.name}")


def r_alias_bomb(rnd: random.Random, root: Path) -> Applied | None:
    path = _pick_yaml(rnd, root)
    if path is None:
        return None
    levels = rnd.choice([6, 9, 12])
    bomb = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        bomb.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    if rnd.random() < 0.5:
        text = "\n".join(bomb) + f"\nrules: *a{levels - 1}\n"
        where = "as the whole file"
    else:
        text = _text(path) + "\nbomb:\n" + "\n".join(
            "  " + line for line in bomb) + "\n"
        where = "appended under key 'bomb'"
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    return Applied(f"alias bomb ({levels} levels, 9**{levels}) {where} in {path.name}")


def r_deep_nesting(rnd: random.Random, root: Path) -> Applied | None:
    path = _pick_yaml(rnd, root)
    if path is None:
        return None
    depth = rnd.choice([200, 5000, 50_000])
    style = rnd.choice(["flow-list", "flow-map", "block"])
    if style == "flow-list":
        deep = "[" * depth + "]" * depth
    elif style == "flow-map":
        deep = "{a: " * depth + "1" + "}" * depth
    else:
        depth = min(depth, 3000)
        deep = "\n" + "".join("  " * (i + 1) + "a:\n" for i in range(depth)) + "  " * (depth + 1) + "b: 1"
    text = _text(path) + f"\ndeep: {deep}\n"
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    return Applied(f"deep nesting ({style}, depth {depth}) appended to {path.name}")


def r_unknown_tag(rnd: random.Random, root: Path) -> Applied | None:
    path = _pick_yaml(rnd, root)
    if path is None:
        return None
    tag = rnd.choice(["!custom x", "!!python/object/apply:os.system ['true']",
                      "!!python/name:os.system", "!!binary aGVsbG8=", "!!set {a, b}",
                      "!!timestamp 2001-12-14", "!!omap [a: 1]"])
    text = _text(path)
    lines = text.splitlines(keepends=True)
    cands = [i for i, line in enumerate(lines) if line.rstrip().endswith(":") is False
             and ": " in line and not line.lstrip().startswith("#")]
    if cands and rnd.random() < 0.7:
        i = rnd.choice(cands)
        key, _, _ = lines[i].partition(": ")
        lines[i] = f"{key}: {tag}\n"
        text = "".join(lines)
        what = f"line {i + 1}"
    else:
        text += f"\nextra: {tag}\n"
        what = "new key"
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    return Applied(f"unknown tag {tag!r} at {what} of {path.name}")


def r_nul(rnd: random.Random, root: Path) -> Applied | None:
    path = _pick_yaml(rnd, root)
    if path is None:
        return None
    data = path.read_bytes()
    at = rnd.randrange(len(data) + 1)
    path.write_bytes(data[:at] + b"\x00" + data[at:])
    return Applied(f"NUL byte at offset {at} of {path.name}")


def r_encoding(rnd: random.Random, root: Path) -> Applied | None:
    path = _pick_yaml(rnd, root)
    if path is None:
        return None
    kind = rnd.choice(["utf-16", "utf-16-le", "utf-32", "bom", "invalid-utf8"])
    data = path.read_bytes()
    if kind == "bom":
        new = b"\xef\xbb\xbf" + data
    elif kind == "invalid-utf8":
        at = rnd.randrange(len(data) + 1)
        new = data[:at] + b"\xff\xfe\xc3" + data[at:]
    else:
        new = data.decode("utf-8", errors="surrogateescape").encode(kind, errors="surrogatepass")
    path.write_bytes(new)
    return Applied(f"re-encode {path.name} as {kind}")


def r_dup_keys(rnd: random.Random, root: Path) -> Applied | None:
    path = _pick_yaml(rnd, root)
    if path is None:
        return None
    text = _text(path)
    lines = text.splitlines(keepends=True)
    cands = [i for i, line in enumerate(lines)
             if ": " in line and not line.lstrip().startswith(("#", "- "))]
    if cands and rnd.random() < 0.7:
        i = rnd.choice(cands)
        key = lines[i].partition(": ")[0]
        lines.insert(i + 1, f"{key}: duplicated\n")
        text = "".join(lines)
        what = f"{key.strip()!r} after line {i + 1}"
    else:
        top = text.split(":", 1)[0].strip() or "rules"
        text += f"\n{top}: []\n"
        what = f"top-level {top[:40]!r}"
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    return Applied(f"duplicate key {what} in {path.name}")


def _rule_docs(root: Path) -> list[tuple[Path, Any]]:
    out = []
    for p in policy_files(root):
        text = p.read_bytes()
        if re.search(rb"[&*][A-Za-z_]", text):  # anchors/aliases (an alias bomb): never expand

            continue
        try:
            doc = yaml.safe_load(text.decode("utf-8"))
            _nodes(doc)
        except (yaml.YAMLError, UnicodeDecodeError, ValueError, RecursionError, TooBig):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("rules"), list) and doc["rules"]:
            out.append((p, doc))
    return out


def r_many_rules(rnd: random.Random, root: Path) -> Applied | None:
    docs = _rule_docs(root)
    if not docs:
        return None
    path, doc = rnd.choice(docs)
    n = rnd.choice([300, 3000])
    template = rnd.choice(doc["rules"])
    copies = []
    for i in range(n):
        rule = json.loads(json.dumps(template))
        if isinstance(rule, dict) and isinstance(rule.get("id"), str):
            rule["id"] = f"{rule['id']}_copy{i}"
        copies.append(rule)
    doc["rules"] = doc["rules"] + copies
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return Applied(f"{n} copies of rule {template.get('id') if isinstance(template, dict) else '?'} "
                   f"added to {path.name}")


def _yaml_leaf_mutation(rnd: random.Random, root: Path, label: str,
                        values: list[tuple[str, Any]]) -> Applied | None:
    docs = _rule_docs(root)
    if not docs:
        return None
    path, doc = rnd.choice(docs)
    leaves = [(p, v) for p, v in _nodes(doc)[1:] if not isinstance(v, (dict, list))]
    if not leaves:
        return None
    wheres = [(p, v) for p, v in leaves if "where" in p]
    pool = wheres if wheres and rnd.random() < 0.7 else leaves
    at, _ = rnd.choice(pool)
    name, value = rnd.choice(values)
    _set(doc, at, value)
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return Applied(f"{label}: {_pointer(at)} of {path.name} set to {name}")


def r_inf(rnd: random.Random, root: Path) -> Applied | None:
    return _yaml_leaf_mutation(rnd, root, "inf literal",
                               [(".inf", float("inf")), ("-.inf", float("-inf")),
                                (".nan", float("nan")), ("2**70", 2 ** 70), ("4.0", 4.0)])


def r_list_operand(rnd: random.Random, root: Path) -> Applied | None:
    return _yaml_leaf_mutation(rnd, root, "list operand",
                               [("[1, 2]", [1, 2]), ("[]", []), ("[[a]]", [["a"]]),
                                ("{ne: [a, b]}", {"ne": ["a", "b"]}), ("null", None),
                                ("{}", {}), ("true", True)])


def r_drop_key(rnd: random.Random, root: Path) -> Applied | None:
    docs = _rule_docs(root)
    if not docs:
        return None
    path, doc = rnd.choice(docs)
    holders = [(p, v) for p, v in _nodes(doc) if isinstance(v, dict) and v]
    if not holders:
        return None
    at, obj = rnd.choice(holders)
    key = rnd.choice(sorted(map(str, obj)))
    obj.pop(key, None)
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return Applied(f"drop key {_pointer(at + (key,))} of {path.name}")


RULE_MUTATIONS: dict[str, tuple[float, Mutation]] = {
    "broken_yaml": (1, r_broken_yaml),
    "alias_bomb": (1, r_alias_bomb),
    "deep_nesting": (1, r_deep_nesting),
    "unknown_tag": (1, r_unknown_tag),
    "nul": (1, r_nul),
    "encoding": (1, r_encoding),
    "dup_keys": (1, r_dup_keys),
    "many_rules": (0.5, r_many_rules),
    "inf": (1.5, r_inf),
    "list_operand": (1.5, r_list_operand),
    "drop_key": (1, r_drop_key),
}


# ---------------------------------------------------------------- building a mutant

@dataclass
class Mutant:
    index: int
    kind: str  # "campaign" or "rules"
    folder: Path
    descriptions: list[str]
    touched: set[tuple[str, str]]


def mutant_random(seed: int, index: int) -> random.Random:
    """The random source of mutant ``index``: independent of N, --jobs and --only."""
    return random.Random(f"kvrules-fuzz:{seed}:{index}")


def _weighted(rnd: random.Random, table: dict[str, tuple[float, Mutation]]) -> str:
    names = sorted(table)
    return rnd.choices(names, weights=[table[n][0] for n in names])[0]


def build_mutant(seed: int, index: int, workdir: Path, rules_share: float = 0.25) -> Mutant:
    """Create mutant ``index`` of ``seed`` in ``workdir/m<index>`` (removed first)."""
    rnd = mutant_random(seed, index)
    folder = workdir / f"m{index:05d}"
    if folder.exists() or folder.is_symlink():
        remove_tree(folder)
    kind = "rules" if rnd.random() < rules_share else "campaign"
    if kind == "rules":
        shutil.copytree(RULES, folder, ignore=shutil.ignore_patterns("__pycache__"))
        table = RULE_MUTATIONS
    else:
        folder.mkdir(parents=True)
        for campaign in sorted(p for p in EXAMPLES.iterdir() if p.is_dir()):
            shutil.copytree(campaign, folder / campaign.name)
        table = CAMPAIGN_MUTATIONS
    descriptions: list[str] = []
    touched: set[tuple[str, str]] = set()
    wanted = rnd.randint(1, 3)
    attempts = 0
    while len(descriptions) < wanted and attempts < 20:
        attempts += 1
        name = _weighted(rnd, table)
        applied = table[name][1](rnd, folder)
        if applied is not None:
            descriptions.append(f"{name}: {applied.description}")
            touched |= applied.touched
    return Mutant(index, kind, folder, descriptions, touched)


def remove_tree(path: Path) -> None:
    """Remove a mutant folder (symlinks are removed, never followed)."""
    if path.is_symlink() or not path.is_dir():
        path.unlink()
        return
    shutil.rmtree(path)


def copy_tree(src: Path, dst: Path) -> None:
    """Copy a mutant keeping symlinks as links and FIFOs as FIFOs (never opening them)."""
    dst.mkdir(parents=True, exist_ok=True)
    for entry in os.scandir(src):
        target = dst / entry.name
        if entry.is_symlink():
            os.symlink(os.readlink(entry.path), target)
        elif entry.is_dir(follow_symlinks=False):
            copy_tree(Path(entry.path), target)
        elif entry.is_file(follow_symlinks=False):
            shutil.copy2(entry.path, target)
        else:
            os.mkfifo(target)


def tree_digest(folder: Path) -> list[tuple[str, str, bytes]]:
    """(relative path, kind, content or link target) of every entry: for identity checks."""
    out = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            p = Path(dirpath, name)
            rel = p.relative_to(folder).as_posix()
            if p.is_symlink():
                out.append((rel, "link", os.readlink(p).encode()))
            elif p.is_dir():
                out.append((rel, "dir", b""))
            elif p.is_file():
                out.append((rel, "file", p.read_bytes()))
            else:
                out.append((rel, "special", b""))
    return sorted(out)
