"""The house has no circles: no module of `gateway/` imports, however indirectly, a
module that imports it back, and no package does (every import counted: at the top,
inside functions and under `TYPE_CHECKING`). A package is a folder of `gateway/`, or a
module at its top; its `__init__` counts as part of it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "gateway"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in ROOT.rglob("*.py")}


def _imported(module: str, path: Path) -> set[str]:
    """The gateway modules this one imports (a name imported from a package is its
    submodule when there is one)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != module and target.startswith("gateway"):
                found.add(target)
    return found


GRAPH = {module: _imported(module, path) for module, path in MODULES.items()}


def _package(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2])


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_the_walk_sees_the_imports():
    assert "gateway.turns.turn" in GRAPH["gateway.turns.prepare"]
    assert "gateway.schema.errors" in GRAPH["gateway.app"] | {dep for mod in GRAPH["gateway.app"] for dep in GRAPH[mod]}


def test_no_module_imports_itself_back():
    assert _circles(GRAPH) == []


def test_no_package_imports_itself_back():
    packages: dict[str, set[str]] = {}
    for module, imported in GRAPH.items():
        packages.setdefault(_package(module), set()).update(
            _package(target) for target in imported if _package(target) != _package(module))
    packages.pop("gateway", None)  # `gateway/__init__.py` imports nothing of ours
    assert _circles(packages) == []


def test_no_module_imports_another_modules_private_name():
    """A `_name` is its module's own (issue 40: the WebSocket writer imported the SSE
    rewriter's `_created_for`): what another module needs is made public."""
    found = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("gateway")):
                found += [f"{module}: {node.module}.{alias.name}" for alias in node.names
                          if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert found == []
