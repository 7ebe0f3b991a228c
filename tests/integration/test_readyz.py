"""`/readyz` follows the real database: 503 while it is stopped, 200 once it is back."""

import pytest
from starlette.testclient import TestClient

from app.config import Settings
from app.db.database import make_database, make_engine, migrate, resolve_urls
from app.main import create_app
from app.services.runtime.context import AppContext
from tests.schema_check import assert_error

pytestmark = pytest.mark.slow


def test_readyz_turns_503_when_postgres_stops_and_200_when_it_returns(tmp_path):
    settings = Settings(data_dir=tmp_path / "data", secret_key="k")
    urls = resolve_urls(settings)  # a separate embedded cluster, so the suite's stays up
    migrate(urls)
    ctx = AppContext(settings, make_database(make_engine(urls.app_url, pool_size=2)))
    server = urls.embedded.handle
    try:
        with TestClient(create_app(settings, ctx=ctx)) as client:
            assert client.get("/readyz").status_code == 200
            assert client.get("/healthz").json() == {"status": "ok"}

            server.stop()
            assert_error(client.get("/readyz"), 503, "unavailable")
            assert client.get("/healthz").status_code == 200  # the process is still alive
            # An authenticated API call has no effect and says so.
            denied = client.get("/v1/whoami", headers={"Authorization": "Bearer mw_key_" + "0" * 26 + "_" + "a" * 43})
            assert_error(denied, 503, "unavailable")

            server.start()
            assert client.get("/readyz").status_code == 200
    finally:
        ctx.close()
        server.cleanup()
