"""What a staged change's diff quotes of live memory (`app.services.review.change_reads`), per operation."""

from app.services.review.change_reads import shown_in_change, shown_in_diff


def _brief(memory_id: str, content: str | None = "text") -> dict:
    return {"id": memory_id, "content": content}


def test_a_remember_quotes_its_neighbours_not_its_own_proposal():
    diff = {"operation": "remember", "proposed": _brief("mem_new"), "similar": [_brief("mem_a"), _brief("mem_b")],
            "closest": _brief("mem_a")}
    assert shown_in_diff(diff) == ["mem_a", "mem_b"]
    assert shown_in_diff(diff, proposed_is_memory=True) == ["mem_a", "mem_b", "mem_new"]


def test_forget_and_merge_quote_what_they_touch_and_a_hard_delete_copy_quotes_nothing():
    assert shown_in_diff({"operation": "forget", "affected": [_brief("mem_a"), _brief("mem_b")]}) == ["mem_a", "mem_b"]
    assert shown_in_diff({"operation": "forget", "affected": [_brief("mem_a", None)]}) == []
    merge = {"operation": "merge", "before": [_brief("mem_c"), _brief("mem_d")], "after": _brief("mem_c")}
    assert shown_in_diff(merge) == ["mem_c", "mem_d"]


def test_a_workspace_write_quotes_the_file_only_when_it_shows_its_current_text():
    new_file = {"operation": "workspace_write", "path": "a.md", "lines": [{"kind": "add", "text": "+x"}]}
    assert shown_in_diff(new_file) == []
    replaced = {**new_file, "lines": [{"kind": "remove", "text": "-old"}, {"kind": "add", "text": "+x"}]}
    assert shown_in_diff(replaced) == ["workspace:a.md"]


def test_a_recover_quotes_its_memory_and_a_decided_remember_its_proposal_once_approved():
    assert shown_in_diff({"operation": "quarantine", "memory": _brief("mem_q")}) == ["mem_q"]
    assert shown_in_diff({"operation": "quarantine", "memory": None}) == []
    decided = {"operation": "remember", "proposed": _brief("mem_new"), "similar": []}
    assert shown_in_change({"status": "approved", "diff": decided}) == ["mem_new"]
    assert shown_in_change({"status": "rejected", "diff": decided}) == []
    assert shown_in_change({"status": "pending", "proposed": {"content": "mine"}}) == []
    assert shown_in_diff(None) == [] and shown_in_diff("not a diff") == []
