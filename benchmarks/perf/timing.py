"""Interleaved timing of several implementations of one case.

Every side runs once per round, rounds repeat (the machine may be shared:
load that comes and goes then hits every side alike), and each side's
median is reported with its spread. Every run is prepared (outputs
poisoned, in-place inputs restored) and checked after, untimed."""

from __future__ import annotations

import statistics
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field


def first_line(e, limit: int = 160) -> str:
    text = str(e).strip().splitlines()
    s = text[0] if text else type(e).__name__
    return s if len(s) <= limit else s[: limit - 3] + "..."


@dataclass
class Side:
    """One implementation of a case. `run` returns None (timed here) or the
    seconds it measured itself (a side in another process times its own
    call, not the pipe). `check` returns an error text or None."""
    run: Callable[[], float | None]
    prepare: Callable[[], None]
    read: Callable[[], object]
    check: Callable[[object], str | None]
    note: str = ""
    work: float = 0.0  # bytes or FLOPs of one run, where the side is a limit
    times: list = field(default_factory=list)
    planned: int = 0
    failure: dict | None = None


def summary(times: list[float]) -> dict:
    """Median, spread and every run, in seconds."""
    t = sorted(times)
    q = statistics.quantiles(t, n=4) if len(t) >= 2 else [t[0], t[0], t[0]]
    return {"status": "ok", "median_s": statistics.median(t), "min_s": t[0], "max_s": t[-1],
            "q1_s": q[0], "q3_s": q[2], "runs": len(t), "times_s": [round(x, 7) for x in times]}


def alternate(calls: dict, repeat: int) -> dict:
    """Seconds of `repeat` runs of each call, the calls taking turns (in
    reverse order every other round, so that none always runs first): the
    standalone scripts' timing, where the callers prepare and check."""
    times = {k: [] for k in calls}
    order = list(calls)
    for i in range(repeat):
        for k in (order if i % 2 == 0 else order[::-1]):
            t0 = time.perf_counter()
            calls[k]()
            times[k].append(time.perf_counter() - t0)
    return times


def bench(sides: dict[str, Side], warmup: int, repeat: int, budget: float, verbose: bool = False) -> dict:
    """Median wall time of each side, the sides interleaved run by run.
    After the warm-up a side's number of timed runs shrinks (to at least 3)
    to keep it within `budget` seconds."""
    def once(side: Side, i: int) -> float | None:
        try:
            side.prepare()
            t0 = time.perf_counter()
            own = side.run()
            dt = own if own is not None else time.perf_counter() - t0
            err = side.check(side.read())
        except Exception as e:  # noqa: BLE001
            if verbose:
                traceback.print_exc()
            side.failure = {"status": "error", "reason": f"run {i + 1}: {first_line(e, 300)}"}
            return None
        if err:
            side.failure = {"status": "wrong", "reason": f"run {i + 1}: {err}"}
            return None
        return dt

    def plan(dt: float) -> int:
        return max(3, min(repeat, int(budget / max(dt, 1e-9))))

    for sd in sides.values():
        sd.planned = repeat
    for i in range(max(warmup, 0)):
        for sd in sides.values():
            if sd.failure is None:
                dt = once(sd, i)
                if dt is not None:
                    sd.planned = plan(dt)
    while True:
        active = [sd for sd in sides.values() if sd.failure is None and len(sd.times) < sd.planned]
        if not active:
            break
        for sd in active:
            dt = once(sd, warmup + len(sd.times))
            if dt is not None:
                sd.times.append(dt)
                if warmup == 0 and len(sd.times) == 1:
                    sd.planned = plan(dt)
    out = {}
    for k, sd in sides.items():
        out[k] = sd.failure if sd.failure is not None else summary(sd.times)
        if sd.note:
            out[k]["note"] = sd.note
    return out
