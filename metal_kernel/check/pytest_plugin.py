"""pytest integration: ``pytest --metal-check`` runs every test's Metal
kernel dispatches under ``metal_kernel.check()`` and fails a test whose
dispatches produced findings; the ``metal_check`` fixture does the same for
one test. ``@pytest.mark.no_metal_check`` exempts a test (one that makes a
kernel fault on purpose, say)."""

from __future__ import annotations

import pytest

from . import check
from .session import ALL_TOOLS


def pytest_addoption(parser):
    group = parser.getgroup("metal-kernel")
    group.addoption("--metal-check", action="store_true", default=False,
                    help="run every Metal kernel dispatch under metal_kernel.check(); a test whose dispatches "
                         "produce findings (out-of-bounds, races, barrier divergence, uninitialised or "
                         "inactive-lane reads, schedule-dependent results) fails")
    group.addoption("--metal-check-tools", default=",".join(ALL_TOOLS),
                    help="comma-separated tools for --metal-check (default: all)")
    group.addoption("--metal-check-schedules", type=int, default=4,
                    help="schedules each dispatch runs under with --metal-check (default: 4)")


def pytest_configure(config):
    config.addinivalue_line("markers", "no_metal_check: do not run this test's kernels under --metal-check")


def _options(config) -> dict:
    tools = tuple(t.strip() for t in config.getoption("--metal-check-tools").split(",") if t.strip())
    return {"tools": tools, "schedules": config.getoption("--metal-check-schedules")}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    config = item.config
    if not config.getoption("--metal-check") or item.get_closest_marker("no_metal_check"):
        return (yield)
    with check(**_options(config)) as report:
        result = yield
    if not report.ok:
        raise pytest.fail.Exception(f"metal-kernel check found errors in this test's kernels:\n{report}",
                                    pytrace=False)
    return result


@pytest.fixture
def metal_check(request):
    """Runs the test's dispatches checked; yields the Report and fails the
    test if it holds findings."""
    with check(**_options(request.config)) as report:
        yield report
    if not report.ok:
        pytest.fail(f"metal-kernel check found errors:\n{report}", pytrace=False)
