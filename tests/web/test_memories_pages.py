"""/memories: browse, filter, search and page live memory; detail with its audit history; tenant and
agent walls; hostile agent-written text renders as literal text."""

import fnmatch
import os
import re
from datetime import timedelta

import pytest
from sqlalchemy import text

from app.core.ids import new_id
from app.core.timefmt import utcnow
from app.db.models import Memory
from app.repos.review import browse
from app.services.tenancy.users import create_user
from app.web import memories as memory_pages
from tests.harness import bearer, csrf_token_in, web_sign_in

PASSWORD = "correct horse battery"
HOSTILE = ["<script>alert(1)</script>", '"><img src=x onerror=alert(1)>']
ACTOR = {"kind": "test", "id": "t"}


_csrf = csrf_token_in


def _sign_in(client, username, password=PASSWORD):
    response = web_sign_in(client, username, password, "/memories")
    assert response.status_code == 303, response.text
    return response


def _remember(client, headers, agent_id="helper", content="Nora's desk is on floor 3.", **extra):
    response = client.post("/v1/memories/remember", json={"agent_id": agent_id, "type": "semantic",
                                                           "content": content, **extra}, headers=headers)
    assert response.status_code == 201, response.text
    return response.json()["id"]


@pytest.fixture
def viewer(ctx, tenant):
    return create_user(ctx, username=f"view-{tenant.name}", password=PASSWORD, tenant_id=tenant.id, role="viewer",
                       actor=ACTOR)


@pytest.fixture
def headers(make_key):
    return bearer(make_key())


def test_signed_out_visitors_are_sent_to_sign_in(client):
    response = client.get("/memories", follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"].startswith("/login?next=/memories")
    assert client.get("/memories/mem_x", follow_redirects=False).status_code == 303


def test_viewer_browses_filters_and_searches(client, viewer, headers):
    nora = _remember(client, headers, content="Nora's desk is on floor 3.", tags=["office"], user_id="u-1")
    tea = _remember(client, headers, agent_id="planner", content="The team prefers green tea on Fridays.")
    _sign_in(client, viewer.username)
    page = client.get("/memories")
    assert page.status_code == 200
    assert f'data-memory-id="{nora}"' in page.text and f'data-memory-id="{tea}"' in page.text
    assert page.text.index(tea) < page.text.index(nora)  # newest first
    assert "<label" in page.text and 'for="mem-q"' in page.text

    def ids(**params):
        html = client.get("/memories", params=params).text
        return set(re.findall(r'data-testid="memory-row" data-memory-id="([^"]+)"', html))

    assert ids(agent="planner") == {tea}
    assert ids(tag="office") == {nora}
    assert ids(user="u-1") == {nora}
    assert ids(type="episodic") == set()
    assert ids(q="tea") == {tea}            # full-text (stemmed) search
    assert ids(q="desks floor") == {nora}
    assert ids(q=nora) == {nora}            # an exact memory id also finds it
    assert ids(q="<script>") == set()


def test_htmx_gets_only_the_results_fragment(client, viewer, headers):
    _remember(client, headers)
    _sign_in(client, viewer.username)
    fragment = client.get("/memories", headers={"HX-Request": "true"})
    assert fragment.status_code == 200 and "<html" not in fragment.text
    assert 'id="memory-results"' in fragment.text
    assert "HX-Request" in fragment.headers.get("vary", "")
    restore = client.get("/memories", headers={"HX-Request": "true", "HX-History-Restore-Request": "true"})
    assert "<html" in restore.text


def test_keyset_pagination(client, viewer, headers, monkeypatch):
    monkeypatch.setattr(memory_pages, "PAGE", 2)
    made = [_remember(client, headers, content=f"Fact number {i} about the office.") for i in range(5)]
    _sign_in(client, viewer.username)
    seen, url = [], "/memories"
    for _ in range(5):
        html = client.get(url).text
        seen += re.findall(r'data-testid="memory-row" data-memory-id="([^"]+)"', html)
        link = re.search(r'<a href="([^"]+)"[^>]*data-testid="memory-next"', html)
        if not link:
            break
        url = link.group(1).replace("&amp;", "&")
    assert seen == list(reversed(made))
    assert client.get("/memories?after=not-a-cursor").status_code == 422


def test_detail_shows_memory_and_its_history_without_content(client, viewer, headers):
    memory_id = _remember(client, headers, content="Nora's desk is on floor 3.", metadata={"room": "3.14"})
    _sign_in(client, viewer.username)
    page = client.get(f"/memories/{memory_id}")
    assert page.status_code == 200
    assert "Nora&#39;s desk is on floor 3." in page.text and "3.14" in page.text
    history = page.text.split('data-testid="memory-history"')[1]
    assert 'data-event-type="memory.remembered"' in history
    assert "floor 3" not in history


def _stage(client, headers, content, agent_id="helper", **extra):
    response = client.post("/v1/memories/remember", json={"agent_id": agent_id, "type": "semantic", "content": content,
                                                           "approval_required": True, **extra}, headers=headers)
    assert response.status_code == 202, response.text
    return response.json()["change_id"]


def test_detail_names_pending_writes_about_the_same_thing(client, viewer, headers, make_key):
    """A staged remember that may supersede this memory is named on its page;
    unrelated staged writes, another agent's, and
    another user's are not."""
    memory_id = _remember(client, headers, content="Quinn lives in Paris.", user_id="u-quinn")
    moved = _stage(client, headers, "Quinn lives in Madrid.", user_id="u-quinn")
    unrelated = _stage(client, headers, "The build server restarts every Sunday at 02:00.")
    elsewhere = _stage(client, headers, "Quinn lives in Madrid now.", agent_id="planner")
    other_user = _stage(client, headers, "Quinn lives in Madrid these days.", user_id="u-other")
    _sign_in(client, viewer.username)
    page = client.get(f"/memories/{memory_id}").text
    assert 'data-testid="pending-write-notice"' in page
    notice = page.split('data-testid="pending-write-notice"')[1].split("</p>")[0]
    assert f'href="/review/{moved}"' in notice
    for absent in (unrelated, elsewhere, other_user):
        assert absent not in notice
    assert re.search(r"similarity 0\.\d\d", notice)
    assert 'data-testid="pending-change-notice"' not in page  # nothing staged names the memory itself

    decided = client.post(f"/v1/changes/{moved}/reject", json={"reason": "stale"},
                          headers=bearer(make_key(scopes="review:decide")))
    assert decided.status_code == 200, decided.text
    assert 'data-testid="pending-write-notice"' not in client.get(f"/memories/{memory_id}").text


def test_other_tenants_and_hidden_agents_are_404(client, ctx, tenant, make_tenant, make_key, headers):
    mine = _remember(client, headers, agent_id="billing-bot")
    hidden = _remember(client, headers, agent_id="support-bot")
    other = make_tenant()
    theirs = _remember(client, bearer(make_key(tenant_id=other.id)), agent_id="billing-bot")
    create_user(ctx, username=f"narrow-{tenant.name}", password=PASSWORD, tenant_id=tenant.id, role="viewer",
                agents="billing-*", actor=ACTOR)
    _sign_in(client, f"narrow-{tenant.name}")
    listing = client.get("/memories").text
    assert mine in listing and hidden not in listing and theirs not in listing
    assert client.get(f"/memories/{mine}").status_code == 200
    assert client.get(f"/memories/{hidden}").status_code == 404
    assert client.get(f"/memories/{theirs}").status_code == 404
    assert client.get("/memories/mem_doesnotexist").status_code == 404
    # Asking for a tenant one has no role in is refused, not silently answered with one's own.
    assert client.get("/memories", params={"tenant": other.name}).status_code == 403


def test_forgotten_and_pending_memories_are_not_shown(client, viewer, headers):
    gone = _remember(client, headers, content="Temporary note.")
    client.post("/v1/memories/forget", json={"agent_id": "helper", "ids": [gone]}, headers=headers)
    pending = client.post("/v1/memories/remember", json={"agent_id": "helper", "type": "semantic",
                                                          "content": "Needs a look.", "approval_required": True},
                          headers=headers).json()["id"]
    _sign_in(client, viewer.username)
    listing = client.get("/memories").text
    assert gone not in listing and pending not in listing
    assert client.get(f"/memories/{gone}").status_code == 404
    assert client.get(f"/memories/{pending}").status_code == 404


def test_user_with_several_tenants_picks_one(client, ctx, tenant, make_tenant, make_key, headers):
    from app.services.tenancy.users import set_role

    here = _remember(client, headers)
    second = make_tenant()
    there = _remember(client, bearer(make_key(tenant_id=second.id)), content="Another tenant's fact.")
    user = create_user(ctx, username=f"multi-{tenant.name}", password=PASSWORD, tenant_id=tenant.id, role="viewer",
                       actor=ACTOR)
    set_role(ctx, user_id=user.id, tenant_id=second.id, role="viewer", actor=ACTOR)
    _sign_in(client, user.username)
    page = client.get("/memories", params={"tenant": second.name}).text
    assert 'id="mem-tenant"' in page and there in page and here not in page
    assert client.get(f"/memories/{here}").status_code == 200  # the detail finds its own tenant


def test_hostile_agent_content_renders_as_literal_text(client, ctx, tenant, viewer, headers):
    memory_id = _remember(client, headers, content=" ".join(HOSTILE), tags=HOSTILE,
                          metadata={"note": HOSTILE[1], HOSTILE[0]: "key"}, user_id="u-x")
    # Agent ids are restricted by the API schema; a row written another way must still render safely.
    now = utcnow()
    raw_id = new_id("mem")
    with ctx.db.sessions.begin() as session:
        session.add(Memory(id=raw_id, tenant_id=tenant.id, agent_id=HOSTILE[1], user_id=HOSTILE[0], type="semantic",
                           content=HOSTILE[0], metadata_={}, tags=[HOSTILE[1]], status="live", live_from=now,
                           created_at=now + timedelta(seconds=1), updated_at=now, digest_key=os.urandom(32)))
    _sign_in(client, viewer.username)
    pages = [client.get("/memories"), client.get(f"/memories/{memory_id}"), client.get(f"/memories/{raw_id}"),
             client.get("/memories", params={"agent": HOSTILE[1], "tag": HOSTILE[0], "q": HOSTILE[0]})]
    for page in pages:
        assert page.status_code == 200
        assert "<script>alert(1)</script>" not in page.text
        assert "<img src=x" not in page.text and '"><img' not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pages[1].text
    assert "&lt;img src=x onerror=alert(1)&gt;" in pages[2].text
    assert "content-security-policy" in pages[0].headers


@pytest.mark.parametrize("pattern", ["*", "billing-*", "a?c", "[ab]x", "[!ab]x", "x[a-c]", "[]]z", "[!]]z",
                                     "a.b", "a[", "[-a]", "@:*", "[z-a]q", "*-[0-9]"])
def test_allow_list_globs_match_in_sql_as_in_python(ctx, pattern):
    candidates = ["billing-1", "billing-", "abc", "axc", "ax", "bx", "cx", "xa", "xd", "]z", "az", "a.b", "aXb",
                  "a[", "-a", "a", "-", "@:x", "zq", "aq", "x-7", "x-", "[ab]x", "ünï", "a\nb", "\nz"]
    regex = browse.glob_regex(pattern)
    with ctx.db.sessions() as session:
        for candidate in candidates:
            expected = fnmatch.fnmatchcase(candidate, pattern)
            got = False if regex is None else session.scalar(text("SELECT :s ~ :r"), {"s": candidate, "r": regex})
            assert got == expected, (pattern, candidate, regex)
