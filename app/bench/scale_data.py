"""`memwarden bench scale`'s data: seeded synthetic memories and their bulk load.

The memories come from templates (facts about the people an agent serves, each with the question a
later turn would ask) and a seeded RNG, so a plan is the same rows for the same arguments (a kept
load is checked against it, and `bench import` and the corpora reuse the generator). Each distinct
text is embedded once (the templates repeat, as real facts do), and the rows are bulk-loaded with
binary COPY with the columns `remember` writes, the table's secondary indexes dropped for the load
and rebuilt after it (`load`). The command itself: `app.bench.scale`.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from typing import Any

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


# --- the rows to load ---------------------------------------------------------------------------

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
