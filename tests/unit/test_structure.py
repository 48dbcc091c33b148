"""The package structure ARCHITECTURE.md promises, checked from the source.

Every module's imports are read with :mod:`ast` (nothing is imported), at any
depth: an import inside a function still ties the two modules together, and an
import under ``if TYPE_CHECKING:`` still makes a circle in the design, so both
count. Two rules follow:

* no import cycle between modules anywhere in the tree;
* no import against the rooms' arrows in ARCHITECTURE.md: ``nimctl ->
  controllers, webhooks -> platforms -> manifests -> api -> nimctl_runtime`` and
  ``nimctl -> localcluster -> nimctl_runtime``. ``nimctl`` (the program) is the
  one composition root; nothing imports it, and ``nimctl_runtime`` imports no
  other room. There is no named exception.

A package's ``__init__`` importing its own submodules (to re-export them) is
not a cycle: importing ``pkg.sub`` runs ``pkg/__init__`` first anyway, so the
edge from a submodule to its parent package is left out of the cycle check.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Which rooms each room may import besides itself: ARCHITECTURE.md's arrows.
MAY_IMPORT: dict[str, frozenset[str]] = {
    "nimctl_runtime": frozenset(),
    "localcluster": frozenset({"nimctl_runtime"}),
    "api": frozenset({"nimctl_runtime"}),
    "manifests": frozenset({"api", "nimctl_runtime"}),
    "platforms": frozenset({"manifests", "api", "nimctl_runtime"}),
    "controllers": frozenset({"platforms", "manifests", "api", "nimctl_runtime"}),
    "webhooks": frozenset({"platforms", "manifests", "api", "nimctl_runtime"}),
    "nimctl": frozenset(
        {"localcluster", "controllers", "webhooks", "platforms", "manifests", "api",
         "nimctl_runtime"}
    ),
}
PACKAGES = tuple(MAY_IMPORT)

# Edges that break the rules but are tolerated, each (importer, imported) with
# why. The house has none; the test fails on stale entries should one be added.
ALLOWED_CYCLE_EDGES: frozenset[tuple[str, str]] = frozenset()
ALLOWED_UPWARD: frozenset[tuple[str, str]] = frozenset()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[_module_name(path)] = path
    return found


def _resolve(
    importer: str, is_package: bool, node: ast.ImportFrom, alias: ast.alias
) -> Iterator[str]:
    """Candidate module names an ``from X import y`` may refer to (X.y first)."""
    if node.level:
        base = importer.split(".")
        if not is_package:
            base = base[:-1]
        if node.level > 1:
            base = base[: len(base) - (node.level - 1)]
        prefix = ".".join([*base, node.module] if node.module else base)
    else:
        prefix = node.module or ""
    yield f"{prefix}.{alias.name}"
    yield prefix


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules *name* imports (any depth, TYPE_CHECKING included)."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = alias.name
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target:
                    out.add(target)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                for candidate in _resolve(name, is_package, node, alias):
                    target = candidate
                    while target and target not in modules:
                        target = target.rpartition(".")[0]
                    if target:
                        out.add(target)
                        break
    out.discard(name)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _is_parent_package(importer: str, imported: str) -> bool:
    return importer.startswith(imported + ".")


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def edges(v: str) -> list[str]:
        return sorted(
            w
            for w in graph[v]
            if not _is_parent_package(v, w) and (v, w) not in ALLOWED_CYCLE_EDGES
        )

    def visit(root: str) -> None:
        nonlocal counter
        work: list[tuple[str, Iterator[str]]] = [(root, iter(edges(root)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(edges(w))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
            if low[v] == index[v]:
                component: list[str] = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _upward(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    bad: list[tuple[str, str]] = []
    for importer, imported in sorted((a, b) for a, targets in graph.items() for b in targets):
        src, dst = importer.split(".")[0], imported.split(".")[0]
        if src != dst and dst not in MAY_IMPORT[src]:
            bad.append((importer, imported))
    return bad


def test_the_analysis_sees_relative_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    """The parser finds imports wherever they hide, so the rules below can bite."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import b\n"
        "from .c import thing\n"
        "if TYPE_CHECKING:\n"
        "    from nimctl_runtime import d\n"
        "def f():\n"
        "    import nimctl_runtime.e.sub\n"
    )
    path = tmp_path / "a.py"
    path.write_text(source)
    modules = {m: path for m in ("pkg.a", "pkg.b", "pkg.c", "nimctl_runtime.d", "nimctl_runtime.e")}
    assert _imports("pkg.a", path, modules) == {
        "pkg.b",
        "pkg.c",
        "nimctl_runtime.d",
        "nimctl_runtime.e",
    }
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _upward({"api.x": {"controllers.y"}, "controllers.y": {"api.x"}}) == [
        ("api.x", "controllers.y")
    ]
    # the program and the embedded cluster are rooms of their own
    assert _upward(
        {
            "nimctl_runtime.a": {"nimctl.cli"},
            "localcluster.b": {"api.c", "nimctl_runtime.a"},
            "platforms.d": {"localcluster.b"},
            "nimctl.cli": {"localcluster.b", "controllers.e"},
        }
    ) == [
        ("localcluster.b", "api.c"),
        ("nimctl_runtime.a", "nimctl.cli"),
        ("platforms.d", "localcluster.b"),
    ]


def test_no_import_cycles() -> None:
    cycles = _cycles(_graph())
    assert not cycles, "import cycles (each line is one strongly connected set):\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def test_no_upward_imports() -> None:
    bad = [edge for edge in _upward(_graph()) if edge not in ALLOWED_UPWARD]
    assert not bad, "imports against the layering in ARCHITECTURE.md:\n" + "\n".join(
        f"{a} -> {b}" for a, b in bad
    )


def test_allowlists_hold_only_edges_that_still_exist() -> None:
    graph = _graph()
    edges = {(a, b) for a, targets in graph.items() for b in targets}
    stale = sorted((ALLOWED_CYCLE_EDGES | ALLOWED_UPWARD) - edges)
    assert not stale, f"allowlisted edges that are gone; remove them from the list: {stale}"
