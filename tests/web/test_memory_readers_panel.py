"""The memory page's "Read by" panel: an auditor sees who read the memory (keys
and people, newest first, with the audit seq); a viewer's own view is recorded but the panel is
not shown to a role without the audit power."""

from app.services.tenancy.users import create_user
from tests.harness import bearer, web_sign_in

PASSWORD = "correct horse battery"
ACTOR = {"kind": "test", "id": "t"}


def _remember(client, headers):
    response = client.post("/v1/memories/remember", json={"agent_id": "panel-agent", "type": "semantic",
                                                           "content": "Oskar's badge number is 5521."},
                           headers=headers)
    assert response.status_code == 201, response.text
    return response.json()["id"]


def test_an_auditor_sees_who_read_the_memory(client, ctx, tenant, make_key):
    token = make_key()
    key_id = "_".join(token.split("_")[1:3])
    memory_id = _remember(client, bearer(token))
    assert client.get(f"/v1/memories/{memory_id}", headers=bearer(token)).status_code == 200
    viewer = create_user(ctx, username=f"pv-{tenant.name}", password=PASSWORD, tenant_id=tenant.id, role="viewer",
                         actor=ACTOR)
    auditor = create_user(ctx, username=f"pa-{tenant.name}", password=PASSWORD, tenant_id=tenant.id, role="auditor",
                          actor=ACTOR)

    assert web_sign_in(client, viewer.username, PASSWORD, "/memories").status_code == 303
    page = client.get(f"/memories/{memory_id}")
    assert page.status_code == 200 and 'data-testid="memory-readers"' not in page.text

    assert web_sign_in(client, auditor.username, PASSWORD, "/memories").status_code == 303
    page = client.get(f"/memories/{memory_id}")
    assert page.status_code == 200 and 'data-testid="memory-readers"' in page.text
    actors = [line.split('data-actor="')[1].split('"')[0] for line in page.text.splitlines()
              if 'data-testid="memory-reader"' in line]
    # Newest first: the auditor's own view, the viewer's, then the key's get.
    assert actors == [f"user:{auditor.id}", f"user:{viewer.id}", f"api_key:{key_id}"]


def test_a_key_that_met_its_read_budget_is_flagged_on_the_admin_page(client, ctx, tenant, make_key):
    from app.services.tenancy.tenant_config import set_read_budget

    set_read_budget(ctx, tenant_id=tenant.id, actor=ACTOR, per_key=1)
    writer = bearer(make_key())
    first, second = _remember(client, writer), _remember(client, writer)
    token = make_key(scopes="memory:read")
    key_id, calm_key = "_".join(token.split("_")[1:3]), "_".join(make_key(scopes="memory:read").split("_")[1:3])
    assert client.get(f"/v1/memories/{first}", headers=bearer(token)).status_code == 200
    assert client.get(f"/v1/memories/{second}", headers=bearer(token)).status_code == 429
    admin = create_user(ctx, username=f"adm-{tenant.name}", password=PASSWORD, tenant_id=tenant.id, role="admin",
                        actor=ACTOR)
    assert web_sign_in(client, admin.username, PASSWORD, "/admin").status_code == 303
    page = client.get("/admin").text
    rows = {row.split('data-key-id="')[1].split('"')[0]: row for row in page.split('data-testid="key-row"')[1:]}
    assert 'data-testid="key-read-budget-flag"' in rows[key_id].split("</tr>")[0]
    assert 'data-testid="key-read-budget-flag"' not in rows[calm_key].split("</tr>")[0]
