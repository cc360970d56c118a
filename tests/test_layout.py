"""The layout is a picture of the architecture, checked on the source (no imports, no services):

- no import cycles between the package's modules, counting every import (module level, inside
  functions, under TYPE_CHECKING) and the packages a submodule import runs;
- the core (everything but the MCP face `server/` and the faces `cli`, `demo`, `__main__`) does
  not import the face, fastmcp or mcp, and has no MCP words: no "fastmcp", no "mcp" other than
  in the product's own name, no resource URIs (stac-gdal://, ui://);
- the test data generator (`testing/`) is not imported at run time.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "stac_gdal_mcp"
PACKAGE = "stac_gdal_mcp"
FACES = ("server", "cli", "demo", "__main__")


def module_names() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if "data" in parts:
            continue
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = module_names()


def is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def imports(name: str) -> set[str]:
    """The modules of the package that `name` imports (anywhere in its source), and the
    packages such an import runs that are not already running (not ancestors of `name`)."""
    tree = ast.parse(MODULES[name].read_text())
    here = name if is_package(name) else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(here.split(".")[: len(here.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            for alias in node.names:
                if base == PACKAGE and alias.name == "__version__":
                    continue  # a constant of the root package, which runs before any submodule
                sub = f"{base}.{alias.name}"
                targets.add(sub if sub in MODULES else base)
    found = set()
    for target in targets:
        while target not in MODULES and "." in target:
            target = target.rpartition(".")[0]
        if target not in MODULES or not target.startswith(PACKAGE):
            continue
        mine = set(ancestors(name))
        found.update(a for a in [*ancestors(target), target] if a not in mine and a != name)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def is_face(name: str) -> bool:
    rest = name[len(PACKAGE) + 1 :]
    return rest.split(".")[0] in FACES


def is_core(name: str) -> bool:
    return name != PACKAGE and not is_face(name) and not name.startswith(f"{PACKAGE}.testing")


# Known, to be untangled by their owner: catalogs opens the workspace catalog, which
# builds on catalogs.LocalCatalog. Listed here so that any other cycle fails at once.
KNOWN_CYCLES: list[list[str]] = []  # catalogs <-> workspace_catalog is gone: the local class is handed in
KNOWN_WORDS = {f"{PACKAGE}.workspace_catalog": "`stac-gdal://` self link"}  # describes records as they are


def test_no_import_cycles():
    graph = {name: imports(name) for name in MODULES}
    assert [c for c in cycles(graph) if c not in KNOWN_CYCLES] == []


def test_the_walk_sees_lazy_and_type_checking_imports():
    """The checker is not blind: imports inside functions and under TYPE_CHECKING count."""
    assert f"{PACKAGE}.processing.requests" in imports(f"{PACKAGE}.session")  # inside a method
    assert f"{PACKAGE}.core" in imports(f"{PACKAGE}.discovery.search")  # under TYPE_CHECKING
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]


def test_the_core_does_not_import_the_faces_or_mcp():
    for name in filter(is_core, MODULES):
        tree = ast.parse(MODULES[name].read_text())
        external = {
            (node.module or "") if isinstance(node, ast.ImportFrom) else alias.name
            for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for alias in node.names
        }
        assert not {m for m in external if m.split(".")[0] in ("fastmcp", "mcp", "mcp_types")}, name
        assert not {m for m in imports(name) if is_face(m)}, name


MCP_WORD = re.compile(r"fastmcp|\bmcp\b")  # in code and messages; prose may name the protocol


def test_the_core_has_no_mcp_words():
    offending = []
    for name in filter(is_core, MODULES):
        for number, line in enumerate(MODULES[name].read_text().splitlines(), start=1):
            text = re.sub(r"stac[-_]gdal[-_]mcp", "", line)  # the product's name
            if KNOWN_WORDS.get(name, "\0") in line:
                continue
            if MCP_WORD.search(text) or "stac-gdal://" in text or "ui://" in text:
                offending.append(f"{MODULES[name].relative_to(ROOT.parent)}:{number}: {line.strip()}")
    assert offending == []


def test_test_data_is_not_imported_at_run_time():
    for name in MODULES:
        if not name.startswith(f"{PACKAGE}.testing"):
            assert not {m for m in imports(name) if m.startswith(f"{PACKAGE}.testing")}, name


# The layers, lowest first: a module may import its own layer and those below, never above.
# `core` (the services bundle) stands on catalogs and the output store; the package face
# (`stac_gdal_mcp/__init__.py`) on everything below it; the faces on the package face.
LAYERS: list[tuple[str, ...]] = [
    ("_version", "errors", "words"),
    ("settings", "setting_checks", "files"),
    ("models", "stac"),
    ("catalogs",),
    ("outputs",),
    ("core",),
    ("discovery",),
    ("processing",),
    ("operations",),
    ("html", "results", "maps"),
    ("session", "session_discovery"),  # Session, and its discovery methods (a mixin)
    ("",),  # the package face
    ("server", "demo", "cli", "__main__"),
]


def layer(name: str) -> int | None:
    """The rank of `name` in LAYERS (None for testing/, which is never imported at run time)."""
    top = name[len(PACKAGE) + 1 :].split(".")[0]
    if top == "testing":
        return None
    for rank, tops in enumerate(LAYERS):
        if top in tops:
            return rank
    raise AssertionError(f"{name} is in no layer: add its top-level name to LAYERS in tests/test_layout.py")


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for name, targets in sorted(graph.items()):
        here = layer(name)
        for target in sorted(targets):
            there = layer(target)
            if here is not None and there is not None and there > here:
                out.append(f"{name} imports {target}, a layer above it")
    return out


def test_no_import_runs_up_a_layer():
    assert upward_imports({name: imports(name) for name in MODULES}) == []


def test_the_layer_check_sees_an_upward_import():
    """The check fails on an import from below (a lazy one counts too)."""
    graph = {f"{PACKAGE}.core": {f"{PACKAGE}.discovery.search"}, f"{PACKAGE}.server.app": {f"{PACKAGE}.core"}}
    assert upward_imports(graph) == [f"{PACKAGE}.core imports {PACKAGE}.discovery.search, a layer above it"]


# deptry's rules on the package (not tests/, benchmarks/): DEP001 imported but not declared,
# DEP002 declared but not imported, DEP003 imported but only there through another dependency,
# DEP004 a test/docs/notebooks extra imported at run time. The test, docs and notebooks extras are
# development groups; any other extra must be imported (optionally) somewhere.
DEV_EXTRAS = "test,docs,notebooks"


def test_every_import_is_declared_and_every_dependency_imported(tmp_path):
    import json
    import subprocess
    import sys

    report = tmp_path / "deptry.json"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "deptry",
            str(ROOT.relative_to(ROOT.parent)),
            "--optional-dependencies-dev-groups",
            DEV_EXTRAS,
            "--known-first-party",
            PACKAGE,
            "--json-output",
            str(report),
        ],
        cwd=ROOT.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert report.exists(), run.stderr[-2000:]
    issues = sorted(
        f"{i['error']['code']} {i['module']} ({Path(i['location']['file']).name})"
        for i in json.loads(report.read_text())
    )
    assert issues == [], "\n".join(issues)


def test_namespace_packages_are_declared_one_by_one():
    """deptry sees only `odc` in `import odc.loader`; each odc.<name> must be declared as odc-<name>."""
    import tomllib

    declared = {
        re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0].lower()
        for d in tomllib.loads((ROOT.parent / "pyproject.toml").read_text())["project"]["dependencies"]
    }
    used = set()
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
            )
            used.update(f"odc-{n.split('.')[1]}" for n in names if n.startswith("odc.") and "." in n)
    assert used - declared == set()
