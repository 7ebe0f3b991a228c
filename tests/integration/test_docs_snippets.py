"""Every fenced code block of the agent and operator guides runs, unchanged, against a live
`memwarden serve`: what a reader copies works as printed, imports included.

Each page gets a server of its own on a fresh embedded database (so each page's
`memwarden tenant create acme` is the first, as for a reader). The blocks run in page order in
one environment, the reader's terminal: `MEMWARDEN_URL` is the server (the pages tell the reader
to set it), the `memwarden` CLI works on the server's data directory, and what a `sh` block
exports (`MEMWARDEN_API_KEY=$(memwarden apikey create …)`) is there for the blocks after it.

- `sh`: run by bash with `-euo pipefail`; its exports carry on. In the reader's own directory, or
  in the project's root when the page marks it `<!-- docs-test: from the checkout -->` (a recipe
  that runs one of the suite's own files, as from a clone).
- `python`: run as a script of its own by this interpreter (so it must import what it uses).
- `json`: an `mcpServers` configuration: `${VAR}` expanded as MCP clients do, then an MCP
  `initialize` with its URL and headers must be answered by Memwarden.
- `text`: what the block before it prints; each line must match a line of that output, in order,
  with `…` standing for any text (ids, times, scores).

A block in any other language, or without one, fails the page: it would be a snippet no test runs.
The Anthropic API is played by a local scripted server (`ANTHROPIC_BASE_URL`), as the Claude page
says a test of the memory tool would.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from app.local_server import clean_env
from tests.harness import PROJECT_ROOT, fresh_server

PAGES = ["docs/agents/http-api.md", "docs/agents/mcp.md", "docs/agents/python-client.md", "docs/agents/langgraph.md",
         "docs/agents/claude-memory-tool.md", "docs/agents/memorywire.md", "docs/agents/openwop.md",
         "docs/operators/backends.md"]
AGENT_PAGES = [page for page in PAGES if page.startswith("docs/agents/")]
FENCE = re.compile(r"^(<!-- docs-test: from the checkout -->\n)?```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)
LANGUAGES = {"sh", "python", "json", "text"}


def blocks(page: str) -> list[tuple[str, str, bool]]:
    """(language, code, from the checkout) of every fenced block of `page`, in order. A block the page
    marks `<!-- docs-test: from the checkout -->` runs in the project's root, as a reader runs it
    in their clone (the suite's own recipes); every other in a directory of the reader's."""
    return [(info.strip().split(" ")[0], code, bool(mark))
            for mark, info, code in FENCE.findall((PROJECT_ROOT / page).read_text())]


@pytest.mark.parametrize("guide", PAGES)
def test_every_block_is_one_the_runner_runs(guide):
    found = blocks(guide)
    assert found, f"{guide} has no code"
    assert all(language in LANGUAGES for language, _, _ in found), [language for language, _, _ in found]
    assert found[0][0] != "text"


@pytest.mark.parametrize("guide", AGENT_PAGES)
def test_each_agent_page_opens_with_a_first_governed_write(guide):
    text = (PROJECT_ROOT / guide).read_text()
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings and headings[0] == "First governed write", headings[:3]


def _expected(shown: str, output: str) -> None:
    """Each line of `shown` matches a line of `output`, in order (`…` matches anything)."""
    lines = [line.rstrip() for line in output.splitlines()]
    at = 0
    for want in shown.rstrip("\n").splitlines():
        pattern = re.compile(".*?".join(re.escape(part) for part in want.split("…")) + r"\Z")
        while at < len(lines) and not pattern.match(lines[at]):
            at += 1
        assert at < len(lines), f"the page shows {want!r}; the block printed:\n{output}"
        at += 1


class ScriptedClaude(BaseHTTPRequestHandler):
    """POST /v1/messages as a model that uses the memory tool once (create a note), then answers."""

    def do_POST(self) -> None:  # noqa: N802 - the handler's name
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        last = body["messages"][-1]
        used = last["role"] == "user" and isinstance(last["content"], list) and any(
            block.get("type") == "tool_result" for block in last["content"])
        if used:
            content, stop = [{"type": "text", "text": "Noted: Ada prefers email."}], "end_turn"
        else:
            content, stop = [{"type": "tool_use", "id": "toolu_01", "name": "memory", "input": {
                "command": "create", "path": "/memories/ada.md", "file_text": "Ada prefers email.\n"}}], "tool_use"
        answer = json.dumps({"id": "msg_01", "type": "message", "role": "assistant", "model": body["model"],
                             "content": content, "stop_reason": stop, "stop_sequence": None,
                             "usage": {"input_tokens": 1, "output_tokens": 1}}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args) -> None:
        return None


def _run_sh(code: str, env: dict[str, str], cwd: Path) -> tuple[str, dict[str, str]]:
    with tempfile.NamedTemporaryFile("rb", suffix=".env") as after:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", f"{code}\nenv -0 > {after.name}"], cwd=cwd,
                              env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"sh block failed ({done.returncode}):\n{code}\n{done.stdout}\n{done.stderr}"
        exported = dict(item.split("=", 1) for item in after.read().decode().split("\0") if "=" in item)
    return done.stdout, exported


def _run_python(code: str, env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, f"python block failed:\n{code}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _check_mcp_config(code: str, env: dict[str, str]) -> str:
    config = json.loads(re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], code))
    server = config["mcpServers"]["memwarden"]
    response = httpx.post(server["url"], headers={**server["headers"], "accept": "application/json, text/event-stream"},
                          json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                              "protocolVersion": "2025-11-25", "capabilities": {},
                              "clientInfo": {"name": "docs", "version": "1"}}}, timeout=30)
    assert response.status_code == 200, response.text
    assert '"name":"memwarden"' in response.text.replace(" ", ""), response.text
    return response.text


@pytest.mark.parametrize("guide", PAGES)
def test_the_page_runs_as_printed(guide, tmp_path):
    claude = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedClaude)
    threading.Thread(target=claude.serve_forever, daemon=True).start()
    data_dir = tmp_path / "data"
    server_env = clean_env(data_dir, MEMWARDEN_BACKEND_POLL_SECONDS="0.2")
    try:
        with fresh_server(data_dir, env=server_env) as (_, base_url):
            env = {**clean_env(data_dir), "MEMWARDEN_URL": base_url,
                   "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                   "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{claude.server_port}", "ANTHROPIC_API_KEY": "test-key"}
            work = tmp_path / "reader"
            work.mkdir()
            output = ""
            for language, code, in_checkout in blocks(guide):
                if language == "sh":
                    output, env = _run_sh(code, env, PROJECT_ROOT if in_checkout else work)
                elif language == "python":
                    output = _run_python(code, env, work)
                elif language == "json":
                    output = _check_mcp_config(code, env)
                else:
                    _expected(code, output)
    finally:
        claude.shutdown()
