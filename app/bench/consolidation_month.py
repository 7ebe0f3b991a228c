"""A scripted month of one assistant's episodic notes about one user, with planted repeated facts
and the traps an honest consolidator must not fall for (`memwarden bench consolidate`).

* **Planted facts** (the answer key): a preference, aversion or allergy, each written in varied
  words on 3-6 distinct days, inside notes about something else ("Booked the Porto flight; the
  user asked for an aisle seat.").
* **Routines**: the same action on many days ("Sent the weekly status report to the team."),
  near-duplicates of each other that state nothing about the user.
* **Repeated questions**: hedged, on distinct days ("User asked whether the gym opens early.").
* **Someone else's preference**, repeated ("Booked the flight for Ana; she asked for a window seat.").
* **One-off mentions**: a preference stated once, or several times in one session (one day).
* **Noise**: one-off errands with random places, people and topics.

Every item carries the fact it belongs to (`fact`, None for all but planted ones) so precision and
recall are measured by source ids, whatever text a promotion gets.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

PLACES = ["Tasca do Chico", "Cervejaria Ramiro", "the Alfama hotel", "Time Out Market", "Café Majestic",
          "the Baixa office", "Pastéis de Belém", "the airport lounge", "Mercado do Bolhão", "the co-working space"]
CITIES = ["Porto", "Madrid", "Berlin", "London", "Paris", "Milan", "Dublin", "Vienna"]
PEOPLE = ["Ana", "Miguel", "Sofia", "Joana", "Ricardo", "Marta", "Hugo", "Inês"]
TOPICS = ["the Q3 budget", "the vendor contract", "the hiring plan", "the product launch", "the board deck",
          "the security review", "the office move", "the customer escalation"]

PLANTED: dict[str, list[str]] = {
    "vegetarian": [
        "Booked dinner at {place}; the user asked for a vegetarian menu.",
        "Hotel breakfast order at {place}: the user requested vegetarian options.",
        "User said they prefer vegetarian food when I suggested {place}.",
        "Catering for the offsite with {person}: the user asked for vegetarian dishes.",
        "Lunch delivery from {place}, the user wanted a vegetarian bowl.",
    ],
    "aisle": [
        "Booked the flight to {city}; the user asked for an aisle seat.",
        "Changed the {city} train booking: the user wanted an aisle seat.",
        "At check-in for {city} the user asked for an aisle seat.",
        "Seat map for the {city} flight: user prefers an aisle seat.",
    ],
    "mornings": [
        "Scheduled the call with {person}; the user prefers morning meetings.",
        "Moved the review of {topic} to 9am since the user prefers morning meetings.",
        "User declined the 5pm slot with {person}; they prefer morning meetings.",
        "Set up {topic} sync early: the user prefers morning meetings.",
    ],
    "peanuts": [
        "Ordered lunch from {place}; reminded them the user is allergic to peanuts.",
        "Told the waiter at {place} the user is allergic to peanuts.",
        "Checked the snacks for the {city} trip: the user is allergic to peanuts.",
    ],
    "portuguese": [
        "Drafted the reply to {person} in Portuguese; the user prefers Portuguese for personal mail.",
        "Translated the note to {person}: user prefers Portuguese for personal mail.",
        "Rewrote the birthday message to {person}, the user prefers Portuguese for personal mail.",
    ],
    "redeye": [
        "Searched flights to {city}; the user avoids red-eye flights.",
        "Skipped the overnight option to {city}: the user avoids red-eye flights.",
        "Rebooked {city} for the afternoon; the user dislikes red-eye flights.",
    ],
}
ROUTINES = [
    "Sent the weekly status report to the team.",
    "Checked the calendar for tomorrow's meetings.",
    "Backed up the user's notes folder.",
    "Booked a taxi to {place}.",
    "Paid the electricity bill.",
]
THIRD_PARTY = [
    "Booked the flight for {person}; she asked for a window seat.",
    "Ordered lunch for {person} at {place}, he wanted the gluten-free menu.",
]
QUESTIONS = [
    "User asked whether the gym at {place} opens early.",
    "User asked if the {city} office has parking.",
]
ONE_OFFS = [
    "User said they like jazz playlists while working.",
    "The user asked for a PDF copy of the invoice from {place}.",
    "User prefers the blue theme for the {topic} slides.",
    "The user asked for extra pillows at the hotel.",
]
NOISE = [
    "Looked up the opening hours of {place}.",
    "Forwarded {person}'s email about {topic}.",
    "Added {topic} to the to-do list.",
    "Summarised the thread on {topic} for {person}.",
    "Reserved a meeting room for {topic}.",
    "Renewed the parking permit for the {city} office.",
    "Sent {person} the agenda for {topic}.",
    "Printed the boarding pass for {city}.",
    "Reminded the user to call {person} about {topic}.",
    "Filed the receipt from {place}.",
]


@dataclass(frozen=True)
class Note:
    day: int
    minute: int
    content: str
    confidence: float
    fact: str | None
    kind: str
    """`planted`, `routine`, `question`, `third_party`, `one_off`, `noise`."""


def month(seed: int = 7, days: int = 30, noise_per_day: int = 12) -> list[Note]:
    """The month's notes, oldest first (day 0 is 30 days ago)."""
    rng = random.Random(seed)

    def fill(template: str) -> str:
        return template.format(place=rng.choice(PLACES), city=rng.choice(CITIES), person=rng.choice(PEOPLE),
                               topic=rng.choice(TOPICS))

    notes: list[Note] = []

    def add(day: int, template: str, fact: str | None, kind: str, confidence: float | None = None) -> None:
        notes.append(Note(day, rng.randrange(8 * 60, 22 * 60), fill(template),
                          confidence if confidence is not None else round(rng.uniform(0.6, 1.0), 2), fact, kind))

    for fact, phrasings in PLANTED.items():
        mentions = rng.randint(3, min(6, days))
        for day in sorted(rng.sample(range(days), mentions)):
            add(day, rng.choice(phrasings), fact, "planted")
    for i, routine in enumerate(ROUTINES):
        step = [7, 2, 5, 3, 10][i % 5]
        for day in range(rng.randrange(step), days, step):
            add(day, routine, None, "routine")
    for question in QUESTIONS:
        for day in sorted(rng.sample(range(days), 3)):
            add(day, question, None, "question")
    for someone_else in THIRD_PARTY:
        for day in sorted(rng.sample(range(days), 3)):
            add(day, someone_else, None, "third_party")
    for i, one_off in enumerate(ONE_OFFS):
        day = rng.randrange(days)
        for _ in range(1 if i < 3 else 3):  # the last: three times in one session, one mention
            add(day, one_off, None, "one_off")
    for day in range(days):
        for _ in range(noise_per_day):
            add(day, rng.choice(NOISE), None, "noise", round(rng.choice([rng.uniform(0.3, 0.6), rng.uniform(0.6, 1.0)]), 2))
    return sorted(notes, key=lambda n: (n.day, n.minute))
