"""The client distribution's extras install what each integration needs to run, not only to import."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXTRAS = tomllib.loads((ROOT / "client" / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def _names(extra: str) -> set[str]:
    return {re.split(r"[<>=\[ ;]", dep)[0] for dep in EXTRAS[extra]}


def test_the_langgraph_extra_brings_langgraph_itself():
    # a graph (StateGraph, create_react_agent) needs `langgraph`; BaseStore lives in langgraph-checkpoint
    assert _names("langgraph") == {"langgraph", "langgraph-checkpoint"}


def test_the_other_extras():
    assert _names("anthropic") == {"anthropic"} and _names("memorywire") == {"memorywire"}
