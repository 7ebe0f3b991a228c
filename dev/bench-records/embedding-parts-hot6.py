"""CPU of one embedding's parts, in one process (issue 25 goal 1, sixth pass: the embedding's row of
the CPU budget).

Usage, from a checkout with its venv active:

    python dev/bench-records/embedding-parts-hot6.py 300

Each line: ms of CPU (`time.process_time`, all threads: onnxruntime's pool too) and wall per call,
after 20 warm-up calls, over N texts shaped like `memwarden bench hotpath`'s: the tokenizer, the
ONNX run on two intra-op threads (the product's) and on one, mean pooling with the L2 norm, the
whole `LocalMiniLMEmbedder.embed` both ways, the product's embedder (`get_embedder`: batcher and
metrics around it), and a hand-off to a thread pool and back with and without an embedding.
Reads private attributes of the embedder on purpose (a scratch probe of its parts, not an API).
"""
import time, os, sys, numpy as np
from app.embeddings import LocalMiniLMEmbedder, BatchingEmbedder, get_embedder
from app.bench.hotpath import FACTS, QUERIES
import onnxruntime as ort
N=int(sys.argv[1]) if len(sys.argv)>1 else 200
texts_f=[FACTS[i%5].format(u=f"User{i%7}", n=i) for i in range(N)]
texts_q=[QUERIES[i%5].format(u=f"User{i%7}") for i in range(N)]
texts_c=[f"calibration sentence number {i} about nothing in particular" for i in range(N)]
def cpu(name, f, texts):
    for t in texts[:20]: f(t)
    s=time.process_time(); w=time.perf_counter()
    for t in texts: f(t)
    print(f"{name:40s} cpu {1000*(time.process_time()-s)/len(texts):.3f} ms  wall {1000*(time.perf_counter()-w)/len(texts):.3f}")
print("load", os.getloadavg())
e2=LocalMiniLMEmbedder()
tok=e2._tokenizer
print("tokens fact/query/calib", len(tok.encode(texts_f[0]).ids), len(tok.encode(texts_q[0]).ids), len(tok.encode(texts_c[0]).ids))
cpu("tokenizer encode_batch([t])", lambda t: tok.encode_batch([t]), texts_f)
cpu("tokenizer encode(t)", lambda t: tok.encode(t), texts_f)
ids=[tok.encode(t).ids for t in texts_f]
def feeds(t):
    i=tok.encode(t).ids
    a=np.array([i],dtype=np.int64); m=np.ones_like(a)
    return {"input_ids":a,"attention_mask":m,"token_type_ids":np.zeros_like(a)}
F=[feeds(t) for t in texts_f]
it=iter(range(10**9))
def run2(t, sess=e2._session):
    return sess.run([e2._output], F[next(it)%len(F)])
cpu("ort run, intra 2", run2, texts_f)
e1=LocalMiniLMEmbedder(); 
o=ort.SessionOptions(); o.intra_op_num_threads=1; o.inter_op_num_threads=1
o.execution_mode=ort.ExecutionMode.ORT_SEQUENTIAL; o.graph_optimization_level=ort.GraphOptimizationLevel.ORT_ENABLE_ALL
o.add_session_config_entry("session.intra_op.allow_spinning","0")
from app.embeddings import _minilm_model_path
e1._session=ort.InferenceSession(str(_minilm_model_path()), sess_options=o, providers=["CPUExecutionProvider"])
cpu("ort run, intra 1", lambda t: e1._session.run([e1._output], F[next(it)%len(F)]), texts_f)
h=e2._session.run([e2._output], F[0])[0]; m=F[0]["attention_mask"]
def pool(t):
    w=m[:,:,None].astype(np.float32); p=(h*w).sum(axis=1)/np.maximum(w.sum(axis=1),1e-9)
    from app.embeddings import _l2_normalise; return _l2_normalise(p)
cpu("pool+normalise", pool, texts_f)
cpu("LocalMiniLM.embed intra2 (fact)", lambda t: e2.embed([t]), texts_f)
cpu("LocalMiniLM.embed intra1 (fact)", lambda t: e1.embed([t]), texts_f)
cpu("LocalMiniLM.embed intra2 (calib)", lambda t: e2.embed([t]), texts_c)
cpu("LocalMiniLM.embed intra1 (calib)", lambda t: e1.embed([t]), texts_c)
cpu("LocalMiniLM.embed intra2 (query)", lambda t: e2.embed([t]), texts_q)
g=get_embedder()
cpu("get_embedder().embed (fact)", lambda t: g.embed([t]), texts_f)
cpu("get_embedder().embed (calib)", lambda t: g.embed([t]), texts_c)
from concurrent.futures import ThreadPoolExecutor
p=ThreadPoolExecutor(4)
cpu("pool.submit(embed).result() (fact)", lambda t: p.submit(g.embed,[t]).result(), texts_f)
cpu("pool.submit(noop).result()", lambda t: p.submit(len,t).result(), texts_f)
print("load", os.getloadavg())
