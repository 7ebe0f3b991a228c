"""`memwarden bench scale`: recall latency and ingest rate at N memories on a fresh embedded database.

1. A fresh data dir; this process opens the embedded PostgreSQL through the services (migrated as
   `memwarden serve` would), creates a tenant and a key.
2. Synthetic but realistic memories (templates below: facts about the people an agent serves, each
   with the question a later turn would ask) are generated with a seeded RNG: `--memories N`
   spread at random over `--agents A` agents (`--users-per-agent` people each), plus, unless
   `--big-agent 0`, one agent holding `--big-agent M` memories (default 50,000; `--big-agent
   10000,100000` makes one agent per size, `agent-big-<size>`), all interleaved
   as they would arrive. Each distinct text is embedded once, in batches with the bundled model
   (the templates repeat, as real facts do: ~30% of 1M rows are distinct texts; a repeated text
   gets the vector it would get on its own, up to float rounding), and the rows are bulk-loaded with
   binary COPY into `memories` with the columns `remember` writes (status 'live', live_from set,
   a random 32-byte digest_key, ids in the app's format). The table's secondary indexes are dropped
   for the load and rebuilt after it with their original definitions (HNSW included), then
   VACUUM ANALYZE. Embedding, COPY and index build are timed separately.
3. `memwarden serve` (subprocess) joins the same cluster; `--queries Q` recall requests go over HTTP
   (keep-alive client, after a warm-up) to random agents, and Q more to the big agent. Each asks the
   question of a random stored memory, so found@5 (that memory, or one with the identical text in
   the same scope, among the hits) is reported as a sanity check, not a quality metric; for each
   big agent, how much of an exact scan's top 20 recall's vector search returns (found@20) is
   measured in process. Scopes up to FULL_SCAN_MAX (2,000) rows are ranked exactly; larger ones
   are shortlisted over their binary codes held in the server process and re-ranked (filtered
   requests, which none of these are, take the code-scan or HNSW statements). The goal checked:
   p95 <= 30 ms with found@20 >= 0.95. One query
   of each kind is replayed in-process under EXPLAIN (ANALYZE, BUFFERS) and the plans are kept in
   the report, with how many of the recall counters' row updates were HOT; and for each big agent,
   every vector path's statement (full scan; binary codes with 100, 200, 400 re-ranked; HNSW with
   `ef_search` 100, 200, 400; the codes held in process, 200 re-ranked, their numpy time added to
   the statement's) on 30 of its questions, whichever path recall takes there: found@20
   against an exact scan, median execution time and buffers (`PATH_VARIANTS`).

A load takes most of the run (about half an hour at 1M on 2 cores). `--data-dir DIR` keeps it, with
the bench key and the rows' ids beside it; `--reuse DIR` then measures recall on that database
again (same `--memories/--agents/--big-agent/--seed`) without reloading, e.g. after a change to
the recall path.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.bench import common

# --- synthetic memories -------------------------------------------------------------------------

FIRST = ("Aaliyah Abdul Ada Adaeze Adrian Agnes Ahmed Aiko Alba Aleksander Alice Amara Amir Ana Anders Andrea Anika "
         "Anton Arjun Astrid Aurora Bao Beatriz Ben Bianca Boris Bruno Camila Carlos Carmen Chen Chidi Chloe Clara "
         "Dalia Daniel Dara Darius Diego Dmitri Dolores Eamon Eduardo Elif Elin Elsa Emeka Emil Emma Esther Ewa "
         "Farah Fatima Felipe Femi Finn Freya Gabriel Gaspard Gemma Giulia Goran Grace Hana Hannah Hassan Helga "
         "Hiroshi Ibrahim Ida Ifeoma Igor Ilse Imani Ines Ingrid Isaac Ivan Jakob Jamal Jana Javier Jin Joao Jonas "
         "Jorge Julia Kai Kamala Karim Kasia Kenji Kofi Lara Lars Layla Leila Leon Liam Lin Lola Lucas Luis Lukas "
         "Maja Malik Mara Marco Maria Mateo Matilda Mehmet Mei Mila Milan Minh Miriam Mohammed Nadia Naomi Nia "
         "Nikolai Nina Noah Nora Olga Omar Oskar Paola Pavel Pedro Petra Priya Rafael Rania Ravi Rhea Rosa Ruth "
         "Sakura Salma Samuel Sana Sara Sebastian Selin Sergio Shira Sofia Soren Stella Tariq Thabo Theo Tomas "
         "Uma Valentina Vera Viktor Wanjiru Wei Xavier Yara Yusuf Zainab Zara Zofia").split()
CITIES = ("Lisbon Porto Lagos Nairobi Accra Cairo Istanbul Athens Krakow Warsaw Prague Vienna Zurich Lyon Bordeaux "
          "Seville Valencia Bilbao Dublin Cork Glasgow Leeds Bristol Oslo Bergen Malmo Tallinn Riga Vilnius Helsinki "
          "Reykjavik Toronto Montreal Vancouver Seattle Denver Austin Chicago Boston Atlanta Miami Havana Bogota "
          "Lima Santiago Mendoza Montevideo Recife Osaka Kyoto Busan Taipei Hanoi Manila Jakarta Chennai Pune "
          "Dhaka Karachi Tbilisi Yerevan Almaty Perth Hobart Wellington Auckland").split()
ALLERGENS = ["peanuts", "shellfish", "penicillin", "cat dander", "pollen", "latex", "sesame", "gluten", "eggs",
             "bee stings", "soy", "dust mites", "ibuprofen", "kiwi fruit", "mustard"]
DRINKS = ["black coffee", "oat-milk lattes", "green tea", "rooibos", "sparkling water", "hot chocolate",
          "matcha", "espresso", "chai", "decaf americanos", "fresh orange juice", "mint tea"]
JOBS = ["paediatric nurse", "structural engineer", "primary-school teacher", "data analyst", "pastry chef",
        "airline pilot", "tax lawyer", "physiotherapist", "graphic designer", "electrician", "pharmacist",
        "marine biologist", "UX researcher", "bus driver", "veterinarian", "journalist", "dentist",
        "carpenter", "translator", "museum curator", "firefighter", "accountant", "game developer"]
COMPANIES = ["a regional hospital", "a logistics start-up", "the city council", "a family bakery", "a wind-farm "
             "operator", "a public library", "an insurance firm", "a bicycle maker", "a biotech lab", "a ferry "
             "company", "a university", "a fashion retailer", "a solar installer", "a football club"]
PETS = ["dog", "cat", "parrot", "rabbit", "tortoise", "ferret", "hamster", "horse", "goldfish", "gecko"]
PET_NAMES = ["Biscuit", "Pepper", "Mochi", "Luna", "Rex", "Olive", "Ziggy", "Nacho", "Pixel", "Juniper",
             "Waffles", "Comet", "Tofu", "Basil", "Shadow", "Clementine"]
HOBBIES = ["rock climbing", "pottery", "salsa dancing", "birdwatching", "chess", "sea kayaking", "baking bread",
           "knitting", "trail running", "woodworking", "photography", "gardening", "playing the cello",
           "learning Japanese", "surfing", "stand-up comedy", "astronomy", "scuba diving", "calligraphy"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
CARS = ["a 2012 Toyota Corolla", "an electric Renault Zoe", "a red Vespa scooter", "a Volvo estate",
        "a second-hand Ford Transit van", "a Tesla Model 3", "a cargo bike", "a Fiat Panda", "a Subaru Outback"]
CHANNELS = ["email", "text message", "WhatsApp", "a phone call after 6 pm", "the mobile app", "post"]
PLANS = ["basic", "family", "premium", "student", "business", "annual saver"]
PRODUCTS = ["the router", "the washing machine", "the mobile app", "the smart thermostat", "the invoice portal",
            "the headphones", "the coffee grinder", "the e-reader", "the baby monitor", "the treadmill"]
PROBLEMS = ["it keeps disconnecting", "it makes a grinding noise", "it crashes on start-up", "the battery drains "
            "overnight", "the display flickers", "it was delivered with a cracked case", "login fails with an error",
            "it charges twice a month"]
EMOTIONS = [("anxious", "flying in small planes"), ("calm", "swimming in the sea"), ("frustrated", "being put on hold"),
            ("overwhelmed", "planning large family events"), ("proud", "finishing a long race"),
            ("nostalgic", "hearing old Cuban records"), ("lonely", "working night shifts"),
            ("energised", "cycling to work in the rain"), ("nervous", "speaking at conferences"),
            ("happy", "cooking for friends on Sundays")]
EVENTS = [("moved house to {city}", "When did {name} move to {city}?"),
          ("ran a first half-marathon in {city}", "Has {name} done any races?"),
          ("got married in {city}", "When did {name} get married?"),
          ("started a new job in {city}", "When did {name} start the new job?"),
          ("broke a wrist skiing", "Has {name} had any injuries?"),
          ("adopted a {pet}", "When did {name} get a pet?"),
          ("graduated from a nursing course", "What has {name} studied?"),
          ("complained about a late delivery", "Has {name} made any complaints?")]
SPORT_EVENTS = ["a triathlon", "the Berlin marathon", "a 100 km cycling sportive", "a swim across the bay",
                "a powerlifting meet", "a mountain ultra-trail"]
SEASONS = ["spring", "summer", "autumn", "winter"]
PLACES = ["Patagonia", "the Norwegian fjords", "Zanzibar", "the Scottish Highlands", "Hokkaido", "the Atacama desert",
          "Sicily", "Iceland's ring road", "Vietnam's Ha Giang loop", "the Amalfi coast", "Banff", "Madeira"]
GENRES = ["science-fiction", "Nordic crime", "historical", "poetry", "graphic-novel", "self-help", "fantasy"]
RELATIONS = ["daughter", "son", "sister", "brother", "mother", "father", "partner", "grandson", "niece"]
REL_FACTS = [("starts university in the autumn", "What is happening with {name}'s {relation}?"),
             ("is recovering from knee surgery", "How is {name}'s {relation} doing?"),
             ("plays the violin in a youth orchestra", "What instrument does {name}'s {relation} play?"),
             ("lives in {city}", "Where does {name}'s {relation} live?"),
             ("is allergic to {allergen}", "What is {name}'s {relation} allergic to?")]


@dataclass(frozen=True)
class Memory:
    type: str
    content: str
    question: str


def _fact(rng: random.Random, name: str) -> Memory:
    pick = rng.choice
    kind = rng.randrange(16)
    city = pick(CITIES)
    if kind == 0:
        a = pick(ALLERGENS)
        return Memory("semantic", f"{name} is allergic to {a}.", f"What should {name} avoid eating or taking?")
    if kind == 1:
        return Memory("semantic", f"{name} prefers {pick(DRINKS)} in the morning.", f"What does {name} like to drink?")
    if kind == 2:
        return Memory("semantic", f"{name} lives in {city} with a {pick(PETS)} called {pick(PET_NAMES)}.",
                      f"Where does {name} live?")
    if kind == 3:
        return Memory("semantic", f"{name} works as a {pick(JOBS)} at {pick(COMPANIES)}.",
                      f"What does {name} do for a living?")
    if kind == 4:
        return Memory("semantic", f"{name} spends {pick(WEEKDAYS)} evenings {pick(HOBBIES)}.",
                      f"What are {name}'s hobbies?")
    if kind == 5:
        return Memory("semantic", f"{name} drives {pick(CARS)}.", f"What vehicle does {name} use?")
    if kind == 6:
        return Memory("semantic", f"{name} asked to be contacted by {pick(CHANNELS)} only.",
                      f"How should we get in touch with {name}?")
    if kind == 7:
        return Memory("semantic", f"{name} is on the {pick(PLANS)} plan and pays by direct debit.",
                      f"Which subscription does {name} have?")
    if kind == 8:
        return Memory("episodic", f"{name} reported a problem with {pick(PRODUCTS)}: {pick(PROBLEMS)}.",
                      f"What technical problems has {name} had?")
    if kind == 9:
        emotion, situation = pick(EMOTIONS)
        return Memory("emotional", f"{name} feels {emotion} when {situation}.", f"How does {name} feel about {situation}?")
    if kind == 10:
        event, question = pick(EVENTS)
        day = f"20{rng.randint(22, 26)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        fill = {"city": city, "pet": pick(PETS), "name": name}
        return Memory("episodic", f"On {day} {name} {event.format(**fill)}.", question.format(**fill))
    if kind == 11:
        return Memory("semantic", f"{name} is training for {pick(SPORT_EVENTS)} next {pick(SEASONS)}.",
                      f"What is {name} training for?")
    if kind == 12:
        return Memory("semantic", f"{name} wants to travel to {pick(PLACES)} next {pick(SEASONS)}.",
                      f"Where does {name} want to go on holiday?")
    if kind == 13:
        return Memory("semantic", f"{name} mostly reads {pick(GENRES)} books before bed.",
                      f"What kind of books does {name} read?")
    if kind == 14:
        relation = pick(RELATIONS)
        fact, question = pick(REL_FACTS)
        fill = {"city": city, "allergen": pick(ALLERGENS), "name": name, "relation": relation}
        return Memory("semantic", f"{name}'s {relation} {fact.format(**fill)}.", question.format(**fill))
    return Memory("semantic", f"{name} has a {pick(PETS)} named {pick(PET_NAMES)} who is {rng.randint(1, 15)} years old.",
                  f"Does {name} have any pets?")


def memories(rng: random.Random, users: list[str], count: int) -> list[tuple[str, Memory]]:
    """`count` (user, memory) pairs about the given users."""
    out = []
    for _ in range(count):
        user = rng.choice(users)
        out.append((user, _fact(rng, user.split("-")[0])))
    return out


def users_for(rng: random.Random, agent_index: int, count: int) -> list[str]:
    """An agent's users: distinct first names, suffixed so ids stay unique per agent."""
    return [f"{name}-{agent_index}" for name in rng.sample(FIRST, min(count, len(FIRST)))]


# --- the benchmark ------------------------------------------------------------------------------

BIG_AGENT = "agent-big"
COLUMNS = ("id", "tenant_id", "agent_id", "user_id", "type", "content", "metadata", "tags", "confidence", "source",
           "embedding", "status", "created_at", "updated_at", "live_from", "digest_key")
TYPES = ("text", "text", "text", "text", "text", "text", "jsonb", "text[]", "float4", "text",
         "vector", "text", "timestamptz", "timestamptz", "timestamptz", "bytea")


@dataclass
class Row:
    agent: str
    user: str
    memory: Memory
    id: str = ""


def big_agents(sizes: int | list[int]) -> list[tuple[str, int]]:
    """(agent id, memories) of the large agents: `agent-big` alone (as loads kept before there could
    be several), else `agent-big-<size>` each."""
    sizes = [s for s in ([sizes] if isinstance(sizes, int) else sizes) if s > 0]
    if len(sizes) == 1:
        return [(BIG_AGENT, sizes[0])]
    return [(f"{BIG_AGENT}-{size}", size) for size in sizes]


def plan(seed: int, memories_n: int, agents: int, users_per_agent: int, big: int | list[int]) -> list[Row]:
    """Every row to load, interleaved across agents in arrival order."""
    rng = random.Random(seed)
    rows: list[Row] = []
    agent_users = [users_for(rng, i, users_per_agent) for i in range(agents)]
    for _ in range(memories_n):
        a = rng.randrange(agents)
        user, memory = memories(rng, agent_users[a], 1)[0]
        rows.append(Row(f"agent-{a:05d}", user, memory))
    for agent, size in big_agents(big):
        big_users = [f"{name}-big{i}" for i in range(max(1, size // 100)) for name in [rng.choice(FIRST)]]
        rows += [Row(agent, user, memory) for user, memory in memories(rng, big_users, size)]
    rng.shuffle(rows)
    return rows


def _mem_id(ms: int, rng: random.Random) -> str:
    """An id in the app's format (app.core.ids.new_id) for a given creation time."""
    from app.core.ids import format_id

    return format_id("mem", (ms << 80) | rng.getrandbits(80))


def load(admin_url: str, tenant_id: str, rows: list[Row], *, batch: int, chunk: int, seed: int,
         progress: bool = True) -> dict[str, Any]:
    """Embed and COPY every row, indexes dropped during the load and rebuilt after it."""
    from datetime import datetime, timedelta, timezone

    import psycopg
    from pgvector.psycopg import register_vector
    from psycopg.types.json import Jsonb

    from app.embeddings import LocalMiniLMEmbedder

    # Same model and recipe as the server's embedder; larger chunks suit short sentences.
    embedder = LocalMiniLMEmbedder(batch_size=batch, chunk_token_budget=batch * 32)
    rng = random.Random(seed + 1)
    now = datetime.now(timezone.utc)
    timings = {"embed_s": 0.0, "copy_s": 0.0}
    url = admin_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        indexes = conn.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'memories' "
                               "AND indexname <> 'memories_pkey' ORDER BY indexname").fetchall()
        for name, _ in indexes:
            conn.execute(f'DROP INDEX "{name}"')
        started = time.perf_counter()
        vector_of: dict[str, Any] = {}  # distinct text -> its embedding
        for start in range(0, len(rows), chunk):
            part = rows[start:start + chunk]
            t0 = time.perf_counter()
            new_texts = list(dict.fromkeys(r.memory.content for r in part if r.memory.content not in vector_of))
            vector_of.update(zip(new_texts, embedder.embed(new_texts)))
            vectors = [vector_of[r.memory.content] for r in part]
            t1 = time.perf_counter()
            with conn.cursor() as cur:
                with cur.copy(f"COPY memories ({', '.join(COLUMNS)}) FROM STDIN WITH (FORMAT BINARY)") as copy:
                    copy.set_types(TYPES)
                    for row, vector in zip(part, vectors):
                        created = now - timedelta(seconds=rng.uniform(0, 365 * 86400))
                        row.id = _mem_id(int(created.timestamp() * 1000), rng)
                        copy.write_row((row.id, tenant_id, row.agent, row.user, row.memory.type, row.memory.content,
                                        Jsonb({}), [], 1.0, None, vector, "live", created, created, created,
                                        os.urandom(32)))
            t2 = time.perf_counter()
            timings["embed_s"] += t1 - t0
            timings["copy_s"] += t2 - t1
            if progress:
                done = start + len(part)
                rate = done / (time.perf_counter() - started)
                print(f"\r  loaded {done:,}/{len(rows):,} ({rate:,.0f}/s)", end="", flush=True)
        if progress:
            print()
        conn.execute("SET maintenance_work_mem = '2GB'")
        conn.execute("SET max_parallel_maintenance_workers = 1")
        builds = {}
        for name, definition in indexes:
            t0 = time.perf_counter()
            conn.execute(definition)
            builds[name] = round(time.perf_counter() - t0, 2)
            if progress:
                print(f"  rebuilt {name} in {builds[name]:.1f}s", flush=True)
        t0 = time.perf_counter()
        conn.execute("VACUUM (ANALYZE) memories")
        vacuum_s = time.perf_counter() - t0
        sizes = conn.execute("SELECT pg_size_pretty(pg_table_size('memories')), "
                             "pg_size_pretty(pg_indexes_size('memories'))").fetchone()
    n = len(rows)
    return {
        "rows": n, "distinct_texts": len(vector_of),
        "embed_s": round(timings["embed_s"], 2), "copy_s": round(timings["copy_s"], 2),
        "embedding_rate_per_s": round(len(vector_of) / timings["embed_s"], 1),
        "insert_rate_per_s": round(n / timings["copy_s"], 1),
        "ingest_rate_per_s": round(n / (timings["embed_s"] + timings["copy_s"]), 1),
        "index_build_s": builds, "vacuum_analyze_s": round(vacuum_s, 2),
        "ingest_rate_with_indexes_per_s": round(n / (timings["embed_s"] + timings["copy_s"] + sum(builds.values())
                                                      + vacuum_s), 1),
        "table_size": sizes[0], "indexes_size": sizes[1],
    }


def measure(base_url: str, token: str, targets: list[Row], warmup: list[Row], k: int = 5) -> dict[str, Any]:
    """Recall the question of each target memory; client-side latency, found@k, path-agnostic."""
    with common.client(base_url, token) as http:
        for row in warmup:
            common.timed_post(http, "/v1/memories/recall", {"agent_id": row.agent, "query": row.memory.question, "k": k})
        client_ms, server_ms, found, found_id, empty = [], [], 0, 0, 0
        for row in targets:
            elapsed, body = common.timed_post(http, "/v1/memories/recall",
                                              {"agent_id": row.agent, "query": row.memory.question, "k": k})
            client_ms.append(elapsed)
            server_ms.append(float(body.get("latency_ms", 0.0)))
            hits = body["hits"]
            # Rows with identical text tie on every score, so which of them ranks first is arbitrary.
            found += any(h["id"] == row.id or h["content"] == row.memory.content for h in hits)
            found_id += any(h["id"] == row.id for h in hits)
            empty += not hits
    share = (lambda count: round(count / len(targets), 3) if targets else 0.0)
    return {"queries": len(targets), "latency": common.latency_summary(client_ms),
            "server_side": common.latency_summary(server_ms),
            f"found_at_{k}": share(found), f"found_id_at_{k}": share(found_id), "empty": empty}


def _shorten(line: str) -> str:
    """Plans quote the 384-float query vector and id lists in full; elide them."""
    line = re.sub(r"'\[[-0-9.,e]+\]'", "'[query vector]'", line)
    return re.sub(r"'\{(mem_[0-9a-z]+,?){3,}\}'", "'{ids…}'", line)


def explain(ctx, principal, row: Row) -> list[str]:
    """Replay one recall in-process and EXPLAIN (ANALYZE, BUFFERS) its vector and keyword queries."""
    from sqlalchemy import event

    from app.db import prepared
    from app.services import recall

    captured: list[tuple[str, Any]] = []

    def capture(conn, cursor, statement, parameters, context, executemany):
        captured.append((statement, parameters))

    def capture_prepared(statement, conn, parameters):  # the candidate queries run on psycopg itself
        captured.append((statement.removeprefix(prepared.PIPELINED), parameters))  # its text, however sent

    event.listen(ctx.db.engine, "before_cursor_execute", capture)
    prepared.observers.append(capture_prepared)
    try:
        recall.recall(ctx, principal, {"agent_id": row.agent, "query": row.memory.question, "k": 5})
    finally:
        event.remove(ctx.db.engine, "before_cursor_execute", capture)
        prepared.observers.remove(capture_prepared)
    out: list[str] = []
    with ctx.db.engine.connect() as conn:
        with conn.begin() as tx:
            for statement, parameters in captured:
                command = statement.lstrip().upper()
                if command.startswith("COMMIT"):  # recall's own transaction for the HNSW settings
                    continue
                if command.startswith(("SET ", "BEGIN")):
                    conn.exec_driver_sql(re.sub(r"^\s*BEGIN;\s*", "", statement), parameters or ())
                elif "<=>" in statement or "@@" in statement:
                    plan_rows = conn.exec_driver_sql("EXPLAIN (ANALYZE, BUFFERS) " + statement, parameters or ()).all()
                    out += [_shorten(r[0]) for r in plan_rows] + [""]
            tx.rollback()
    return out


STATE_FILE = "bench-scale.json"  # beside the kept data dir: config, bench key, ingest report
IDS_FILE = "bench-scale-ids.txt"  # the loaded rows' ids, one per line, in plan order


def _save_load(root: Path, config: dict[str, Any], token: str, ingest: dict[str, Any], rows: list[Row]) -> None:
    (root / IDS_FILE).write_text("".join(r.id + "\n" for r in rows), encoding="utf-8")
    (root / STATE_FILE).write_text(json.dumps({"config": _load_config(config), "token": token, "ingest": ingest}),
                                   encoding="utf-8")


def _reuse_load(root: Path, config: dict[str, Any], rows: list[Row]) -> tuple[str, dict[str, Any]]:
    """The bench key and ingest report of a kept load of the same plan; the rows get their ids."""
    state = json.loads((root / STATE_FILE).read_text(encoding="utf-8"))
    if state["config"] != _load_config(config):
        raise SystemExit(f"--reuse {root} holds a different load: {state['config']}")
    ids = (root / IDS_FILE).read_text(encoding="utf-8").split()
    for row, row_id in zip(rows, ids, strict=True):
        row.id = row_id
    return state["token"], {**state["ingest"], "reused": True}


def _load_config(config: dict[str, Any]) -> dict[str, Any]:
    """What decides the loaded rows (not how they are queried)."""
    return {k: v for k, v in config.items() if k not in ("queries", "embed_batch")}


@contextlib.contextmanager
def _data_dir(args: argparse.Namespace) -> Iterator[Path]:
    if not args.reuse:
        with common.scratch_dir(args.data_dir) as data_dir:
            yield data_dir
        return
    root = Path(args.reuse).expanduser().resolve()
    if not (root / STATE_FILE).is_file():
        raise SystemExit(f"--reuse {root}: no {STATE_FILE}; load it first with --data-dir")
    try:
        yield root / ".memwarden"
    finally:
        common.stop_cluster(root / ".memwarden")


def _row_updates(ctx, since: dict[str, Any] | None = None) -> dict[str, Any]:
    """Row updates of `memories` (the server's batched recall counters, once it has exited) and how
    many were HOT (same page, no index entry written), since `since`; and the table's fillfactor."""
    from sqlalchemy import text

    with ctx.db.engine.connect() as conn:
        row = conn.execute(text(
            "SELECT n_tup_upd, n_tup_hot_upd, (SELECT reloptions FROM pg_class WHERE oid = 'memories'::regclass) "
            "FROM pg_stat_user_tables WHERE relid = 'memories'::regclass")).one()
    now = {"rows": int(row[0]), "hot": int(row[1]), "reloptions": row[2]}
    if since is None:
        return now
    rows, hot = now["rows"] - since["rows"], now["hot"] - since["hot"]
    return {"rows_updated": rows, "hot": hot, "hot_share": round(hot / rows, 3) if rows else None,
            "table_options": now["reloptions"] or []}


def _big_key(agent: str) -> str:
    """The report's key for a large agent: `recall_big_agent` for the lone `agent-big`."""
    return "recall_big_agent" if agent == BIG_AGENT else "recall_" + agent.replace("-", "_")


def _big_config(sizes: list[int]) -> int | list[int]:
    """As the config recorded it before there could be several large agents (a kept load compares it)."""
    return sizes[0] if len(sizes) == 1 else sizes


def _path(scope_rows: float, table_rows: int) -> str:
    """Which vector search recall takes for a scope of this size in a table of this size."""
    from app.repos import search_sizes, search_vector

    if scope_rows <= min(search_sizes.FULL_SCAN_MAX, search_sizes.EXACT_SCAN_MAX):
        return "exact scan"
    if search_vector.CACHED_CODES:
        return "codes held in process + re-rank"
    if scope_rows <= search_vector.code_scan_limit(table_rows):
        return "binary codes + re-rank"
    return "HNSW iterative scan"


# (path, shortlist or ef_search) compared on each big agent; recall's own are SHORTLIST and HNSW_OVERFETCH.
PATH_VARIANTS = (("full scan", 0), ("binary codes", 100), ("binary codes", 200), ("binary codes", 400),
                 ("HNSW", 100), ("HNSW", 200), ("HNSW", 400), ("cached codes", 200))


def vector_paths(ctx, tenant_id: str, targets: list[Row], n: int = 20) -> dict[str, Any]:
    """Each vector path's statement (and the code shortlist / HNSW `ef_search` around recall's) on the
    same scope and questions, in process, whichever path recall takes there: found@n against an
    exact scan, and median execution time and buffers under EXPLAIN (ANALYZE, BUFFERS)."""
    from sqlalchemy import text
    from sqlalchemy.orm import Session

    from app.db.vectors import SqlVector
    from app.repos import search_vector
    from app.repos.memories import Scope

    exact_nth = text("SELECT (embedding <=> CAST(:q AS vector)) + 0 AS d FROM memories WHERE tenant_id = :t "
                     "AND agent_id = :a AND status = 'live' ORDER BY d LIMIT :n")
    filters = {"types": None, "tags": None, "metadata": None, "fresher_than_days": None}
    found: dict[str, list[tuple[float, int, float]]] = {}
    for row, vector in zip(targets, ctx.embedder.embed([r.memory.question for r in targets])):
        query = SqlVector(vector)
        scope = Scope(tenant_id, row.agent, None, None)
        with ctx.db.reader() as conn, Session(bind=conn) as session:
            nth = conn.execute(exact_nth, {"q": query.to_text(), "t": tenant_id, "a": row.agent, "n": n}).scalars().all()
            for path, setting in PATH_VARIANTS:
                options = {"shortlist": setting} if path == "binary codes" else {"overfetch": setting}
                hits = search_vector.run_vector_path(session, scope, filters, query, n, path, **options)
                lines = search_vector.run_vector_path(session, scope, filters, query, n, path, explain=True, **options)
                ms = float(re.search(r"Execution Time: ([0-9.]+)", lines[-1]).group(1))
                # the codes held in process: their shortlist's time in numpy, then the statement's
                ms += sum(float(m.group(1)) for m in map(re.compile(r"Shortlist in process: ([0-9.]+) ms").match, lines)
                          if m)
                buffers = re.search(r"Buffers: shared hit=(\d+)(?: read=(\d+))?", next(l for l in lines if "Buffers" in l))
                share = sum(float(h.distance) <= nth[-1] + 1e-6 for h in hits) / len(nth)
                found.setdefault(f"{path} {setting}" if setting else path, []).append(
                    (ms, int(buffers.group(1)) + int(buffers.group(2) or 0), share))
    out = {}
    for key, samples in found.items():
        ms, buffers, shares = (sorted(x[i] for x in samples) for i in range(3))
        out[key] = {"questions": len(samples), "found_at_20": round(sum(shares) / len(shares), 3),
                    "found_at_20_min": round(shares[0], 3), "execution_ms_p50": ms[len(ms) // 2],
                    "execution_ms_max": ms[-1], "buffers_p50": buffers[len(buffers) // 2]}
    return out


def vector_vs_exact(ctx, tenant_id: str, targets: list[Row], n: int = 20) -> dict[str, Any]:
    """found@n: how much of a scope's exact top n recall's vector search returns, per question.

    Recall's own vector search (in process, autocommit, as the server runs it) against an exact
    ranking of every row in the scope. A hit counts when it is no farther than the exact n-th
    nearest, so rows with identical text (equal distances) count whichever of them came back."""
    from sqlalchemy import text
    from sqlalchemy.orm import Session

    from app.db.vectors import SqlVector
    from app.repos import search_vector
    from app.repos.memories import Scope

    exact_nth = text("SELECT (embedding <=> CAST(:q AS vector)) + 0 AS d FROM memories WHERE tenant_id = :t "
                     "AND agent_id = :a AND status = 'live' ORDER BY d LIMIT :n")
    filters = {"types": None, "tags": None, "metadata": None, "fresher_than_days": None}
    shares, full = [], 0
    for row, vector in zip(targets, ctx.embedder.embed([r.memory.question for r in targets])):
        query = SqlVector(vector)
        with ctx.db.reader() as conn, Session(bind=conn) as session:
            found = search_vector.vector_search(session, Scope(tenant_id, row.agent, None, None), filters, query, n)
            nth = conn.execute(exact_nth, {"q": query.to_text(), "t": tenant_id, "a": row.agent, "n": n}).scalars().all()
        shares.append(sum(distance <= nth[-1] + 1e-6 for _, distance in found.hits) / len(nth))
        full += len(found.hits) == n
    return {"queries": len(targets), "n": n,
            "mean_share_of_exact_top_n": round(sum(shares) / len(shares), 3) if shares else None,
            "min_share": round(min(shares), 3) if shares else None, "full_result_lists": full}


def run(args: argparse.Namespace) -> dict[str, Any]:
    from app.config import Settings
    from app.services import recall  # noqa: F401  (fail now, not after an hour of loading)
    from app.services.apikeys import authenticate, create_key
    from app.services.context import AppContext
    from app.services.tenants import create_tenant

    rows = plan(args.seed, args.memories, args.agents, args.users_per_agent, args.big_agent)
    report: dict[str, Any] = {
        "benchmark": "scale",
        "config": {"memories": args.memories, "agents": args.agents, "users_per_agent": args.users_per_agent,
                   "big_agent_memories": _big_config(args.big_agent), "total_rows": len(rows), "queries": args.queries,
                   "seed": args.seed, "embed_batch": args.batch},
    }
    with _data_dir(args) as data_dir:
        # The in-process EXPLAIN replays a recall under this key too: budgets that never refuse, as the server's.
        settings = Settings(data_dir=data_dir, rate_limit_per_minute=0, read_budget_per_key=100_000_000,
                            read_budget_per_agent=100_000_000)
        ctx = AppContext.open(settings)
        try:
            if args.reuse:
                token, report["ingest"] = _reuse_load(data_dir.parent, report["config"], rows)
            else:
                tenant = create_tenant(ctx, name="bench-scale", actor=common.BENCH_ACTOR)
                token = create_key(ctx, tenant_id=tenant.id, scopes="memory:read,memory:write",
                                   actor=common.BENCH_ACTOR).token
                print(f"loading {len(rows):,} memories ({args.memories:,} over {args.agents:,} agents"
                      + "".join(f" + {size:,} in {agent}" for agent, size in big_agents(args.big_agent)) + ")",
                      flush=True)
                report["ingest"] = load(ctx.db.embedded.admin_url, tenant.id, rows, batch=args.batch,
                                        chunk=args.chunk, seed=args.seed)
                if args.data_dir:
                    _save_load(data_dir.parent, report["config"], token, report["ingest"], rows)
            rng = random.Random(args.seed + 2)
            names = [agent for agent, _ in big_agents(args.big_agent)]
            spread = [r for r in rows if r.agent not in names]
            bigs = {agent: [r for r in rows if r.agent == agent] for agent in names}
            warm = min(50, args.queries)
            # Budgets so high they never refuse: their cost per recall is measured, not their refusals.
            env = common.clean_env(data_dir, MEMWARDEN_RATE_LIMIT_PER_MINUTE="0",
                                   MEMWARDEN_READ_BUDGET_PER_KEY="100000000", MEMWARDEN_READ_BUDGET_PER_AGENT="100000000")
            updates_before = _row_updates(ctx)
            with common.serve(data_dir, env=env) as server:
                print(f"recall: {args.queries} queries on random agents" + "".join(f", on {a}" for a in names),
                      flush=True)
                if spread:
                    report["recall_spread"] = {
                        "scope_rows": round(len(spread) / args.agents, 1), "path": _path(len(spread) / args.agents, len(rows)),
                        **measure(server.base_url, token, rng.sample(spread, min(args.queries, len(spread))),
                                  rng.sample(spread, min(warm, len(spread))))}
                for agent, big in bigs.items():
                    report[_big_key(agent)] = {
                        "agent": agent, "scope_rows": len(big), "path": _path(len(big), len(rows)),
                        **measure(server.base_url, token, rng.sample(big, min(args.queries, len(big))),
                                  rng.sample(big, min(warm, len(big))))}
            report["recall_tracking_updates"] = _row_updates(ctx, since=updates_before)
            common.write_json(args.out, report)  # the measurements are safe even if EXPLAIN fails
            principal = authenticate(ctx, token)
            for agent, big in bigs.items():
                print(f"vector search against an exact scan of {agent}", flush=True)
                report[_big_key(agent)]["vector_vs_exact"] = vector_vs_exact(
                    ctx, principal.tenant_id, rng.sample(big, min(100, len(big))))
                print(f"each vector path's statement on {agent} (EXPLAIN ANALYZE)", flush=True)
                report[_big_key(agent)]["vector_paths"] = vector_paths(
                    ctx, principal.tenant_id, rng.sample(big, min(30, len(big))))
            report["explain"] = {}
            for agent, pool in (("spread", spread), *bigs.items()):
                if pool:
                    try:
                        report["explain"][agent] = explain(ctx, principal, rng.choice(pool))
                    except Exception as exc:  # diagnostics only; never lose the run for them
                        report["explain"][agent] = [f"EXPLAIN failed: {type(exc).__name__}: {exc}"]
        finally:
            ctx.close()
    return report


def summary(report: dict[str, Any]) -> str:
    ing = report["ingest"]
    embedding = (f"{ing['embedding_rate_per_s']:,.0f} texts/s "
                 f"({ing.get('distinct_texts', ing['rows']):,} distinct, {ing['embed_s']:.0f} s)")
    rows = [("ingest: embedding", embedding),
            ("ingest: COPY insert", f"{ing['insert_rate_per_s']:,.0f} rows/s ({ing['copy_s']:.1f} s)"),
            ("ingest: embed + insert", f"{ing['ingest_rate_per_s']:,.0f} memories/s"),
            ("index rebuild", ", ".join(f"{k} {v:.0f}s" for k, v in ing["index_build_s"].items())),
            ("table / indexes", f"{ing['table_size']} / {ing['indexes_size']}")]
    keys = [("recall_spread", "recall, random agents")] + [
        (key, f"recall, {report[key]['agent'] if 'agent' in report[key] else BIG_AGENT}")
        for key in report if key.startswith("recall_big_agent") or key.startswith("recall_agent_big")]
    for key, label in keys:
        if key in report:
            r = report[key]
            lat = r["latency"]
            rows.append((f"{label} ({r['scope_rows']:,} rows/scope, {r['path']})",
                         f"p50 {lat['p50_ms']:.1f} / p95 {lat['p95_ms']:.1f} / p99 {lat['p99_ms']:.1f} ms; "
                         f"found@5 {r['found_at_5']:.2f}"
                         + (f"; vector found@20 vs exact {r['vector_vs_exact']['mean_share_of_exact_top_n']:.3f}"
                            if "vector_vs_exact" in r else "")))
    return common.table(rows, ["scale " + f"({report['config']['total_rows']:,} rows)", "result"])


def goals(report: dict[str, Any]) -> dict[str, bool]:
    """The large-scope goal per large agent (recall p95 <= 30 ms with the vector search
    returning >= 0.95 of an exact scan's top 20), and the 100-row scopes' p95 <= 50 ms."""
    out = {}
    if "recall_spread" in report:
        out["recall_p95_le_50ms_spread"] = report["recall_spread"]["latency"]["p95_ms"] <= 50.0
    for key, r in report.items():
        if key.startswith(("recall_big_agent", "recall_agent_big")) and isinstance(r, dict) and "latency" in r:
            agent = r.get("agent", BIG_AGENT)
            out[f"{agent}_recall_p95_le_30ms"] = r["latency"]["p95_ms"] <= 30.0
            if "vector_vs_exact" in r:
                out[f"{agent}_found_at_20_ge_0.95"] = (r["vector_vs_exact"]["mean_share_of_exact_top_n"] or 0) >= 0.95
    return out


def cmd_scale(args: argparse.Namespace, settings) -> int:
    common.quiet_http_logs()
    started = time.perf_counter()
    load_before = common.machine()["loadavg_1_5_15"]
    report = run(args)
    report["wall_s"] = round(time.perf_counter() - started, 1)
    report["machine"] = {**common.machine(), "loadavg_before": load_before}
    report["command"] = (f"memwarden bench scale --memories {args.memories} --agents {args.agents} "
                         f"--queries {args.queries} --big-agent {','.join(map(str, args.big_agent))}"
                         + (f" --reuse {args.reuse}" if args.reuse else "")
                         + (f" --out {args.out}" if args.out else ""))
    report["goal"] = goals(report)
    print(summary(report))
    common.write_json(args.out, report)
    return 0


def _sizes(value: str) -> list[int]:
    return [int(v) for v in value.split(",") if v.strip()]


def add_parser(bench: argparse._SubParsersAction) -> None:
    p = bench.add_parser("scale", help="recall latency and ingest rate at N memories (fresh database)",
                         description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--memories", type=int, required=True, help="memories spread over the agents")
    p.add_argument("--agents", type=int, default=1000)
    p.add_argument("--queries", type=int, default=500, help="timed recalls per query set (default 500)")
    p.add_argument("--big-agent", type=_sizes, default=[50_000],
                   help="extra memories in ONE agent, to exercise the HNSW path (default 50000; 0 = none); "
                        "several sizes, comma-separated, make one agent each (agent-big-<size>)")
    p.add_argument("--users-per-agent", type=int, default=20)
    p.add_argument("--batch", type=int, default=128, help="embedding batch size")
    p.add_argument("--chunk", type=int, default=4096, help="rows per COPY")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", help="write the JSON report here (e.g. scale-100k.json)")
    p.add_argument("--data-dir", help="use (and keep) this empty directory instead of a temporary one, with what "
                                      "--reuse needs to query it again")
    p.add_argument("--reuse", metavar="DIR", help="measure recall on a load kept by --data-dir DIR (same plan "
                                                  "options) instead of loading a fresh database")
    p.set_defaults(func=cmd_scale)
