"""Memwarden's Python client: `from memwarden.client import Client, AsyncClient`.

The server lives in the `app` package; this package only talks to it over HTTP (httpx), so an
agent process installs only this distribution (`memwarden-client`, httpx alone) and never the
database code.
"""

from memwarden.client import AsyncClient, Client
from memwarden.errors import MemwardenError

__all__ = ["AsyncClient", "Client", "MemwardenError"]
