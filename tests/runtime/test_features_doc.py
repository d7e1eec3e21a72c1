"""The feature tables of README.md and docs/compatibility.md are generated
from metal_kernel/runtime/features.py and must not go stale."""

from pathlib import Path

import pytest

from metal_kernel.runtime import features

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("doc", ["README.md", "docs/compatibility.md"])
def test_feature_table_in_docs_is_generated_from_the_table(doc):
    text = (ROOT / doc).read_text()
    assert features.with_table(text) == text, (
        f"{doc} is stale: run python -m metal_kernel.runtime.features --update README.md docs/compatibility.md")


def test_every_test_a_feature_cites_exists():
    for f in features.FEATURES:
        if not f.shown_by:
            continue
        first, *rest = [p.strip() for p in f.shown_by.split(",")]
        folder = (ROOT / first).parent
        for name in [Path(first).name, *rest]:
            assert (folder / name).is_file(), (f.name, name)


def test_rejected_rows_give_the_rewriters_reasons():
    assert features.rejected_words()["ray_data"].startswith("ray-tracing")
    assert "texture" in features.rejected_attributes()
    assert all(f.status in ("yes", "partial", "rejected", "no") for f in features.FEATURES)
