"""Durations as operators write them and as the review-SLA messages print them."""

import pytest

from app.core.durations import format_duration, human_age, parse_duration
from app.core.slack import slack_text


@pytest.mark.parametrize("seconds", [0, 60, 90 * 60, 3600, 4 * 3600, 86400, 2 * 86400, 61])
def test_format_duration_reads_back(seconds):
    assert parse_duration(format_duration(seconds)) == seconds


def test_human_age_uses_the_largest_unit():
    assert [human_age(s) for s in (-5, 40, 720, 5 * 3600 + 59, 3 * 86400)] == ["0 s", "40 s", "12 min", "5 h", "3 d"]


def test_slack_text_has_ids_and_ages_and_links_only_with_a_public_url():
    data = {"changeId": "chg_1", "agentId": "bot", "operation": "remember", "riskLevel": "high",
            "waitedSeconds": 7300, "slaSeconds": 3600}
    plain = slack_text("review.sla_breached", data, None)
    assert "chg_1" in plain and "2 h" in plain and "1h SLA" in plain and "http" not in plain
    linked = slack_text("review.sla_breached", data, "https://mw.example/")
    assert "<https://mw.example/review/chg_1|chg_1>" in linked and linked.endswith("Queue: https://mw.example/review")
    assert slack_text("memory.written", {"memoryId": "mem_1", "tags": ["x"]}, None) == \
        "Memwarden event memory.written (memoryId=mem_1)"
