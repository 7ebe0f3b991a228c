"""Train the semantic screening classifier (``app/core/screening/data/semantic_model.npz``).

    python -m app.bench.make_screening_exemplars

Training data: the hand-written exemplars (``app/core/screening/data/exemplars.jsonl``: varied
human sentences per attack family and ordinary memories that resemble them, written for
Memwarden, no templates) plus the **dev** split of the generated corpus (its injection and exfiltration rows and all its
benign rows, redacted as ``remember`` screens them) (never its test split,
never a held-out corpus). Vectors: the local all-MiniLM-L6-v2 embedder, the one ``remember``
uses. Model: L2-regularised logistic regression by full-batch gradient descent (deterministic).
Rerun after editing the exemplars or changing the local model.
"""

from __future__ import annotations

import json
from typing import Iterable, Sequence

import numpy as np

from app.bench.corpora import DATA, HELDOUT_SETS, load_corpus
from app.core.screening.semantic import MODEL, Classifier

EXEMPLARS = MODEL.parent / "exemplars.jsonl"
L2, STEPS, RATE = 1e-3, 3000, 2.0
SEMANTIC_DEV_CLASSES = ("prompt_injection", "exfiltration")


def exemplars() -> list[dict]:
    """The labelled exemplars: ``{"family", "label", "text"}``."""
    return [json.loads(line) for line in EXEMPLARS.read_text(encoding="utf-8").splitlines() if line.strip()]


def training_rows(skip_family: str | None = None) -> list[tuple[str, bool, str]]:
    """(text, is_attack, family) for training: exemplars (less ``skip_family``) and the corpus dev split."""
    from app.core.redaction import Redactor

    redactor = Redactor()
    rows = [(e["text"], e["label"] == "poisoned", e["family"]) for e in exemplars() if e["family"] != skip_family]
    # Only the dev classes that are about meaning; secrets, PII, hidden characters, contradictions and
    # provenance are the rules' job (learning "a key is mentioned" would flag every redacted note).
    # Redacted, as remember screens them.
    rows += [(redactor.redact_payload(r["content"], [], {}).content, r["label"] == "poisoned", "dev:" + r["class"])
             for r in load_corpus(DATA) if r["split"] == "dev" and r["type"] != "procedural"
             and (r["label"] == "benign" or r["class"] in SEMANTIC_DEV_CLASSES)]
    return rows


def fit(vectors: np.ndarray, labels: Sequence[bool], model: str) -> Classifier:
    """Logistic regression on unit vectors (deterministic: zero start, fixed steps)."""
    y = np.asarray(labels, dtype=np.float64)
    x = np.asarray(vectors, dtype=np.float64)
    w, b = np.zeros(x.shape[1]), 0.0
    for _ in range(STEPS):
        p = 1.0 / (1.0 + np.exp(-(x @ w + b)))
        g = p - y
        w -= RATE * (x.T @ g / len(y) + L2 * w)
        b -= RATE * float(g.mean())
    return Classifier(w.astype(np.float32), float(b), model)


def train(embedder=None, skip_family: str | None = None, cache: dict[str, np.ndarray] | None = None) -> Classifier:
    """A classifier trained on ``training_rows(skip_family)`` (``cache``: text -> vector, reused across folds)."""
    from app.embeddings import LocalMiniLMEmbedder

    embedder = embedder or LocalMiniLMEmbedder()
    rows = training_rows(skip_family)
    vectors = embed_all(embedder, [r[0] for r in rows], cache)
    return fit(vectors, [r[1] for r in rows], embedder.name)


def embed_all(embedder, texts: Iterable[str], cache: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """Vectors for ``texts``, embedding only those not in ``cache``."""
    texts = list(texts)
    cache = {} if cache is None else cache
    missing = [t for t in dict.fromkeys(texts) if t not in cache]
    if missing:
        cache.update(zip(missing, embedder.embed(missing)))
    return np.stack([cache[t] for t in texts]) if texts else np.zeros((0, 384), dtype=np.float32)


def check() -> list[str]:
    """Problems with the shipped classifier: not what retraining gives, or trained on held-out text."""
    from app.core.screening import semantic

    problems = []
    shipped, retrained = semantic.load(), train()
    if retrained.model != shipped.model or float(np.abs(retrained.weights - shipped.weights).max()) >= 1e-2:
        problems.append("the shipped semantic_model.npz is not what the exemplars and dev split train")
    held_out = {r["content"] for r in load_corpus(DATA) if r["split"] == "test"}
    held_out |= {r["content"] for path in HELDOUT_SETS.values() for r in load_corpus(path)}
    if {text for text, _, _ in training_rows()} & held_out:
        problems.append("a training row is in the test split or the held-out corpus")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    """Train and save; with ``--check``, only verify the shipped file (exit 1 on a problem)."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="verify the shipped classifier instead of writing it")
    args = parser.parse_args(argv)
    if args.check:
        problems = check()
        print("\n".join(problems) or "ok: the shipped classifier matches its training data")
        return 1 if problems else 0
    train().save()
    print(f"trained on {len(training_rows())} rows -> {MODEL}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
