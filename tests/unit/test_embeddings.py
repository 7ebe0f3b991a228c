"""Embedders: the real local MiniLM model, spec parsing and the HTTP client."""

from __future__ import annotations

import json
import threading
import time

import httpx
import numpy as np
import pytest

from app import embeddings
from app.embeddings import (
    BatchingEmbedder,
    Embedder,
    EmbedderError,
    EmbedderSpec,
    HttpEmbedder,
    LocalMiniLMEmbedder,
    get_embedder,
    parse_embedder_spec,
)


@pytest.fixture(scope="module")
def local() -> Embedder:
    return get_embedder("local")


def test_local_embedder_shape_dtype_and_norm(local: Embedder) -> None:
    assert isinstance(local, BatchingEmbedder)  # the process-wide one shares runs between threads
    assert isinstance(local, Embedder)
    vectors = local.embed(["The cat sat on the mat.", "Another sentence."])
    assert local.dim == 384
    assert vectors.shape == (2, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_similar_sentences_are_closer_than_unrelated(local: Embedder) -> None:
    a, b, c = local.embed(
        [
            "The deployment failed because the database migration timed out.",
            "A schema migration took too long and broke the release.",
            "My grandmother bakes apple pie every Sunday.",
        ]
    )
    assert float(a @ b) > float(a @ c) + 0.2
    assert float(a @ b) > float(b @ c) + 0.2


def test_batch_equals_single(local: Embedder) -> None:
    texts = ["short", "a somewhat longer sentence that forces padding in the batch", ""]
    batch = local.embed(texts)
    singles = np.stack([local.embed([t])[0] for t in texts])
    np.testing.assert_allclose(batch, singles, atol=1e-4)


def test_chunking_keeps_input_order(local: Embedder) -> None:
    # Mixed lengths: the embedder regroups texts by length internally.
    texts = [f"memory number {i} " + "detail " * (i % 9) for i in range(130)]
    vectors = local.embed(texts)
    assert vectors.shape == (130, 384)
    for i in (0, 1, 8, 64, 129):
        np.testing.assert_allclose(vectors[i], local.embed([texts[i]])[0], atol=1e-4)


def test_empty_string_and_empty_list(local: Embedder) -> None:
    [vector] = local.embed([""])
    assert np.isfinite(vector).all()
    assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)
    assert local.embed([]).shape == (0, 384)


def test_long_text_is_truncated(local: Embedder) -> None:
    long_text = " ".join(f"word{i % 97}" for i in range(2000))
    [vector] = local.embed([long_text])
    assert vector.shape == (384,)
    assert np.isfinite(vector).all()


def test_get_embedder_is_cached_and_thread_safe() -> None:
    results: list[Embedder] = []
    threads = [
        threading.Thread(target=lambda: results.append(get_embedder("local"))) for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    first = get_embedder("local")
    assert get_embedder("local") is first
    assert get_embedder("") is first
    assert all(r is first for r in results)


def test_default_spec_comes_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMWARDEN_EMBEDDER", raising=False)
    assert get_embedder() is get_embedder("local")


def test_spec_parsing() -> None:
    assert parse_embedder_spec(None) == EmbedderSpec("local")
    assert parse_embedder_spec(" local ") == EmbedderSpec("local")
    spec = parse_embedder_spec("openai:text-embedding-3-small@https://api.example.com/")
    assert spec == EmbedderSpec("openai", "text-embedding-3-small", "https://api.example.com")
    assert spec.key == "openai:text-embedding-3-small@https://api.example.com"
    bad_specs = ("openai:", "openai:m", "openai:@http://x", "openai:m@ftp://x", "hash", "x:m@http://x")
    for bad in bad_specs:
        with pytest.raises(ValueError):
            parse_embedder_spec(bad)


def _http_embedder(handler, **kwargs) -> HttpEmbedder:  # type: ignore[no-untyped-def]
    return HttpEmbedder(
        "m",
        "http://embed.test/v1",
        api_key="sk-do-not-leak",
        transport=httpx.MockTransport(handler),
        **kwargs,
    )


def test_http_embedder_normalises_orders_and_chunks() -> None:
    calls: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        auth = request.headers["authorization"]
        calls.append({"url": str(request.url), "n": len(body["input"]), "auth": auth})
        data = [{"index": i, "embedding": [3.0, 4.0, float(i)]} for i in range(len(body["input"]))]
        return httpx.Response(200, json={"data": list(reversed(data))})

    embedder = _http_embedder(handler)
    vectors = embedder.embed([f"t{i}" for i in range(70)])
    assert embedder.dim == 3
    assert vectors.shape == (70, 3) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(vectors[0], [0.6, 0.8, 0.0], atol=1e-6)
    assert [c["n"] for c in calls] == [64, 6]
    assert calls[0]["url"] == "http://embed.test/v1/embeddings"
    assert calls[0]["auth"] == "Bearer sk-do-not-leak"
    assert "sk-do-not-leak" not in repr(embedder)


def test_http_embedder_checks_dimension_and_errors() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"data": [{"index": 0, "embedding": [1.0, 0.0]}]})

    with pytest.raises(EmbedderError, match="expected 3-d"):
        _http_embedder(handler, dim=3).embed(["x"])

    def failing(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": "bad key sk-do-not-leak"})

    with pytest.raises(EmbedderError) as excinfo:
        _http_embedder(failing).embed(["x"])
    assert "401" in str(excinfo.value)
    assert "sk-do-not-leak" not in str(excinfo.value)


def test_http_url_building() -> None:
    assert HttpEmbedder("m", "http://h:8080")._url == "http://h:8080/v1/embeddings"
    assert HttpEmbedder("text-embedding-3-small", "https://h/v1/").dim == 1536
    assert embeddings.ENV_API_KEY == "MEMWARDEN_EMBEDDER_API_KEY"


class _GatedEmbedder:
    """The real model behind a gate: records each run's texts; the first run waits for `release`."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.dim, self.name = inner, inner.dim, inner.name
        self.runs: list[list[str]] = []
        self.first_started, self.release = threading.Event(), threading.Event()

    def embed(self, texts):
        self.runs.append(list(texts))
        if len(self.runs) == 1:
            self.first_started.set()
            assert self.release.wait(30)
        if any(t == "boom" for t in texts):
            raise EmbedderError("model failed")
        return self.inner.embed(texts)


def _plain_local() -> LocalMiniLMEmbedder:
    return LocalMiniLMEmbedder()


def test_batching_lone_call_runs_at_once_with_its_own_texts() -> None:
    gated = _GatedEmbedder(_plain_local())
    gated.release.set()
    batching = BatchingEmbedder(gated)
    vectors = batching.embed(["alone", "and a second text"])
    assert gated.runs == [["alone", "and a second text"]]
    np.testing.assert_allclose(vectors, gated.inner.embed(["alone", "and a second text"]), atol=1e-4)
    assert batching.embed([]).shape == (0, 384) and len(gated.runs) == 1


def test_batching_groups_calls_that_arrive_during_a_run_and_returns_each_its_rows() -> None:
    gated = _GatedEmbedder(_plain_local())
    batching = BatchingEmbedder(gated)
    results: dict[str, np.ndarray] = {}
    first = threading.Thread(target=lambda: results.update(first=batching.embed(["the first caller"])))
    first.start()
    assert gated.first_started.wait(30)
    texts = {f"w{i}": [f"waiting caller {i} likes tea", f"and {i} dogs"] for i in range(5)}
    waiters = [threading.Thread(target=lambda key=key: results.update({key: batching.embed(texts[key])}))
               for key in texts]
    for thread in waiters:
        thread.start()
    deadline = time.monotonic() + 30
    while len(batching._queue) < len(texts) and time.monotonic() < deadline:
        time.sleep(0.01)
    gated.release.set()
    for thread in [first, *waiters]:
        thread.join(30)
    # One run for the first caller, then a single run for all five that queued behind it.
    assert len(gated.runs) == 2 and sorted(gated.runs[1]) == sorted(t for ts in texts.values() for t in ts)
    for key, own in texts.items():
        np.testing.assert_allclose(results[key], gated.inner.embed(own), atol=1e-4)
    np.testing.assert_allclose(results["first"], gated.inner.embed(["the first caller"]), atol=1e-4)


def test_batching_raises_a_shared_runs_error_in_every_caller_of_that_run() -> None:
    gated = _GatedEmbedder(_plain_local())
    batching = BatchingEmbedder(gated)
    errors: list[BaseException] = []

    def call(texts: list[str]) -> None:
        try:
            batching.embed(texts)
        except EmbedderError as exc:
            errors.append(exc)

    first = threading.Thread(target=call, args=(["fine"],))
    first.start()
    assert gated.first_started.wait(30)
    waiters = [threading.Thread(target=call, args=(texts,)) for texts in (["boom"], ["innocent bystander"])]
    for thread in waiters:
        thread.start()
    deadline = time.monotonic() + 30
    while len(batching._queue) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    gated.release.set()
    for thread in [first, *waiters]:
        thread.join(30)
    assert len(errors) == 2  # both callers of the failed run; the first run succeeded
    assert batching.embed(["works again"]).shape == (1, 384)


def test_batching_lets_bulk_calls_bypass_the_queue() -> None:
    gated = _GatedEmbedder(_plain_local())
    batching = BatchingEmbedder(gated, max_texts=4)
    first = threading.Thread(target=lambda: batching.embed(["a live request"]))
    first.start()
    assert gated.first_started.wait(30)
    bulk = [f"imported memory number {i}" for i in range(5)]
    vectors = batching.embed(bulk)  # returns while the first run is still held: it never queued
    assert vectors.shape == (5, 384) and gated.runs[1] == bulk
    gated.release.set()
    first.join(30)
    assert len(gated.runs) == 2
