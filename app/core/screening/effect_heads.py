"""Small linear heads, one per category of effect, over the embedding ``remember`` already computes.

``effects`` finds most categories by structure (links, numbers, commands, schedules, conditions,
imperatives); some have no structure of their own (a grant of authority, a designation of a
trusted source) and a structure can be written around (an order in a language the grammar checks
do not read). These heads read the meaning instead: each is a logistic classifier over the same
two features as ``semantic`` (the 384-d unit embedding and the text's hashed words, so one
``Classifier``'s arithmetic), trained by ``python -m dev.screening.train.effects`` on
``dev/screening/data/effect_examples.jsonl``: descriptions of each effect written in several registers
and languages, with ordinary memories (facts, preferences, past events, plans) as counter-examples.

Each head ships two cuts (``data/effect_heads.npz``): ``support``, where 6 % of the rows without
the category lie above it under 5-fold cross-validation (enough to confirm a structure), and
``alone``, where 3 % do (enough to raise the category with no structure). Scoring all heads is six
384-element dot products and one weight look-up per distinct word per head: tens of microseconds.

Known limits: the examples are a few hundred sentences, so a head is a coarse reader; the embedding
model reads English best, so in other languages the hashed words carry more of the decision.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from app.core.screening.semantic import LEXICAL_WEIGHT, lexical_buckets

MODEL = Path(__file__).resolve().parent / "data" / "effect_heads.npz"


@dataclass(frozen=True)
class Heads:
    """One linear head per category (rows in ``names`` order) and its two cuts."""

    names: tuple[str, ...]
    weights: np.ndarray
    """(heads, 384) embedding weights."""
    lexical: np.ndarray
    """(heads, ``semantic.LEXICAL_BUCKETS``) word-bucket weights."""
    bias: np.ndarray
    support: np.ndarray
    alone: np.ndarray
    model: str
    """The embedder the heads were trained with (another model's vectors are not comparable)."""

    def probabilities(self, vector: Any, content: str) -> dict[str, float]:
        """P(category) for every head, from one embedding and the text it embeds."""
        v = np.asarray(getattr(vector, "to_numpy", lambda: vector)(), dtype=np.float32).reshape(-1)
        logits = self.weights @ v + self.bias
        buckets = lexical_buckets(content)
        if len(buckets):
            logits = logits + LEXICAL_WEIGHT * self.lexical[:, buckets].sum(axis=1) / np.sqrt(len(buckets))
        return dict(zip(self.names, (float(p) for p in 1.0 / (1.0 + np.exp(-logits)))))

    def save(self, path: Path = MODEL) -> None:
        np.savez_compressed(path, names=np.array(self.names), weights=self.weights.astype(np.float32),
                            lexical=self.lexical.astype(np.float16), bias=self.bias.astype(np.float32),
                            support=self.support.astype(np.float32), alone=self.alone.astype(np.float32),
                            model=np.array(self.model))


@functools.cache
def load() -> Heads | None:
    """The shipped heads (read once per process), or None when the file is absent."""
    if not MODEL.is_file():
        return None
    with np.load(MODEL, allow_pickle=False) as data:
        return Heads(tuple(str(n) for n in data["names"]), data["weights"].astype(np.float32),
                     data["lexical"].astype(np.float32), data["bias"].astype(np.float32),
                     data["support"].astype(np.float32), data["alone"].astype(np.float32), str(data["model"]))


def read(content: str, embedding: Sequence[float] | None, embedder: str | None,
         heads: Heads | None = None) -> dict[str, float]:
    """The heads' probabilities for ``content``, or ``{}`` without a comparable embedding."""
    heads = heads or load()
    if heads is None or embedding is None or embedder != heads.model or not content.strip():
        return {}
    return heads.probabilities(embedding, content)
