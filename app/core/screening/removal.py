"""A learned reader for "this removes a safeguard, as a rule for later", in any domain's words.

``controls`` finds a removed safeguard by its *name* (verification, review, MFA, backups …), and a
fake lesson written in a trade's own words names a control no list holds: the walk-round before a
departure, the second count of a till, the crossmatch, the licence check of a new driver. This
head reads the meaning instead. It is a logistic classifier over the same two features as
``semantic`` (the 384-d embedding ``remember`` already computes, and the text's hashed words),
trained on:

* sentences written for it (``dev/screening/data/removal_sentences.jsonl`` in the repository)
  across many trades (software delivery, finance, insurance, health, HR, safeguarding, logistics, manufacturing, legal,
  hospitality, education, support, security, construction, energy, aviation, pharma, retail …)
  that say a check, approval, inspection, test, sign-off or limit may be skipped, assumed, waived
  or dropped from now on (``removes``), and as hard negatives the same checks being done, lessons
  that *add* or keep a check, relaxations bounded by a reason, a scope and a compensating control,
  and notes that describe a check (``keeps``);
* the first stage's fake-lesson attacks and every benign row it trains on (exemplars, the corpus's
  dev split, the spent held-out sets), so that ordinary notes stay below its cut.

No second model call: one dot product and one weight per distinct word, as ``semantic``. The cut
(``high`` in the model file) is where 3 % of its benign training rows lie above it under 5-fold
cross-validation (``python -m dev.screening.train.exemplars --removal-head`` retrains it;
``--check`` verifies the shipped file).

How ``screen`` uses it: above the cut, *and* the write reads as a rule for later (a rule cue of
``controls.RULE``: "from now on", "lesson", "takeaway", "policy" …) or a control rule already
matched, the ``prompt_injection`` flag is high (kind ``learned_removal``, evidence the whole
content, as ``semantic_attack``'s). Alone, the head raises nothing: a lesson that adds a check sits
close to one that removes it, and the cue or the rule is the second reader. Known limits: it was
trained on English sentences and a handful in seven other languages; a bounded relaxation with a
stated reason can still read as a removal; a removal with no rule cue and no control noun passes.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Sequence

import numpy as np

from app.core.screening.semantic import Classifier

KIND = "learned_removal"
MODEL = Path(__file__).resolve().parent / "data" / "removal_model.npz"
WEIGHT = 0.6
"""The ``prompt_injection`` evidence weight when the head fires with a rule cue or a control rule (high)."""


@functools.cache
def load() -> Classifier | None:
    """The shipped head (read once per process), or None when the file is absent."""
    if not MODEL.is_file():
        return None
    with np.load(MODEL, allow_pickle=False) as data:
        medium, high = (float(t) for t in data["thresholds"])
        return Classifier(data["weights"].astype(np.float32), data["lexical"].astype(np.float32), float(data["bias"]),
                          str(data["model"]), medium, high)


def fires(content: str, embedding: Sequence[float] | None, embedder: str | None,
          head: Classifier | None = None) -> bool:
    """Whether the head reads ``content`` as removing a safeguard (probability at or above its
    ``high`` cut); False without an embedding from the model it was trained on."""
    head = head or load()
    if head is None or embedding is None or embedder != head.model or not content.strip():
        return False
    return head.probability(embedding, content) >= head.high
