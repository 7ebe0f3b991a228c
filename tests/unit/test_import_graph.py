"""The import graph of `app/`: no circles, and the layers' arrows point one way.

Every `.py` under `app/` is parsed (nothing is imported), and every import statement in it counts,
wherever it stands: at the top, inside a function, inside a `try`. A late import inside a function
that closes a circle is still a circle; it only moves the failure from import time to call time.

One exception, for circles only: an import under `if TYPE_CHECKING:` never runs, so it is left
out of the circle check (annotations may name a type from a module that imports this one). The
layer rules count it too: a type from the wrong layer in a signature is a wrong-way arrow as well.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app"

# (importing package, what it must not import, why)
FORBIDDEN = [
    ("app.core", "app.contracts", "core is pure domain logic: it does not load schemas"),
    ("app.core", "app.errors", "core raises its own errors; HTTP errors belong to the callers"),
    ("app.core", "app.config", "core takes values, not settings"),
    ("app.core", "starlette", "core knows no web framework"),
    ("app.core", "sqlalchemy", "core knows no database"),
    ("app.repos", "app.services", "services call repos, never the other way"),
    ("app.api", "app.web", "the agent API does not reach into the reviewer pages"),
    ("app.mcp", "app.web", "the MCP server does not reach into the reviewer pages"),
    ("app.middleware", "app.web", "the middleware serves every mount; the error path is app.error_responses"),
]


@dataclass(frozen=True)
class Import:
    target: str  # the imported module, fully qualified
    line: int
    type_checking: bool  # under `if TYPE_CHECKING:`


def module_name(path: Path) -> str:
    parts = list(path.relative_to(APP.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(APP.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _resolve(name: str, importer: str, is_package: bool, level: int) -> str:
    if not level:
        return name
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def imports_of(name: str) -> list[Import]:
    """Every import in module `name`, resolved to the modules it loads (`from pkg import mod`
    names the submodule `pkg.mod` when there is one, else `pkg`)."""
    path = MODULES[name]
    is_package = path.name == "__init__.py"
    found: list[Import] = []

    def visit(node: ast.AST, type_checking: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, type_checking)
            return
        if isinstance(node, ast.Import):
            found.extend(Import(alias.name, node.lineno, type_checking) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node.module or "", name, is_package, node.level)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.append(Import(sub if sub in MODULES else base, node.lineno, type_checking))
        for child in ast.iter_child_nodes(node):
            visit(child, type_checking)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), False)
    return found


IMPORTS = {name: imports_of(name) for name in MODULES}


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _app_module(target: str) -> str | None:
    """The `app` module an import loads (the longest known prefix: `import app.x.y` loads `app.x.y`)."""
    parts = target.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in MODULES:
            return candidate
    return None


def _graph() -> dict[str, dict[str, int]]:
    """module -> {imported app module: line of the first such import}, without TYPE_CHECKING ones."""
    graph: dict[str, dict[str, int]] = {name: {} for name in MODULES}
    for name, found in IMPORTS.items():
        for imp in found:
            target = _app_module(imp.target)
            if target is not None and target != name and not imp.type_checking:
                graph[name].setdefault(target, imp.line)
    return graph


def strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative), those of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
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
                    components.append(sorted(component))
    return components


def _cycle_in(component: list[str], graph: dict[str, dict[str, int]]) -> list[str]:
    """One circle through the component's first module (breadth-first: a shortest one)."""
    members = set(component)
    start = component[0]
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for succ in sorted(graph[node]):
            if succ == start:
                return paths[node] + [start]
            if succ in members and succ not in paths:
                paths[succ] = paths[node] + [succ]
                queue.append(succ)
    return component


def test_the_parser_sees_late_and_relative_imports():
    """The checks below mean something only if the graph has the edges they look for."""
    assert "app.services.audit.audit" in MODULES and "app.core" in MODULES
    assert IMPORTS["app.services.runtime.context"], "context imports settings and the database"
    graph = _graph()
    assert "app.db.database" in graph["app.services.runtime.context"]
    # `from app.embeddings import get_embedder` sits inside a method of AppContext
    assert "app.embeddings" in graph["app.services.runtime.context"]
    assert any(imp.type_checking for imp in IMPORTS["app.services.runtime.context"])


def test_cycle_detection_finds_a_circle_closed_by_a_late_import():
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 9}, "d": {"a": 1}}
    components = strongly_connected(graph)
    assert components == [["a", "b", "c"]]
    assert _cycle_in(components[0], graph) == ["a", "b", "c", "a"]


def test_no_import_circles_in_app():
    graph = _graph()
    circles = []
    for component in strongly_connected(graph):
        cycle = _cycle_in(component, graph)
        steps = [f"{a} (line {graph[a][b]}) -> {b}" for a, b in zip(cycle, cycle[1:])]
        circles.append(f"{len(component)} modules {component}; e.g. " + "; ".join(steps))
    assert not circles, "import circles in app/:\n" + "\n".join(circles)


def test_layers_import_one_way():
    wrong = []
    for name, found in IMPORTS.items():
        for package, forbidden, why in FORBIDDEN:
            if not _within(name, package):
                continue
            for imp in found:
                if _within(imp.target, forbidden):
                    wrong.append(f"{name} line {imp.line} imports {imp.target}: {why}")
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)
