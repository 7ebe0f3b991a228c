"""What the browser tests share: a fresh tenant talking to the live server, and sign-in steps."""

import re
import uuid

import httpx
from playwright.sync_api import Page, expect

from app.services.tenancy.apikeys import create_key
from app.services.tenancy.tenants import create_tenant
from app.services.tenancy.users import create_user

PASSWORD = "e2e-password-long-enough"
ACTOR = {"kind": "test", "id": "e2e"}


class World:
    """A fresh tenant with an agent key and reviewers, talking to the live server."""

    def __init__(self, ctx, base_url: str):
        self.ctx, self.base_url = ctx, base_url
        self.tenant = create_tenant(ctx, name=f"e2e-{uuid.uuid4().hex[:10]}", actor=ACTOR)
        token = create_key(ctx, tenant_id=self.tenant.id, scopes="memory:read,memory:write", actor=ACTOR).token
        self.http = httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=30)

    def reviewer(self, role: str = "reviewer") -> str:
        username = f"{role}-{uuid.uuid4().hex[:10]}"
        create_user(self.ctx, username=username, password=PASSWORD, tenant_id=self.tenant.id, role=role, actor=ACTOR)
        return username

    def remember(self, content: str, *, staged: bool = False, agent: str = "assistant", **extra) -> dict:
        # The user's own words unless a test says otherwise: without a source, a contact detail or an
        # order in the text is staged by screening's provenance rule, and these pages need live facts.
        extra.setdefault("source", "user")
        response = self.http.post("/v1/memories/remember", json={
            "agent_id": agent, "type": "semantic", "content": content, "approval_required": staged, **extra})
        assert response.status_code == (202 if staged else 201), response.text
        return response.json()

    def recall(self, query: str, agent: str = "assistant") -> list[dict]:
        return self.http.post("/v1/memories/recall", json={"agent_id": agent, "query": query}).json()["hits"]


def sign_in(page: Page, base_url: str, username: str) -> None:
    page.goto(base_url + "/login")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_test_id("login-submit").click()
    expect(page).to_have_url(re.compile(r"/review"))


def open_change(page: Page, base_url: str, change_id: str) -> None:
    page.goto(f"{base_url}/review/{change_id}")
    expect(page.get_by_test_id("diff")).to_be_visible()
