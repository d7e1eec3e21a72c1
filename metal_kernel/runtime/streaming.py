"""Streaming (non-temporal) stores for direct kernels over large buffers.

A kernel like saxpy over 64 MB outputs is limited by memory traffic. An
ordinary store first reads the destination line into the cache (a "read for
ownership") and writes it back later: every output byte crosses the memory
bus twice. A non-temporal store writes whole lines straight to memory, the
way memcpy/memset do for copies larger than the cache.

This module adds, next to a direct kernel's `__mk_fast_N` loop, a clone
`__mk_stream_N` whose wide vector stores (the ones the loop vectoriser makes
for `out[i] = ...` across consecutive threads) are non-temporal. The runtime
calls the clone only when the buffers of a dispatch are larger than the
last-level cache (runtime/library.py), since data written around the cache
is slow to read back while it would still have fit.

x86 non-temporal vector stores need aligned addresses, and a buffer's
alignment is only known at run time, so each rewritten store checks its
address: 64-byte (or vector-size) aligned -> one wide non-temporal store,
16-byte aligned -> 16-byte non-temporal pieces, else the ordinary store.
The check is on the address of each store, so any buffer offset is safe.

Only stores to buffers the kernel never reads are rewritten: a buffer the
kernel also loads from (`y[i] = a * x[i] + y[i]`) has its lines in the
cache already, and writing them around it costs a round trip to memory
per line (3x slower in place on a Zen 3 EPYC, issue 14). A store's buffer
is the base its address is computed from (through getelementptr, select
and phi), a buffer argument loaded from the launch's table; a store whose
base is also the base of any load, or cannot be traced, stays ordinary.
Two different buffer arguments may still be the same memory; the runtime
takes the variant only when the dispatch's buffers do not overlap
(runtime/library.py).

Only kernels with no private arrays (`alloca`), no threadgroup memory and
no atomics or fences get a clone: a non-temporal store to memory the kernel
reads back at once would be slow, and those are the stores that do; and
non-temporal stores are not ordered by x86's release fences, which a kernel
publishing data through an atomic flag relies on. Every thread that ran
groups runs the non-temporal stores' fence (`sfence`) before the dispatch
completes (src/mkrt_pool.h, work()).

Works on the textual IR of the optimised module; the result is compiled
without running the optimiser again (compiler.py), so the new blocks stay
as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Element types a vector store may have, and their sizes in bytes.
_ELEMENT_BYTES = {"i8": 1, "i16": 2, "half": 2, "bfloat": 2, "i32": 4, "float": 4, "i64": 8, "double": 8}

# Narrowest vector store worth streaming: 32 bytes means the store came
# from a vectorised loop over threads (a per-thread float4 store is 16).
MIN_VECTOR_BYTES = 32

_NAME = r"%[-a-zA-Z$._0-9]+"
_STORE = re.compile(
    rf"^(?P<indent>\s*)store (?P<type><(?P<n>\d+) x (?P<elem>\w+)>) (?P<value>{_NAME}), "
    rf"ptr (?P<ptr>{_NAME}), align (?P<align>\d+)(?P<meta>(, !.*)?)$"
)
_ATOMIC = re.compile(r"\b(atomicrmw|cmpxchg|fence)\b|\b(load|store) atomic\b")
_DEF = re.compile(rf"^\s*({_NAME}) = (.*)$")
_GEP = re.compile(rf"^getelementptr (?:inbounds |nuw |nusw )*[^,]+, (?:ptr|<\d+ x ptr>) ({_NAME})((?:, .*)?)$")
_CAST = re.compile(rf"^(?:bitcast|addrspacecast) ptr ({_NAME}) to ptr$")
_SELECT = re.compile(rf"^select .*?, ptr ({_NAME}), ptr ({_NAME})$")
_PHI_PTR = re.compile(r"^phi ptr (.*)$")
_LOAD = re.compile(rf"^load (?:volatile )?[^,]+, ptr ({_NAME})")
_LOAD_PTR = re.compile(rf"^load ptr, ptr ({_NAME})")
_CALL_PTRS = re.compile(rf"\bptr(?: [a-z_]+(?:\([^)]*\))?| \d+)* ({_NAME})")
_CONST_OFFSET = re.compile(r"^, i(?:32|64) (-?\d+)$")
_LABEL = re.compile(r"^(?P<name>[-a-zA-Z$._0-9]+):(\s|$)")
_PHI_FROM = r"(\[\s*[^\[\]]+?,\s*){old}(\s*\])"


@dataclass
class StreamingResult:
    text: str
    symbols: set[int] = field(default_factory=set)  # kernels that got a __mk_stream_N


def _function_span(lines: list[str], name: str) -> tuple[int, int] | None:
    """[first, last] line indices of the definition of @name."""
    head = re.compile(rf"^define .*@{re.escape(name)}\(")
    for i, line in enumerate(lines):
        if head.match(line):
            for j in range(i + 1, len(lines)):
                if lines[j] == "}":
                    return i, j
            return None
    return None


class _Buffers:
    """Which buffer each address of a function points into: the base it is
    computed from, with pointers loaded from memory named by the address
    they were loaded from (the same buffer slot loaded twice is one buffer)."""

    def __init__(self, body: list[str]):
        self.defs: dict[str, str] = {}
        for line in body[1:-1]:
            m = _DEF.match(line)
            if m:
                self.defs[m.group(1)] = m.group(2).strip()
        self.memo: dict[str, frozenset | None] = {}

    def _slot(self, p: str, depth: int):
        """A pointer slot: (the buffers of its base, constant byte offset)."""
        m = _GEP.match(self.defs.get(p, ""))
        off = _CONST_OFFSET.match(m.group(2)) if m else None
        if m and off:
            return self.of(m.group(1), depth + 1), int(off.group(1))
        if m and not m.group(2):
            return self.of(m.group(1), depth + 1), 0
        return self.of(p, depth + 1), 0

    def of(self, v: str, depth: int = 0) -> frozenset | None:
        """The set of bases `v` may point into; None when unknown."""
        if v in self.memo:
            return self.memo[v]
        if depth > 64:
            return None
        self.memo[v] = None  # a cycle through phis: unknown until resolved
        d = self.defs.get(v)
        if d is None:
            out = frozenset([("value", v)])  # an argument
        elif (m := _GEP.match(d)) or (m := _CAST.match(d)):
            out = self.of(m.group(1), depth + 1)
        elif m := _SELECT.match(d):
            a, b = self.of(m.group(1), depth + 1), self.of(m.group(2), depth + 1)
            out = None if a is None or b is None else a | b
        elif m := _PHI_PTR.match(d):
            parts = [self.of(x, depth + 1) for x in re.findall(rf"\[\s*({_NAME}),", m.group(1))]
            out = None if not parts or any(x is None for x in parts) else frozenset().union(*parts)
        elif m := _LOAD_PTR.match(d):
            out = frozenset([("loaded", self._slot(m.group(1), depth))])
        else:
            out = None  # inttoptr, a call's result, ...
        self.memo[v] = out
        return out


def _read_buffers(body: list[str], buffers: _Buffers) -> frozenset | None:
    """The bases of every address the function reads through (loads, and
    calls taking pointers); None when one cannot be traced."""
    read: set = set()
    for line in body[1:-1]:
        m = _DEF.match(line)
        rhs = m.group(2).strip() if m else line.strip()
        addrs = []
        if lm := _LOAD.match(rhs):
            addrs = [lm.group(1)]
        elif re.match(r"^(tail |musttail |notail )?call\b", rhs) and "@llvm.lifetime" not in rhs:
            addrs = _CALL_PTRS.findall(rhs)
        for a in addrs:
            b = buffers.of(a)
            if b is None:
                return None
            read |= b
    return frozenset(read)


def _stream_clone(body: list[str], sym: int, counter: list[int]) -> list[str] | None:
    """The body of __mk_fast_<sym> (define line to closing brace) as
    __mk_stream_<sym>, or None when it has no store worth streaming."""
    text = "\n".join(body)
    if re.search(r"=\s*alloca\b", text) or "tg_alloc" in text:
        return None
    if _ATOMIC.search(text):
        # Non-temporal stores are weakly ordered: a release fence or atomic
        # (plain moves on x86) could publish a flag before the data.
        return None
    buffers = _Buffers(body)
    read = _read_buffers(body, buffers)
    if read is None:
        return None  # a read through an address it cannot trace: any store may hit it
    out = [body[0].replace(f"@__mk_fast_{sym}(", f"@__mk_stream_{sym}(", 1)]
    block: str | None = None  # label of the block being copied (None: entry block)
    renamed: dict[str, str] = {}  # block label -> label of its last piece after splitting
    changed = False
    for line in body[1:-1]:
        m = _LABEL.match(line)
        if m:
            block = m.group("name")
            out.append(line)
            continue
        s = _STORE.match(line)
        if s is None or block is None:
            out.append(line)
            continue
        elem = s.group("elem")
        if elem not in _ELEMENT_BYTES:
            out.append(line)
            continue
        nbytes = int(s.group("n")) * _ELEMENT_BYTES[elem]
        if nbytes < MIN_VECTOR_BYTES or nbytes & (nbytes - 1):
            out.append(line)
            continue
        written = buffers.of(s.group("ptr"))
        if written is None or written & read:
            out.append(line)  # read-modify-write (or untraceable): through the cache
            continue
        k = counter[0]
        counter[0] += 1
        ind, ty, val, ptr = s.group("indent"), s.group("type"), s.group("value"), s.group("ptr")
        plain = line

        def nt(align: int) -> str:
            return f"{ind}store {ty} {val}, ptr {ptr}, align {align}{s.group('meta')}, !nontemporal !{{i32 1}}"
        full, part, check, rest, tail = (f"mk.nt{k}.full", f"mk.nt{k}.part", f"mk.nt{k}.check",
                                         f"mk.nt{k}.plain", f"mk.nt{k}.tail")
        out += [
            f"{ind}%mk.nt{k}.addr = ptrtoint ptr {ptr} to i64",
            f"{ind}%mk.nt{k}.low = and i64 %mk.nt{k}.addr, {nbytes - 1}",
            f"{ind}%mk.nt{k}.wide = icmp eq i64 %mk.nt{k}.low, 0",
            f"{ind}br i1 %mk.nt{k}.wide, label %{full}, label %{check}",
            f"{full}:",
            nt(nbytes),
            f"{ind}br label %{tail}",
            f"{check}:",
            f"{ind}%mk.nt{k}.low16 = and i64 %mk.nt{k}.addr, 15",
            f"{ind}%mk.nt{k}.narrow = icmp eq i64 %mk.nt{k}.low16, 0",
            f"{ind}br i1 %mk.nt{k}.narrow, label %{part}, label %{rest}",
            f"{part}:",
            nt(16),
            f"{ind}br label %{tail}",
            f"{rest}:",
            plain,
            f"{ind}br label %{tail}",
            f"{tail}:",
        ]
        renamed[block] = tail
        changed = True
    if not changed:
        return None
    out.append(body[-1])
    # Edges that left a split block now leave its last piece: phis name it.
    for i, line in enumerate(out):
        if " = phi " not in line:
            continue
        for old, new in renamed.items():
            line = re.sub(_PHI_FROM.format(old=re.escape("%" + old)), rf"\1%{new}\2", line)
        out[i] = line
    return out


def add_streaming_variants(ll: str, symbols) -> StreamingResult:
    """Adds __mk_stream_N next to __mk_fast_N for each N in `symbols` that
    has wide vector stores (see the module docstring)."""
    lines = ll.split("\n")
    result = StreamingResult(ll)
    clones: list[str] = []
    counter = [0]
    for sym in symbols:
        span = _function_span(lines, f"__mk_fast_{sym}")
        if span is None:
            continue
        clone = _stream_clone(lines[span[0]:span[1] + 1], sym, counter)
        if clone is not None:
            clones += ["", *clone]
            result.symbols.add(sym)
    if clones:
        result.text = ll.rstrip("\n") + "\n" + "\n".join(clones) + "\n"
    return result
