"""``extends:``: a user policy directory that starts from another policy (yamllint-style).

A header that says ``extends: default`` (the shipped policy) or ``extends: ../base`` (a policy
directory, relative to this one) gets every rule of that base, then:

* ``override: [rule.id, ...]`` names the base rules this directory replaces with its own rule
  of the same id. A same-id rule not listed there is a ``rule_duplicate_id`` error, so a rule
  is never replaced by accident;
* ``disable: [rule.id, ...]`` drops single base rules;
* any other rule is added.

Header fields merge: ``name``, ``version`` and ``description`` are the user's; parameters,
derived facts and qualification groups are merged by name (a qualification's conditions
key by key); ``regimes`` and ``error_codes`` are the union, base first.

Reading (:func:`read_layers`) follows ``extends`` to the bottom, base layers first, and reports
a missing base or a cycle as a ``rule_extends_error`` at the user's ``extends:`` line; the
``resolve_extends`` compiler pass then merges the parsed documents. Base rules keep their own
file and line, so every diagnostic still points at the file that holds the text.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from importlib.abc import Traversable
from pathlib import Path
from typing import Any, Callable, Protocol

from kvrules.diagnostics import Diagnostic, KvrulesUsageError
from kvrules.policy import codes
from kvrules.policy.yamlpos import Positions, YamlSyntaxError, load_with_positions, position_of
from kvrules.resources import rules_dir

EXTENDS_SPELLINGS = ("extends", "\\")
"""How a YAML document can hold the key ``extends``: the word itself, or a double-quoted key
written with escapes (``"\\x65xtends"``); no other spelling, alias, fold or tag yields it."""

DEFAULT = "default"
"""The name of the shipped policy in ``extends:``."""
MAX_DEPTH = 8
"""Most policies one ``extends`` chain may stack (bounds reading)."""
HEADER_ONLY = ("extends", "override", "disable")
"""Header keys that steer resolution and are not part of the resolved header."""

Root = Path | Traversable
Reader = Callable[[Root, str], tuple[dict[str, str], dict[str, YamlSyntaxError]]]
"""Reads one policy directory: (files by name, files that could not be read)."""


@dataclass(frozen=True)
class Layer:
    """One policy directory of a chain: its label and the names of its files."""

    label: str
    names: tuple[str, ...]


@dataclass
class Sources:
    """Every file of a resolved chain, base layers first, and the problems of reading it."""

    label: str
    files: dict[str, str] = field(default_factory=dict)
    errors: dict[str, YamlSyntaxError] = field(default_factory=dict)
    layers: list[Layer] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)


def header_of(files: dict[str, str], names: tuple[str, ...]
              ) -> tuple[str, dict[str, Any], Positions] | None:
    """(file, header mapping, positions) of the first file of ``names`` with a ``policy:``."""
    for name in names:
        try:
            data, positions = load_with_positions(files[name])
        except YamlSyntaxError:
            continue  # reported by the load_yaml pass
        if isinstance(data, dict) and isinstance(data.get("policy"), dict):
            return name, data["policy"], positions
    return None


def read_layers(root: Root, label: str, reader: Reader) -> Sources:
    """Read ``root`` and, first, every policy it extends (see module docstring)."""
    out = Sources(label)
    _read_chain(root, label, reader, out, [])
    return out


def _may_extend(files: dict[str, str]) -> bool:
    """Whether a header of these files can say ``extends`` (else no YAML need be parsed to
    read the policy: the shipped one, and most others, are read without PyYAML)."""
    return any(spelling in text for text in files.values() for spelling in EXTENDS_SPELLINGS)


def _identity(root: Root) -> str:
    return str(Path(root).resolve()) if isinstance(root, Path) else f"<{root.name}>"


def _read_chain(root: Root, label: str, reader: Reader, out: Sources,
                stack: list[tuple[str, str]]) -> None:
    files, errors = reader(root, label)
    names = tuple(sorted(files))
    stack = stack + [(_identity(root), label)]
    found = header_of(files, names) if _may_extend(files) else None
    base = found[1].get("extends") if found else None
    if found and isinstance(base, str):
        base_root = _base_root(root, base)
        problem = _chain_problem(base, base_root, stack)
        if problem:
            line, col = position_of(found[2], "/policy/extends")
            out.diagnostics.append(Diagnostic(found[0], line, col, problem,
                                              codes.RULE_EXTENDS_ERROR, "/policy/extends"))
        else:
            assert base_root is not None
            _read_chain(base_root, _base_label(label, base), reader, out, stack)
    if any(n in out.files for n in names):
        raise KvrulesUsageError(f"policy {label} is read twice through 'extends'")
    out.files.update(files)
    out.errors.update(errors)
    out.layers.append(Layer(label, names))


def _base_root(root: Root, base: str) -> Root | None:
    if base == DEFAULT:
        return rules_dir()
    if not isinstance(root, Path):
        return None
    path = root / base
    return path if path.is_dir() else None


def _base_label(label: str, base: str) -> str:
    if base == DEFAULT:
        return "rules"
    return os.path.normpath(os.path.join(label, base))


def _chain_problem(base: str, base_root: Root | None, stack: list[tuple[str, str]]
                   ) -> str | None:
    if base_root is None:
        return f"extends '{base}': no such policy directory"
    seen = [ident for ident, _ in stack]
    if _identity(base_root) in seen:
        start = seen.index(_identity(base_root))
        chain = " -> ".join([lab for _, lab in stack[start:]] + [stack[start][1]])
        return f"extends '{base}' forms a cycle: {chain}"
    if len(stack) >= MAX_DEPTH:
        return f"extends '{base}': more than {MAX_DEPTH} policies in one chain"
    return None


class ExtendState(Protocol):
    """What the resolve pass needs of the compiler's state."""

    docs: dict[str, tuple[Any, dict[str, tuple[int, int]]]]
    layers: list[Layer]
    skipped: set[tuple[str, int]]

    def error(self, code: str, message: str, loc: tuple[str, int, int], pointer: str = "",
              rule: str | None = None, severity: str = "error") -> None: ...


@dataclass
class RuleSite:
    """Where a rule of the chain is: its file, index in that file's ``rules`` and line."""

    file: str
    index: int
    line: int


def resolve_extends(state: ExtendState) -> None:
    """Merge each layer into the layers below it: one header, base rules kept, overridden
    or disabled base rules skipped. A header without ``extends`` may not override/disable."""
    header = _layer_header(state, state.layers[0]) if state.layers else None
    if header is not None:
        _refuse_without_base(state, header)
    for layer in state.layers[1:]:
        _merge_layer(state, layer)


def _layer_header(state: ExtendState, layer: Layer) -> tuple[str, dict[str, Any]] | None:
    for name in layer.names:
        doc = state.docs.get(name, (None, {}))[0]
        if isinstance(doc, dict) and isinstance(doc.get("policy"), dict):
            return name, doc["policy"]
    return None


def _refuse_without_base(state: ExtendState, header: tuple[str, dict[str, Any]]) -> None:
    name, data = header
    for key in ("override", "disable"):
        if key in data and "extends" not in data:
            _error_at(state, name, f"/policy/{key}", f"'{key}' needs 'extends' (there is "
                      "no base policy to take rules from)")


def _error_at(state: ExtendState, name: str, pointer: str, message: str,
              code: str = codes.RULE_EXTENDS_ERROR, rule: str | None = None) -> None:
    line, col = position_of(state.docs[name][1], pointer)
    state.error(code, message, (name, line, col), pointer, rule)


def _sites(state: ExtendState, names: tuple[str, ...]) -> dict[str, RuleSite]:
    """Rule id -> site, over the given files, skipping rules already dropped."""
    sites: dict[str, RuleSite] = {}
    for name in names:
        doc, positions = state.docs.get(name, (None, {}))
        rules = doc.get("rules") if isinstance(doc, dict) else None
        for i, rule in enumerate(rules if isinstance(rules, list) else []):
            rid = rule.get("id") if isinstance(rule, dict) else None
            if isinstance(rid, str) and (name, i) not in state.skipped:
                sites.setdefault(rid, RuleSite(name, i, position_of(positions,
                                                                    f"/rules/{i}")[0]))
    return sites


def _merge_layer(state: ExtendState, layer: Layer) -> None:
    below = tuple(n for lay in state.layers[:state.layers.index(layer)] for n in lay.names)
    top, base = _layer_header(state, layer), _base_header(state, below)
    if top is None or base is None:
        return  # build_model reports the missing header
    name, data = top
    base_sites, own_sites = _sites(state, below), _sites(state, layer.names)
    for rid in _listed(state, name, data, "disable", base_sites):
        _skip(state, base_sites[rid])
    overridden = set(_listed(state, name, data, "override", base_sites))
    for rid in sorted(overridden - set(own_sites)):
        _error_at(state, name, "/policy/override", f"override '{rid}': this policy defines "
                  "no rule with that id")
    for rid, site in own_sites.items():
        if rid in base_sites:
            _skip(state, base_sites[rid])
            if rid not in overridden:
                _error_at(state, site.file, f"/rules/{site.index}", f"rule id '{rid}' is "
                          f"already used by the base policy at {base_sites[rid].file}:"
                          f"{base_sites[rid].line}; list it under policy.override to "
                          "replace that rule", codes.RULE_DUPLICATE_ID, rid)
    _install_header(state, name, merge_headers(base[1], data))
    _drop_header(state, base[0])


def _base_header(state: ExtendState, below: tuple[str, ...]) -> tuple[str, dict[str, Any]]\
        | None:
    return _layer_header(state, Layer("", below))


def _listed(state: ExtendState, name: str, data: dict[str, Any], key: str,
            base_sites: dict[str, RuleSite]) -> list[str]:
    """The ids under ``key`` that name a base rule; every other id is an error."""
    out = []
    for i, rid in enumerate(data.get(key) or []):
        if rid in base_sites:
            out.append(rid)
        else:
            _error_at(state, name, f"/policy/{key}/{i}", f"{key} '{rid}': the base policy "
                      "has no rule with that id")
    return out


def _skip(state: ExtendState, site: RuleSite) -> None:
    state.skipped.add((site.file, site.index))


def _install_header(state: ExtendState, name: str, header: dict[str, Any]) -> None:
    doc, positions = state.docs[name]
    state.docs[name] = ({**doc, "policy": header}, positions)


def _drop_header(state: ExtendState, name: str) -> None:
    doc, positions = state.docs[name]
    state.docs[name] = ({k: v for k, v in doc.items() if k != "policy"}, positions)


def merge_headers(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """The resolved header: ``over`` merged into ``base`` (see module docstring)."""
    out = {k: v for k, v in base.items() if k not in HEADER_ONLY}
    for key, value in over.items():
        if key in HEADER_ONLY:
            continue
        if key in ("parameters", "derived"):
            out[key] = {**base.get(key, {}), **value}
        elif key == "qualifications":
            out[key] = _merge_qualifications(base.get(key, {}), value)
        elif key in ("regimes", "error_codes"):
            out[key] = list(dict.fromkeys([*base.get(key, []), *value]))
        else:
            out[key] = value
    return out


def _merge_qualifications(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for group, spec in over.items():
        old = base.get(group, {})
        merged = {**old, **spec}
        if "conditions" in old or "conditions" in spec:
            merged["conditions"] = {**old.get("conditions", {}), **spec.get("conditions", {})}
        out[group] = merged
    return out
