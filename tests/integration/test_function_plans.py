"""Migration 0036: the hot path's plpgsql functions reuse their statements' plans while the app's
own statements keep custom plans."""

from sqlalchemy import text

HOT_FUNCTIONS = ("memwarden_take_read_budget", "memwarden_lock_chain", "memwarden_owe_backends")


def test_hot_functions_run_with_plan_cache_auto_and_the_session_keeps_custom_plans(ctx):
    with ctx.db.sessions() as session:
        config = dict(session.execute(text(
            "SELECT proname, proconfig FROM pg_proc WHERE proname = ANY(:names)"),
            {"names": list(HOT_FUNCTIONS)}).all())
        session_mode = session.execute(text("SHOW plan_cache_mode")).scalar()
    assert {name: config.get(name) for name in HOT_FUNCTIONS} == {
        name: ["plan_cache_mode=auto"] for name in HOT_FUNCTIONS}
    # Recall's scope-skewed statements still plan per call (app.db.database.make_engine).
    assert session_mode == "force_custom_plan"
