"""Tampering with the audit log for real, caught by the real `memwarden audit verify` (contract §6).

Each case gets its own committed tenant chain, is tampered with in PostgreSQL as the owner (the
append-only triggers are ENABLE ALWAYS, so `session_replication_role` does not get past them:
the tamperer disables them inside its own transaction), or in an exported file, and then the
CLI runs as a subprocess with `--json`: exit 1 and the first bad sequence number and reason.

Every chain is: seq 1 `tenant.created`, seq 2..12 `test.event` (data `{"n": seq}`), signed
checkpoints at sizes 4 and 8, seq 9..12 not yet covered (a live log's tail).
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Iterator

import httpx
import psycopg
import pytest
from sqlalchemy import create_engine, select, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import DBAPIError

from app.core import auditchain as chain
from app.core.access import Principal
from app.core.timefmt import format_ts
from app.db.models import AuditCheckpoint, AuditEntry, Memory
from app.services.audit.audit import actor_label, chain_for
from app.services.tenancy.tenants import create_tenant
from tests.harness import PROJECT_ROOT, server_env, unique

ACTOR = {"kind": "test", "id": "tamper-suite"}
N = 12
CHECKPOINTS = (4, 8)


# --- fixtures and helpers ------------------------------------------------------------------------

@dataclass(frozen=True)
class Chain:
    tenant_id: str
    name: str

    @property
    def chain_id(self) -> str:
        return chain_for(self.tenant_id)


@pytest.fixture(scope="module")
def owner(settings) -> Iterator[Engine]:
    """The owner (superuser) of the schema: the only one who can get past the triggers."""
    engine = create_engine(settings.migration_database_url)
    yield engine
    engine.dispose()


def _event(ctx, tenant_id: str, n: int) -> None:
    with ctx.db.sessions.begin() as session:
        ctx.audit.append(session, tenant_id=tenant_id, event_type="test.event", actor=ACTOR,
                         subject={"type": "memory", "id": f"mem_{n:04d}"}, data={"n": n})


def _checkpoint(ctx, chain_id: str) -> str:
    with ctx.db.sessions.begin() as session:
        return ctx.audit.checkpoint(session, chain_id).note


@pytest.fixture
def make_chain(committed_ctx):
    def make(prefix: str = "tamper") -> Chain:
        tenant = create_tenant(committed_ctx, name=unique(prefix), actor=ACTOR)
        for n in range(2, N + 1):
            _event(committed_ctx, tenant.id, n)
            if n in CHECKPOINTS:
                _checkpoint(committed_ctx, chain_for(tenant.id))
        return Chain(tenant.id, tenant.name)

    return make


@pytest.fixture
def victim(make_chain) -> Chain:
    return make_chain()


def cli(settings, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", "audit", *args], cwd=PROJECT_ROOT,
                          env=server_env(settings), capture_output=True, text=True, timeout=180)


def verify(settings, *args: str) -> tuple[int, dict[str, Any] | None]:
    """`memwarden audit verify ARGS --json`: (exit code, parsed report or None)."""
    done = cli(settings, "verify", *args, "--json")
    lines = done.stdout.strip().splitlines()
    payload = json.loads(lines[-1]) if lines else None
    assert done.returncode in (0, 1, 2), done.stderr[-2000:]
    return done.returncode, payload


def verify_db(settings, victim: Chain, *extra: str) -> tuple[int, dict[str, Any]]:
    code, payload = verify(settings, "--tenant", victim.name, *extra)
    assert payload is not None
    return code, payload


def assert_tampered(code: int, report: dict[str, Any], first_bad: int, reason: str) -> None:
    assert (code, report["status"], report["first_bad_seq"], report["reason"]) == (1, "tampered", first_bad, reason), \
        report


@contextmanager
def tampering(owner: Engine) -> Iterator[Connection]:
    """One owner transaction with the append-only triggers disabled; they are re-enabled before it
    commits, so no other session ever runs without them."""
    triggers = [f"{t}_{k}" for t in ("audit_entries", "audit_checkpoints") for k in ("no_update_delete", "no_truncate")]
    with owner.begin() as conn:
        for name in triggers:
            conn.execute(text(f"ALTER TABLE {name.rsplit('_no_', 1)[0]} DISABLE TRIGGER {name}"))
        yield conn
        for name in triggers:
            conn.execute(text(f"ALTER TABLE {name.rsplit('_no_', 1)[0]} ENABLE ALWAYS TRIGGER {name}"))


def row(conn: Connection, chain_id: str, seq: int):
    return conn.execute(select(AuditEntry.__table__).where(AuditEntry.chain_id == chain_id,
                                                           AuditEntry.seq == seq)).one()


def set_row(conn: Connection, chain_id: str, at_seq: int, **values: Any) -> None:
    sets = ", ".join(f"{k} = :{k}" for k in values)
    done = conn.execute(text(f"UPDATE audit_entries SET {sets} WHERE chain_id = :at_chain AND seq = :at_seq"),
                        {**values, "at_chain": chain_id, "at_seq": at_seq})
    assert done.rowcount == 1


def move_seq(conn: Connection, chain_id: str, old: int, new: int) -> None:
    set_row(conn, chain_id, old, seq=new)


def edited(entry: bytes, n: int) -> bytes:
    """The entry with `data.n` changed: still canonical JSON, still the same length."""
    needle = f'"data":{{"n":{n}}}'.encode()
    assert needle in entry
    return entry.replace(needle, f'"data":{{"n":{n + 1}}}'.encode())


def rehash_from(conn: Connection, chain_id: str, seq: int) -> None:
    """Recompute leaf and chain hashes from `seq` on, consistently, as a careful forger would."""
    prev = row(conn, chain_id, seq - 1).chain_hash if seq > 1 else chain.GENESIS
    for r in conn.execute(select(AuditEntry.seq, AuditEntry.entry).where(
            AuditEntry.chain_id == chain_id, AuditEntry.seq >= seq).order_by(AuditEntry.seq)).all():
        leaf = chain.leaf_hash(r.entry)
        prev = chain.chain_hash(prev, leaf)
        set_row(conn, chain_id, r.seq, leaf_hash=leaf, chain_hash=prev)


# --- the baseline -------------------------------------------------------------------------------------

def test_an_intact_chain_verifies_with_exit_0(settings, victim):
    code, report = verify_db(settings, victim)
    assert code == 0, report
    assert report["status"] == "intact" and report["entries"] == N and report["first_bad_seq"] is None
    assert report["checkpoints_verified"] == len(CHECKPOINTS) and report["verified_through"] == CHECKPOINTS[-1]
    assert report["chain_id"] == victim.chain_id and report["signatures_checked"] is True


# --- the triggers: speed bumps for the app role and for the owner --------------------------------

def _refused(engine: Engine, sql: str, setup: str | None = None) -> str:
    with engine.connect() as conn:
        with pytest.raises(DBAPIError) as caught:
            if setup:
                conn.execute(text(setup))
            conn.execute(text(sql))
        conn.rollback()
    assert isinstance(caught.value.orig, psycopg.errors.InsufficientPrivilege), caught.value
    return str(caught.value.orig)


STATEMENTS = ["UPDATE {t} SET chain_id = chain_id WHERE chain_id = '{c}'", "DELETE FROM {t} WHERE chain_id = '{c}'",
              "TRUNCATE {t}"]


@pytest.mark.parametrize("table", ["audit_entries", "audit_checkpoints"])
def test_the_app_role_may_not_update_delete_or_truncate_the_log(settings, committed_ctx, victim, table):
    if make_url(settings.database_url).username == make_url(settings.migration_database_url).username:
        pytest.skip("the app and the owner are one role in this database")
    for sql in STATEMENTS:
        message = _refused(committed_ctx.db.engine, sql.format(t=table, c=victim.chain_id))
        assert "permission denied" in message, message


@pytest.mark.parametrize("table", ["audit_entries", "audit_checkpoints"])
@pytest.mark.parametrize("replica", [False, True], ids=["origin", "session_replication_role=replica"])
def test_the_owner_is_refused_by_the_triggers_even_as_a_replica(settings, owner, victim, table, replica):
    setup = "SET session_replication_role = replica" if replica else None
    for sql in STATEMENTS:
        message = _refused(owner, sql.format(t=table, c=victim.chain_id), setup)
        assert "audit log is append-only" in message, message
    code, report = verify_db(settings, victim)
    assert code == 0, report


# --- tampering in the database ---------------------------------------------------------------------------

def test_editing_an_entrys_bytes_is_caught_at_that_seq(settings, owner, victim):
    with tampering(owner) as conn:
        set_row(conn, victim.chain_id, 6, entry=edited(row(conn, victim.chain_id, 6).entry, 6))
    code, report = verify_db(settings, victim)
    assert_tampered(code, report, 6, "leaf_hash_mismatch")
    human = cli(settings, "verify", "--tenant", victim.name)
    assert human.returncode == 1 and "first bad seq 6" in human.stdout and "leaf_hash_mismatch" in human.stdout


def test_editing_an_entry_and_its_leaf_hash_breaks_the_link_at_that_seq(settings, owner, victim):
    with tampering(owner) as conn:
        entry = edited(row(conn, victim.chain_id, 6).entry, 6)
        set_row(conn, victim.chain_id, 6, entry=entry, leaf_hash=chain.leaf_hash(entry))
    assert_tampered(*verify_db(settings, victim), 6, "chain_hash_mismatch")


@pytest.mark.parametrize("column, value", [
    ("event_type", "'memory.forgotten'"),
    ("subject_id", "'mem_somebody_else'"),
    ("actor", "'api_key:key_innocent'"),
    ("ts", "ts - interval '1 day'"),
    ("tenant_id", "'ten_elsewhere'"),
])
def test_editing_only_a_query_column_is_caught(settings, owner, victim, column, value):
    with tampering(owner) as conn:
        conn.execute(text(f"UPDATE audit_entries SET {column} = {value} WHERE chain_id = :c AND seq = 5"),
                     {"c": victim.chain_id})
    assert_tampered(*verify_db(settings, victim), 5, "column_mismatch")


def test_deleting_a_row_is_caught_at_its_seq(settings, owner, victim):
    with tampering(owner) as conn:
        conn.execute(text("DELETE FROM audit_entries WHERE chain_id = :c AND seq = 6"), {"c": victim.chain_id})
    assert_tampered(*verify_db(settings, victim), 6, "seq_mismatch")


def test_swapping_two_rows_is_caught_at_the_first(settings, owner, victim):
    with tampering(owner) as conn:
        move_seq(conn, victim.chain_id, 5, 1_000_005)
        move_seq(conn, victim.chain_id, 6, 5)
        move_seq(conn, victim.chain_id, 1_000_005, 6)
    assert_tampered(*verify_db(settings, victim), 5, "seq_mismatch")


def test_a_forged_row_inserted_mid_chain_is_caught_at_its_seq(settings, owner, victim):
    """A well-formed entry, correctly linked to seq 6, slid in as seq 7; later rows renumbered."""
    with tampering(owner) as conn:
        for seq in range(N, 6, -1):
            move_seq(conn, victim.chain_id, seq, seq + 1)
        ts = row(conn, victim.chain_id, 6).ts + timedelta(milliseconds=1)
        forged = chain.build_entry(origin=f"{settings.audit_origin}/{victim.chain_id}", chain_id=victim.chain_id,
                                   seq=7, ts=format_ts(ts), event_type="memory.forgotten", actor=ACTOR,
                                   subject={"type": "memory", "id": "mem_0003"}, data={"n": 3})
        leaf = chain.leaf_hash(forged)
        conn.execute(AuditEntry.__table__.insert().values(
            chain_id=victim.chain_id, seq=7, entry=forged, leaf_hash=leaf,
            chain_hash=chain.chain_hash(row(conn, victim.chain_id, 6).chain_hash, leaf), tenant_id=victim.tenant_id,
            event_type="memory.forgotten", ts=ts, actor=actor_label(ACTOR), subject_type="memory",
            subject_id="mem_0003"))
    assert_tampered(*verify_db(settings, victim), 7, "seq_mismatch")


def test_a_consistently_recomputed_chain_is_caught_by_the_signed_checkpoint(settings, owner, victim):
    """Every hash from the edit on is recomputed: the rows agree with each other, but not with what
    was signed at size 8. The checkpoint at 4 still matches, so the change lies in 5..8."""
    with tampering(owner) as conn:
        set_row(conn, victim.chain_id, 6, entry=edited(row(conn, victim.chain_id, 6).entry, 6))
        rehash_from(conn, victim.chain_id, 6)
    code, report = verify_db(settings, victim)
    assert_tampered(code, report, 8, "checkpoint_root_mismatch")
    assert report["verified_through"] == 4 and "seq 5..8" in report["detail"]


def test_truncating_the_tail_behind_the_last_checkpoint_is_caught(settings, owner, victim):
    with tampering(owner) as conn:
        conn.execute(text("DELETE FROM audit_entries WHERE chain_id = :c AND seq >= 7"), {"c": victim.chain_id})
    assert_tampered(*verify_db(settings, victim), 7, "truncated")


def test_truncating_rows_and_their_checkpoints_is_caught_by_a_checkpoint_the_auditor_holds(
        settings, owner, victim, tmp_path):
    """Deleting the signed checkpoint too leaves a shorter chain that is consistent with itself;
    only a checkpoint kept outside the database (`--checkpoint`) shows what was signed."""
    with owner.connect() as conn:
        held = conn.scalar(select(AuditCheckpoint.note).where(AuditCheckpoint.chain_id == victim.chain_id,
                                                              AuditCheckpoint.size == 8))
    (tmp_path / "held.note").write_text(held, encoding="utf-8")
    with tampering(owner) as conn:
        conn.execute(text("DELETE FROM audit_entries WHERE chain_id = :c AND seq >= 7"), {"c": victim.chain_id})
        conn.execute(text("DELETE FROM audit_checkpoints WHERE chain_id = :c AND size >= 7"), {"c": victim.chain_id})
    code, report = verify_db(settings, victim)
    assert code == 0 and report["entries"] == 6, report  # the database alone cannot tell
    assert_tampered(*verify_db(settings, victim, "--checkpoint", str(tmp_path / "held.note")), 7, "truncated")


def test_an_entry_spliced_in_from_another_tenants_chain_is_caught(settings, owner, make_chain):
    victim, other = make_chain(), make_chain("other")
    with tampering(owner) as conn:
        theirs = row(conn, other.chain_id, 6)
        set_row(conn, victim.chain_id, 6, entry=theirs.entry, leaf_hash=theirs.leaf_hash,
                chain_hash=theirs.chain_hash)
    assert_tampered(*verify_db(settings, victim), 6, "wrong_chain")
    assert verify_db(settings, other)[0] == 0


# --- a GDPR hard delete leaves the chain intact -----------------------------------------------------------

def test_a_hard_delete_of_a_memory_leaves_the_chain_verifying(settings, committed_ctx, tmp_path):
    from app.services.memory import memories, remembering
    from app.services.tenancy.apikeys import create_key
    from app.services.tenancy.tenant_config import set_policy

    tenant = create_tenant(committed_ctx, name=unique("gdpr"), actor=ACTOR)
    set_policy(committed_ctx, tenant_id=tenant.id, doc={"rules": []}, actor=ACTOR)
    key = create_key(committed_ctx, tenant_id=tenant.id, scopes="memory:read,memory:write", actor=ACTOR).key
    agent = Principal(tenant.id, key.id, frozenset(key.scopes), tuple(key.agents))
    secret = f"Dana's home address is {unique('street')} 12."
    written = remembering.remember(committed_ctx, agent, {"agent_id": "gdpr-agent", "type": "semantic",
                                                       "content": secret})
    assert written.status == 201
    memory_id = written.body["id"]
    gone = memories.forget(committed_ctx, agent, {"agent_id": "gdpr-agent", "ids": [memory_id],
                                                  "hard_delete": True})
    assert gone.status == 200 and gone.body["forgotten"] == [memory_id]

    with committed_ctx.db.sessions() as session:
        tombstone = session.get(Memory, {"id": memory_id, "tenant_id": tenant.id})
        assert tombstone.hard_deleted and tombstone.content is None and tombstone.digest_key is None
        entries = session.execute(select(AuditEntry.event_type, AuditEntry.entry).where(
            AuditEntry.chain_id == chain_for(tenant.id)).order_by(AuditEntry.seq)).all()
    assert [e.event_type for e in entries][-2:] == ["memory.remembered", "memory.hard_deleted"]
    assert not any(secret.encode() in e.entry for e in entries)  # only digests ever entered the log

    code, report = verify(settings, "--tenant", tenant.name)
    assert code == 0 and report["entries"] == len(entries), report
    out = tmp_path / "gdpr.jsonl"
    assert cli(settings, "export", "--tenant", tenant.name, "--out", str(out)).returncode == 0
    code, report = verify(settings, str(out), "--public-key", committed_ctx.audit.vkey)
    assert code == 0 and report["entries"] == len(entries) and report["key_pinned"], report


# --- tampering with an export file ----------------------------------------------------------------------------

def export_chain(settings, victim: Chain, path: Path) -> list[dict[str, Any]]:
    done = cli(settings, "export", "--tenant", victim.name, "--out", str(path))
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def write_lines(path: Path, objs: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(o, separators=(",", ":")) + "\n" for o in objs), encoding="utf-8")
    return path


@pytest.fixture
def pinned(committed_ctx, tmp_path) -> str:
    """The verifier key as an auditor keeps it: a file, fetched once (`memwarden audit public-key`)."""
    path = tmp_path / "memwarden.vkey"
    path.write_text(committed_ctx.audit.vkey + "\n", encoding="utf-8")
    return str(path)


def test_an_intact_export_verifies_with_the_pinned_key(settings, victim, pinned, tmp_path):
    lines = export_chain(settings, victim, tmp_path / "audit.jsonl")
    sizes = [chain.parse_checkpoint(o["note"]).size for o in lines if o["kind"] == "checkpoint"]
    assert sizes == [*CHECKPOINTS, N]  # the export signs a fresh checkpoint of the tail
    code, report = verify(settings, str(tmp_path / "audit.jsonl"), "--public-key", pinned)
    assert code == 0 and report["entries"] == N and report["checkpoints_verified"] == 3, report


def test_an_altered_checkpoint_text_is_caught(settings, victim, pinned, tmp_path):
    lines = export_chain(settings, victim, tmp_path / "audit.jsonl")
    for obj in lines:
        if obj["kind"] == "checkpoint" and chain.parse_checkpoint(obj["note"]).size == 8:
            body = obj["note"].split("\n")
            body[2] = base64.b64encode(bytes(32)).decode()  # the signed Merkle root
            obj["note"] = "\n".join(body)
    code, report = verify(settings, str(write_lines(tmp_path / "altered.jsonl", lines)), "--public-key", pinned)
    assert_tampered(code, report, 8, "checkpoint_bad_signature")


def test_a_forgery_signed_with_an_unknown_key_is_caught_only_with_the_pinned_key(settings, victim, pinned, tmp_path):
    """The forger edits seq 6, recomputes every later hash, re-signs every checkpoint with a key of
    their own under the same name, and puts that key in the manifest."""
    lines = export_chain(settings, victim, tmp_path / "audit.jsonl")
    forger = chain.Signer.from_pem(chain.generate_private_key_pem(), name=settings.audit_origin)
    frontier, head = chain.MerkleFrontier(), chain.GENESIS
    for obj in lines:
        if obj["kind"] == "manifest":
            obj["vkey"] = forger.vkey
        elif obj["kind"] == "entry":
            entry = base64.b64decode(obj["entry"])
            if obj["seq"] == 6:
                entry = edited(entry, 6)
                obj["entry"] = base64.b64encode(entry).decode()
            leaf = chain.leaf_hash(entry)
            head = chain.chain_hash(head, leaf)
            frontier.append(leaf)
            obj["leaf_hash"], obj["chain_hash"] = leaf.hex(), head.hex()
        else:
            cp = chain.parse_checkpoint(obj["note"])
            obj["note"] = forger.sign_checkpoint(cp.origin, cp.size, frontier.root(), head, ts=cp.ts)
    forged = str(write_lines(tmp_path / "forged.jsonl", lines))
    code, report = verify(settings, forged)
    assert code == 0 and report["key_pinned"] is False  # self-consistent: the file vouches for itself
    assert_tampered(*verify(settings, forged, "--public-key", pinned), 4, "checkpoint_unknown_key")


def test_an_older_export_replayed_against_a_newer_checkpoint_is_caught(settings, committed_ctx, victim, pinned,
                                                                       tmp_path):
    old = tmp_path / "old.jsonl"
    export_chain(settings, victim, old)
    for n in range(N + 1, N + 4):
        _event(committed_ctx, victim.tenant_id, n)
    newer = tmp_path / "newer.note"
    newer.write_text(_checkpoint(committed_ctx, victim.chain_id), encoding="utf-8")
    assert chain.parse_checkpoint(newer.read_text(encoding="utf-8")).size == N + 3

    assert_tampered(*verify(settings, str(old), "--public-key", pinned, "--checkpoint", str(newer)),
                    N + 1, "truncated")
    with committed_ctx.db.sessions() as session:  # a checkpoint the old export does cover is fine
        older = session.scalar(select(AuditCheckpoint.note).where(AuditCheckpoint.chain_id == victim.chain_id,
                                                                  AuditCheckpoint.size == 8))
    (tmp_path / "older.note").write_text(older, encoding="utf-8")
    code, report = verify(settings, str(old), "--public-key", pinned, "--checkpoint", str(tmp_path / "older.note"))
    assert code == 0, report


@pytest.mark.parametrize("content", [None, "", "this is not an export\n", '{"kind":"entry"}\n', "\xff\xfe"],
                         ids=["missing", "empty", "text", "no-manifest", "not-utf8"])
def test_an_unusable_file_exits_2(settings, pinned, tmp_path, content):
    path = tmp_path / "input.jsonl"
    if content is not None:
        path.write_bytes(content.encode("latin-1"))
    code, report = verify(settings, str(path), "--public-key", pinned)
    assert code == 2
    assert report is None or (report["status"] == "unusable" and report["first_bad_seq"] is None)


def test_an_unusable_key_exits_2(settings, victim, tmp_path):
    export_chain(settings, victim, tmp_path / "audit.jsonl")
    code, report = verify(settings, str(tmp_path / "audit.jsonl"), "--public-key", "not-a-key")
    assert code == 2 and report["status"] == "unusable", report


# --- the witness: checkpoints kept outside the database -------------------------------------------------

@pytest.fixture
def witness_file(tmp_path) -> Path:
    """The witness file: in its own directory, outside the data dir."""
    return tmp_path / "witness" / "checkpoints.jsonl"


@pytest.fixture
def witnessed_ctx(settings, committed_ctx, witness_file):
    """The services of a deployment that witnesses every checkpoint (same database and key)."""
    from app.services.runtime.context import AppContext

    return AppContext(settings.with_changes(audit_witness_file=witness_file), committed_ctx.db)


@pytest.fixture
def witnessed_victim(witnessed_ctx, witness_file) -> Chain:
    """The usual chain, its checkpoints (4, 8) witnessed; then an export signs and witnesses 12."""
    tenant = create_tenant(witnessed_ctx, name=unique("witnessed"), actor=ACTOR)
    for n in range(2, N + 1):
        _event(witnessed_ctx, tenant.id, n)
        if n in CHECKPOINTS:
            _checkpoint(witnessed_ctx, chain_for(tenant.id))
    for _ in witnessed_ctx.audit.export(witnessed_ctx.db.sessions, chain_for(tenant.id)):
        pass
    origin = witnessed_ctx.audit.checkpoint_origin(chain_for(tenant.id))
    records = [json.loads(line) for line in witness_file.read_text(encoding="utf-8").splitlines()]
    assert [r["size"] for r in records if r["origin"] == origin] == [*CHECKPOINTS, N]
    return Chain(tenant.id, tenant.name)


def refused_checkpoint(ctx, victim: Chain):
    from app.errors import AuditChainBroken

    with pytest.raises(AuditChainBroken) as caught:
        _checkpoint(ctx, victim.chain_id)
    assert caught.value.status == 409 and caught.value.code == "audit_chain_broken"
    return caught.value.details


def test_a_rewrite_behind_a_deleted_checkpoint_is_refused_by_the_signer_and_caught_by_the_witness(
        settings, owner, committed_ctx, witnessed_ctx, witnessed_victim, witness_file):
    """The owner edits seq 10, re-hashes everything after it and deletes the checkpoint rows that
    covered it (12): the database is consistent with itself again, only the witness knows better."""
    victim = witnessed_victim
    with tampering(owner) as conn:
        conn.execute(text("DELETE FROM audit_checkpoints WHERE chain_id = :c AND size > 8"), {"c": victim.chain_id})
        set_row(conn, victim.chain_id, 10, entry=edited(row(conn, victim.chain_id, 10).entry, 10))
        rehash_from(conn, victim.chain_id, 10)
    code, report = verify_db(settings, victim)
    assert code == 0, report  # the database alone cannot tell
    details = refused_checkpoint(witnessed_ctx, victim)  # 8 still extends; the witnessed 12 does not
    assert (details["first_bad_seq"], details["reason"]) == (N, "not_an_extension"), details
    code, report = verify_db(settings, victim, "--witness", str(witness_file))
    assert_tampered(code, report, N, "checkpoint_root_mismatch")
    assert report["verified_through"] == 8 and "seq 9..12" in report["detail"]
    # An export from a signer that does not read the witness still verifies alone, not against it.
    out = Path(witness_file).parent.parent / "rewritten.jsonl"
    out.write_text("".join(line + "\n" for line in committed_ctx.audit.export(committed_ctx.db.sessions,
                                                                               victim.chain_id)), encoding="utf-8")
    assert verify(settings, str(out), "--public-key", committed_ctx.audit.vkey)[0] == 0
    assert_tampered(*verify(settings, str(out), "--public-key", committed_ctx.audit.vkey, "--witness",
                            str(witness_file)), N, "checkpoint_root_mismatch")


def test_deleting_the_last_rows_and_their_checkpoints_is_caught_by_the_witness(
        settings, owner, committed_ctx, witnessed_ctx, witnessed_victim, witness_file, tmp_path):
    victim = witnessed_victim
    with tampering(owner) as conn:
        conn.execute(text("DELETE FROM audit_entries WHERE chain_id = :c AND seq >= 10"), {"c": victim.chain_id})
        conn.execute(text("DELETE FROM audit_checkpoints WHERE chain_id = :c AND size >= 10"), {"c": victim.chain_id})
    code, report = verify_db(settings, victim)
    assert code == 0 and report["entries"] == 9, report
    assert_tampered(*verify_db(settings, victim, "--witness", str(witness_file)), 10, "truncated")
    details = refused_checkpoint(witnessed_ctx, victim)
    assert (details["first_bad_seq"], details["reason"]) == (10, "truncated"), details
    out = tmp_path / "short.jsonl"
    out.write_text("".join(line + "\n" for line in committed_ctx.audit.export(committed_ctx.db.sessions,
                                                                               victim.chain_id)), encoding="utf-8")
    assert_tampered(*verify(settings, str(out), "--public-key", committed_ctx.audit.vkey, "--witness",
                            str(witness_file)), 10, "truncated")
    human = cli(settings, "verify", str(out), "--witness", str(witness_file))
    assert human.returncode == 1 and "first bad seq 10" in human.stdout and "truncated" in human.stdout


def test_the_residual_window_rows_after_the_last_witnessed_checkpoint(settings, owner, witnessed_ctx,
                                                                      witnessed_victim, witness_file):
    """What the README admits: rows appended after the last witnessed checkpoint can still be
    rewritten, consistently, by the database owner, until the next checkpoint is witnessed."""
    victim = witnessed_victim
    for n in range(N + 1, N + 4):
        _event(witnessed_ctx, victim.tenant_id, n)
    with tampering(owner) as conn:
        set_row(conn, victim.chain_id, N + 2, entry=edited(row(conn, victim.chain_id, N + 2).entry, N + 2))
        rehash_from(conn, victim.chain_id, N + 2)
    code, report = verify_db(settings, victim, "--witness", str(witness_file))
    assert code == 0 and report["entries"] == N + 3 and report["verified_through"] == N, report


def test_a_witness_without_this_chain_or_not_a_witness_exits_2(settings, victim, witnessed_victim, witness_file,
                                                                tmp_path):
    code, _ = verify(settings, "--tenant", victim.name, "--witness", str(witness_file))
    assert code == 2
    (tmp_path / "junk.jsonl").write_text("not a witness record\n", encoding="utf-8")
    assert verify(settings, "--tenant", witnessed_victim.name, "--witness", str(tmp_path / "junk.jsonl"))[0] == 2


# --- a forged row appended by the app role ------------------------------------------------------------------

def forge_next_row(engine: Engine, victim: Chain, settings, how: str) -> int:
    """INSERT the next row as the app role may: a well-formed entry whose stored hashes were not
    derived from it and the head (`bad_link`), or whose leaf hash is not its bytes' (`bad_leaf`)."""
    with engine.begin() as conn:
        head = conn.execute(select(AuditEntry.seq, AuditEntry.chain_hash, AuditEntry.ts).where(
            AuditEntry.chain_id == victim.chain_id).order_by(AuditEntry.seq.desc()).limit(1)).one()
        seq = head.seq + 1
        forged = chain.build_entry(origin=f"{settings.audit_origin}/{victim.chain_id}", chain_id=victim.chain_id,
                                   seq=seq, ts=format_ts(head.ts), event_type="memory.forgotten", actor=ACTOR,
                                   subject={"type": "memory", "id": "mem_0003"}, data={"n": 3})
        leaf = chain.leaf_hash(forged)
        link = chain.chain_hash(chain.GENESIS, leaf) if how == "bad_link" else chain.chain_hash(head.chain_hash, leaf)
        if how == "bad_leaf":
            leaf = chain.leaf_hash(forged + b" ")
        conn.execute(AuditEntry.__table__.insert().values(
            chain_id=victim.chain_id, seq=seq, entry=forged, leaf_hash=leaf, chain_hash=link,
            tenant_id=victim.tenant_id, event_type="memory.forgotten", ts=head.ts, actor=actor_label(ACTOR),
            subject_type="memory", subject_id="mem_0003"))
    return seq


def chain_size(ctx, chain_id: str) -> int:
    with ctx.db.sessions() as session:
        return len(session.scalars(select(AuditEntry.seq).where(AuditEntry.chain_id == chain_id)).all())


@pytest.mark.parametrize("how, reason", [("bad_link", "chain_hash_mismatch"), ("bad_leaf", "leaf_hash_mismatch")])
def test_an_append_refuses_to_extend_a_forged_head(settings, committed_ctx, victim, how, reason):
    from app.errors import AuditChainBroken

    forged = forge_next_row(committed_ctx.db.engine, victim, settings, how)
    with pytest.raises(AuditChainBroken) as caught:
        _event(committed_ctx, victim.tenant_id, 99)
    assert (caught.value.details["first_bad_seq"], caught.value.details["reason"]) == (forged, reason)
    assert chain_size(committed_ctx, victim.chain_id) == forged  # the refused append rolled back
    assert_tampered(*verify_db(settings, victim), forged, reason)


def test_an_api_write_on_a_forged_head_is_409_and_writes_nothing(settings, committed_ctx, live_server, victim):
    from app.services.tenancy.apikeys import create_key
    from app.services.tenancy.tenant_config import set_policy

    set_policy(committed_ctx, tenant_id=victim.tenant_id, doc={"rules": []}, actor=ACTOR)
    token = create_key(committed_ctx, tenant_id=victim.tenant_id, scopes="memory:read,memory:write",
                       actor=ACTOR).token
    forged = forge_next_row(committed_ctx.db.engine, victim, settings, "bad_link")
    response = httpx.post(f"{live_server}/v1/memories/remember", headers={"Authorization": f"Bearer {token}"},
                          json={"agent_id": "forgery-agent", "type": "semantic", "content": "written on a forgery"},
                          timeout=60)
    assert response.status_code == 409, response.text
    error = response.json()["error"]
    assert error["code"] == "audit_chain_broken" and error["details"]["first_bad_seq"] == forged
    with committed_ctx.db.sessions() as session:
        assert not session.scalars(select(Memory.id).where(Memory.tenant_id == victim.tenant_id)).all()
    assert chain_size(committed_ctx, victim.chain_id) == forged


# --- exporting a broken chain ------------------------------------------------------------------------------------

def test_the_http_export_of_a_broken_chain_is_409_before_any_body(settings, owner, committed_ctx, live_server, victim):
    from app.services.tenancy.apikeys import create_key

    token = create_key(committed_ctx, tenant_id=victim.tenant_id, scopes="audit:read", actor=ACTOR).token
    with tampering(owner) as conn:
        set_row(conn, victim.chain_id, 6, entry=edited(row(conn, victim.chain_id, 6).entry, 6))
    response = httpx.get(f"{live_server}/v1/audit/export", headers={"Authorization": f"Bearer {token}"}, timeout=60)
    assert response.status_code == 409 and response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == "audit_chain_broken", error
    assert (error["details"]["first_bad_seq"], error["details"]["reason"]) == (6, "leaf_hash_mismatch")


def test_the_cli_export_of_a_broken_chain_exits_1_with_the_first_bad_seq(settings, owner, victim, tmp_path):
    with tampering(owner) as conn:
        conn.execute(text("DELETE FROM audit_entries WHERE chain_id = :c AND seq = 6"), {"c": victim.chain_id})
    out = tmp_path / "broken.jsonl"
    done = cli(settings, "export", "--tenant", victim.name, "--out", str(out))
    assert done.returncode == 1, done.stderr[-2000:]
    assert "first bad seq 6" in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert not out.exists() and not out.with_name(out.name + ".part").exists()
