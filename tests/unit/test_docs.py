"""Docs that cannot drift: every setting and command documented, the README's commands are what CI runs."""

import importlib.util
import re
import tomllib
from pathlib import Path

from app.cli import build_parser
from app.config import Settings

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
CONFIGURATION = ROOT / "docs" / "operators" / "configuration.md"
CLI = ROOT / "docs" / "operators" / "cli.md"


def _reference_generator():
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "dev" / "docs_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _readme_commands(count: int = 2) -> list[str]:
    return re.findall(r"```sh\n(.+?)\n```", README)[:count]


def test_readme_opens_with_the_run_and_test_commands():
    run, test = _readme_commands()
    assert run.endswith("memwarden serve") and "pip install -e ." in run
    assert test.endswith("python -m pytest -q") and "chromium" in test
    assert README.index(run) < README.index("## What Memwarden is")
    assert "-e ./client" in test  # the suite drives the client distribution too
    # the lint, format and type checks run before the suite, so a red check stops it early
    assert test.index("ruff check") < test.index("ruff format --check") < test.index("mypy") < test.index("pytest")


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


def test_every_setting_is_in_the_configuration_page():
    page = CONFIGURATION.read_text()
    for name, help_text in Settings.env_vars().items():
        row = next((line for line in page.splitlines() if line.startswith(f"| `{name}` |")), None)
        assert row, f"{name} is not documented in docs/operators/configuration.md"
        assert help_text.split()[0] in row, f"{name}'s row does not carry its help text"


def test_generated_reference_pages_are_current():
    """configuration.md and cli.md are written by dev/docs_reference.py; a changed setting or
    command without a re-run fails here (run `python dev/docs_reference.py`)."""
    generator = _reference_generator()
    assert CONFIGURATION.read_text() == generator.configuration_page(), "re-run python dev/docs_reference.py"
    assert CLI.read_text() == generator.cli_page(), "re-run python dev/docs_reference.py"


def test_every_command_is_in_the_cli_page():
    page = CLI.read_text()
    for command in ("memwarden serve", "memwarden db upgrade", "memwarden apikey create", "memwarden tenant set",
                    "memwarden audit verify", "memwarden recover", "memwarden bench hotpath"):
        assert f"### `{command}`" in page, command


def test_contract_cli_commands_exist():
    parser = build_parser()
    for argv in (["serve", "--help"], ["db", "upgrade", "--help"], ["apikey", "create", "--help"],
                 ["tenant", "create", "--help"], ["audit", "export", "--help"], ["audit", "verify", "--help"]):
        try:
            parser.parse_args(argv)
        except SystemExit as exc:
            assert exc.code == 0, argv
