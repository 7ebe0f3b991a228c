"""URL prefixes of the bearer-key APIs: authenticated by API key, never by the reviewers' cookie
session (so no CSRF token), answered in JSON, each parameter validated by its handler."""

V1 = "/v1/"
MEMORYWIRE = "/memorywire/v0/"
"""memorywire's wire format over the same services (`app.api.memorywire`)."""

BEARER_API_PREFIXES = (V1, MEMORYWIRE)


def is_bearer_api(path: str) -> bool:
    """Is `path` under one of the bearer-key APIs?"""
    return path.startswith(BEARER_API_PREFIXES)


MACHINE_PATHS = frozenset({"/openapi.json", "/readyz", "/healthz", "/metrics"})
"""Paths for programs rather than people (probes, metrics, the API description): answered in JSON,
never given a reviewer's session or pre-session cookie."""


def is_machine_path(path: str) -> bool:
    """Is `path` answered for programs: a bearer-key API, a probe or metrics, the OpenAPI document,
    or a `/.well-known/` document?"""
    return is_bearer_api(path) or path in MACHINE_PATHS or path.startswith("/.well-known/")
