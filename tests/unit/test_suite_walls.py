"""The suite treats the benchmarks as a tool: it runs `memwarden bench …` as a command and never
imports `app.bench`, so benchmark internals can change without the suite reaching into them."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_no_test_or_e2e_module_imports_app_bench():
    files = [*(ROOT / "tests").rglob("*.py"), *(ROOT / "e2e").rglob("*.py")]
    assert len(files) > 50
    offenders = {str(f.relative_to(ROOT)): sorted(m for m in _imported_modules(f)
                                                  if m == "app.bench" or m.startswith("app.bench."))
                 for f in files}
    assert {f: m for f, m in offenders.items() if m} == {}


def _private_uses(path: Path) -> list[str]:
    """Private names of Memwarden's own code: `from app.x import _name`, and any `thing._name`
    except on `self`/`cls` or on a module from outside `app` (the standard library's
    `argparse._SubParsersAction` is not ours to keep stable)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    outside: set[str] = set()
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            outside.update((alias.asname or alias.name).split(".")[0] for alias in node.names
                           if alias.name.split(".")[0] != "app")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "app":
            found += [f"line {node.lineno}: from {node.module} import {alias.name}" for alias in node.names
                      if alias.name.startswith("_") and not alias.name.startswith("__")]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            if isinstance(node.value, ast.Name) and node.value.id in {"self", "cls", *outside}:
                continue
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_benchmarks_use_only_public_names():
    """Benchmarks measure the product through its public functions, so a refactor of private
    internals cannot silently change (or break) what they measure."""
    files = sorted((ROOT / "app" / "bench").glob("*.py"))
    assert len(files) > 10
    offenders = {str(f.relative_to(ROOT)): _private_uses(f) for f in files}
    assert {f: uses for f, uses in offenders.items() if uses} == {}
