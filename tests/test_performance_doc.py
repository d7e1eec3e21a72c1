"""docs/performance.md and the README quote only what the committed
benchmark runs (benchmarks/results/*.json) hold: their generated tables
must match those files, and each file must carry what makes its figures
reproducible."""

import json
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks" / "perf"))
import report  # noqa: E402

RESULTS = {cls: REPO / "benchmarks" / "results" / f"{cls}.json" for cls in report.CLASSES}


@pytest.fixture(scope="module")
def runs():
    return {cls: json.loads(p.read_text()) for cls, p in RESULTS.items()}


def test_one_committed_run_per_machine_class(runs):
    assert set(runs) == {"avx512", "avx2"}
    for cls, doc in runs.items():
        assert doc["machine"]["class"] == cls
        assert not doc["settings"]["quick"], f"{cls}: a --quick run cannot be quoted"


def test_each_run_records_how_it_was_measured(runs):
    for cls, doc in runs.items():
        m = doc["machine"]
        for key in ("cpu", "simd_flags", "usable_cpus", "mk_workers", "compiler", "pocl", "march",
                    "loadavg_start", "loadavg_end"):
            assert m.get(key) not in (None, ""), f"{cls}: machine.{key} missing"
        for case in doc["cases"]:
            ours = case["sides"]["ours"]
            assert ours["status"] == "ok", f"{cls} {case['key']}: {ours}"
            # raw runs and their spread, not just a median
            assert len(ours["times_s"]) == ours["runs"] >= 3
            assert ours["min_s"] <= ours["median_s"] <= ours["max_s"]
        assert doc["limits"]["phases"] and doc["limits"]["best"]["triad_gbs"] > 0


def test_docs_tables_match_the_committed_runs():
    blocks = report.generated(REPO)
    for parts in report.DOCS:
        path = REPO.joinpath(*parts)
        text = path.read_text()
        names = [m.group("name") for m in report.BEGIN.finditer(text)]
        assert names, f"{path.name} has no generated block"
        assert set(names) <= set(blocks), f"{path.name}: blocks without data: {set(names) - set(blocks)}"
        assert report.fill(text, blocks) == text, (
            f"{path.name} does not match benchmarks/results/: run python benchmarks/bench_runtime.py --doc")


def test_the_readme_speed_section_quotes_no_figure_of_its_own():
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Speed"):]
    section = section[:section.index("\n## ", 1)]
    outside = report.BEGIN.split(section)[0] + section[section.index("<!-- end: readme-summary -->"):]
    figures = re.findall(r"\d+(?:\.\d+)?\s*(?:x\b|%|ms\b|GB/s|GFLOP/s)", outside)
    assert not figures, f"figures outside the generated block: {figures}"


def test_a_changed_figure_is_caught(runs):
    # The check itself can fail: alter one median and the tables differ.
    doc = json.loads(json.dumps(runs["avx512"]))
    before = report.pocl_table(doc)
    doc["cases"][0]["sides"]["ours"]["median_s"] *= 2
    assert report.pocl_table(doc) != before
