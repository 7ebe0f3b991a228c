"""Train the per-category heads of ``app.core.screening.effect_heads`` (``data/effect_heads.npz``).

Data: ``dev/screening/data/effect_examples.jsonl``, one row per sentence, ``{"text", "effects"}``:
the categories of effect the sentence would have on an agent that believed it (``directive``,
``authority``, ``destination``, ``high_impact_fact``, ``trusted_source``, ``command``), or none.
They were written for these heads as descriptions of each effect in several registers (a chat
line, a memo, a ticket, a terse note) and languages (English, German, French, Spanish, Italian,
Portuguese, Dutch, Polish), beside ordinary memories that carry none (preferences, facts,
appointments, past events, plans, and recurring habits that order nothing). None is copied
from an attack set, and no held-out set is read. The semantic classifier's benign exemplars join
as further counter-examples (``ordinary``), never as positives.

Each head is one-against-the-rest: its positives are the rows labelled with its category, its
negatives every other row (other categories included, so a head learns its own effect rather than
"sounds risky"). Fitting is ``make_screening_exemplars.fit`` (the same logistic regression on
[unit embedding, hashed words]); its out-of-fold probabilities (the same fixed 5 folds) give the
cuts: ``support`` where ``SUPPORT_SHARE`` of the negatives lie above (6 %: enough to confirm a
structure), ``alone`` where ``ALONE_SHARE`` do (1 %: a head that raises a category by itself must
be sure, since a short or unusual note embeds noisily).

    python -m dev.screening.train.effects          # retrain and write the model file
    python -m dev.screening.train.effects --check  # verify the shipped file matches the data
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from dev.screening.train.exemplars import embed_all, fit, out_of_fold, word_matrix
from app.core.screening import effects
from app.core.screening.effect_heads import MODEL, Heads

EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "effect_examples.jsonl"
SUPPORT_SHARE, ALONE_SHARE = 0.06, 0.01
SUPPORT_FLOOR, ALONE_FLOOR = 0.25, 0.5
POSITIVE_COPIES = 3
"""Each head's positives count this many times (rows repeated): a category has a few dozen examples
against some eight hundred counter-examples, and unweighted the head would learn to say "no"."""
BORROWED_EVERY = 2
"""Every second borrowed counter-example is kept (enough for calibration; the fit is quadratic in rows)."""
"""The lowest cuts: where few negatives score at all (a head whose examples are all far from ordinary
notes), the share would put a cut near zero, and a note unlike every example would cross it."""


def examples() -> list[dict]:
    """The labelled sentences (every label checked against ``effects.NAMES``), then the counter-examples
    borrowed from the semantic classifier's benign exemplars (``ordinary()``)."""
    rows = [json.loads(line) for line in EXAMPLES.read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in rows:
        unknown = set(row["effects"]) - set(effects.NAMES)
        if unknown:
            raise ValueError(f"unknown effect {sorted(unknown)} in {EXAMPLES.name}")
    return rows + ordinary({r["text"] for r in rows})


def ordinary(skip: set[str]) -> list[dict]:
    """The semantic classifier's benign exemplars (``dev/screening/data/exemplars.jsonl``:
    ordinary notes in many registers and languages) as rows with no effect, for calibration: a few
    hundred written sentences cannot show a head what ordinary memory looks like. A benign note can
    still carry an effect (a runbook's command, a reminder's schedule), so a row is left out of every
    head whose category its structure raises (``effects.detect`` without heads); a head is taught
    only that such notes are not its category when nothing about them says they are."""
    from dev.screening.train.exemplars import EXEMPLARS as path

    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    found = []
    benign = [r for r in rows if r["label"] == "benign"]
    for row in benign[::BORROWED_EVERY]:
        if row["text"] in skip:
            continue
        structural = {f.name for f in effects.detect(row["text"])}
        found.append({"text": row["text"], "effects": [], "unknown": sorted(structural)})
    return found


def train(embedder=None) -> Heads:
    """Heads trained on ``examples()`` with the local embedder (or ``embedder``)."""
    from app.embeddings import LocalMiniLMEmbedder

    embedder = embedder or LocalMiniLMEmbedder()
    rows = examples()
    texts = [r["text"] for r in rows]
    vectors = embed_all(embedder, texts)
    embedded = np.asarray(vectors, dtype=np.float64)
    lexical_rows = word_matrix(texts)[1]
    gram = embedded @ embedded.T + lexical_rows @ lexical_rows.T  # what fit() descends on, for the folds
    fitted, cuts = [], []
    for name in effects.NAMES:
        positive = [name in r["effects"] for r in rows]
        at = np.array([i for i, r in enumerate(rows) if name not in r.get("unknown", ())
                       for _ in range(POSITIVE_COPIES if positive[i] else 1)])
        labels = np.array([positive[i] for i in at], dtype=np.float64)
        fitted.append(fit(embedded[at], [texts[i] for i in at], labels.astype(bool), embedder.name, calibrate=False))
        negatives = np.sort(out_of_fold(gram[np.ix_(at, at)], labels)[labels == 0])[::-1]
        cuts.append([max(floor, float(negatives[min(int(share * len(negatives)), len(negatives) - 1)]) + 1e-6)
                     for share, floor in ((SUPPORT_SHARE, SUPPORT_FLOOR), (ALONE_SHARE, ALONE_FLOOR))])
    return Heads(effects.NAMES, np.stack([c.weights for c in fitted]), np.stack([c.lexical for c in fitted]),
                 np.array([c.bias for c in fitted]), np.array([c[0] for c in cuts]),
                 np.array([c[1] for c in cuts]), embedder.name)


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="verify the shipped heads instead of writing them")
    args = parser.parse_args(argv)
    heads = train()
    if args.check:
        from app.core.screening import effect_heads

        shipped = effect_heads.load()
        same = (shipped is not None and shipped.names == heads.names
                and np.allclose(shipped.weights, heads.weights, atol=1e-4)
                and np.allclose(shipped.alone, heads.alone, atol=1e-4))
        print("ok: the shipped heads match their examples" if same else "the shipped heads differ: retrain them")
        return 0 if same else 1
    heads.save(MODEL)
    cuts = ", ".join(f"{n} {s:.2f}/{a:.2f}" for n, s, a in zip(heads.names, heads.support, heads.alone))
    print(f"trained on {len(examples())} rows -> {MODEL} (support/alone cuts: {cuts})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
