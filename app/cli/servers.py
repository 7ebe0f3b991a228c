"""The HTTP servers `memwarden serve` can run the app on: uvicorn (the default) or granian.

Both serve the same ASGI app built by `app.main.create_app`; the choice is `MEMWARDEN_SERVER`.
granian is optional (not a dependency): asking for it without the package installed is an error
before anything is served.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from app.config import Settings

SERVERS = ("uvicorn", "granian")


def check_server(name: str) -> str | None:
    """Why `name` cannot serve here, or None."""
    if name not in SERVERS:
        return f"MEMWARDEN_SERVER: {name!r} is not one of {', '.join(SERVERS)}"
    if name == "granian":
        try:
            import granian  # noqa: F401
        except ImportError:
            return "MEMWARDEN_SERVER=granian needs the granian package (pip install granian)"
    return None


def run_uvicorn(
    settings: Settings, *, workers: int, log_level: str, log_config: dict[str, Any], proxy: dict[str, Any]
) -> None:
    import uvicorn

    common: dict[str, Any] = dict(
        host=settings.host,
        port=settings.port,
        log_level=log_level,
        log_config=log_config,
        server_header=False,
        timeout_graceful_shutdown=5,
        **proxy,
    )
    if workers > 1:  # workers import the app themselves, from the environment `serve` prepared
        uvicorn.run("app.main:create_app", factory=True, workers=workers, **common)
    else:
        from app.main import create_app

        uvicorn.run(create_app(settings), **common)


def granian_app():
    """The app of one granian worker: `create_app` from the environment `serve` prepared, behind
    uvicorn's proxy-header middleware when `serve` enabled it (granian reads no forwarded headers)."""
    from app.main import create_app

    app = create_app()
    trusted = os.environ.get("MEMWARDEN_GRANIAN_FORWARDED_ALLOW_IPS")
    if trusted:
        from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

        return ProxyHeadersMiddleware(app, trusted_hosts=trusted)
    return app


def run_granian(
    settings: Settings, *, workers: int, log_level: str, log_config: dict[str, Any], proxy: dict[str, Any]
) -> None:
    from granian import Granian
    from granian.constants import Interfaces
    from granian.log import LogLevels

    # granian always serves from worker processes (one here unless --workers), each building the
    # app from the environment, as uvicorn's workers do.
    os.environ["MEMWARDEN_DATA_DIR"] = str(settings.data_path)
    if proxy.get("proxy_headers"):
        os.environ["MEMWARDEN_GRANIAN_FORWARDED_ALLOW_IPS"] = proxy["forwarded_allow_ips"]
    else:
        os.environ.pop("MEMWARDEN_GRANIAN_FORWARDED_ALLOW_IPS", None)
    level = LogLevels(log_level) if log_level in LogLevels._value2member_map_ else LogLevels.info
    Granian(
        "app.cli.servers:granian_app",
        factory=True,
        address=settings.host,
        port=settings.port,
        interface=Interfaces.ASGI,
        workers=workers,
        log_level=level,
        log_dictconfig=log_config,
        workers_kill_timeout=5,
    ).serve()
    sys.stdout.flush()
