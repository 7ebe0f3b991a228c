"""Memwarden's Python client: `from memwarden.client import Client, AsyncClient`.

The server lives in the `app` package; this package only talks to it over HTTP (httpx), so an
agent process can install Memwarden and import the client without touching the database code.
"""

from memwarden.client import AsyncClient, Client
from memwarden.errors import MemwardenError

__all__ = ["AsyncClient", "Client", "MemwardenError"]
