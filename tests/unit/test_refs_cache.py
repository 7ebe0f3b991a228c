"""The process's cache of committed refs is bounded: a caller minting scope after scope cannot grow
the server without limit, and what it forgets is read from the database again (refs never change)."""

from app.services.memory import refs


def test_the_known_refs_cache_forgets_the_oldest_scope_past_its_bound(monkeypatch):
    monkeypatch.setattr(refs, "KNOWN_MAX", 3)
    monkeypatch.setattr(refs, "_KNOWN", {})
    scopes = [("t1", f"agent-{i}", None) for i in range(5)]
    for i, scope in enumerate(scopes):
        refs._remember(scope, f"mref_{i}")
    assert [refs.known_ref(*scope) for scope in scopes] == [None, None, "mref_2", "mref_3", "mref_4"]
    refs._remember(scopes[3], "mref_3")  # a scope seen again does not push another out
    assert len(refs._KNOWN) == 3 and refs.known_ref(*scopes[2]) == "mref_2"
