"""Claude's memory tool (`memory_20250818`) backed by Memwarden's workspace files.

    from anthropic import Anthropic
    from memwarden.anthropic import MemwardenMemoryTool
    from memwarden.client import Client

    memory = MemwardenMemoryTool(Client("http://127.0.0.1:8000", api_key="mw_key_…"), agent_id="support-bot")
    runner = Anthropic().beta.messages.tool_runner(model=..., max_tokens=1024, tools=[memory], messages=[...])

The model's `/memories/<name>` is the workspace file `memories/<agent_id>/<name>` (the `root`, one
folder per agent by default, so one agent never sees another's notes), so every write gets
the workspace's versions, redaction, screening, policy staging and audit. A write a policy stages answers
the model "saved for review (change chg_…)"; reads only ever show approved content. Paths are confined:
`..`, `.` segments, percent-encoding, backslashes, control characters and anything outside `/memories`
are refused before a request is made (the server checks its own path pattern as well).

Agents share notes by naming one `root` (`root="memories/shared"` for each of them). The folders keep
agents' notes apart; they are no access boundary: a key with `workspace:read` reads the whole tenant's
workspace, so agents that must not read each other get keys of their own tenants.

Needs the `anthropic` extra: `pip install 'memwarden-client[anthropic]'`.
"""

from __future__ import annotations

from anthropic.lib.tools import BetaAbstractMemoryTool, ToolError
from anthropic.types.beta import (
    BetaMemoryTool20250818CreateCommand, BetaMemoryTool20250818DeleteCommand, BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand, BetaMemoryTool20250818StrReplaceCommand, BetaMemoryTool20250818ViewCommand,
)

import hashlib
import re

from memwarden import errors
from memwarden.client import Client
from memwarden.models import WorkspaceFile, WorkspaceWrite

MEMORIES = "/memories"
ROOT = "memories"


def agent_folder(agent_id: str) -> str:
    """The workspace folder name of an agent's notes: the id itself when it is a plain name, else
    the id with other characters as `_` plus a digest of it (so `a:b` and `a_b` stay apart)."""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", agent_id):
        return agent_id
    plain = re.sub(r"[^A-Za-z0-9_-]", "_", agent_id).strip("_") or "agent"
    return f"{plain}-{hashlib.sha256(agent_id.encode()).hexdigest()[:12]}"


class MemwardenMemoryTool(BetaAbstractMemoryTool):
    """The client-side memory tool over a Memwarden tenant's workspace (see the module docstring).

    `agent_id` is sent as `X-Agent-Id` (policies and reviewers see it); `root` is the workspace
    folder that stands for `/memories`: by default `memories/<agent_id>` (`memories` without an
    agent), so each agent has its own; agents that pass the same `root` share it."""

    def __init__(self, client: Client, *, agent_id: str | None = None, root: str | None = None) -> None:
        super().__init__()
        self.client = client
        self.agent_id = agent_id
        if root is None:
            root = f"{ROOT}/{agent_folder(agent_id)}" if agent_id else ROOT
        if not isinstance(root, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)*",
                                                         root.strip("/")):
            raise ValueError(f"root {root!r}: workspace folder names, each starting with a letter or digit")
        self.root = root.strip("/")

    # --- commands --------------------------------------------------------------------------------

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        """A directory listing, or the file's lines numbered from 1 (`view_range` = [first, last|-1])."""
        path = self._workspace_path(command.path, allow_root=True)
        found = self._get(path) if path != self.root else None
        if found is None:
            return self._listing(command.path, path)
        lines = found.content.split("\n")
        first, last = 1, len(lines)
        if command.view_range:
            if len(command.view_range) != 2:
                raise ToolError("view_range is [first_line, last_line] (last_line -1 for the end)")
            first, last = command.view_range[0], command.view_range[1]
            last = len(lines) if last == -1 else last
            if first < 1 or first > len(lines) or last < first or last > len(lines):
                raise ToolError(f"Invalid view_range {command.view_range}: the file has {len(lines)} lines")
        numbered = "\n".join(f"{n:6d}\t{lines[n - 1]}" for n in range(first, last + 1))
        return f"Here's the content of {command.path} with line numbers:\n{numbered}"

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        """A new file; an existing one is an error (checked first: the API has no create-only write)."""
        path = self._workspace_path(command.path)
        if self._get(path) is not None:
            raise ToolError(f"File {command.path} already exists")
        written = self._put(path, command.file_text)
        return _staged(written) or f"File created successfully at: {command.path}"

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        """Replace the one occurrence of `old_str`; none or several is an error. Written with If-Match."""
        current = self._existing(command.path)
        count = current.content.count(command.old_str)
        if count != 1:
            where = "does not appear" if count == 0 else f"appears {count} times"
            raise ToolError(f"No replacement was performed: old_str {where} in {command.path}; it must appear "
                            "exactly once")
        content = current.content.replace(command.old_str, command.new_str, 1)
        written = self._put(current.path, content, if_match=current.etag)
        return _staged(written) or f"The memory file {command.path} has been edited."

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        """Insert `insert_text` after line `insert_line` (0: at the top). Written with If-Match."""
        current = self._existing(command.path)
        lines = current.content.split("\n")
        if command.insert_line < 0 or command.insert_line > len(lines):
            raise ToolError(f"Invalid insert_line {command.insert_line}: it must be within [0, {len(lines)}]")
        text = command.insert_text.removesuffix("\n")
        content = "\n".join(lines[:command.insert_line] + text.split("\n") + lines[command.insert_line:])
        written = self._put(current.path, content, if_match=current.etag)
        return _staged(written) or f"The memory file {command.path} has been edited."

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        """Delete one file (a tombstone version, so history keeps it); directories are not deletable."""
        path = self._workspace_path(command.path)
        current = self._existing(command.path)
        written = self._call(lambda: self.client.delete_file(path, if_match=current.etag, agent_id=self.agent_id))
        return _staged(written) or f"Successfully deleted {command.path}"

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        """Write the content at `new_path`, then delete `old_path`. Not atomic: the API has no rename, so
        a failure (or a policy staging either half) can leave both files; the result says which."""
        target = self._workspace_path(command.new_path)
        current = self._existing(command.old_path)
        if self._get(target) is not None:
            raise ToolError(f"The destination {command.new_path} already exists")
        written = self._put(target, current.content)
        removed = self._call(lambda: self.client.delete_file(current.path, if_match=current.etag,
                                                             agent_id=self.agent_id))
        staged = [note for note in (_staged(written), _staged(removed)) if note]
        if staged:
            return f"Rename of {command.old_path} to {command.new_path}: " + "; ".join(staged)
        return f"Successfully renamed {command.old_path} to {command.new_path}"

    # --- helpers ---------------------------------------------------------------------------------

    def _workspace_path(self, path: str, *, allow_root: bool = False) -> str:
        """The workspace path for a `/memories/...` path, refusing anything that could leave the root."""
        if not isinstance(path, str) or any(c in path for c in "\\%\0") or any(ord(c) < 32 for c in path):
            raise ToolError(f"Invalid path {path!r}: backslashes, percent-encoding and control characters "
                            "are not allowed")
        if path.rstrip("/") == MEMORIES:
            if allow_root:
                return self.root
            raise ToolError(f"{path} is the memory directory itself; name a file under {MEMORIES}/")
        if not path.startswith(MEMORIES + "/"):
            raise ToolError(f"Invalid path {path!r}: every memory path starts with {MEMORIES}/")
        rest = path[len(MEMORIES) + 1:]
        parts = (rest.rstrip("/") if allow_root else rest).split("/")  # a directory may be named with a '/'
        if any(part in ("", ".", "..") for part in parts):
            raise ToolError(f"Invalid path {path!r}: empty, '.' and '..' segments are not allowed")
        return "/".join([self.root, *parts])

    def _memory_path(self, workspace_path: str) -> str:
        return MEMORIES + workspace_path[len(self.root):]

    def _listing(self, shown: str, path: str) -> str:
        files = self._call(lambda: self.client.list_files(prefix=path + "/"))
        if not files and path != self.root:
            raise ToolError(f"The path {shown} does not exist. Please provide a valid path.")
        rows = [f"- {self._memory_path(f.path)} ({f.byte_size} bytes)" for f in sorted(files, key=lambda f: f.path)]
        return "\n".join([f"Directory: {shown.rstrip('/') or MEMORIES}", *rows])

    def _get(self, path: str) -> WorkspaceFile | None:
        try:
            return self._call(lambda: self.client.get_file(path), pass_not_found=True)
        except errors.NotFound:
            return None

    def _existing(self, shown: str) -> WorkspaceFile:
        found = self._get(self._workspace_path(shown))
        if found is None:
            raise ToolError(f"The path {shown} does not exist. Please provide a valid path.")
        return found

    def _put(self, path: str, content: str, *, if_match: str | None = None) -> WorkspaceWrite:
        return self._call(lambda: self.client.put_file(path, content, if_match=if_match, agent_id=self.agent_id))

    @staticmethod
    def _call(action, *, pass_not_found: bool = False):
        """Run a client call, turning Memwarden's errors into tool errors the model can read and act on
        (NotFound passes through when the caller handles absence itself)."""
        try:
            return action()
        except errors.NotFound:
            if pass_not_found:
                raise
            raise ToolError("The memory file does not exist (it may have been deleted meanwhile).") from None
        except errors.Conflict:
            raise ToolError("The memory file changed while this command ran; view it again and retry.") from None
        except errors.MemwardenError as exc:
            raise ToolError(f"Memwarden refused the command: {exc.code}: {exc.message}") from None


def _staged(result: WorkspaceWrite) -> str | None:
    """The model's answer when a policy staged the write: saved, but not visible until a reviewer approves."""
    return f"saved for review (change {result.change_id})" if result.pending else None
