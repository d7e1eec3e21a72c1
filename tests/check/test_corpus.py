"""The checker against its corpus: every buggy kernel is found with the
right kind, at the line marked `// BUG`; no clean kernel gives a finding."""

from __future__ import annotations

import functools

import pytest

import metal_kernel
from corpus import BUGGY, CLEAN, CLEAN_C10, HEADER


@functools.lru_cache(maxsize=None)
def library(group: str):
    cases = {"buggy": BUGGY, "clean": CLEAN, "c10": CLEAN_C10}[group]
    source = HEADER + "\n".join(c.source for c in cases)
    return metal_kernel.compile_shader(source, source_name=f"{group}.metal"), source


def _bug_line(source: str, case) -> int:
    start = source.index(f"kernel void {case.name}(")
    rel = source[start:].index("// BUG")
    return source[:start + rel].count("\n") + 1


def test_the_corpus_is_as_large_as_promised():
    kinds = {}
    for c in BUGGY:
        kinds[c.kind] = kinds.get(c.kind, 0) + 1
    assert len(BUGGY) >= 40 and len(CLEAN) + len(CLEAN_C10) >= 40
    assert set(kinds) == {"oob", "race", "divergence", "uninit", "inactive-lane", "schedule-dependent"}
    assert min(kinds.values()) >= 5


@pytest.mark.parametrize("case", BUGGY, ids=[c.name for c in BUGGY])
def test_every_bug_is_found_with_its_kind(case):
    lib, source = library("buggy")
    with metal_kernel.check() as report:
        case.run(lib)
    kinds = [f.kind for f in report.findings]
    assert case.kind in kinds, str(report)
    if case.kind != "schedule-dependent":
        line = _bug_line(source, case)
        lines = {f.line for f in report.findings if f.kind == case.kind}
        lines |= {f.other.line for f in report.findings if f.kind == case.kind and f.other}
        assert f"buggy.metal:{line}" in lines, (line, str(report))


@pytest.mark.parametrize("case", CLEAN, ids=[c.name for c in CLEAN])
def test_no_clean_kernel_gives_a_finding(case):
    lib, _ = library("clean")
    with metal_kernel.check() as report:
        case.run(lib)
    assert report.ok, str(report)
    assert not [n for n in report.notes if "unchecked" in n], report.notes


@pytest.mark.parametrize("case", CLEAN_C10, ids=[c.name for c in CLEAN_C10])
def test_no_clean_c10_kernel_gives_a_finding(case):
    lib, _ = library("c10")
    with metal_kernel.check() as report:
        case.run(lib)
    assert report.ok, str(report)
