"""``semantic_attack``: the write *means* what known poisoning attempts mean, whatever its wording.

The rule detectors match shapes of sentences; a paraphrase with none of those shapes passes them.
This signal reuses the embedding ``remember`` computes anyway (all-MiniLM-L6-v2, 384-d,
normalised) and scores it with a small classifier (``data/semantic_model.npz``) trained on labelled
exemplars written for it (``data/exemplars.jsonl``): short human sentences per attack family (standing instructions for future turns, exfiltration and beacons,
privilege and identity claims, fake lessons, cross-user bridges, tool-misuse directives, hidden
markup) and ordinary memories that look similar (preferences, reminders, lessons, contacts).

Score: a logistic classifier over the 384-d vector (384 weights and a bias, trained at build time
on the exemplars and the dev split of the generated corpus, L2-regularised): the probability that
the write is an attack. One 384-element dot product: microseconds.

It runs only when the embedding came from the model the exemplars were embedded with (another
embedder's vectors are not comparable) and is skipped for procedural (FSM JSON) writes. Evidence
is the whole content: the signal says "this reads like an attack", not which words.
Known limits: English exemplars; an attack family with no exemplar is caught only by the rules;
short texts embed noisily; a preference phrased as an order sits close to a standing instruction.
Thresholds were chosen on 5-fold cross-validation over the training data (exemplars and dev
split), never on held-out data (see docs/benchmarks.md).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from app.core.screening.flags import RiskFlag, Span

NAME = "semantic_attack"
MODEL = Path(__file__).resolve().parent / "data" / "semantic_model.npz"
#: Attack probabilities at which the flag is medium / high. High was chosen where 5-fold
#: cross-validation on the training data staged under 2 % of benign writes.
MEDIUM, HIGH = 0.6, 0.8


@dataclass(frozen=True)
class Classifier:
    """A linear attack classifier over unit embeddings of one model."""

    weights: np.ndarray
    bias: float
    model: str

    def probability(self, vector: Any) -> float:
        """P(attack) for one embedding."""
        v = np.asarray(getattr(vector, "to_numpy", lambda: vector)(), dtype=np.float32).reshape(-1)
        return float(1.0 / (1.0 + np.exp(-(float(self.weights @ v) + self.bias))))

    def save(self, path: Path = MODEL) -> None:
        np.savez(path, weights=self.weights.astype(np.float32), bias=np.float32(self.bias), model=np.array(self.model))


@functools.cache
def load() -> Classifier:
    """The shipped classifier (read once per process)."""
    with np.load(MODEL, allow_pickle=False) as data:
        return Classifier(data["weights"].astype(np.float32), float(data["bias"]), str(data["model"]))


def severity(probability: float) -> str | None:
    """The flag severity for an attack probability, or None below the medium threshold."""
    if probability >= HIGH:
        return "high"
    return "medium" if probability >= MEDIUM else None


def detect(content: str, embedding: Sequence[float] | None, embedder: str | None,
           classifier: Classifier | None = None) -> RiskFlag | None:
    """The ``semantic_attack`` flag, or None (also when the embedding is from another model)."""
    if embedding is None or not content.strip():
        return None
    classifier = classifier or load()
    if embedder != classifier.model:
        return None
    probability = classifier.probability(embedding)
    level = severity(probability)
    if level is None:
        return None
    return RiskFlag(NAME, level, probability, (Span("content", 0, len(content)),))
