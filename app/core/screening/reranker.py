"""The second stage of ``semantic_attack``: a fine-tuned MiniLM attack classifier, run only for the
writes the first stage is unsure about.

The first stage (``semantic.Classifier``) is a linear model over the embedding ``remember`` has
already computed: tens of microseconds. This one is all-MiniLM-L6-v2 (Apache-2.0, the same base
model and tokenizer as the embedder) fine-tuned end to end on the same labelled rows to say
"attack or not", with a mean-pooled linear head, exported to ONNX and quantized to int8
(``data/attack_minilm_int8.onnx``, ~23 MB; trained by ``python -m dev.screening.train.finetune``
in a separate environment with torch — torch is never a runtime or test dependency). Its own forward
pass costs a few milliseconds, so it runs only when the first stage's probability is at least
``gate``: below it, even a certain second opinion could not lift the mean of the two to the high
threshold, so the write gets no ``semantic_attack`` flag without it. Most ordinary writes stay below the
gate (at gate 0.476: 13 of the 727 load writes of the benchmarks, none of the hot path's fact
templates); attack-like ones mostly reach it. So the median write pays nothing extra and the
95th percentile pays one call (``memwarden bench hotpath``).

The vote is the mean of the two probabilities, with its own thresholds (``data/attack_minilm.json``:
``gate``, ``medium``, ``high``), calibrated on rows neither model trained on (the fine-tuning's
held-back calibration rows, scored by the first stage out of fold). Why two models and not the
fine-tuned one alone: trained without the blind fourth held-out set and measured on it, the
fine-tuned model alone stopped fewer attacks than the linear one at equal false positives, the mean
of the two more than either (docs/benchmarks/screening.md).

No network: the weights ship in the repository. Without the file (or onnxruntime), ``load`` returns
None and the first stage decides alone, as before.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).resolve().parent / "data"
MODEL = DATA / "attack_minilm_int8.onnx"
CONFIG = DATA / "attack_minilm.json"
TOKENIZER = Path(__file__).resolve().parents[2] / "model" / "tokenizer.json"
MAX_TOKENS = 128
"""Word pieces read (the start of a long text, as the model was trained)."""


@dataclass(frozen=True)
class Thresholds:
    """Where the second stage runs (first-stage probability ``gate``) and where the mean of the two
    probabilities flags medium and high."""

    gate: float
    medium: float
    high: float


class Reranker:
    """The fine-tuned classifier: one ONNX session and the embedder's tokenizer."""

    def __init__(self, model_path: Path = MODEL, config_path: Path = CONFIG, tokenizer_path: Path = TOKENIZER) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        config = json.loads(config_path.read_text(encoding="utf-8"))
        self.thresholds = Thresholds(float(config["gate"]), float(config["medium"]), float(config["high"]))
        self._tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self._tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._tokenizer.no_padding()
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # No busy-waiting pool threads after a run (see app.embeddings: they took a core from PostgreSQL).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(str(model_path), sess_options=options, providers=["CPUExecutionProvider"])

    def probability(self, content: str) -> float:
        """P(attack) for one text, from the fine-tuned model alone."""
        ids = self._tokenizer.encode(content[:8192]).ids or [0]
        feed: dict[str, Any] = {"input_ids": np.asarray([ids], dtype=np.int64),
                                "attention_mask": np.ones((1, len(ids)), dtype=np.int64)}
        logit = float(self._session.run(None, feed)[0].reshape(-1)[0])
        return float(1.0 / (1.0 + np.exp(-logit)))

    def vote(self, first: float, content: str) -> tuple[float, str | None]:
        """(the combined probability, its severity or None) for a first-stage probability ``first``;
        the model runs only at or above the gate."""
        if first < self.thresholds.gate:
            return first, None
        combined = (first + self.probability(content)) / 2
        if combined >= self.thresholds.high:
            return combined, "high"
        return combined, "medium" if combined >= self.thresholds.medium else None


@functools.cache
def load() -> Reranker | None:
    """The shipped second stage, or None when its files (or onnxruntime) are missing (the first
    stage then decides alone)."""
    if not (MODEL.is_file() and CONFIG.is_file()):
        return None
    try:
        return Reranker()
    except ImportError:
        return None
