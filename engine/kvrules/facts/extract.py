"""Turn one cell's evidence into facts. Copies values as found; judges nothing.

Every fact field is the raw JSON value found at a documented place (objects and lists
included: the rules test their type, length and agreement with the language's operators),
a position in the evidence (``rank``, ``group_index``, the ranks holding a point), a digest,
or a split of a producer format (``skip:<reason>``, ``run.sh``). Absent evidence is an absent
field; no field is a count, a JSON type name or a presence flag.
"""
from __future__ import annotations

import copy
import hashlib
import json
import shlex
from typing import Any, Iterable

from kvrules.artifacts.model import CellEvidence, Document
from kvrules.facts.jsontypes import canonical, pointer
from kvrules.facts.model import CellFacts, Fact
from kvrules.facts.points import PointTable, rank_of

EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
TOPOLOGY_KEYS = ("tp", "pp", "dp", "cp", "moe_tp", "moe_ep")
PARALLEL_KEYS = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
                 "data_parallel_rank", "prefill_context_parallel_size",
                 "decode_context_parallel_size", "enable_expert_parallel")
CACHE_SPEC_KEYS = ("sliding_window", "attention_chunk_size", "non_causal")


def _copy(fields: dict[str, Any], name: str, obj: Any, key: str) -> None:
    """Copy ``obj[key]`` into ``fields[name]`` only when present (absent stays absent)."""
    if isinstance(obj, dict) and key in obj:
        fields[name] = obj[key]


def _obj(obj: Any, key: str) -> Any:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else None


def _json_text(obj: Any, ensure_ascii: bool) -> str:
    """Canonical JSON text that never raises on what a decoder can return."""
    try:
        return canonical(obj, ascii=ensure_ascii)
    except (TypeError, ValueError, RecursionError):
        return json.dumps(repr(obj), ensure_ascii=ensure_ascii)


def canonical_digest(obj: Any) -> str:
    """SHA-256 of the canonical JSON the planners freeze (spec 2.4: sorted keys, compact,
    ASCII escapes, UTF-8); lone surrogates are kept as their escapes."""
    return hashlib.sha256(_json_text(obj, True).encode("utf-8")).hexdigest()


WARMUP_SWITCHES = ("DYN_BENCH_KV_WARMUP", "DYN_BENCH_PREFILL_REAL_SEED")
"""The switches the planners resolve into ``K8sConfig.extra_env`` before freezing the digest."""
SWITCH_VALUES = ("on", "1", "true", "off", "0", "false")


def resolve_overrides(data: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The overrides as the planner resolved them (spec 2.4), on a copy, or why they cannot be.

    This is the documented normalisation the plan digest is taken over, not a judgment:
    the rules decide what an unresolvable file means (D6).
    """
    resolved = copy.deepcopy(data)
    k8s = resolved.get("K8sConfig")
    if k8s is None:
        k8s = resolved["K8sConfig"] = {}
    if not isinstance(k8s, dict):
        return None, "K8sConfig is not an object"
    env = k8s.get("extra_env")
    if env is None:
        env = k8s["extra_env"] = []
    if not isinstance(env, list):
        return None, "K8sConfig.extra_env is not a list"
    names = set()
    for i, item in enumerate(env):
        if not isinstance(item, dict) or "name" not in item:
            return None, f"K8sConfig.extra_env[{i}] has no name"
        if isinstance(item["name"], str):
            names.add(item["name"])
        if item["name"] in WARMUP_SWITCHES:
            value = item.get("value")
            if not isinstance(value, str) or value.lower() not in SWITCH_VALUES:
                return None, (f"K8sConfig.extra_env[{i}] {item['name']} value "
                              f"{_json_text(value, False)[:60]} is not one of "
                              f"{'/'.join(SWITCH_VALUES)}")
    for name in WARMUP_SWITCHES:
        if name not in names:
            env.append({"name": name, "value": "on"})
    return resolved, ""


def extract_cell(ev: CellEvidence) -> CellFacts:
    """All facts of one cell, in a fixed order with structure-derived ids."""
    facts: list[Fact] = [_cell_fact(ev)]
    if ev.ranks:
        facts.append(_kvwarm_fact(ev.ranks[0]))
    for doc in ev.ranks:
        facts.append(_warmup_fact(doc))
        facts.append(_rank_fact(doc))
        facts.extend(_cache_spec_facts(doc))
    if ev.plan is not None:
        facts.append(_plan_fact(ev))
        facts.extend(_model_section_facts(ev))
    if ev.provenance:
        facts.append(_provenance_fact(ev.provenance[0]))
    facts.append(_launch_fact(ev))
    table = PointTable.of_ranks(ev.ranks)
    return CellFacts(campaign=ev.campaign, cell_id=ev.cell_id, workload_kind=ev.workload_kind,
                     facts=_unique_ids(facts), points=table.rows, peer_points=table.peers,
                     diagnostics=list(ev.diagnostics))


def _unique_ids(facts: list[Fact]) -> list[Fact]:
    """Fact ids unique within the cell whatever the evidence repeats (two files of one rank):
    the engine rejects a repeated fact, and such a cell already has its structural error."""
    seen: set[str] = set()
    for fact in facts:
        if fact.id in seen:
            n = 2
            while f"{fact.id}~{n}" in seen:
                n += 1
            fact.id = f"{fact.id}~{n}"
        seen.add(fact.id)
    return facts


def _cell_fact(ev: CellEvidence) -> Fact:
    plan_cell = ev.plan_cell or {}
    fields: dict[str, Any] = {"cell_id": ev.cell_id, "ranks": [rank_of(d) for d in ev.ranks]}
    if ev.workload_kind is not None:
        fields["workload_kind"] = ev.workload_kind
    _copy(fields, "parallel_strategy", plan_cell, "parallel_strategy")
    topology = _obj(plan_cell, "topology")
    for key in TOPOLOGY_KEYS:
        _copy(fields, key, topology, key)
    _copy(fields, "model_config_sha256", _obj(plan_cell, "execution_identity"),
          "model_config_sha256")
    sources = {}
    if ev.plan is not None and ev.plan_cell_index is not None:
        sources[""] = (ev.plan.relpath, pointer("cells", ev.plan_cell_index))
    return Fact("cell", "cell", fields, sources)


WARMUP_KEYS = ("enabled", "warm_eligible", "skip_reason")


_WARMUP_POINTERS = {"": pointer("kvwarm"), "block": pointer("kvwarm"),
                    **{key: pointer("kvwarm", key) for key in WARMUP_KEYS}}
"""Where each field of a kvwarm or warmup fact is found in its rank artifact."""


def _warmup_fields(doc: Document) -> tuple[dict[str, Any], dict[str, tuple[str, str]]]:
    """One artifact's kvwarm block as found (``block`` absent when the key is) and the
    keys of the triple copied out of it when it is an object."""
    data = doc.data
    fields: dict[str, Any] = {"rank": rank_of(doc)}
    _copy(fields, "block", data, "kvwarm")
    for key in WARMUP_KEYS:
        _copy(fields, key, data.get("kvwarm"), key)
    return fields, {name: (doc.relpath, at) for name, at in _WARMUP_POINTERS.items()}


def _kvwarm_fact(doc: Document) -> Fact:
    """The spec's K, the cell's kvwarm block: that of the first rank artifact (the lowest
    dp.rank); every other rank must report the same (dp_warmup_disagreement)."""
    fields, sources = _warmup_fields(doc)
    return Fact("kvwarm", "kvwarm", fields, sources)


def _warmup_fact(doc: Document) -> Fact:
    fields, sources = _warmup_fields(doc)
    return Fact("warmup", f"warmup{fields['rank']}", fields, sources)


_RANK_POINTERS = {
    "": pointer("engine"), "engine": pointer("engine"),
    **{name: pointer("engine", key) for name, key in (
        ("model_block", "model"), ("parallel_block", "parallel"),
        ("versions_block", "versions"), ("kv_cache_block", "kv_cache"))},
    **{key: pointer("engine", "model", key) for key in ("model_type", "architectures", "model")},
    **{key: pointer("engine", "parallel", key) for key in PARALLEL_KEYS},
    "vllm_version": pointer("engine", "versions", "vllm"),
    "groups": pointer("engine", "kv_cache", "groups"),
    "capture_error": pointer("engine", "capture_error")}
"""Where each field of a rank fact is found in its rank artifact (the same in every one)."""


def _rank_fact(doc: Document) -> Fact:
    rank = rank_of(doc)
    engine = doc.data.get("engine")
    model, parallel = _obj(engine, "model"), _obj(engine, "parallel")
    versions, kv_cache = _obj(engine, "versions"), _obj(engine, "kv_cache")
    fields: dict[str, Any] = {"rank": rank}
    _copy(fields, "engine", doc.data, "engine")
    for name, key in (("model_block", "model"), ("parallel_block", "parallel"),
                      ("versions_block", "versions"), ("kv_cache_block", "kv_cache")):
        _copy(fields, name, engine, key)
    _copy(fields, "groups", kv_cache, "groups")
    _copy(fields, "capture_error", engine, "capture_error")
    for key in ("model_type", "architectures", "model"):
        _copy(fields, key, model, key)
    for key in PARALLEL_KEYS:
        _copy(fields, key, parallel, key)
    _copy(fields, "vllm_version", versions, "vllm")
    return Fact("rank", f"rank{rank}", fields,
                {name: (doc.relpath, at) for name, at in _RANK_POINTERS.items()})


def _spec_fields(spec: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    _copy(fields, "type", spec, "type")
    for key in CACHE_SPEC_KEYS + ("specs",):
        _copy(fields, key, spec, key)
    return fields


def _cache_spec_facts(doc: Document) -> Iterable[Fact]:
    rank = rank_of(doc)
    kv_cache = _obj(_obj(doc.data, "engine"), "kv_cache")
    groups = kv_cache.get("groups") if kv_cache else None
    if not isinstance(groups, list):
        return
    for g, group in enumerate(groups):
        fields = {"rank": rank, "group_index": g, **_spec_fields(group)}
        src = (doc.relpath, pointer("engine", "kv_cache", "groups", g))
        yield Fact("cache_spec", f"spec{rank}.{g}", fields, {"": src})
        inner = group.get("specs") if isinstance(group, dict) else None
        if isinstance(inner, list):
            for s, spec in enumerate(inner):
                fields = {"rank": rank, "group_index": g, "spec_index": s, **_spec_fields(spec)}
                src = (doc.relpath, pointer("engine", "kv_cache", "groups", g, "specs", s))
                yield Fact("cache_spec", f"spec{rank}.{g}.{s}", fields, {"": src})


def _plan_fact(ev: CellEvidence) -> Fact:
    assert ev.plan is not None
    plan = ev.plan.data
    capability = _obj(plan, "capability")
    model_config = _obj(capability, "model_config")
    payload = _obj(model_config, "payload")
    fields: dict[str, Any] = {}
    _copy(fields, "payload", model_config, "payload")
    _copy(fields, "model_path", plan, "model_path")
    _copy(fields, "generator_config_sha256", plan, "generator_config_sha256")
    _copy(fields, "is_moe", capability, "is_moe")
    _copy(fields, "attention_source", capability, "attention_source")
    _copy(fields, "model_type", payload, "model_type")
    _copy(fields, "architectures", payload, "architectures")
    rel = ev.plan.relpath
    sources = {"": (rel, pointer("capability")), "model_path": (rel, pointer("model_path")),
               "is_moe": (rel, pointer("capability", "is_moe")),
               "attention_source": (rel, pointer("capability", "attention_source")),
               "payload": (rel, pointer("capability", "model_config", "payload"))}
    return Fact("plan", "plan", fields, sources)


def _model_section_facts(ev: CellEvidence) -> Iterable[Fact]:
    assert ev.plan is not None
    payload = _obj(_obj(_obj(ev.plan.data, "capability"), "model_config"), "payload")
    if payload is None:
        return
    base: tuple[str, ...] = ("capability", "model_config", "payload")
    sections: list[tuple[str, Any, tuple[str, ...]]] = [("payload", payload, base)]
    for name in ("text_config", "llm_config"):
        if isinstance(payload.get(name), dict):
            sections.append((name, payload[name], base + (name,)))
    for name, obj, path in sections:
        fields: dict[str, Any] = {"section": name}
        for key in EXPERT_KEYS:
            _copy(fields, key, obj, key)
        yield Fact("model_section", f"section.{name}", fields,
                   {"": (ev.plan.relpath, pointer(*path))})


def _provenance_fact(doc: Document) -> Fact:
    runtime = _obj(doc.data, "runtime")
    fields: dict[str, Any] = {}
    _copy(fields, "backend", runtime, "backend")
    _copy(fields, "backend_version", runtime, "backend_version")
    return Fact("provenance", "provenance", fields,
                {"": (doc.relpath, pointer("runtime", "backend_version"))})


def run_sh_model(text: str) -> str | None:
    """The ``--model`` value of the ``engine_command=( ... )`` line, shell-split literally."""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped.startswith("engine_command=("):
            continue
        body = stripped[len("engine_command=("):]
        body = body[:body.rfind(")")] if ")" in body else body
        try:
            words = shlex.split(body, posix=True)
        except ValueError:
            return None
        for i, word in enumerate(words):
            if word == "--model" and i + 1 < len(words):
                return words[i + 1]
            if word.startswith("--model="):
                return word[len("--model="):]
    return None


def _launch_fact(ev: CellEvidence) -> Fact:
    fields: dict[str, Any] = {}
    sources = {}
    if ev.generator_overrides is not None:
        data = ev.generator_overrides.data
        resolved, problem = resolve_overrides(data)
        if resolved is not None:
            fields["overrides_digest"] = canonical_digest(resolved)
        else:
            fields["overrides_unresolvable"] = problem
        k8s = _obj(data, "K8sConfig")
        _copy(fields, "mount_path", k8s, "k8s_pvc_mount_path")
        _copy(fields, "path_in_pvc", k8s, "k8s_model_path_in_pvc")
        mount, inner = fields.get("mount_path"), fields.get("path_in_pvc")
        if isinstance(mount, str) and isinstance(inner, str):
            fields["mounted_model"] = f"{mount.rstrip('/')}/{inner}"
        sources[""] = (ev.generator_overrides.relpath, pointer("K8sConfig"))
    if ev.generator_request is not None:
        _copy(fields, "request_model_path", _obj(ev.generator_request.data, "ServiceConfig"),
              "model_path")
        sources["request_model_path"] = (ev.generator_request.relpath,
                                         pointer("ServiceConfig", "model_path"))
    if ev.run_sh is not None:
        model = run_sh_model(ev.run_sh.text)
        if model is not None:
            fields["run_sh_model"] = model
            fields["run_sh_model_literal"] = "$" not in model and "`" not in model
        sources["run_sh_model"] = (ev.run_sh.relpath, "")
    return Fact("launch", "launch", fields, sources)
