"""SQL is written in `app/repos` only (docs/design/architecture.md: "the only place SQL is written").

A statement-building site is, in a module of `app/` outside `app/repos/`, `app/db/` (engine,
models, migrations) and `app/bench/` (measurement harnesses that drive their own databases):

- a call of `select`, `insert`, `update`, `delete` or `text` imported from `sqlalchemy` (or one
  of its dialects), and
- a call of `execute`, `scalar`, `scalars`, `get`, `add`, `add_all`, `delete` or `merge` on a
  receiver named like a session or connection (`session`, `conn`, `s.session`,
  `session.connection()`, ...): the ORM statements a service would otherwise issue itself.

Moving a site into `app/repos` is how the count goes down. `ALLOWED` is what is left, per module;
the test fails when a module gains a site or a new module starts building statements, and when a
module's count drops below its allowance (lower the number, so the ratchet holds the gain).

Run `python tests/unit/test_sql_in_repos.py` for the current count by module.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import Counter
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app"
EXCLUDED = ("repos", "db", "bench")
BUILDERS = {"select", "insert", "update", "delete", "text"}
SESSION_METHODS = {"execute", "scalar", "scalars", "get", "add", "add_all", "delete", "merge"}
SESSION_NAME = re.compile(r"(^|_)(session|sess|conn|connection|db_session)$")

# What remains outside app/repos, per module (goal: empty). Lower a number when you move SQL out.
ALLOWED: dict[str, int] = {}  # none left: every statement is built in app/repos


def _receiver_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "connection":
        return "connection"  # session.connection().execute(...)
    return None


def sites(path: Path) -> int:
    """The statement-building sites of one module (see the module docstring)."""
    tree = ast.parse(path.read_text(), str(path))
    builders: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "sqlalchemy":
            builders |= {alias.asname or alias.name for alias in node.names if alias.name in BUILDERS}
    count = 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in builders:
            count += 1
        elif isinstance(func, ast.Attribute) and func.attr in SESSION_METHODS:
            receiver = _receiver_name(func.value)
            if receiver is not None and SESSION_NAME.search(receiver):
                count += 1
    return count


def census() -> Counter[str]:
    """Sites per module of `app/` outside the excluded packages."""
    found: Counter[str] = Counter()
    for path in sorted(APP.rglob("*.py")):
        relative = path.relative_to(APP.parent)
        if relative.parts[1] in EXCLUDED:
            continue
        n = sites(path)
        if n:
            found[relative.as_posix()] = n
    return found


def test_the_counter_sees_statement_building():
    """The census counts what it claims to (a counter that sees nothing proves nothing)."""
    sample = APP.parent / "tests" / "unit" / "_sql_sample.py"
    sample.write_text("from sqlalchemy import select, text as sql\n"
                      "def f(session, conn, d):\n"
                      "    session.execute(select(1))\n"
                      "    conn.scalar(sql('select 1'))\n"
                      "    session.connection().execute(STATEMENT)\n"
                      "    d.get('x')\n")
    try:
        assert sites(sample) == 5
    finally:
        sample.unlink()


def test_no_new_sql_outside_repos():
    found = census()
    grown = {m: n for m, n in found.items() if n > ALLOWED.get(m, 0)}
    assert not grown, f"SQL belongs in app/repos; new statement sites (module: found): {grown}"
    shrunk = {m: (ALLOWED[m], found.get(m, 0)) for m in ALLOWED if found.get(m, 0) < ALLOWED[m]}
    assert not shrunk, f"fewer sites than allowed (module: (allowed, found)); lower ALLOWED: {shrunk}"


if __name__ == "__main__":
    counts = census()
    for module, n in counts.most_common():
        print(f"{n:4d}  {module}")
    print(f"{sum(counts.values()):4d}  total in {len(counts)} modules", file=sys.stderr)
