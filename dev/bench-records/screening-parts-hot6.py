"""CPU of screening one remember's content alone, then a cProfile of it (issue 25 goal 1, sixth pass).

Usage, from a checkout with its venv active: `python dev/bench-records/screening-parts-hot6.py`

`app.core.screening.screen` on 400 texts shaped like `memwarden bench hotpath`'s, with five live
neighbours and the content's embedding (the semantic classifier runs), after 30 warm-up calls:
`time.process_time` per call, then the profile's top 25 by own time (call counts per 400 screens:
how many regex scans and text folds one write costs).
"""
import cProfile, pstats, time, numpy as np
from app.core.screening import screen
from app.bench.hotpath import FACTS
from app.embeddings import get_embedder
texts=[FACTS[i%5].format(u=f"User{i%7}", n=i) for i in range(400)]
e=get_embedder(); vecs=[e.embed([t])[0] for t in texts[:5]]
live=[texts[j] for j in range(5)]
def one(i):
    return screen(texts[i], memory_type="semantic", live=live, embedding=vecs[i%5], embedder=e.name)
for i in range(30): one(i)
s=time.process_time()
for i in range(400): one(i)
print("screen cpu ms", (time.process_time()-s)*1000/400)
pr=cProfile.Profile(); pr.enable()
for i in range(400): one(i)
pr.disable(); pstats.Stats(pr).sort_stats('tottime').print_stats(25)
