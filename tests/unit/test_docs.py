"""Docs that cannot drift: every setting documented, the README's commands are what CI runs."""

import re
import tomllib
from pathlib import Path

from app.cli import build_parser
from app.config import Settings

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def _readme_commands(count: int = 2) -> list[str]:
    return re.findall(r"```sh\n(.+?)\n```", README)[:count]


def test_readme_opens_with_the_run_and_test_commands():
    run, test = _readme_commands()
    assert run.endswith("memwarden serve") and "pip install -e ." in run
    assert test.endswith("python -m pytest -q") and "chromium" in test
    assert README.index(run) < README.index("## What Memwarden is")
    assert "-e ./client" in test  # the suite drives the client distribution too


def test_readme_gives_agents_the_client_alone():
    """The third command installs the client distribution, whose only dependency is httpx."""
    agent = _readme_commands(3)[2]
    assert agent.startswith("pip install ./client") and README.index(agent) < README.index("## What Memwarden is")
    client = tomllib.loads((ROOT / "client" / "pyproject.toml").read_text())["project"]
    assert client["name"] == "memwarden-client"
    assert [re.split(r"[<>=\[ ]", dep)[0] for dep in client["dependencies"]] == ["httpx"]


def test_ci_runs_the_readmes_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    test = _readme_commands()[1]
    venv_part = test[test.index("python3 -m venv"):]
    assert venv_part in ci
    assert "apt-get install -y" in ci and "chromium" in ci


def test_every_setting_is_in_the_readme_configuration_table():
    for name in Settings.env_vars():
        assert f"`{name}`" in README, f"{name} is not documented in README.md"


def test_contract_cli_commands_exist():
    parser = build_parser()
    for argv in (["serve", "--help"], ["db", "upgrade", "--help"], ["apikey", "create", "--help"],
                 ["tenant", "create", "--help"], ["audit", "export", "--help"], ["audit", "verify", "--help"]):
        try:
            parser.parse_args(argv)
        except SystemExit as exc:
            assert exc.code == 0, argv
