"""Reading import files: format detection, record lines, ids and timestamps (no database)."""

from __future__ import annotations

import json

import pytest

from app.core import importformats as f

SOURCE = f.Source(tenant_id="ten_a", fmt="memorywire", digest="d" * 64, default_agent="fallback")


def records(text: str, fmt: str, source: f.Source = SOURCE):
    source = f.Source(tenant_id=source.tenant_id, fmt=fmt, digest=source.digest, default_agent=source.default_agent)
    return [f.to_record(source, line, raw, n) for n, (line, raw) in enumerate(f.raw_records(text, fmt), start=1)]


def test_detects_each_format():
    assert f.detect_format('[{"agent_id": "a", "type": "semantic", "content": "x"}]') == "memorywire"
    assert f.detect_format('{"memories": [{"id": "1", "memory": "x"}]}') == "mem0"
    assert f.detect_format('{"results": [{"id": "1", "memory": "x"}], "relations": []}') == "mem0"
    assert f.detect_format('[{"id": "1", "memory": "x"}]') == "mem0"
    assert f.detect_format('{"format": "memwarden.export/v1"}\n{"id": "x"}\n') == "jsonl"
    assert f.detect_format('{"content": "one line of jsonl"}') == "jsonl"
    with pytest.raises(f.FileError):
        f.detect_format("hello")
    with pytest.raises(f.FileError):
        f.detect_format('[{"a": 1},')
    with pytest.raises(f.FileError, match="nested too deeply"):  # deeper than Python's parser recurses
        f.detect_format("[" * 5000)


def test_array_records_keep_the_line_they_start_on():
    text = '{\n  "memories": [\n    {"id": "a", "memory": "x"},\n\n    {"id": "b",\n     "memory": "y"}\n  ]\n}\n'
    assert [line for line, _ in f.raw_records(text, "mem0")] == [3, 5]
    text = '{"version": "v1", "nested": {"memories": 1}, "results": [\n{"memory": "x"}]}'
    assert [line for line, _ in f.raw_records(text, "mem0")] == [2]


def test_ids_kept_derived_from_source_ids_or_from_file_and_line():
    kept = "mem_01m83nwv5bs148ykh5x7ng0ajv"
    rows = records(json.dumps([
        {"id": kept, "agent_id": "a", "type": "semantic", "content": "x"},
        {"id": "01HZK6F8AAAB3C4D5E6F7G8H9J", "agent_id": "a", "type": "semantic", "content": "y"},
        {"agent_id": "a", "type": "semantic", "content": "z"},
    ]), "memorywire")
    assert rows[0].id == kept
    assert rows[1].id == f.derived_id("ten_a", "memorywire", "01HZK6F8AAAB3C4D5E6F7G8H9J")
    assert rows[1].body["metadata"] == {"import_source_id": "01HZK6F8AAAB3C4D5E6F7G8H9J"}
    assert rows[2].id == records(json.dumps([{}, {}, {"agent_id": "a", "type": "semantic", "content": "z"}]),
                                 "memorywire")[2].id  # the same record at the same position, in another file
    assert rows[2].id != records(json.dumps([{}, {}, {"agent_id": "a", "type": "semantic", "content": "z2"}]),
                                 "memorywire")[2].id
    other_tenant = f.Source(tenant_id="ten_b", fmt="memorywire", digest="d" * 64)
    assert f.to_record(other_tenant, 1, {"id": "01HZK6F8AAAB3C4D5E6F7G8H9J", "content": "y"}).id != rows[1].id
    assert all(r.id.startswith("mem_") and len(r.id) == 30 for r in rows)


def test_memorywire_epoch_milliseconds_and_default_agent():
    (row,) = records('[{"type": "episodic", "content": "deploy retried", "stored_at": 1716700931000,'
                     ' "expires_at": 1724476131000}]', "memorywire")
    assert row.body["agent_id"] == "fallback" and row.created_at.year == 2024 and row.updated_at == row.created_at
    assert row.body["expires_at"] == 1724476131000


def test_mem0_mapping():
    (row,) = records(json.dumps({"memories": [{
        "id": "6d1b7b1e-8f0a-4a5b-9a54-0d2b3c4d5e6f", "memory": "Prefers window seats", "user_id": "alex",
        "agent_id": None, "metadata": None, "categories": ["travel", "travel", "preferences"],
        "created_at": "2024-07-20T01:10:12.123456", "updated_at": "2024-07-21T01:10:12-07:00",
        "expiration_date": "2030-01-01"}]}), "mem0")
    assert row.body["content"] == "Prefers window seats" and row.body["agent_id"] == "fallback"
    assert row.body["tags"] == ["travel", "preferences"] and row.body["source"] == "mem0"
    assert row.body["metadata"] == {"import_source_id": "6d1b7b1e-8f0a-4a5b-9a54-0d2b3c4d5e6f"}
    assert row.created_at.isoformat() == "2024-07-20T01:10:12.123456+00:00"
    assert row.updated_at.isoformat() == "2024-07-21T08:10:12+00:00"
    assert row.body["expires_at"].startswith("2030-01-01T00:00:00")


def test_jsonl_keeps_state_and_refuses_what_it_cannot_keep():
    line = {"id": "mem_01m83nwv5bs148ykh5x7ng0ajv", "agent_id": "a", "type": "semantic", "content": "x",
            "status": "merged", "merged_into": "mem_01m83nwv5bs148ykh5x7ng0ajw", "ended_at": "2026-01-02T00:00:00Z",
            "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-02T00:00:00Z"}
    header = json.dumps({"format": f.EXPORT_FORMAT}) + "\n"
    (row,) = records(header + json.dumps(line) + "\n", "jsonl")
    assert row.line == 2 and row.status == "merged" and row.merged_into.endswith("ajw")
    source = f.Source(tenant_id="t", fmt="jsonl", digest="d")
    for bad, reason in [({**line, "status": "rejected"}, "cannot be imported"), ({**line, "colour": 1}, "unknown field"),
                        ({**line, "id": "uuid-1"}, "Memwarden id"), ({**line, "created_at": "yesterday"}, "timestamp"),
                        ({**line, "created_at": True}, "timestamp"), ([1], "JSON object")]:
        with pytest.raises(ValueError, match=reason):
            f.to_record(source, 1, bad)
    rows = list(f.raw_records('{"ok": 1}\n{broken\n', "jsonl"))
    assert rows[1][0] == 2 and isinstance(rows[1][1], f.FileError)


@pytest.mark.parametrize("created_at", ["0001-01-01T00:00:00", "1969-12-31T23:59:59", "9999-12-31T23:59:59"])
def test_mem0_timestamps_without_an_offset_keep_the_range_of_every_other_timestamp(created_at):
    with pytest.raises(ValueError, match="created_at is not a timestamp"):
        records(json.dumps({"results": [{"id": "m1", "memory": "Likes tea", "created_at": created_at}]}), "mem0")


def test_a_jsonl_line_nested_too_deeply_is_a_bad_line_not_a_crash():
    problems = [raw for _, raw in f.raw_records('{"content": "fine"}\n' + "[" * 5000 + "\n", "jsonl")]
    assert isinstance(problems[1], f.FileError) and "nested too deeply" in str(problems[1])
