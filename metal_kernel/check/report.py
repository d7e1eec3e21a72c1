"""Findings and the report, in compute-sanitizer's shape.

Every line of the text report starts with ``========= ``; each finding
names what went wrong, where (``at fn() in file:line``), by which thread,
and how the address is wrong; the report ends with ``ERROR SUMMARY``."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

PREFIX = "========= "
KINDS = ("oob", "race", "divergence", "uninit", "inactive-lane", "schedule-dependent")


@dataclass
class OtherAccess:
    """The second access of a race (or the second barrier of a divergence)."""
    thread: tuple[int, int, int] | None
    threadgroup: tuple[int, int, int] | None
    line: str | None
    access: str  # "read", "write", "barrier", "returned"
    function: str = ""


@dataclass
class Finding:
    kind: str  # one of KINDS
    kernel: str
    message: str
    thread: tuple[int, int, int] | None = None
    threadgroup: tuple[int, int, int] | None = None
    simdgroup: int | None = None
    lane: int | None = None
    address_space: str | None = None  # "device", "threadgroup", "thread", "constant"
    buffer: tuple[int, str] | None = None  # (index, parameter name)
    offset: int | None = None
    size: int | None = None
    line: str | None = None  # "file:line" in the user's source
    access: str | None = None  # "read", "write", "atomic"
    other: OtherAccess | None = None
    count: int = 1  # occurrences folded into this finding
    function: str = ""
    details: list[str] = field(default_factory=list)  # further report lines

    def to_json(self) -> dict:
        d = asdict(self)
        d.pop("details")
        return d

    def text(self) -> list[str]:
        lines = [self.message]
        lines += ["    " + d for d in self.details]
        if self.count > 1:
            lines.append(f"    ({self.count} occurrences in this dispatch)")
        return [PREFIX + ln for ln in lines] + [PREFIX.rstrip()]


@dataclass
class Report:
    """What a check() block found: the findings in the order found, and
    notes (what could not be checked, float atomics that reorder)."""
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    dispatches: int = 0
    proven: int = 0  # dispatches proven unable to go wrong before they ran (check/prove.py)
    unchecked: int = 0  # dispatches that ran unchecked (the notes say why)
    # dispatches whose threadgroup memory was checked in one group of each
    # kind (check/invariant.py): the others could find nothing there
    by_representatives: int = 0
    tools: tuple[str, ...] = ()
    schedules: int = 0

    @property
    def ok(self) -> bool:
        return not self.findings

    def __str__(self) -> str:
        lines = [f"{PREFIX}METAL-KERNEL CHECK ({', '.join(self.tools)}; {self.schedules} schedule(s) per "
                 f"dispatch; {self.dispatches} dispatch(es), {self.proven} proven safe before running"
                 + (f", {self.by_representatives} with threadgroup memory checked in one group of each kind"
                    if self.by_representatives else "")
                 + (f", {self.unchecked} not checked" if self.unchecked else "") + ")"]
        for f in self.findings:
            lines += f.text()
        for n in self.notes:
            lines.append(f"{PREFIX}Note: {n}")
        n = len(self.findings)
        lines.append(f"{PREFIX}ERROR SUMMARY: {n} error{'s' if n != 1 else ''}")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"ok": self.ok, "errors": len(self.findings), "dispatches": self.dispatches, "proven": self.proven,
                "unchecked": self.unchecked, "by_representatives": self.by_representatives,
                "tools": list(self.tools), "schedules": self.schedules,
                "findings": [f.to_json() for f in self.findings], "notes": self.notes}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2)
