"""Measure the contradiction detector on a labelled blind set of (live, new) pairs, once, before and
after in one run: "before" is the detector at a base commit (loaded from git), "after" the working
tree's. A pair is predicted "replaces" when the ``contradiction`` flag fires for ``new`` against
``[live]``, read as the service reads it: with the attribute readings of both texts by the recall
embedder (``MEMWARDEN_EMBEDDER``; the local MiniLM by default) when the detector takes them, and
the contradiction model (``app.nli``, unless ``MEMWARDEN_CONTRADICTION_MODEL=off``) when it takes one. Prints
and writes accuracy, precision and recall of "replaces", overall, for non-English pairs (the
pair's ``lang``/``language`` field when it has one, else a stop-word test), per language when the
rows carry one, and per half of the ids (even and odd number); and for each label how many pairs
were predicted "replaces".
Development tooling, outside the package; the set itself is not committed.

    python dev/screening/contradiction_blind.py /work/blind/contradiction-pairs.jsonl BASE_COMMIT OUT.json
"""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from app.core import attributes  # noqa: E402
from app.core.screening import contradiction as after  # noqa: E402
from app.embeddings import get_embedder  # noqa: E402
from app.nli import get_scorer  # noqa: E402

_ENGLISH = re.compile(r"\b(?:the|is|are|lives|in|at|to|has|and|of|works|moved|now|his|her|a)\b", re.I)


def _base(commit: str):
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:app/core/screening/contradiction.py"],
                            check=True, capture_output=True, text=True).stdout
    module = types.ModuleType("contradiction_base")
    exec(compile(source, "contradiction_base", "exec"), module.__dict__)
    return module


def _english(pair: dict) -> bool:
    lang = pair.get("lang") or pair.get("language")
    if isinstance(lang, str):
        return lang.lower().startswith("en")
    text = f"{pair['live']} {pair['new']}"
    return len(_ENGLISH.findall(text)) >= 2 and text.isascii()


def _scores(truth: list[bool], guess: list[bool]) -> dict:
    tp = sum(t and g for t, g in zip(truth, guess))
    fp = sum(g and not t for t, g in zip(truth, guess))
    fn = sum(t and not g for t, g in zip(truth, guess))
    n = len(truth)
    return {"n": n, "accuracy": round(sum(t == g for t, g in zip(truth, guess)) / n, 3) if n else None,
            "precision": round(tp / (tp + fp), 3) if tp + fp else None,
            "recall": round(tp / (tp + fn), 3) if tp + fn else None, "tp": tp, "fp": fp, "fn": fn}


def _lang(pair: dict) -> str:
    lang = pair.get("lang") or pair.get("language")
    return lang.lower() if isinstance(lang, str) else ("en" if _english(pair) else "other")


def _half(pair: dict) -> str:
    digits = re.findall(r"\d+", str(pair.get("id", "")))
    return ("even" if int(digits[-1]) % 2 == 0 else "odd") if digits else "none"


def _report(pairs: list[dict], truth: list[bool], guess: list[bool]) -> dict:
    def part(indexes: list[int]) -> dict:
        return _scores([truth[i] for i in indexes], [guess[i] for i in indexes])

    everything = list(range(len(pairs)))
    report = {"overall": part(everything), "non_english": part([i for i in everything if not _english(pairs[i])])}
    report["per_label"] = {label: {"n": len(rows), "predicted_replaces": sum(guess[i] for i in rows)}
                           for label in sorted({p["label"] for p in pairs})
                           for rows in [[i for i in everything if pairs[i]["label"] == label]]}
    report["per_half"] = {h: part([i for i in everything if _half(pairs[i]) == h])
                          for h in sorted({_half(p) for p in pairs})}
    if any("lang" in p or "language" in p for p in pairs):
        report["per_language"] = {lang: part([i for i in everything if _lang(pairs[i]) == lang])
                                  for lang in sorted({_lang(p) for p in pairs})}
    return report


def _guesses(module, pairs: list[dict]) -> list[bool]:
    if "meaning" not in inspect.signature(module.detect).parameters:
        return [module.detect(p["new"], [p["live"]]) is not None for p in pairs]
    embedder = get_embedder()
    new = embedder.embed([p["new"] for p in pairs])
    live = embedder.embed([p["live"] for p in pairs])
    extra = {"model": get_scorer()} if "model" in inspect.signature(module.detect).parameters else {}
    return [module.detect(p["new"], [p["live"]],
                          attributes.meaning(embedder.embed, embedder.name, new[i], [live[i]]), **extra) is not None
            for i, p in enumerate(pairs)]


def main(path: str, commit: str, out: str) -> None:
    pairs = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    base = _base(commit)
    truth = [p["label"] == "replaces" for p in pairs]
    result = {"set": Path(path).name, "pairs": len(pairs), "base_commit": commit}
    for name, module in (("before", base), ("after", after)):
        result[name] = _report(pairs, truth, _guesses(module, pairs))
    Path(out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main(*sys.argv[1:4])
