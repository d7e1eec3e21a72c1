"""docs/port-diagnostics.md is generated from the table the translator uses."""

from __future__ import annotations

from metal_kernel.port.to_metal import docs, table


def test_committed_page_is_current():
    assert docs.DOC.read_text() == docs.generate(), \
        "run: python -m metal_kernel.port.to_metal.docs > docs/port-diagnostics.md"


def test_every_code_is_documented_and_used():
    text = docs.generate()
    for code, d in table.DIAGNOSTICS.items():
        assert f"### {code}" in text and d.suggestion in text
        assert d.severity in table.SEVERITIES
    assert len({r.cuda for r in table.RULES}) > 200
    for r in table.RULES:
        assert r.category in table.CATEGORIES
        assert not r.code or r.code in table.DIAGNOSTICS
