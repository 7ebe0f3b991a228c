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
