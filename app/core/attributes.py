"""Which attribute of its subject a short memory text states, read by meaning (pure but for the model).

An ``Encoder`` is any function taking texts and returning one unit-norm float32 row per text (the
recall embedder's ``embed``; a multilingual model plugs in the same way). Each attribute below is
described by a few plain sentences; their mean vector, per encoder, is the attribute's prototype.
A text's attribute is its nearest prototype: a text "about" where someone lives sits nearest
``residence`` whether it says "lives in", "moved to" or "is based in". Two texts state the same
attribute when their nearest prototypes agree, or when each is among the other's two nearest and
the texts themselves are close.

The descriptions are general, written for the kinds of facts an assistant keeps about people and
things (home, work, contact, relations, health, money, schedules, tools and services,
preferences), not for any evaluation set.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

Encoder = Callable[[Sequence[str]], np.ndarray]
"""Texts in, one L2-normalised float32 row per text out."""

ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "residence": ("where someone lives, their home city", "She lives in Madrid.", "He moved to Boston."),
    "address": ("someone's street address", "Her address is 12 Oak Road.", "They live at 5 Main Street."),
    "employer": ("the company someone works for", "He works at Google.", "She joined a new company.",
                 "Her employer is a bank.", "He is with a consulting firm now.", "She works for Siemens."),
    "job": ("someone's job title or occupation", "She is a nurse.", "He was promoted to senior manager."),
    "manager": ("who someone reports to at work", "Her boss is Tom.", "He reports to the director."),
    "school": ("the school or university someone attends", "He studies at Harvard.", "She goes to Lincoln High."),
    "phone": ("someone's phone number", "His mobile number is 555 0100.", "Call her on 020 1234 5678."),
    "email": ("someone's email address", "Her email is ann@example.com.", "Write to him at bob@mail.org."),
    "partner": ("someone's romantic partner or marital status", "She is married to Paul.",
                "He is dating Lisa.", "They are single."),
    "children": ("how many children someone has", "They have two kids.", "She has a son and a daughter."),
    "pet": ("someone's pets", "He has a dog named Rex.", "She adopted a cat."),
    "owner": ("who owns a thing, a house, a business or an animal", "The house belongs to the Smiths.",
              "The shop is owned by Maria."),
    "diet": ("what someone eats, their diet", "She is vegan.", "He doesn't eat meat."),
    "drink": ("how someone takes their coffee or tea", "He drinks his coffee black.", "She likes green tea."),
    "allergy": ("someone's allergies", "She is allergic to peanuts.", "He has a pollen allergy."),
    "medication": ("someone's medication and its dose", "He takes 20 mg of statins.", "She is on insulin."),
    "doctor": ("someone's doctor, dentist or therapist", "Her GP is Dr. Patel.", "He sees a therapist weekly."),
    "car": ("the car someone drives", "She drives a Toyota.", "He bought a new car."),
    "computer": ("someone's laptop or computer", "He works on a Dell laptop.", "She uses a MacBook."),
    "handset": ("the mobile phone handset someone uses", "He has an iPhone.", "She uses an Android phone."),
    "software": ("the software or app someone uses", "She writes code in Vim.", "He uses Chrome as his browser."),
    "service": ("a provider or subscription someone uses: internet, phone plan, streaming, music",
                "Their internet is from Comcast.", "She listens on Spotify.", "He is on a monthly data plan."),
    "bank": ("someone's bank or financial accounts", "He banks with Chase.", "Her account is at HSBC."),
    "insurance": ("someone's insurance", "Their car insurance is with Geico.", "She has health insurance."),
    "landlord": ("who someone rents their home from", "Their landlord is Mr. Brown.",
                 "She rents from a property company."),
    "price": ("how much something costs each month", "The rent is $1,200 a month.",
              "The gym costs 40 euros per month."),
    "appointment": ("the date and time of an appointment, class or meeting", "The meeting is on Monday at 9.",
                    "Her dentist appointment is Tuesday at 3 pm.", "The class is on Saturdays."),
    "travel": ("the time of a flight or train", "The flight leaves at 7 am.", "His train departs at noon."),
    "deadline": ("the date something is due or happens", "The project is due on May 1.",
                 "The wedding is on June 3."),
    "name": ("what someone is called, their name or nickname", "She goes by Kate.", "His last name is Smith."),
    "age": ("how old someone is", "He is 40.", "She turned 30."),
    "language": ("a language someone speaks or learns", "She is learning French.", "He speaks German."),
    "units": ("units and display preferences", "He wants distances in kilometres.",
              "She prefers dark mode."),
    "timezone": ("someone's time zone", "She is on Central European Time.", "He is in Pacific Time."),
    "work_location": ("whether someone works from home or the office", "She works remotely.",
                      "He goes to the office every day."),
    "hobby": ("someone's hobbies and pastimes", "She plays tennis.", "He enjoys painting on weekends."),
    "password": ("a password or PIN", "The wifi password is abc123.", "Her PIN is 4321."),
    "birthday": ("someone's birthday or date of birth", "His birthday is May 2.", "She was born in 1990."),
    "sport": ("exercise and training routines", "He runs 5 km a day.", "She goes to the gym."),
    "role": ("a role someone holds in a club, board or group", "She is the club treasurer.",
             "He chairs the board."),
}
_LOCK = threading.Lock()
_TABLES: dict[str, np.ndarray] = {}
_NAMES = tuple(ATTRIBUTES)
MAX_TABLES = 8
CLOSE = 0.55
"""Cosine at which two texts whose nearest attributes differ but neighbour are still one attribute."""
SAME = 0.7
"""Cosine at which two texts are about one attribute, whatever their nearest prototypes (the
prototypes are English; two texts in another language this close say the same kind of thing)."""
FLOOR = 0.3
"""Cosine below which two texts are not about one attribute, whatever their nearest prototypes."""


def prototypes(encoder: Encoder, name: str) -> np.ndarray:
    """The attributes' prototype vectors for ``encoder`` (the model called ``name``), embedded once
    per model and process."""
    with _LOCK:
        cached = _TABLES.get(name)
    if cached is not None:
        return cached
    texts = [t for described in ATTRIBUTES.values() for t in described]
    vectors = np.asarray(encoder(texts), dtype=np.float32)
    rows, start = [], 0
    for described in ATTRIBUTES.values():
        mean = vectors[start:start + len(described)].mean(axis=0)
        rows.append(mean / (np.linalg.norm(mean) or 1.0))
        start += len(described)
    table = np.stack(rows).astype(np.float32)
    with _LOCK:
        if len(_TABLES) >= MAX_TABLES:
            _TABLES.clear()
        _TABLES[name] = table
    return table


@dataclass(frozen=True)
class Reading:
    """The attributes a text is nearest, best first, with their cosines."""

    ranked: tuple[tuple[str, float], ...]

    @property
    def attribute(self) -> str:
        return self.ranked[0][0]


def _row(vector: Any) -> np.ndarray:
    """A stored or computed vector (numpy, pgvector, list) as one float32 row."""
    vector = vector.to_numpy() if hasattr(vector, "to_numpy") else vector
    return np.asarray(vector, dtype=np.float32).reshape(-1)


def read(vector: Any, table: np.ndarray, top: int = 2) -> Reading | None:
    """The ``top`` attributes nearest ``vector`` (None without a vector, or of another length)."""
    if vector is None:
        return None
    vector = _row(vector)
    if vector.shape[0] != table.shape[1]:
        return None
    scores = table @ vector
    order = np.argsort(-scores)[:top]
    return Reading(tuple((_NAMES[i], float(scores[i])) for i in order))


def same_attribute(a: Reading, b: Reading, cosine: float) -> bool:
    """Whether two readings name one attribute (see the module's docstring)."""
    if cosine < FLOOR:
        return False
    if a.attribute == b.attribute or cosine >= SAME:
        return True
    names_a, names_b = {n for n, _ in a.ranked}, {n for n, _ in b.ranked}
    return cosine >= CLOSE and a.attribute in names_b and b.attribute in names_a


@dataclass(frozen=True)
class Meaning:
    """What the meaning reader knows of a write and the live texts it is compared with: the write's
    reading, and for each live text (in order) its reading and its cosine to the write, or None."""

    content: Reading
    live: tuple[tuple[Reading, float] | None, ...]

    def pair(self, index: int) -> tuple[Reading, Reading, float] | None:
        found = self.live[index] if index < len(self.live) else None
        return (self.content, found[0], found[1]) if found is not None else None


def meaning(encoder: Encoder | None, name: str | None, content_vector: Any, live_vectors: Sequence[Any]) -> Meaning | None:
    """A ``Meaning`` from the write's vector and the live texts' (None where missing), or None when
    there is no encoder or no usable write vector."""
    if encoder is None or not name or content_vector is None:
        return None
    table = prototypes(encoder, name)
    content = read(content_vector, table)
    if content is None:
        return None
    x = _row(content_vector)
    live: list[tuple[Reading, float] | None] = []
    for vector in live_vectors:
        reading = read(vector, table)
        if reading is None:
            live.append(None)
            continue
        live.append((reading, float(x @ _row(vector))))
    return Meaning(content, tuple(live))
