"""A policy-gated workspace edit is reviewed as a line diff in the browser and applied on approval."""

import httpx
import pytest
from playwright.sync_api import expect

from app.services.tenancy.apikeys import create_key
from app.services.tenancy.tenant_config import set_policy
from e2e.helpers import ACTOR, World, open_change, sign_in

pytestmark = pytest.mark.e2e


def test_policy_gated_workspace_edit_shows_its_diff_and_applies_on_approval(page, committed_ctx, live_server):
    world = World(committed_ctx, live_server)
    token = create_key(committed_ctx, tenant_id=world.tenant.id, scopes="workspace:read,workspace:write",
                       actor=ACTOR).token
    host = httpx.Client(base_url=live_server, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    path = "/v1/host/workspace/files/runbook.md"
    first = host.put(path, json={"content": "# Runbook\n\nRestart the worker.\nPage the on-call.\n"})
    assert first.status_code == 201, first.text

    set_policy(committed_ctx, tenant_id=world.tenant.id, actor=ACTOR, doc={"rules": [
        {"id": "runbooks-reviewed", "match": {"operations": ["workspace_write"], "paths": ["runbook*"]},
         "action": "require_approval"}]})
    proposed = "# Runbook\n\nDrain the queue, then restart the worker.\nPage the on-call.\n"
    staged = host.put(path, json={"content": proposed}, headers={"If-Match": first.headers["etag"]})
    assert staged.status_code == 202, staged.text
    change_id = staged.json()["changeId"]
    assert host.get(path).json()["content"].startswith("# Runbook\n\nRestart")  # not applied yet

    sign_in(page, live_server, world.reviewer())
    open_change(page, live_server, change_id)
    line_diff = page.get_by_test_id("line-diff")
    expect(line_diff.locator(".line-remove")).to_contain_text("-Restart the worker.")
    expect(line_diff.locator(".line-add")).to_contain_text("+Drain the queue, then restart the worker.")
    page.get_by_test_id("approve").click()
    expect(page.get_by_test_id("decided")).to_have_attribute("data-status", "approved")

    applied = host.get(path)
    assert applied.json()["content"] == proposed and applied.headers["etag"] != first.headers["etag"]
    host.close()
    world.http.close()
