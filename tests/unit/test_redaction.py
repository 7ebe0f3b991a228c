"""SR-1 secret redaction."""

from __future__ import annotations

import pytest

from app.core.redaction import (
    LABELS,
    Finding,
    Redactor,
    RegisteredSecret,
    luhn_valid,
    marker,
)

KEY = b"tenant-key-0123456789abcdef012345"

AWS_ACCESS = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
GCP = "AIzaSyA1234567890abcdefghijklmnopqrstuv"
GITHUB = "ghp_" + "a1B2c3D4e5" * 4
SLACK = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
OPENAI = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
    "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PRIVATE_KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
    "-----END RSA PRIVATE KEY-----"
)
CARD = "4111 1111 1111 1111"  # Luhn-valid test Visa


def redact(text: str, redactor: Redactor | None = None) -> tuple[str, list[str]]:
    return (redactor or Redactor()).redact_text(text)


POSITIVE = [
    ("aws_access_key", f"key id {AWS_ACCESS} here", AWS_ACCESS),
    ("aws_access_key", "temp ASIAY34FZKBOKMUTVV7A ok", "ASIAY34FZKBOKMUTVV7A"),
    ("aws_secret_key", f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET),
    ("gcp_api_key", f"maps key={GCP}&x=1", GCP),
    ("github_token", f"push with {GITHUB}", GITHUB),
    ("github_token", "pat github_pat_11ABCDEFG0123456789_abcdefghijk", "github_pat_11ABCDEFG"),
    ("slack_token", f"bot {SLACK}", SLACK),
    ("stripe_key", f"charge with {STRIPE}", STRIPE),
    ("stripe_key", "test rk_test_51H8abcdefghijklmn ok", "rk_test_51H8abcdefghijklmn"),
    ("openai_key", f"use {OPENAI} for calls", OPENAI),
    ("openai_key", "old sk-abcdefghijklmnopqrstuvwxyz0123 key", "sk-abcdefghijklmnopqrstuvwxyz0123"),
    ("private_key", f"here:\n{PRIVATE_KEY}\nthanks", "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMx"),
    ("jwt", f"Authorization: Bearer {JWT}", JWT),
    ("card_number", f"card {CARD} exp 12/29", "4111 1111 1111 1111"),
    ("card_number", "pay 5500-0000-0000-0004 now", "5500-0000-0000-0004"),
    ("password_assignment", "db password=hunter2 ok", "hunter2"),
    ("password_assignment", '{"client_secret": "s3cr3t value"}', "s3cr3t value"),
    ("password_assignment", "GITHUB_TOKEN: abc123xyz", "abc123xyz"),
    ("password_assignment", "api_key='q1w2e3r4'", "q1w2e3r4"),
]

NEGATIVE = [
    ("aws_access_key", "AKIA is a prefix, AKIAIOSFODNN7 is too short"),
    ("aws_secret_key", f"a random string {AWS_SECRET} without context"),
    ("gcp_api_key", "AIza alone or AIzaShort"),
    ("github_token", "ghp_tooshort and github is great"),
    ("slack_token", "xoxb- is a prefix; xoxq-1234567890abc is not slack"),
    ("stripe_key", "pk_live_4eC39HqLyjWDarjtT1zdp7dc is publishable"),
    ("openai_key", "scikit uses sk-learn; task-management-system-design-doc"),
    ("private_key", "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkq\n-----END PUBLIC KEY-----"),
    ("jwt", "eyJ is base64 for {\" and a.b.c is not a token"),
    ("card_number", "order 4111 1111 1111 1112 is not a card"),
    ("card_number", "call 555-123-4567 or 4111111111"),
    ("password_assignment", "max_tokens: 256 and the password is strong"),
]


@pytest.mark.parametrize(("label", "text", "secret"), POSITIVE)
def test_detector_positive(label: str, text: str, secret: str) -> None:
    new, labels = redact(text)
    assert labels == [label]
    assert marker(label) in new
    assert secret not in new


@pytest.mark.parametrize(("label", "text"), NEGATIVE)
def test_detector_negative(label: str, text: str) -> None:
    new, labels = redact(text)
    assert labels == []
    assert new == text


def test_every_detector_has_a_positive_and_negative_case() -> None:
    covered = {label for label, *_ in POSITIVE} & {label for label, _ in NEGATIVE}
    assert covered == set(LABELS) - {"registered_secret"}


def test_luhn() -> None:
    assert luhn_valid("4111111111111111")
    assert not luhn_valid("4111111111111112")


def test_assignment_keeps_the_key_and_redacts_only_the_value() -> None:
    new, _ = redact('config: password = "hunter2", user = bob')
    assert new == 'config: password = "<REDACTED:password_assignment>", user = bob'


def test_overlap_gets_one_marker_with_the_specific_label() -> None:
    new, labels = redact(f"OPENAI_API_KEY={OPENAI}")
    assert new == "OPENAI_API_KEY=<REDACTED:openai_key>"
    assert labels == ["openai_key"]


def test_whole_private_key_block_is_one_marker() -> None:
    new, labels = redact(f"before\n{PRIVATE_KEY}\nafter")
    assert new == "before\n<REDACTED:private_key>\nafter"
    assert labels == ["private_key"]


def test_registered_secret_found_inside_a_sentence() -> None:
    stored = RegisteredSecret.from_plaintext("correct-horse-battery", KEY)
    redactor = Redactor([stored], hmac_key=KEY)
    new, labels = redactor.redact_text('The vault pass is "correct-horse-battery", keep it safe.')
    assert new == 'The vault pass is "<REDACTED:registered_secret>", keep it safe.'
    assert labels == ["registered_secret"]
    assert redactor.redact_text("correct-horse-battery-staple")[1] == []


def test_registered_secret_with_spaces_matches_as_whole_text() -> None:
    redactor = Redactor([RegisteredSecret.from_plaintext("open sesame now", KEY)], hmac_key=KEY)
    assert redactor.redact_text("  open sesame now\n") == (
        "  <REDACTED:registered_secret>\n",
        ["registered_secret"],
    )


def test_registered_secret_stores_no_plaintext() -> None:
    stored = RegisteredSecret.from_plaintext("correct-horse-battery", KEY)
    assert "correct-horse-battery" not in repr(stored)
    assert stored.length == len("correct-horse-battery")
    other_key = Redactor([stored], hmac_key=b"another-tenant-key-000000000000000")
    assert other_key.redact_text("correct-horse-battery")[1] == []


def test_registered_secrets_need_a_key() -> None:
    with pytest.raises(ValueError):
        Redactor([RegisteredSecret.from_plaintext("abcdef", KEY)])
    with pytest.raises(ValueError):
        RegisteredSecret.from_plaintext("ab", KEY)


SAMPLES = [
    f"creds {AWS_ACCESS} / aws_secret_access_key={AWS_SECRET} and {JWT}",
    f"password = {OPENAI} card {CARD}",
    f"tokenhunter2!x{AWS_ACCESS}",
    f"{PRIVATE_KEY}\npwd: <REDACTED:jwt> secret={GITHUB}",
    "nothing to see here",
]


@pytest.mark.parametrize("text", SAMPLES)
def test_redaction_is_idempotent(text: str) -> None:
    redactor = Redactor([RegisteredSecret.from_plaintext("tokenhunter2!x", KEY)], hmac_key=KEY)
    once, _ = redactor.redact_text(text)
    twice, labels = redactor.redact_text(once)
    assert twice == once
    assert labels == []


def test_markers_are_not_redetected() -> None:
    text = "token: <REDACTED:github_token> and password=<REDACTED:password_assignment>"
    assert redact(text) == (text, [])


def test_payload_paths_and_nested_metadata() -> None:
    result = Redactor().redact_payload(
        content=f"deploy with {GITHUB}",
        tags=["ops", f"key:{AWS_ACCESS}"],
        metadata={
            "count": 3,
            "source": {"url": "https://x.test/?token=abc123", "notes": [f"card {CARD}", 7]},
            "a/b": "password: pw",
            "untouched": None,
        },
    )
    assert result.content == "deploy with <REDACTED:github_token>"
    assert result.tags == ["ops", "key:<REDACTED:aws_access_key>"]
    assert result.metadata == {
        "count": 3,
        "source": {
            "url": "https://x.test/?token=<REDACTED:password_assignment>",
            "notes": ["card <REDACTED:card_number>", 7],
        },
        "a/b": "password: <REDACTED:password_assignment>",
        "untouched": None,
    }
    assert result.findings == [
        Finding("content", "github_token"),
        Finding("tags/1", "aws_access_key"),
        Finding("metadata/source/url", "password_assignment"),
        Finding("metadata/source/notes/0", "card_number"),
        Finding("metadata/a~1b", "password_assignment"),
    ]


def test_payload_inputs_are_not_mutated() -> None:
    metadata = {"inner": {"s": f"x {OPENAI}"}}
    tags = [OPENAI]
    Redactor().redact_payload(OPENAI, tags, metadata)
    assert metadata == {"inner": {"s": f"x {OPENAI}"}}
    assert tags == [OPENAI]


def test_findings_never_contain_secret_text() -> None:
    secrets = [AWS_ACCESS, AWS_SECRET, GITHUB, OPENAI, JWT, "hunter2", "correct-horse-battery"]
    redactor = Redactor([RegisteredSecret.from_plaintext("correct-horse-battery", KEY)], KEY)
    result = redactor.redact_payload(
        content=f"{AWS_ACCESS} {GITHUB} {OPENAI} {JWT} password=hunter2",
        tags=["correct-horse-battery"],
        metadata={"k": f"aws_secret_access_key: {AWS_SECRET}"},
    )
    dumped = repr(result.findings)
    assert len(result.findings) == 7
    for secret in secrets:
        assert secret not in dumped
        assert secret not in result.content + repr(result.tags) + repr(result.metadata)
