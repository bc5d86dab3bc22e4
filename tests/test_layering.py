"""The package's imports follow the pipeline: no stage imports a later one, and durable-rules
stays behind ``kvrules.backend.durable``.

Every module under ``engine/kvrules`` is parsed (``ast``), so imports inside functions count
as much as those at the top of a file. The stage order is the one README.md documents (section "Layout").
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "engine" / "kvrules"

STAGES: tuple[tuple[str, ...], ...] = (
    ("diagnostics", "resources"),
    ("artifacts",),
    ("facts",),
    ("policy",),
    ("pointclasses",),
    ("backend",),
    ("verdicts",),
    ("pipeline",),
    ("cache", "workers"),
    ("api",),
    ("consumers", "authoring", "executors"),
    ("cli",),
)
"""Pipeline stages in order; stages of one tuple are peers (neither may import the other
in both directions)."""

RANK = {stage: n for n, peers in enumerate(STAGES) for stage in peers}
STAGE_ALIASES = {"__main__": "cli"}
"""Top-level modules that belong to a stage of another name."""

BACKEND = "kvrules.backend.durable"
ENGINE_MODULES = {"durable", "durable_rules_engine"}
POLICY_MUST_NOT_IMPORT = {"pointclasses", "backend", "verdicts"}


@dataclass(frozen=True)
class Import:
    """``importer`` imports ``target`` (a module) at ``line``; ``names`` for a from-import."""

    importer: str
    target: str
    line: int
    names: tuple[str, ...] = ()


def module_name(path: Path, package: Path = PACKAGE) -> str:
    """Dotted name of a source file (``engine/kvrules/policy/model.py`` → kvrules.policy.model)."""
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str, package: Path = PACKAGE) -> bool:
    """Whether ``name`` (dotted, under kvrules) is a module or package of the source tree."""
    parts = name.split(".")
    if parts[0] != package.name:
        return False
    base = package.parent.joinpath(*parts)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _from_base(importer: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    """The module a from-import reads from, relative imports resolved."""
    if not node.level:
        return node.module or ""
    parts = importer.split(".") if is_pkg else importer.split(".")[:-1]
    parts = parts[:len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def imports_of(path: Path, package: Path = PACKAGE) -> list[Import]:
    """Every import statement in the file, at any depth (functions, branches, classes)."""
    importer = module_name(path, package)
    is_pkg = path.name == "__init__.py"
    out: list[Import] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [Import(importer, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _from_base(importer, is_pkg, node)
            plain = tuple(a.name for a in node.names if not is_module(f"{base}.{a.name}", package))
            if plain:
                out.append(Import(importer, base, node.lineno, plain))
            out += [Import(importer, f"{base}.{a.name}", node.lineno) for a in node.names
                    if is_module(f"{base}.{a.name}", package)]
    return out


def all_imports(package: Path = PACKAGE) -> list[Import]:
    return [imp for path in sorted(package.rglob("*.py")) for imp in imports_of(path, package)]


def stage_of(module: str) -> str | None:
    """The stage of a kvrules module (None: not a kvrules module, or the bare package)."""
    parts = module.split(".")
    if parts[0] != "kvrules" or len(parts) == 1:
        return None
    return STAGE_ALIASES.get(parts[1], parts[1])


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def exported(package_init: Path) -> set[str]:
    """The names of a package's ``__all__`` (its public boundary)."""
    for node in ast.parse(package_init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__"
                                                for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()


def violations(imports: list[Import], public: set[str]) -> list[str]:
    """Every import that breaks the layering, as ``importer:line: why``."""
    out = []
    for imp in imports:
        where = f"{imp.importer}:{imp.line}: imports {imp.target}"
        src, dst = stage_of(imp.importer), stage_of(imp.target)
        if src is not None and dst is not None and RANK[dst] > RANK[src]:
            out.append(f"{where}: stage '{src}' imports the later stage '{dst}'")
        if src == "policy" and dst in POLICY_MUST_NOT_IMPORT:
            out.append(f"{where}: policy/ must not import {dst}")
        if not _inside(imp.importer, BACKEND):
            if imp.target.split(".")[0] in ENGINE_MODULES:
                out.append(f"{where}: durable-rules is imported only inside {BACKEND}")
            if imp.target.startswith(BACKEND + "."):
                out.append(f"{where}: use the public names of {BACKEND}, not its modules")
            if imp.target == BACKEND and set(imp.names) - public:
                out.append(f"{where}: {sorted(set(imp.names) - public)} are not in "
                           f"{BACKEND}.__all__")
    return out


def stage_cycles(imports: list[Import]) -> list[tuple[str, str]]:
    """Pairs of distinct stages that import each other (directly or through other stages)."""
    edges: dict[str, set[str]] = {}
    for imp in imports:
        src, dst = stage_of(imp.importer), stage_of(imp.target)
        if src is not None and dst is not None and src != dst:
            edges.setdefault(src, set()).add(dst)

    def reaches(a: str, b: str) -> bool:
        seen: set[str] = set()
        todo = [a]
        while todo:
            node = todo.pop()
            if node == b:
                return True
            if node not in seen:
                seen.add(node)
                todo += edges.get(node, ())
        return False
    pairs = {(min(a, b), max(a, b)) for a in edges for b in edges[a] if reaches(b, a)}
    return sorted(pairs)


# --- the package -------------------------------------------------------------------------

def test_every_module_belongs_to_a_stage() -> None:
    stages = {s for p in PACKAGE.rglob("*.py") if (s := stage_of(module_name(p))) is not None}
    assert stages <= set(RANK), f"modules in no stage (add them to STAGES and the README): " \
                                f"{sorted(stages - set(RANK))}"


def test_no_module_imports_a_later_stage_or_durable_outside_the_backend() -> None:
    assert violations(all_imports(), exported(PACKAGE / "backend" / "durable" / "__init__.py")) == []


def test_no_import_cycle_between_stages() -> None:
    assert stage_cycles(all_imports()) == []


def test_durable_rules_is_imported_by_the_backend_only() -> None:
    importers = {imp.importer for imp in all_imports()
                 if imp.target.split(".")[0] in ENGINE_MODULES}
    assert importers and all(_inside(m, BACKEND) for m in importers), importers


def test_the_readme_documents_the_stage_order() -> None:
    order = " → ".join("/".join(f"`{s}`" for s in peers) for peers in STAGES)
    assert order in (ROOT / "README.md").read_text(encoding="utf-8")


# --- the checker itself --------------------------------------------------------------------

def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    package = tmp_path / "kvrules"
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return package


def test_function_level_and_relative_imports_are_seen(tmp_path: Path) -> None:
    package = _package(tmp_path, {
        "__init__.py": "", "policy/__init__.py": "", "policy/model.py": "",
        "policy/parse.py": ("from . import model\nfrom .model import Rule\n"
                            "def f():\n    if True:\n        import kvrules.pointclasses\n"),
    })
    assert imports_of(package / "policy" / "parse.py", package) == [
        Import("kvrules.policy.parse", "kvrules.policy.model", 1),
        Import("kvrules.policy.parse", "kvrules.policy.model", 2, ("Rule",)),
        Import("kvrules.policy.parse", "kvrules.pointclasses", 5),
    ]


@pytest.mark.parametrize("imp, why", [
    (Import("kvrules.policy.parse", "kvrules.pointclasses", 5),
     "stage 'policy' imports the later stage 'pointclasses'"),
    (Import("kvrules.facts.extract", "kvrules.pipeline", 3),
     "stage 'facts' imports the later stage 'pipeline'"),
    (Import("kvrules.authoring.explain.joins", "kvrules.backend.durable.session", 9),
     "use the public names of kvrules.backend.durable, not its modules"),
    (Import("kvrules.pipeline", "durable.lang", 1),
     "durable-rules is imported only inside kvrules.backend.durable"),
    (Import("kvrules.api", "kvrules.backend.durable", 2, ("EngineSupervisor",)),
     "['EngineSupervisor'] are not in kvrules.backend.durable.__all__"),
])
def test_each_kind_of_violation_is_reported(imp: Import, why: str) -> None:
    assert any(v.endswith(why) for v in violations([imp], {"Backend"})), violations([imp], set())


def test_allowed_imports_pass() -> None:
    allowed = [Import("kvrules.pipeline", "kvrules.backend.durable", 1, ("Backend",)),
               Import("kvrules.backend.durable.host", "durable.lang", 2),
               Import("kvrules.backend.durable.session", "kvrules.backend.durable.host", 3),
               Import("kvrules.cli.app", "kvrules.api", 4),
               Import("kvrules.authoring.diff", "kvrules.api", 5)]
    assert violations(allowed, {"Backend"}) == []


def test_a_cycle_between_peer_stages_is_reported() -> None:
    imports = [Import("kvrules.consumers.render", "kvrules.authoring.diff", 1),
               Import("kvrules.authoring.diff", "kvrules.consumers.rows", 1)]
    assert stage_cycles(imports) == [("authoring", "consumers")]
