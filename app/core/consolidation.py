"""Consolidation's judgement, without a database or a network: which short-term items repeat a
standing fact about the user (promote it) and which are cold (evict them).

A window is one (agent, user)'s recent episodic memories. Notes that state something about the
user (`claim`: a preference, aversion or allergy, `stance`; or an attribute `app.core.facts` reads)
cluster with each other by what they state: the same relation to values sharing a content word,
embeddings not far apart. The others cluster by their stored embeddings (leader clustering,
densest first). A cluster is scored on

* **salience** — mentions on distinct days (two writes of one session are one mention: a note
  written twice is not repeated evidence), saturating at `Weights.saturation` days;
* **recency** — exp(-ln 2 · age of the newest mention / half-life);
* **confidence** — the members' mean;
* **stance** — the share of members that state something about the user. A routine that recurs
  ("sent the weekly report") clusters as well as a preference does; it states nothing standing
  about the user, so it is never promoted.

A cluster is promoted when it has `min_mentions` distinct-day mentions, a stance share of at least
one half and a score (weighted salience, recency, confidence) at or above `promote_at`. Its text
is a template over the repeated attribute when members agree on one ("User prefers aisle seats."),
else the best-supported statement: the stance clause of the medoid (the member most similar to the
rest), else the medoid's own text.

`Scorer` and `Writer` are the plug points: the defaults here need no model beyond the embedding
already stored, and no network.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import numpy as np

from app.core import facts


@dataclass(frozen=True)
class Item:
    """A short-term memory as consolidation reads it (content is hostile: never interpreted beyond matching)."""

    id: str
    content: str
    confidence: float
    created_at: datetime
    last_recalled_at: datetime | None
    embedding: np.ndarray


@dataclass(frozen=True)
class Weights:
    salience: float = 0.5
    recency: float = 0.25
    confidence: float = 0.25
    saturation: int = 5
    """Distinct-day mentions at which salience reaches 1."""
    half_life_days: float = 14.0


@dataclass
class Cluster:
    members: list[Item]
    mentions: int = 0
    salience: float = 0.0
    recency: float = 0.0
    confidence: float = 0.0
    stance: float = 0.0
    score: float = 0.0
    statement: str = ""
    statement_from: str = ""
    """`template` (the repeated attribute) or `best_supported` (the medoid's clause or text)."""
    attribute: str | None = None
    reasons: list[str] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        return sorted(m.id for m in self.members)

    def evidence(self) -> dict[str, Any]:
        """Why it scored: numbers and ids only (the stored evidence; content stays in the memories)."""
        return {"source_ids": self.ids, "mentions": self.mentions, "items": len(self.members),
                "salience": round(self.salience, 4), "recency": round(self.recency, 4),
                "confidence": round(self.confidence, 4), "stance": round(self.stance, 4),
                "score": round(self.score, 4), "statement_from": self.statement_from, "reasons": self.reasons}


class Scorer(Protocol):
    def clusters(self, items: Sequence[Item], now: datetime) -> list[Cluster]:
        """Every cluster of `items`, scored (singletons included: eviction reads their scores)."""


class Writer(Protocol):
    def statement(self, cluster: Cluster) -> tuple[str, str, str | None]:
        """(text, how it was made, attribute) of the semantic memory a cluster is promoted to."""


# --- stance: what a sentence says about the user ---------------------------------------------------

_RELATIONS: list[tuple[str, str]] = [
    (r"(?:is|was|'s) allergic to", "is allergic to"),
    (r"(?:is|was) intolerant (?:to|of)", "is allergic to"),
    (r"(?:does not|doesn't|did not|didn't|never) (?:want|like|eat|drink|take|book|fly)", "avoids"),
    (r"(?:dislikes|disliked|hates|hated|avoids|avoided|can't stand|cannot stand|refuses|refused)", "avoids"),
    (r"(?:prefers|preferred|prefer|likes|liked|loves|loved|enjoys|enjoyed|favou?rs|favou?red)", "prefers"),
    (r"(?:asked|asks|asking) (?:again |once more )?for", "prefers"),
    (r"(?:requested|requests|wanted|wants|insisted on|insists on|chose|chooses|picked|picks|went for|goes for)",
     "prefers"),
    (r"(?:always|usually|again) (?:orders|ordered|books|booked|takes|took|gets|got|picks|picked|chooses|chose)",
     "prefers"),
]
# The user only: a pronoun may be anyone the note names ("booked Ana's flight; she asked for a window
# seat" is Ana's preference), so it states nothing about the user.
_USER = r"(?:the user|user|i)"
_CLAUSE = [(re.compile(rf"\b{_USER}\s+(?:(?:also|again|still|once more)\s+)?{verb}\s+(?P<value>[^.;!?\n]+)",
                       re.IGNORECASE), relation) for verb, relation in _RELATIONS]
_CUT = re.compile(r"\s*(?:,|\(|\bwhen\b|\bbecause\b|\bsince\b|\bfor (?:the|this|that|our|her|his|their)\b|"
                  r"\bat (?:the|a)\b|\bon (?:the|a|this|that)\b|\bduring\b|\bwhile\b|\bbut\b|\bso\b|\bthis\b|"
                  r"\bagain\b|\bas usual\b|\btoday\b|\byesterday\b|\bthough\b|\bif\b|\bthat\b).*$", re.IGNORECASE)
_LEAD = re.compile(r"^(?:(?:a|an|the|some|their|her|his|my|to|only)\s+)+", re.IGNORECASE)
_HEDGE = re.compile(r"\b(?:might|maybe|perhaps|whether|if they|asked whether|asked if|considering)\b", re.IGNORECASE)
_MAX_VALUE_WORDS = 8


@dataclass(frozen=True)
class Stance:
    relation: str
    value: str

    @property
    def key(self) -> tuple[str, str]:
        return self.relation, self.value.lower()


def stance(text: str) -> Stance | None:
    """The first relation a text states about the user ("… the user asked for a window seat" →
    prefers "window seat"), or None; hedged sentences state none."""
    if not text or _HEDGE.search(text):
        return None
    for pattern, relation in _CLAUSE:
        match = pattern.search(text)
        if match:
            value = _LEAD.sub("", _CUT.sub("", match.group("value")).strip()).strip(" '\"")
            words = value.split()
            if 0 < len(words) <= _MAX_VALUE_WORDS:
                return Stance(relation, " ".join(words))
    return None


_STOPWORDS = frozenset(("a", "an", "the", "and", "or", "of", "for", "to", "in", "on", "at", "with", "from", "by",
                        "some", "any", "their", "her", "his", "my", "our", "your", "this", "that", "is", "are",
                        "was", "be", "it", "its", "as"))


def _content_words(value: str) -> frozenset[str]:
    return frozenset(w for w in re.findall(r"[^\W\d_]{3,}", value.lower()) if w not in _STOPWORDS)


def attribute_fact(text: str) -> tuple[str, str] | None:
    """An attribute of the user `app.core.facts` reads (residence, employer…), as (attribute, value)."""
    for fact in facts.facts(text or ""):
        if fact.subject == "user" and not fact.ends:
            return fact.attribute, fact.value
    return None


def claim(text: str) -> Stance | None:
    """What a note states about the user: an attribute `app.core.facts` reads, else a stance."""
    found = attribute_fact(text)
    return Stance(found[0], found[1]) if found else stance(text)


# --- the default scorer and writer ---------------------------------------------------------------

@dataclass(frozen=True)
class DefaultScorer:
    similarity: float = 0.72
    stance_similarity: float = 0.45
    """The cosine two notes stating the same relation need to be joined (see `clusters`)."""
    weights: Weights = Weights()

    def clusters(self, items: Sequence[Item], now: datetime) -> list[Cluster]:
        if not items:
            return []
        vectors = np.array([m.embedding for m in items], dtype=np.float32)
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        cosine = vectors @ vectors.T
        # Notes that state something about the user cluster with each other only, by what they
        # state: the same relation to values sharing a content word, with embeddings not far apart
        # (a note's embedding is mostly about its errand, "booked dinner at …", not the fact it
        # mentions in passing). The others cluster by embedding alone. So a routine near a
        # preference's errand never absorbs the preference, nor the reverse.
        claims = [claim(m.content) for m in items]
        words = [_content_words(c.value) if c else frozenset() for c in claims]
        stating = np.array([c is not None for c in claims])
        near = (cosine >= self.similarity - 1e-6) & ~stating[:, None] & ~stating[None, :]
        for i, a in enumerate(claims):
            near[i, i] = True
            if a is None:
                continue
            for j in range(i + 1, len(items)):
                b = claims[j]
                if (b is not None and a.relation == b.relation and words[i] & words[j]
                        and cosine[i, j] >= self.stance_similarity):
                    near[i, j] = near[j, i] = True
        degree = near.sum(axis=1)
        order = sorted(range(len(items)), key=lambda i: (-int(degree[i]), -items[i].confidence, items[i].id))
        free = np.ones(len(items), dtype=bool)
        found = []
        for i in order:
            if not free[i]:
                continue
            members = [int(j) for j in np.flatnonzero(free & near[i])]
            free[members] = False
            cluster = Cluster([items[j] for j in members])
            self._score(cluster, vectors[members], now)
            found.append(cluster)
        return found

    def _score(self, cluster: Cluster, vectors: np.ndarray, now: datetime) -> None:
        w = self.weights
        members = cluster.members
        cluster.mentions = len({m.created_at.date() for m in members})
        cluster.salience = min(1.0, (cluster.mentions - 1) / max(1, w.saturation - 1))
        newest = max(m.created_at for m in members)
        age_days = max(0.0, (now - newest).total_seconds() / 86400)
        cluster.recency = math.exp(-math.log(2) * age_days / w.half_life_days)
        cluster.confidence = sum(m.confidence for m in members) / len(members)
        stated = [m for m in members if claim(m.content)]
        cluster.stance = len(stated) / len(members)
        cluster.score = (w.salience * cluster.salience + w.recency * cluster.recency
                         + w.confidence * cluster.confidence) / (w.salience + w.recency + w.confidence)
        # The medoid leads the members (the statement writer reads it first).
        if len(members) > 1:
            centrality = (vectors @ vectors.T).sum(axis=1)
            ranked = sorted(range(len(members)), key=lambda k: (-float(centrality[k]), -members[k].confidence,
                                                                 members[k].id))
            cluster.members = [members[k] for k in ranked]


@dataclass(frozen=True)
class DefaultWriter:
    min_agreeing: int = 2

    def statement(self, cluster: Cluster) -> tuple[str, str, str | None]:
        attributes = Counter(a for a in (attribute_fact(m.content) for m in cluster.members) if a)
        if attributes:
            (attribute, value), count = attributes.most_common(1)[0]
            if count >= self.min_agreeing:
                return f"User's {attribute} is {value}.", "template", attribute
        stances = [s for s in (stance(m.content) for m in cluster.members) if s]
        if stances:
            counts = Counter(s.key for s in stances)
            (relation, _), count = counts.most_common(1)[0]
            if count >= self.min_agreeing:
                value = next(s.value for s in stances if s.key == counts.most_common(1)[0][0])
                return f"User {relation} {value}.", "template", relation
            lead = stances[0]  # the most central member that states one: the best-supported clause
            return f"User {lead.relation} {lead.value}.", "best_supported", lead.relation
        return cluster.members[0].content, "best_supported", None


@dataclass(frozen=True)
class Thresholds:
    min_mentions: int = 3
    promote_at: float = 0.55
    min_stance: float = 0.5
    evict_below: float = 0.35


def promotable(cluster: Cluster, t: Thresholds) -> bool:
    """Whether a scored cluster is promoted; fills `cluster.reasons` either way."""
    reasons = []
    if cluster.mentions < t.min_mentions:
        reasons.append(f"mentioned on {cluster.mentions} day(s), fewer than {t.min_mentions}")
    if cluster.stance < t.min_stance:
        reasons.append("states no standing fact about the user")
    if cluster.score < t.promote_at:
        reasons.append(f"score {cluster.score:.2f} below {t.promote_at}")
    cluster.reasons = reasons or [f"mentioned on {cluster.mentions} days with score {cluster.score:.2f}"]
    return not reasons


def window_key(tenant_id: str, agent_id: str, user_id: str | None, kind: str, source_ids: Sequence[str]) -> str:
    """The idempotency key of a promotion or eviction: the window and its sorted source ids."""
    parts = [tenant_id, agent_id, user_id or "", kind, *sorted(source_ids)]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()
