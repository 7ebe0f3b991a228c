"""``semantic_attack``: the write *means* what known poisoning attempts mean, whatever its wording.

The rule detectors match shapes of sentences; a paraphrase with none of those shapes passes them.
This signal reuses the embedding ``remember`` computes anyway (all-MiniLM-L6-v2, 384-d,
normalised) and scores it with a small classifier (``data/semantic_model.npz``) trained on labelled
exemplars written for it (``dev/screening/data/exemplars.jsonl`` in the repository): varied human
sentences per attack family (standing instructions for future turns, exfiltration and beacons,
privilege and identity claims, fake lessons, cross-user bridges, tool-misuse directives, hidden
markup, secret harvesting) and ordinary memories that look similar (preferences, tasks that send or
delete things, facts about who is an admin, security talk that quotes attacks, runbooks, lessons,
code with comments, logs and IDs), plus the spent held-out sets (see
``dev.screening.train.exemplars``).

Score: one logistic classifier over two feature sets, trained together:

* the 384-d embedding (what the text is about, and its tone);
* the text's distinct lower-case words, hashed into ``2**14`` buckets and scaled to length
  ``LEXICAL_WEIGHT`` (which words it uses: the embedding blurs "send me" and "send them" together). Only the first
  ``LEXICAL_CHARS`` characters are read, as the embedder reads only the start of a long text.

The probability that the write is an attack is one 384-element dot product plus one weight per
distinct word: tens of microseconds. The two thresholds (medium, high) ship in the model file; the
trainer picks them by 5-fold cross-validation on the training data only, as the probabilities at
which 6 % and 3 % of its benign rows would be flagged, never on a blind held-out set
(``python -m dev.screening.train.exemplars``; see docs/benchmarks/).

Scoring each sentence as well as the whole text (sentence vectors pooled from the same forward
pass) was tried for orders buried in long paragraphs and left out: on the spent sets it stopped
as many more benign writes as attacks (docs/benchmarks/screening.md).

When this first stage is unsure (its probability at or above a gate), a second stage joins the
vote: a fine-tuned MiniLM classifier that reads the text itself (``reranker``); the flag's score is
then the mean of the two probabilities, with the second stage's thresholds. On the fourth held-out
set, with both trained without it, the mean stopped more attacks at fewer false positives than
either model alone (docs/benchmarks/screening.md).

It runs only when the embedding came from the model the exemplars were embedded with (another
embedder's vectors are not comparable) and is skipped for procedural (FSM JSON) writes. Evidence
is the whole content: the signal says "this reads like an attack", not which words.
Known limits: the embedding model reads English, so other languages lean on the rules' cue lexicons
(``lexicon``); the exemplars hold ordinary notes and attacks in many languages so that a language is
not itself a sign of attack; an attack family with no exemplar is caught mostly by the rules
(leave-one-family-out figures in docs/benchmarks/); short texts embed noisily; a preference
phrased as an order sits close to a standing instruction; a harmful "lesson" sits close to an honest
one.
"""

from __future__ import annotations

import functools
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from app.core.screening import reranker
from app.core.screening.flags import RiskFlag, Span

NAME = "semantic_attack"
MODEL = Path(__file__).resolve().parent / "data" / "semantic_model.npz"
LEXICAL_BUCKETS = 1 << 14
LEXICAL_CHARS = 4096
#: The length of the word vector beside the unit embedding: 3 made cross-validation on the training
#: rows catch the most attacks at 2 % benign (0.75 against 0.68 at 1 and 0.59 without words).
LEXICAL_WEIGHT = 3.0
_WORD = re.compile(r"[a-z0-9_']+")


def lexical_buckets(content: str) -> np.ndarray:
    """The hash buckets of the distinct lower-case words in the start of ``content`` (linear time)."""
    words = set(_WORD.findall(content[:LEXICAL_CHARS].lower()))
    return np.fromiter(sorted({zlib.crc32(w.encode()) & (LEXICAL_BUCKETS - 1) for w in words}), dtype=np.int64)


def lexical_vector(content: str) -> np.ndarray:
    """``lexical_buckets`` as a dense vector of length ``LEXICAL_WEIGHT`` (what the trainer fits on)."""
    vector = np.zeros(LEXICAL_BUCKETS, dtype=np.float64)
    buckets = lexical_buckets(content)
    if len(buckets):
        vector[buckets] = LEXICAL_WEIGHT / np.sqrt(len(buckets))
    return vector


@dataclass(frozen=True)
class Classifier:
    """A linear attack classifier over one model's unit embeddings and the text's hashed words,
    with the probabilities at which it flags medium and high."""

    weights: np.ndarray
    lexical: np.ndarray
    bias: float
    model: str
    medium: float
    high: float

    def probability(self, vector: Any, content: str = "") -> float:
        """P(attack) for one embedding and the text it embeds."""
        v = np.asarray(getattr(vector, "to_numpy", lambda: vector)(), dtype=np.float32).reshape(-1)
        buckets = lexical_buckets(content)
        words = LEXICAL_WEIGHT * float(self.lexical[buckets].sum()) / np.sqrt(len(buckets)) if len(buckets) else 0.0
        return float(1.0 / (1.0 + np.exp(-(float(self.weights @ v) + words + self.bias))))

    def severity(self, probability: float) -> str | None:
        """The flag severity for an attack probability, or None below the medium threshold."""
        if probability >= self.high:
            return "high"
        return "medium" if probability >= self.medium else None

    def save(self, path: Path = MODEL) -> None:
        np.savez(path, weights=self.weights.astype(np.float32), lexical=self.lexical.astype(np.float32),
                 bias=np.float32(self.bias), model=np.array(self.model),
                 thresholds=np.array([self.medium, self.high], dtype=np.float32))


@functools.cache
def load() -> Classifier:
    """The shipped classifier (read once per process)."""
    with np.load(MODEL, allow_pickle=False) as data:
        medium, high = (float(t) for t in data["thresholds"])
        return Classifier(data["weights"].astype(np.float32), data["lexical"].astype(np.float32), float(data["bias"]),
                          str(data["model"]), medium, high)


def detect(content: str, embedding: Sequence[float] | None, embedder: str | None,
           classifier: Classifier | None = None) -> RiskFlag | None:
    """The ``semantic_attack`` flag, or None (also when the embedding is from another model).

    With the shipped classifier, the shipped second stage (``reranker``) joins the vote when the
    first stage's probability reaches its gate; a replacement ``classifier`` (the benchmark's
    leave-one-out runs) decides alone with its own thresholds, since the second stage was trained
    on every row."""
    if embedding is None or not content.strip():
        return None
    second = reranker.load() if classifier is None else None
    classifier = classifier or load()
    if embedder != classifier.model:
        return None
    probability = classifier.probability(embedding, content)
    if second is not None:
        probability, level = second.vote(probability, content)
    else:
        level = classifier.severity(probability)
    if level is None:
        return None
    return RiskFlag(NAME, level, probability, (Span("content", 0, len(content)),))
