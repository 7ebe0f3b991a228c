"""Two OS processes decide the same change at the same instant: exactly one decision wins."""

import multiprocessing as mp

import pytest

from app.core.access import Principal
from app.services.memory import remembering
from app.services.tenancy.apikeys import create_key
from app.services.tenancy.tenants import create_tenant
from tests.harness import unique

pytestmark = pytest.mark.slow


def _decide(settings, tenant_id, change_id, kind, barrier, results):
    from app.errors import Conflict
    from app.services.runtime.context import AppContext
    from app.services.review.review import DecisionRequest, decide

    ctx = AppContext.open(settings, migrate=False)
    barrier.wait(timeout=30)
    try:
        change = decide(ctx, tenant_id=tenant_id, change_id=change_id, actor={"kind": "test", "id": kind},
                        may_see=lambda agent: True, request=DecisionRequest(decision=kind, reason="race"))
        results.put((kind, change["status"]))
    except Conflict as error:
        results.put((kind, f"conflict:{error.details['reason']}"))
    finally:
        ctx.close()


def test_concurrent_approve_and_reject_exactly_one_wins(settings, committed_ctx):
    tenant = create_tenant(committed_ctx, name=unique("race"), actor={"kind": "test", "id": "t"})
    key = create_key(committed_ctx, tenant_id=tenant.id, scopes="memory:write", actor={"kind": "test", "id": "t"}).key
    agent = Principal(tenant.id, key.id, frozenset(key.scopes), tuple(key.agents))
    spawn = mp.get_context("spawn")
    for round_ in range(3):
        staged = remembering.remember(committed_ctx, agent, {"agent_id": "racer", "type": "semantic",
                                                          "content": f"Race fact {round_}.", "approval_required": True})
        change_id = staged.body["change_id"]
        barrier, results = spawn.Barrier(2), spawn.Queue()
        procs = [spawn.Process(target=_decide, args=(settings, tenant.id, change_id, kind, barrier, results))
                 for kind in ("approve", "reject")]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
            assert p.exitcode == 0
        outcomes = dict(results.get(timeout=5) for _ in procs)
        winners = [k for k, v in outcomes.items() if not v.startswith("conflict")]
        assert len(winners) == 1, outcomes
        loser = "reject" if winners[0] == "approve" else "approve"
        assert outcomes[loser] == "conflict:already_decided"
        from app.services.review.changes import get_change

        final = get_change(committed_ctx, tenant.id, change_id, lambda a: True)
        assert final["status"] == ("approved" if winners[0] == "approve" else "rejected")
        assert committed_ctx.audit.verify_database(committed_ctx.db.sessions, f"tenant:{tenant.id}").ok
