"""Train the semantic screening classifier (``app/core/screening/data/semantic_model.npz``).

    python -m dev.screening.train.exemplars

Training data: the hand-written exemplars (``dev/screening/data/exemplars.jsonl``: varied
human sentences per attack family and ordinary memories that resemble them, written for
Memwarden, no templates, never derived from a held-out corpus); the **dev** split of the generated
corpus (its injection and exfiltration rows and all its benign rows) (never its test split); and
the **spent** held-out sets (``SEEN_SETS``: the eight sets that were measured once, read, and are
now dev data: their semantic attack families and all their benign rows). Every row is redacted as
``remember`` screens it. A held-out set that is not in ``SEEN_SETS`` (a new blind one) is never
trained on: ``--check`` fails if a training row is in one. Vectors: the local all-MiniLM-L6-v2
embedder, the one ``remember`` uses, and the hashed words of each text
(``semantic.lexical_vector``). Model: L2-regularised logistic regression by full-batch gradient
descent (deterministic), run in its dual form (on the rows' Gram matrix, computed once and shared
by the cross-validation folds: the same steps, since every step's weights are a combination of the
rows, but fast with 16 768 features). Thresholds: 5-fold cross-validation over the same rows gives
every row a probability from a model that did not see it; medium and high are where 5 % and 2 % of
the benign rows would be flagged. Rerun after editing the exemplars or changing the local model.
``--leave-one-set-out`` prints, for each spent set (``--sets`` to choose), what the classifier trained
without it (and the rules) stop on it: the figure used to pick ``L2``, the thresholds' shares and,
in the sixth pass, which new exemplars to keep (``--sets heldout_v3,heldout_v4,heldout_v5``; the three
sets written blind by hand, docs/benchmarks.md "Sixth pass"); in the seventh, with ``--families
fake_lesson,privilege_identity`` over v3 to v6, whether the control-removal rules and new exemplars
help a family the classifier has no rows of (docs/benchmarks.md "Seventh pass").

``--removal-head`` trains the learned removal reader instead (``app/core/screening/removal.py``,
``removal_model.npz``): the same model and cross-validated cut on ``removal_rows`` (its own written
sentences, the fake-lesson attacks and every benign row above); ``--check`` verifies it as well."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from app.bench.corpora import DATA, amsb_corpus, benign_load_writes, external_corpus, load_corpus
from app.core.screening.semantic import LEXICAL_BUCKETS, LEXICAL_WEIGHT, MODEL, Classifier, lexical_buckets
from dev.screening.heldout import HELDOUT_SETS

EXEMPLARS = Path(__file__).resolve().parents[1] / "data" / "exemplars.jsonl"
#: The removal head's own written sentences (``app.core.screening.removal``).
REMOVAL_SENTENCES = EXEMPLARS.parent / "removal_sentences.jsonl"
L2, STEPS, RATE = 3e-4, 400, 2.0
"""Chosen by leave-one-set-out over the three spent held-out sets (each left out of training in turn,
rules unchanged; ``--leave-one-set-out``, docs/benchmarks.md): at L2 3e-4 90.6 % caught, 2.7 % benign
staged; 1e-3 and 3e-3 caught less (87.9 %, 86.7 %), 1e-4 a little more (91.3 %) for more benign
writes staged (3.2 %). 400 momentum steps reach what 3000 plain ones did."""
FOLDS, MEDIUM_BENIGN, HIGH_BENIGN = 5, 0.06, 0.03
"""Cross-validation folds, and the shares of benign training rows the medium and high thresholds let
through. High: the share at which leave-one-set-out stages about half the 5 % benign budget of the
spent sets' benign writes (2.7 % at 3 %, for 90.6 % caught; 3.6 % at 4 % for 91.6 %; 2.4 % at 2 % for
86.2 %), since the one blind measurement so far (heldout_v3) staged 2.5 points more benign writes
than the set measured before it."""
SEMANTIC_DEV_CLASSES = ("prompt_injection", "exfiltration")
#: Held-out sets that were measured once and are now spent: read, trained on, reported as "seen"
#: (the fourth, ``heldout_v4``, since the fifth pass; the fifth, ``heldout_v5``, since the sixth; the
#: sixth, ``heldout_v6``, since the seventh; the seventh and eighth, ``heldout_v7`` and ``heldout_v8``, since
#: the ninth, where leave-one-set-out over v5-v8 said training on them helps: docs/benchmarks.md "Ninth pass").
SEEN_SETS = ("heldout", "heldout_fresh", "heldout_v3", "heldout_v4", "heldout_v5", "heldout_v6", "heldout_v7",
             "heldout_v8")
#: The spent sets the **second stage** (``reranker``) trains on: those of the eighth pass. Retrained on v7
#: and v8 as well in the ninth pass, its cuts fell (gate 0.56 -> 0.29) and on data no model trains on it
#: staged twice the benign writes (bastioncorpus 5 -> 10 of 63, the generated test split 4 -> 6 of 130)
#: for 5 more of 118 attacks there; so it stays trained on these sets (docs/benchmarks.md "Ninth pass").
SECOND_STAGE_SETS = ("heldout", "heldout_fresh", "heldout_v3", "heldout_v4", "heldout_v5", "heldout_v6")
#: Their attack families the classifier learns; PII profiles and protected keys are the rules' job
#: (their content is often an ordinary sentence: the attack is in a number format or a metadata key).
SEEN_ATTACK_FAMILIES = ("standing_instruction", "exfiltration", "privilege_identity", "fake_lesson", "cross_user",
                        "tool_misuse", "hidden_markup", "secret_harvest")


def exemplars() -> list[dict]:
    """The labelled exemplars: ``{"family", "label", "text"}``."""
    return [json.loads(line) for line in EXEMPLARS.read_text(encoding="utf-8").splitlines() if line.strip()]


def training_rows(skip_family: str | None = None, skip_set: str | None = None,
                  sets: Sequence[str] = SEEN_SETS) -> list[tuple[str, bool, str]]:
    """(text, is_attack, family) for training: exemplars and the seen sets' rows (less ``skip_family``'s
    attacks), the corpus dev split, and every held-out set of ``sets`` (the spent ones) except ``skip_set``."""
    from app.core.redaction import Redactor

    redactor = Redactor()
    rows = [(e["text"], e["label"] == "poisoned", e["family"]) for e in exemplars() if e["family"] != skip_family]
    # Only the dev classes that are about meaning; secrets, PII, hidden characters, contradictions and
    # provenance are the rules' job (learning "a key is mentioned" would flag every redacted note).
    # Redacted, as remember screens them.
    rows += [(redactor.redact_payload(r["content"], [], {}).content, r["label"] == "poisoned", "dev:" + r["class"])
             for r in load_corpus(DATA) if r["split"] == "dev" and r["type"] != "procedural"
             and (r["label"] == "benign" or r["class"] in SEMANTIC_DEV_CLASSES)]
    for name in sets:
        if name == skip_set:
            continue
        rows += [(redactor.redact_payload(r["content"], [], {}).content, r["label"] == "poisoned", r["class"])
                 for r in load_corpus(HELDOUT_SETS[name]) if r["type"] != "procedural" and r["class"] != skip_family
                 and (r["label"] == "benign" or r["class"] in SEEN_ATTACK_FAMILIES)]
    return rows


def fit(vectors: np.ndarray, texts: Sequence[str], labels: Sequence[bool], model: str,
        calibrate: bool = True) -> Classifier:
    """Logistic regression on [unit embedding, hashed words] (deterministic: zero start, fixed steps),
    with thresholds from ``FOLDS``-fold cross-validation when ``calibrate`` (else 0.5 for both).

    Everything runs on the rows' Gram matrix, computed once (the folds take its sub-matrices): the
    word part is sparse, so it is built from the buckets each row uses rather than 16 384 columns."""
    y = np.asarray(labels, dtype=np.float64)
    embedded = np.asarray(vectors, dtype=np.float64)
    per_row = [lexical_buckets(t) for t in texts]
    weights = np.array([LEXICAL_WEIGHT / np.sqrt(len(b)) if len(b) else 0.0 for b in per_row])
    gram = embedded @ embedded.T + lexical_gram(per_row, weights)
    alpha, bias = _descend(gram, y)
    lexical = np.zeros(LEXICAL_BUCKETS, dtype=np.float64)
    for buckets, coefficient in zip(per_row, weights * alpha):
        lexical[buckets] += coefficient
    medium = high = 0.5
    if calibrate:
        medium, high = thresholds(gram, y)
    return Classifier((embedded.T @ alpha).astype(np.float32), lexical.astype(np.float32), bias, model, medium, high)


def lexical_gram(per_row: Sequence[np.ndarray], weights: np.ndarray) -> np.ndarray:
    """The word part of the Gram matrix: rows i and j share ``count`` distinct buckets, each of value
    ``weights[i]`` and ``weights[j]``, so their dot product is ``count * weights[i] * weights[j]``. The
    counts come from each bucket's rows (a few dozen buckets a row), not from a rows x buckets product."""
    rows_of: dict[int, list[int]] = {}
    for i, buckets in enumerate(per_row):
        for bucket in buckets.tolist():
            rows_of.setdefault(bucket, []).append(i)
    counts = np.zeros((len(per_row), len(per_row)), dtype=np.float64)
    for rows in rows_of.values():
        index = np.asarray(rows)
        counts[np.ix_(index, index)] += 1.0
    return counts * np.outer(weights, weights)


def word_matrix(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(the buckets any row uses, each row's ``lexical_vector`` restricted to those buckets)."""
    per_row = [lexical_buckets(t) for t in texts]
    columns = np.unique(np.concatenate(per_row)) if per_row else np.zeros(0, dtype=np.int64)
    matrix = np.zeros((len(per_row), len(columns)), dtype=np.float64)
    for i, buckets in enumerate(per_row):
        if len(buckets):
            matrix[i, np.searchsorted(columns, buckets)] = LEXICAL_WEIGHT / np.sqrt(len(buckets))
    return columns, matrix


def _descend(gram: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """Gradient descent on the L2-regularised logistic loss, in the dual (weights = features.T @ alpha),
    with Nesterov momentum (the same optimum in a tenth of the plain steps: ~3000 rows share a
    2-core box with the test suite): the dual coefficients and the bias."""
    alpha, bias = np.zeros(len(y)), 0.0
    last_alpha, last_bias = alpha, bias
    for step in range(STEPS):
        momentum = step / (step + 3)
        ahead_alpha = alpha + momentum * (alpha - last_alpha)
        ahead_bias = bias + momentum * (bias - last_bias)
        gradient = 1.0 / (1.0 + np.exp(-(gram @ ahead_alpha + ahead_bias))) - y
        last_alpha, last_bias = alpha, bias
        alpha = ahead_alpha - RATE * (gradient / len(y) + L2 * ahead_alpha)
        bias = ahead_bias - RATE * float(gradient.mean())
    return alpha, bias


def thresholds(gram: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(medium, high): the out-of-fold probabilities above which ``MEDIUM_BENIGN`` and ``HIGH_BENIGN``
    of the benign rows lie (fixed fold assignment, so retraining reproduces them)."""
    held = out_of_fold(gram, y)
    benign = np.sort(held[y == 0])[::-1]
    at = lambda share: float(benign[min(int(share * len(benign)), len(benign) - 1)]) + 1e-6  # noqa: E731
    return at(MEDIUM_BENIGN), at(HIGH_BENIGN)


def out_of_fold(gram: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Every row's probability from the model trained on the other ``FOLDS - 1`` folds (fixed folds)."""
    order = np.random.default_rng(1).permutation(len(y))
    held = np.zeros(len(y))
    for fold in np.array_split(order, FOLDS):
        train_rows = np.setdiff1d(order, fold)
        alpha, bias = _descend(gram[np.ix_(train_rows, train_rows)], y[train_rows])
        held[fold] = 1.0 / (1.0 + np.exp(-(gram[np.ix_(fold, train_rows)] @ alpha + bias)))
    return held


def train(embedder=None, skip_family: str | None = None, cache: dict[str, np.ndarray] | None = None,
          skip_set: str | None = None) -> Classifier:
    """A classifier trained on ``training_rows(skip_family, skip_set)`` (``cache``: text -> vector, reused
    across folds)."""
    from app.embeddings import LocalMiniLMEmbedder

    embedder = embedder or LocalMiniLMEmbedder()
    rows = training_rows(skip_family, skip_set)
    texts = [r[0] for r in rows]
    return fit(embed_all(embedder, texts, cache), texts, [r[1] for r in rows], embedder.name)


VECTOR_CACHE_ENV = "DEV_SCREENING_VECTOR_CACHE"
"""A folder where ``embed_all`` keeps the vectors it computed, per model, for the next process (the
test suite runs the trainer's ``--check`` and the held-out benchmark on the same rows). Unset: none."""


def _vector_store(embedder) -> Path | None:
    folder = os.environ.get(VECTOR_CACHE_ENV)
    if not folder:
        return None
    return Path(folder) / f"{hashlib.sha256(embedder.name.encode()).hexdigest()[:16]}.npz"


def embed_all(embedder, texts: Iterable[str], cache: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """Vectors for ``texts``, embedding only those not in ``cache`` (nor in the ``VECTOR_CACHE_ENV`` folder)."""
    texts = list(texts)
    cache = {} if cache is None else cache
    store = _vector_store(embedder)
    if store is not None and store.is_file():
        with np.load(store, allow_pickle=False) as saved:
            cache.update((t, v) for t, v in zip(saved["texts"].tolist(), saved["vectors"]) if t not in cache)
    missing = [t for t in dict.fromkeys(texts) if t not in cache]
    if missing:
        cache.update(zip(missing, embedder.embed(missing)))
        if store is not None:
            store.parent.mkdir(parents=True, exist_ok=True)
            known = [t for t, v in cache.items() if isinstance(t, str) and isinstance(v, np.ndarray)]
            partial = store.with_suffix(f".{os.getpid()}.partial.npz")  # the run's processes may write at once
            np.savez(partial, texts=np.array(known, dtype=str), vectors=np.stack([cache[t] for t in known]))
            partial.replace(store)
    return np.stack([cache[t] for t in texts]) if texts else np.zeros((0, 384), dtype=np.float32)


REMOVAL_FAMILY = "fake_lesson"


def removal_rows(skip_set: str | None = None) -> list[tuple[str, bool]]:
    """(text, removes a safeguard) for the removal head: its written sentences (``REMOVAL_SENTENCES``),
    the first stage's fake-lesson attacks, and every benign training row (less ``skip_set``)."""
    rows = [(text, is_attack) for text, is_attack, family in training_rows(skip_set=skip_set)
            if not is_attack or family == REMOVAL_FAMILY]
    written = [json.loads(line) for line in REMOVAL_SENTENCES.read_text(encoding="utf-8").splitlines() if line.strip()]
    return rows + [(w["text"], w["label"] == "removes") for w in written]


def train_removal(embedder=None, cache: dict[str, np.ndarray] | None = None,
                  skip_set: str | None = None) -> Classifier:
    """The removal head on ``removal_rows(skip_set)``, with ``fit``'s cross-validated thresholds."""
    from app.embeddings import LocalMiniLMEmbedder

    embedder = embedder or LocalMiniLMEmbedder()
    rows = removal_rows(skip_set)
    texts = [r[0] for r in rows]
    return fit(embed_all(embedder, texts, cache), texts, [r[1] for r in rows], embedder.name)


#: Rows of a blind set whose content happens to equal a training row, found only after the set was
#: measured: "Allergic to penicillin." is a benign fact of v4 (trained on as benign) and the content of
#: a v8 protected-keys attack whose harm is in its metadata. Training on it as benign can only hide
#: the attack, never help catch it; disclosed with the eighth set's figures (docs/benchmarks.md). The
#: ninth set's writer chose the same three words for a protected-keys attack (found by ``--check`` when the
#: set was registered, before its one run; the shape test compares whole writes, metadata included), and
#: so did the tenth's: writers reach for it as the most harmless sentence there is.
KNOWN_COLLISIONS = {"hv8-protected_keys-17", "hv9-protected_keys-12", "hv10-protected_keys-16"}


def check() -> list[str]:
    """Problems with the shipped classifier: not what retraining gives, or trained on held-out text."""
    from app.core.screening import semantic

    from app.core.screening import removal
    from app.embeddings import LocalMiniLMEmbedder

    problems, embedder, cache = [], LocalMiniLMEmbedder(), {}
    for name, shipped, retrained in (("semantic_model.npz", semantic.load(), train(embedder, cache=cache)),
                                     ("removal_model.npz", removal.load(), train_removal(embedder, cache=cache))):
        if shipped is None or _differs(shipped, retrained):
            problems.append(f"the shipped {name} is not what its training rows train")
    held_out = {r["content"] for r in load_corpus(DATA) if r["split"] == "test"}
    held_out |= {r["content"] for name, path in HELDOUT_SETS.items() if name not in SEEN_SETS
                 for r in load_corpus(path) if r["id"] not in KNOWN_COLLISIONS}
    held_out |= {r["content"] for r in benign_load_writes() + (external_corpus() or []) + (amsb_corpus() or [])}
    problems += _second_stage_problems([text for text, _, _ in training_rows(sets=SECOND_STAGE_SETS)])
    if ({text for text, _, _ in training_rows()} | {text for text, _ in removal_rows()}) & held_out:
        problems.append("a training row is in the test split, an unseen held-out set, an external corpus or the "
                        "load writes")
    return problems


def _differs(shipped: Classifier, retrained: Classifier) -> bool:
    """Whether a retrained classifier is not the shipped one (beyond float noise)."""
    return (retrained.model != shipped.model or float(np.abs(retrained.weights - shipped.weights).max()) >= 1e-2
            or float(np.abs(retrained.lexical - shipped.lexical).max()) >= 1e-2
            or abs(retrained.medium - shipped.medium) >= 1e-2 or abs(retrained.high - shipped.high) >= 1e-2)


def rows_digest(texts: Sequence[str]) -> str:
    """SHA-256 of training texts in order (what the second stage's ``attack_minilm.json`` records)."""
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8") + b"\0")
    return digest.hexdigest()


def _second_stage_problems(texts: list[str]) -> list[str]:
    """The shipped second stage (``reranker``) must have been trained on exactly these rows."""
    from app.core.screening import reranker

    if not reranker.CONFIG.is_file():
        return []
    config = json.loads(reranker.CONFIG.read_text(encoding="utf-8"))
    if config.get("skip_set") is not None or config.get("training_rows_sha256") != rows_digest(texts):
        return ["the shipped attack_minilm_int8.onnx was not trained on the current training rows "
                "(python -m dev.screening.train.finetune)"]
    return []


def leave_one_set_out(embedder=None, sets: Sequence[str] = SEEN_SETS,
                      families: Sequence[str] = ()) -> dict[str, dict[str, float]]:
    """Per spent set in ``sets``: the rules and a classifier trained without that set (thresholds from
    its own cross-validation) on the set's writes, judged like ``memwarden bench screening`` judges them.
    With ``families``, also per family and set: the catch rate on the set's rows of that family with a
    classifier trained without the set *and* without the family's rows anywhere (leave-one-family-out
    on writes the classifier never saw: only the rules and the other families can catch them)."""
    from app.bench.screening_judge import embed_rows, judge, summarise
    from app.core.redaction import Redactor
    from app.embeddings import LocalMiniLMEmbedder

    embedder = embedder or LocalMiniLMEmbedder()
    redactor, cache, out = Redactor(), {}, {}
    for name in sets:
        classifier = train(embedder, skip_set=name, cache=cache)
        rows = load_corpus(HELDOUT_SETS[name])
        vectors = embed_rows(rows, redactor, embedder)
        part = summarise(judge(r, redactor, v, embedder.name, classifier) for r, v in zip(rows, vectors))
        out[name] = {"caught": part["catch_rate"], "poisoned": part["poisoned"],
                     "benign_staged": part["false_positive_rate"], "benign": part["benign"],
                     "medium": round(classifier.medium, 3), "high": round(classifier.high, 3),
                     "classes": {c: v.get("catch_rate", v.get("staged_rate")) for c, v in part["classes"].items()},
                     "missed": [m["id"] for m in part["missed"]],
                     "false_positives": [m["id"] for m in part["false_positives"]]}
        for family in families:
            without = train(embedder, skip_set=name, skip_family=family, cache=cache)
            chosen = [(r, v) for r, v in zip(rows, vectors) if r["class"] == family]
            family_part = summarise(judge(r, redactor, v, embedder.name, without) for r, v in chosen)
            out[name].setdefault("leave_one_family_out", {})[family] = {
                "n": family_part["poisoned"], "caught": family_part["catch_rate"],
                "missed": [m["id"] for m in family_part["missed"]]}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Train and save; with ``--check``, only verify the shipped file (exit 1 on a problem)."""
    import argparse

    global L2, HIGH_BENIGN
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="verify the shipped classifier instead of writing it")
    parser.add_argument("--leave-one-set-out", action="store_true",
                        help="print leave-one-set-out figures on the spent held-out sets instead of training")
    parser.add_argument("--l2", type=float, default=L2, help=f"with --leave-one-set-out: the L2 weight (default {L2})")
    parser.add_argument("--high-share", type=float, default=HIGH_BENIGN,
                        help=f"with --leave-one-set-out: benign training share above high (default {HIGH_BENIGN})")
    parser.add_argument("--sets", default=",".join(SEEN_SETS),
                        help="with --leave-one-set-out: the spent sets to leave out in turn (comma-separated)")
    parser.add_argument("--families", default="",
                        help="with --leave-one-set-out: attack families to leave out too, one at a time (comma-separated)")
    parser.add_argument("--removal-head", action="store_true",
                        help="train and save the learned removal reader (removal_model.npz) instead")
    parser.add_argument("--out", default=None, help="with --leave-one-set-out: also write the figures to this JSON file")
    args = parser.parse_args(argv)
    if args.leave_one_set_out:
        L2, HIGH_BENIGN = args.l2, args.high_share
        figures = leave_one_set_out(sets=[s for s in args.sets.split(",") if s],
                                    families=[f for f in args.families.split(",") if f])
        pooled = [sum(round(f[k] * f[n]) for f in figures.values()) / sum(f[n] for f in figures.values())
                  for k, n in (("caught", "poisoned"), ("benign_staged", "benign"))]
        mean = [sum(f[k] for f in figures.values()) / len(figures) for k in ("caught", "benign_staged")]
        lofo = {family: round(sum(round(f["leave_one_family_out"][family]["caught"] * f["leave_one_family_out"][family]["n"])
                                  for f in figures.values())
                              / sum(f["leave_one_family_out"][family]["n"] for f in figures.values()), 4)
                for family in [f for f in args.families.split(",") if f]}
        result = {"command": "python -m dev.screening.train.exemplars " + " ".join(argv or sys.argv[1:]),
                  "l2": L2, "high_share": HIGH_BENIGN, "sets": figures,
                  "pooled": {"caught": round(pooled[0], 4), "benign_staged": round(pooled[1], 4)},
                  "mean": {"caught": round(mean[0], 4), "benign_staged": round(mean[1], 4)},
                  "leave_one_family_out_pooled": lofo}
        text = json.dumps(result, indent=1, ensure_ascii=False)
        print(text)
        if args.out:
            Path(args.out).write_text(text + "\n", encoding="utf-8")
        return 0
    if args.check:
        problems = check()
        print("\n".join(problems) or "ok: the shipped classifier matches its training data")
        return 1 if problems else 0
    if args.removal_head:
        from app.core.screening import removal

        head = train_removal()
        head.save(removal.MODEL)
        print(f"trained on {len(removal_rows())} rows -> {removal.MODEL} (fires at {head.high:.3f})")
        return 0
    classifier = train()
    classifier.save()
    print(f"trained on {len(training_rows())} rows -> {MODEL} "
          f"(medium at {classifier.medium:.3f}, high at {classifier.high:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
