"""Fixture: a temporary PyTorch-checkout-like tree (see aten_tree.py)."""

from pathlib import Path

import pytest

from aten_tree import build_tree


@pytest.fixture
def tree(tmp_path) -> Path:
    return build_tree(tmp_path / "pytorch")
