"""Sign-in throttling through the real app and PostgreSQL: per (client address, username) back-off,
a loose per-username ceiling that only slows, success resets; nobody can lock a user out."""

import pytest
from sqlalchemy import text
from starlette.testclient import TestClient

from app.services.tenancy import users
from app.services.tenancy.users import create_user
from tests.harness import csrf_token_in

PASSWORD = "correct horse battery"
WRONG = "not-the-password-9"


@pytest.fixture
def person(ctx, tenant):
    return create_user(ctx, username=f"rev-{tenant.name}", password=PASSWORD, tenant_id=tenant.id, role="reviewer",
                       actor={"kind": "test", "id": "t"})


def browser_at(client, address: str) -> TestClient:
    """A browser connecting from `address` (the socket's peer address, not a header)."""
    return TestClient(client.app, base_url="http://testserver", client=(address, 40000))


def attempt(browser, username, password):
    token = csrf_token_in(browser.get("/login").text)
    return browser.post("/login", data={"username": username, "password": password, "csrf_token": token},
                        follow_redirects=False)


def expire_blocks(ctx, username):
    """Let the current back-off elapse (the test transaction's clock does not move)."""
    with ctx.db.sessions.begin() as session:
        session.execute(text("UPDATE login_throttle SET blocked_until = now() - interval '1 second'"
                             " WHERE username = :u"), {"u": username})


def test_attacker_failing_from_one_address_does_not_block_the_user_elsewhere(client, ctx, person, tenant):
    attacker, user = browser_at(client, "203.0.113.9"), browser_at(client, "198.51.100.7")
    for _ in range(5):
        assert attempt(attacker, person.username, WRONG).status_code == 422
    for _ in range(3):
        throttled = attempt(attacker, person.username, PASSWORD)  # even the right password waits
        assert throttled.status_code == 429 and throttled.headers["retry-after"] == "1"
        assert throttled.headers["content-type"].startswith("text/html") and "too many" in throttled.text
    assert attempt(user, person.username, PASSWORD).status_code == 303

    with ctx.db.sessions() as session:
        rows = session.execute(text("SELECT event_type, convert_from(entry, 'UTF8') AS entry FROM audit_entries"
                                    " WHERE tenant_id = :t AND event_type LIKE 'auth.%' ORDER BY seq"),
                               {"t": tenant.id}).all()
    # Three refusals under one block: one entry (refusals are free to send; entries are not).
    assert [r.event_type for r in rows] == (["auth.sign_in_failed"] * 5 + ["auth.sign_in_throttled"]
                                            + ["auth.signed_in"])
    assert '"203.0.113.9"' in rows[0].entry and '"198.51.100.7"' in rows[-1].entry
    assert not any(PASSWORD in r.entry or WRONG in r.entry for r in rows)


def test_back_off_doubles_per_failure_and_a_success_resets_the_clients_count(client, ctx, person):
    browser = browser_at(client, "2001:db8:1:2::10")
    for _ in range(5):
        assert attempt(browser, person.username, WRONG).status_code == 422
    waits = []
    for _ in range(3):
        refused = attempt(browser, person.username, WRONG)
        assert refused.status_code == 429
        waits.append(int(refused.headers["retry-after"]))
        expire_blocks(ctx, person.username)
        assert attempt(browser, person.username, WRONG).status_code == 422
    assert waits == [1, 2, 4]
    # Same IPv6 /64, another host: the same client as far as throttling goes.
    assert attempt(browser_at(client, "2001:db8:1:2::99"), person.username, WRONG).status_code == 429

    expire_blocks(ctx, person.username)
    assert attempt(browser, person.username, PASSWORD).status_code == 303
    with ctx.db.sessions() as session:
        failures = session.scalar(text("SELECT failures FROM login_throttle WHERE username = :u AND client = :c"),
                                  {"u": person.username, "c": "2001:db8:1:2::/64"})
    assert failures == 0
    assert attempt(browser, person.username, WRONG).status_code == 422  # counting starts again from zero


def test_per_username_ceiling_only_slows_new_addresses_and_spares_known_ones(client, ctx, person, monkeypatch):
    monkeypatch.setattr(users, "GLOBAL_FREE_FAILURES", 6)  # 50 in production; the rule is the same
    home = browser_at(client, "192.0.2.50")
    assert attempt(home, person.username, PASSWORD).status_code == 303  # a known address from now on
    for n in range(6):  # a distributed guesser: one failure from each of many addresses
        assert attempt(browser_at(client, f"203.0.113.{n + 1}"), person.username, WRONG).status_code == 422
    newcomer = attempt(browser_at(client, "198.51.100.20"), person.username, PASSWORD)
    assert newcomer.status_code == 429
    assert 1 <= int(newcomer.headers["retry-after"]) <= users.GLOBAL_MAX_DELAY
    assert attempt(home, person.username, PASSWORD).status_code == 303
    expire_blocks(ctx, person.username)
    assert attempt(browser_at(client, "198.51.100.20"), person.username, PASSWORD).status_code == 303


def test_backoff_delay_is_capped():
    assert [users.backoff_delay(n, 5, 300) for n in (0, 4, 5, 6, 7, 13, 14, 1000)] == [0, 0, 1, 2, 4, 256, 300, 300]
    assert users.backoff_delay(10**6, 50, 30) == 30


def test_each_block_is_audited_once_however_many_attempts_it_refuses(client, ctx, person, tenant):
    attacker = browser_at(client, "203.0.113.77")

    def throttled_entries():
        with ctx.db.sessions() as session:
            return session.scalar(text("SELECT count(*) FROM audit_entries WHERE tenant_id = :t"
                                       " AND event_type = 'auth.sign_in_throttled'"), {"t": tenant.id})

    for _ in range(5):
        assert attempt(attacker, person.username, WRONG).status_code == 422
    for _ in range(4):
        assert attempt(attacker, person.username, WRONG).status_code == 429
    assert throttled_entries() == 1

    expire_blocks(ctx, person.username)
    assert attempt(attacker, person.username, WRONG).status_code == 422  # a new, longer block starts
    for _ in range(3):
        refused = attempt(attacker, person.username, WRONG)
        assert refused.status_code == 429 and refused.headers["retry-after"] == "2"
    assert throttled_entries() == 2
