"""URL prefixes of the bearer-key APIs: authenticated by API key, never by the reviewers' cookie
session (so no CSRF token), answered in JSON, each parameter validated by its handler."""

V1 = "/v1/"
MEMORYWIRE = "/memorywire/v0/"
"""memorywire's wire format over the same services (`app.api.memorywire`)."""

BEARER_API_PREFIXES = (V1, MEMORYWIRE)


def is_bearer_api(path: str) -> bool:
    """Is `path` under one of the bearer-key APIs?"""
    return path.startswith(BEARER_API_PREFIXES)
