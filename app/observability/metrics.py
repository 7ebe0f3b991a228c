"""Every Prometheus metric Memwarden records, and the one-line hooks services call.

Labels are bounded by construction: route templates (never raw paths), status classes, fixed
outcome and flag names, reviewer roles. Never an agent, user, memory or key id, never content.
(`tenant` labels appear only on the scrape-time gauges of `app.observability.endpoint`, bounded by
the tenants an operator creates.)

Multiprocess: `memwarden serve --workers N` sets `PROMETHEUS_MULTIPROC_DIR` before the workers
start, so these metrics write to shared files that `/metrics` aggregates; a single process keeps
them in memory. Gauges therefore name their `multiprocess_mode`.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterable

from prometheus_client import Counter, Gauge, Histogram, multiprocess, values

from app.errors import Forbidden, PolicyDenied
from app.observability import tracing

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
DECISION_BUCKETS = (60, 300, 900, 3600, 4 * 3600, 12 * 3600, 86400, 3 * 86400, 7 * 86400)
POOL_WAIT_BUCKETS = (0.001, 0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0)

HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

HTTP_REQUESTS = Counter(
    "memwarden_http_requests", "HTTP requests answered, by route template, method and status class.",
    ["route", "method", "status"])
HTTP_DURATION = Histogram(
    "memwarden_http_request_duration_seconds", "Time to answer an HTTP request (to the response start).",
    ["route", "method"], buckets=LATENCY_BUCKETS)
REMEMBER = Counter(
    "memwarden_remember", "Remember requests by outcome: live (201), staged for review (202), denied by policy.",
    ["outcome"])
RECALL = Histogram(
    "memwarden_recall_duration_seconds", "Time to serve a recall.", buckets=LATENCY_BUCKETS)
RECALLS = Counter(
    "memwarden_recall", "Recall requests by outcome: served, or denied (the key may not read that agent).",
    ["outcome"])
SCREENING_FLAGS = Counter(
    "memwarden_screening_flags", "Write-screening risk flags raised, by flag family.", ["flag"])
REVIEW_DECISIONS = Counter(
    "memwarden_review_decisions",
    "Review decisions by who decided (`user`: a person signed in; `api_key`: a key with review:decide) and what.",
    ["reviewer", "decision"])
DECISION_SECONDS = Histogram(
    "memwarden_review_time_to_decision_seconds", "From a change's submission to its final decision.",
    ["decision"], buckets=DECISION_BUCKETS)
AUDIT_APPENDS = Counter("memwarden_audit_appends", "Audit entries written (at their transaction's commit).")
CHECKPOINTS_SIGNED = Counter("memwarden_audit_checkpoints_signed", "Audit checkpoints signed.")
WITNESS_FAILURES = Counter(
    "memwarden_audit_witness_failures", "Signed checkpoints the witness did not receive, by target.", ["target"])
EMBEDDING = Histogram(
    "memwarden_embedding_duration_seconds", "Time to embed one batch of texts, by embedder kind.",
    ["embedder"], buckets=LATENCY_BUCKETS)
DB_POOL_IN_USE = Gauge(
    "memwarden_db_pool_connections_in_use", "Database connections checked out of the pools, all workers.",
    multiprocess_mode="livesum")
DB_POOL_CAPACITY = Gauge(
    "memwarden_db_pool_capacity", "Connections the pools may hold (size plus overflow), all workers.",
    multiprocess_mode="livesum")
DB_POOL_WAIT = Histogram(
    "memwarden_db_pool_wait_seconds", "Time to obtain a database connection from the pool.",
    buckets=POOL_WAIT_BUCKETS)
DB_POOL_TIMEOUTS = Counter(
    "memwarden_db_pool_timeouts", "Waits for a database connection that hit the pool timeout (request shed).")

REPLICA_READS = Counter(
    "memwarden_replica_reads",
    "Reads that tolerate staleness (recall, list, get, export) while replicas are configured, by where they "
    "were served: a replica's name (`replica1`, ... in MEMWARDEN_READ_REPLICA_URLS order) or `primary`.",
    ["served_by"])
REPLICA_FALLBACKS = Counter(
    "memwarden_replica_fallbacks",
    "Routed reads the primary served instead of a replica, by reason: `down` (no replica reachable as a "
    "standby) or `lagging` (none had replayed the key's last write within MEMWARDEN_REPLICA_MAX_WAIT_MS).",
    ["reason"])
REPLICA_WAIT = Histogram(
    "memwarden_replica_wait_seconds",
    "Time a routed read waited for a replica to replay the calling key's last write (0 when it had).",
    buckets=POOL_WAIT_BUCKETS)

REVIEWER_KINDS = frozenset({"user", "api_key"})  # actor kinds (ids never: unbounded)


def is_multiprocess() -> bool:
    """Whether metric values live in `PROMETHEUS_MULTIPROC_DIR` files (fixed when prometheus_client loads)."""
    return values.ValueClass is not values.MutexValue


def status_class(status: int) -> str:
    return f"{status // 100}xx" if 100 <= status < 600 else "other"


def method_label(method: str) -> str:
    return method if method in HTTP_METHODS else "other"


# --- hooks for services ----------------------------------------------------------------------------

def counts_remember(service: Callable) -> Callable:
    """Decorate `remember`: count each call's outcome (live, staged, or denied by a policy rule)."""
    @functools.wraps(service)
    def counted(*args: Any, **kwargs: Any):
        try:
            outcome = service(*args, **kwargs)
        except PolicyDenied:
            REMEMBER.labels("denied").inc()
            raise
        REMEMBER.labels("staged" if outcome.status == 202 else "live").inc()
        return outcome

    return counted


def times_recall(service: Callable) -> Callable:
    """Decorate `recall`: count it (served or denied) and record how long a served one took."""
    @functools.wraps(service)
    def timed(*args: Any, **kwargs: Any):
        started = time.perf_counter()
        try:
            result = service(*args, **kwargs)
        except Forbidden:
            RECALLS.labels("denied").inc()
            raise
        RECALL.observe(time.perf_counter() - started)
        RECALLS.labels("served").inc()
        return result

    return timed


def screened(flag_names: Iterable[str]) -> None:
    """Count the risk flags one write raised (names are the screening detectors' fixed set)."""
    for name in flag_names:
        SCREENING_FLAGS.labels(name).inc()


def counts_decisions(service: Callable) -> Callable:
    """Decorate `review.decide`: count the decision by the actor's kind and observe its time from
    submission (the change JSON it returns carries both timestamps; an approval still waiting for
    a second reviewer counts as `approval_recorded`)."""

    @functools.wraps(service)
    def counted(*args: Any, **kwargs: Any):
        change = service(*args, **kwargs)
        kind = (kwargs.get("actor") or {}).get("kind")
        reviewer = kind if kind in REVIEWER_KINDS else "other"
        status = change.get("status")
        decision = status if status in ("approved", "rejected") else "approval_recorded"
        REVIEW_DECISIONS.labels(reviewer, decision).inc()
        if decision != "approval_recorded":
            seconds = _seconds_between(change.get("submitted_at"), change.get("decided_at"))
            if seconds is not None:
                DECISION_SECONDS.labels(decision).observe(seconds)
        return change

    return counted


def _seconds_between(start: str | None, end: str | None) -> float | None:
    if start is None or end is None:
        return None
    try:
        return max(0.0, (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds())
    except (TypeError, ValueError):
        return None


def time_embeddings(embedder: Any, kind: str) -> Any:
    """Make `embedder.embed` record its duration under `kind` (`local` or `openai`), and trace it
    while OpenTelemetry is on; returns it."""
    plain = embedder.embed
    histogram = EMBEDDING.labels(kind if kind in ("local", "openai") else "other")

    @functools.wraps(plain)
    def embed(texts):
        started = time.perf_counter()
        try:
            with tracing.span("memwarden.embed", **{"memwarden.embedder": kind, "memwarden.texts": len(texts)}):
                return plain(texts)
        finally:
            histogram.observe(time.perf_counter() - started)

    embedder.embed = embed
    return embedder


def forget_this_process() -> None:
    """On a worker's way out: drop its live gauges from the shared files (pool in use, capacity)."""
    if is_multiprocess():
        multiprocess.mark_process_dead(os.getpid())


def forget_dead_workers() -> None:
    """Drop the live gauges of workers that died without saying so (killed, then replaced by the
    server): their connections are not in use any more. Their counters stay: they still count."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not directory:
        return
    pids = {int(m.group(1)) for f in Path(directory).glob("gauge_live*_*.db")
            if (m := re.search(r"_(\d+)\.db$", f.name))}
    for pid in pids:
        if not _running(pid):
            multiprocess.mark_process_dead(pid, directory)


def prepare_multiprocess_dir(parent: os.PathLike[str] | str) -> str:
    """A fresh, empty directory for the workers' metric files under `parent` (`metrics-<pid>`),
    removing those of `serve` processes that no longer run; returns its path. The caller puts it
    in `PROMETHEUS_MULTIPROC_DIR` before any worker starts."""
    base = Path(parent)
    base.mkdir(parents=True, exist_ok=True)
    for old in base.glob("metrics-*"):
        pid = old.name.removeprefix("metrics-")
        if not pid.isdigit() or not _running(int(pid)) or int(pid) == os.getpid():
            shutil.rmtree(old, ignore_errors=True)
    path = base / f"metrics-{os.getpid()}"
    path.mkdir()
    return str(path)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
