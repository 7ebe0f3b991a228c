"""`memwarden bench fusion` reproduces memorywire's adversarial-fusion figures through the router's
fusion, and the drop-ungoverned rule closes `max` fusion (the claims in docs/benchmarks/)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.harness import PROJECT_ROOT


def test_bench_fusion_reproduces_the_published_figures_and_the_drop_rule_holds(tmp_path):
    out = tmp_path / "fusion.json"
    subprocess.run([sys.executable, "-m", "app.cli", "bench", "fusion", "--out", str(out)], cwd=PROJECT_ROOT,
                   check=True, capture_output=True, timeout=300)
    results = json.loads(out.read_text())["results"]
    clean = {"recall_at_5": 1.0, "leak": 0.0, "displacement": 0.0}

    def at(variant, method):
        return {row["k_attack"]: {k: row[k] for k in clean} for row in results[variant][method]}

    assert all(v == clean for v in at("memwarden_router_fusion_only", "rrf").values())
    assert at("memwarden_router_fusion_only", "max")[25] == {"recall_at_5": 0.5, "leak": 0.8, "displacement": 0.5}
    for method in ("rrf", "max", "weighted"):
        assert all(v == clean for v in at("memwarden_router_drop_ungoverned", method).values())
    if "memorywire_router" in results:  # memorywire's own router, same scenario, same run
        assert at("memorywire_router", "max") == at("memwarden_router_fusion_only", "max")
        assert at("memorywire_router", "rrf") == at("memwarden_router_fusion_only", "rrf")
