"""The server's wheel holds the product and nothing else.

Built from the sources deploy/Dockerfile copies (`pip wheel --no-deps`, dependencies not installed),
its file list must match an explicit allow-list: the `app` package's modules, the page templates,
static files and JSON schemas, the migrations, the embedding model's tokenizer and the screening
models, the licences and notices, and the dist-info. The benchmarks an operator runs against their
own deployment (`memwarden bench …`) ship; screening's trainers, held-out and training sets, the
benchmarks that tune defaults on the project's own data and recorded results live in `dev/`
(not packaged). Every data file that ships is one a shipped module names, so nothing rides along
unused.
"""

from __future__ import annotations

import fnmatch
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.harness import PROJECT_ROOT
from tests.integration.test_packaging import SERVER_SOURCES, _clean_env, _copy_sources

DIST_INFO = "memwarden-*.dist-info/"
ALLOWED = (
    "app/*.py",                       # the package's modules (app/bench checked on its own below)
    "app/templates/*.html", "app/templates/*/*.html",
    "app/static/*.css", "app/static/*.js", "app/static/*.svg", "app/static/vendor/*.js",
    "app/static/vendor/*.LICENSE",
    "app/schemas/*.json", "app/schemas/*/*.json",
    "app/db/migrations/script.py.mako",
    "app/model/tokenizer.json", "app/model/NOTICE.md",
    "app/core/screening/data/*.npz", "app/core/screening/data/attack_minilm_int8.onnx",
    "app/core/screening/data/attack_minilm.json", "app/core/screening/data/NOTICE.md",
    "app/bench/data/calibration.json",        # `bench reviewer` / `bench screening`: the recall facts as benign load
    "app/bench/data/screening_corpus.jsonl",  # `bench screening`: the labelled attack/benign corpus
    DIST_INFO + "METADATA", DIST_INFO + "WHEEL", DIST_INFO + "RECORD", DIST_INFO + "entry_points.txt",
    DIST_INFO + "top_level.txt", DIST_INFO + "licenses/LICENSE", DIST_INFO + "licenses/*NOTICE.md",
    DIST_INFO + "licenses/static/vendor/*.LICENSE",
)
# `memwarden bench …` modules (app/cli/bench.py registers each) and the helpers they share.
BENCH_MODULES = {
    "audit", "audit_guards", "backtest", "blast", "compare", "compare_ab", "consolidate", "contradiction", "fusion",
    "hotpath", "import_", "rate_limit", "recall", "replicas", "review", "reviewer", "router", "scale", "screening",
    "state_check",
    "__init__", "common", "consolidation_month", "corpora", "driver_common", "mem0_driver", "memorywire_driver",
    "reviewer_ui", "router_stores", "scale_data", "scale_measure", "screening_judge",
}
# What research tooling is called; no shipped path may look like it.
RESEARCH = re.compile(r"make_|train|finetune|calibrat(e|ion)\.py|diff_match|read_budget\.py|heldout|exemplar|"
                      r"unshipped|pass_?\d|bench-records|docs/bench")


@pytest.fixture(scope="module")
def wheel_files(tmp_path_factory) -> list[str]:
    tmp_path = tmp_path_factory.mktemp("wheel")
    sources = _copy_sources(SERVER_SOURCES, PROJECT_ROOT, tmp_path / "src")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"),
                           str(sources)], cwd=tmp_path, env=_clean_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("memwarden-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return [name for name in archive.namelist() if not name.endswith("/")]


def _allowed(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in ALLOWED)


def test_every_file_in_the_wheel_is_on_the_allow_list(wheel_files) -> None:
    assert [name for name in wheel_files if not _allowed(name)] == []
    assert [name for name in wheel_files if RESEARCH.search(name)] == []
    tops = {name.split("/")[0] for name in wheel_files}
    assert tops == {"app", next(n for n in tops if n.endswith(".dist-info"))}


def test_the_benchmarks_that_ship_are_the_operators_and_their_data_is_what_they_load(wheel_files) -> None:
    bench = {Path(n).stem for n in wheel_files if n.startswith("app/bench/") and n.count("/") == 2}
    assert bench == BENCH_MODULES
    assert sorted(n for n in wheel_files if n.startswith("app/bench/data/")) == [
        "app/bench/data/calibration.json", "app/bench/data/screening_corpus.jsonl"]
    code = "\n".join(p.read_text(encoding="utf-8") for p in (PROJECT_ROOT / "app").rglob("*.py"))
    registered = set(re.findall(r'"app\.bench\.(\w+)", +# memwarden bench ', code))  # the command table
    assert registered <= BENCH_MODULES and BENCH_MODULES - registered == {
        "__init__", "common", "compare_ab", "consolidation_month", "corpora", "driver_common", "mem0_driver",
        "memorywire_driver",
        "reviewer_ui", "router_stores", "scale_data", "scale_measure", "screening_judge"}


def test_every_shipped_data_file_is_named_by_a_shipped_module(wheel_files) -> None:
    code = "\n".join((PROJECT_ROOT / n).read_text(encoding="utf-8") for n in wheel_files
                     if n.startswith("app/") and n.endswith(".py") and not n.startswith(("app/schemas/", "app/static/",
                                                                                         "app/templates/")))
    data = [n for n in wheel_files if re.match(r"app/(bench|core/screening)/data/|app/model/", n)
            and not n.endswith("NOTICE.md")]
    assert len(data) >= 8
    assert [n for n in data if f'"{Path(n).name}"' not in code] == []


def test_the_core_of_the_product_is_there(wheel_files) -> None:
    """The allow-list is no proof on its own that anything ships: the parts a server needs are present."""
    files = set(wheel_files)
    assert {"app/main.py", "app/db/migrations/env.py", "app/model/tokenizer.json",
            "app/core/screening/data/semantic_model.npz", "app/core/screening/data/attack_minilm_int8.onnx",
            "app/templates/base.html", "app/static/app.css"} <= files
    assert any(n.startswith("app/db/migrations/versions/") for n in files)
    assert any(n.startswith("app/schemas/") for n in files)
    assert any(fnmatch.fnmatchcase(n, DIST_INFO + "licenses/LICENSE") for n in files)
