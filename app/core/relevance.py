"""Scope-residual similarity: how close a query and a memory are once what their scope shares is
taken away.

Every memory of a person's scope names the person ("Hari completed a marathon…", "Hari lives in
Leeds…"), so their mean vector (the scope's centroid c) is mostly "that person", and a question
naming the person is close to all of them. Centred on the centroid, the query and the memory keep
their topic: cos(q − c, f − c) is high for "what sport does Ingrid do?" and "Ingrid rides a fat-tyre
bike across the snow" and low for "is Ingrid a professional photographer?" and any of her facts.

Computed from four numbers the search already has or gets in the same scan, with q and f unit
vectors: q·f (the hit's cosine), q·c (the scope's mean cosine to the query), f·c and c·c.
"""

from __future__ import annotations

import math


def residual_similarity(query_fact: float, query_centroid: float, fact_centroid: float,
                        centroid_norm2: float) -> float:
    """cos(q − c, f − c) for unit vectors q and f and the scope centroid c, from their dot products;
    0.0 when either residual vanishes (a one-memory scope: f = c)."""
    dot = query_fact - query_centroid - fact_centroid + centroid_norm2
    q2 = 1.0 - 2.0 * query_centroid + centroid_norm2
    f2 = 1.0 - 2.0 * fact_centroid + centroid_norm2
    if q2 <= 1e-9 or f2 <= 1e-9:
        return 0.0
    return dot / math.sqrt(q2 * f2)
