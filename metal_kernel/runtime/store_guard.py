"""Bounds-checked stores for ordinary dispatches: a kernel's store past the
end of a buffer becomes a KernelError, never a write into the process's heap.

Before a dispatch runs, its stores to device buffers are either

- proven in bounds for this grid and these buffer sizes, from the kernel's
  offset polynomials (check/affine.py: `out[gid] = ...`, `if (i < n) y[i]`,
  loops bounded by a scalar; check/prove.py `stores_in_bounds`): the kernel
  runs as it is, at full speed; or
- not proven: every buffer the kernel may write (and every buffer sharing
  memory with one) is copied into memory fenced by tens of GiB of
  inaccessible address space on both sides (check/guarded.py), the kernel
  runs on the copies, and the results are copied back. A store past either
  end faults in the fence: KernelError naming the buffer and the distance,
  and the caller's memory is left as it was before the dispatch.

The facts a proof needs come from the kernel's per-thread function compiled
once (CompiledLibrary.store_facts, cached on disk). A dispatch whose guarded
copies would be small does not wait for them: copying is cheaper than the
first compile. $METAL_KERNEL_BOUNDS_CHECK=0 turns the guard off (the store
goes wherever the kernel sends it); metal_kernel.check() finds out-of-bounds
accesses exactly, with thread and line, reads included.

Not covered: threadgroup and private arrays (their stores stay inside the
runtime's own memory or the worker's stack; check() finds them), and reads,
which cannot corrupt anything.
"""

from __future__ import annotations

import os

# Copies up to this many bytes per dispatch are made without first trying to
# prove the stores (the proof's facts cost one compile of the kernel, ~1 s)...
COPY_WITHOUT_FACTS = 8 << 20
# ...until a kernel's copies add up to about what that compile costs (a
# kernel called again and again on 4 MB ran at half speed for good), or the
# facts are already on disk (an earlier process compiled them).
COPIES_BEFORE_FACTS = 1 << 30
# Inaccessible address space on each side of a copy: any 32-bit index of an
# element of up to 16 bytes lands in it.
REACH = 1 << 36
# Dispatch shapes whose store proofs a kernel keeps (`_proven`).
PROOFS_KEPT = 64

_OFF = ("0", "false", "no", "off", "never")


def enabled() -> bool:
    return os.environ.get("METAL_KERNEL_BOUNDS_CHECK", "1").strip().lower() not in _OFF


def written_buffers(kernel, b) -> list[int]:
    """Bound buffers the kernel may write: its `device` (non-const) pointer
    and reference parameters."""
    out = []
    for i, ptr in enumerate(b.ptrs):
        if not ptr or not b.sizes[i]:
            continue
        _, ptype = kernel._buffers.get(i, (None, None))
        if ptype is None or ptype.writable:
            out.append(i)
    return out


def guard_needed(kernel, b, grid, group, ngroups) -> list[int]:
    """The buffers to fence for this dispatch: [] when nothing is written or
    every store is proven in bounds."""
    written = written_buffers(kernel, b)
    if not written:
        return []
    facts = kernel._store_facts
    if facts is None:
        copy = sum(b.sizes[i] for i in written)
        kernel._fenced_bytes += copy
        if copy > COPY_WITHOUT_FACTS or kernel._fenced_bytes > COPIES_BEFORE_FACTS or kernel._store_facts_cached():
            facts = kernel._load_store_facts()
    if facts:
        if _proven(kernel, facts, b, grid, group, ngroups):
            return []
        written = [i for i in written if i in set(facts.get("written", written))] \
            if not facts.get("writes_unknown") else written
    return written


def settled(kernel, b, grid, group, ngroups) -> bool:
    """Whether this dispatch needs no fence and no dispatch with the same
    geometry, buffer sizes and addresses ever will: it writes nothing, or
    its proof read nothing from the buffers' contents (runtime/dispatch_plan.py
    then skips the guard when the call repeats)."""
    if not written_buffers(kernel, b):
        return True
    hit = kernel._store_proofs.get(_proof_key(b, grid, group, ngroups))
    return hit is not None and hit[1] and not hit[0]


def _proof_key(b, grid, group, ngroups) -> tuple:
    return (tuple(grid), tuple(group), tuple(ngroups), tuple(b.sizes), tuple(p & 4095 if p else -1 for p in b.ptrs))


def _proven(kernel, facts: dict, b, grid, group, ngroups) -> bool:
    """check/prove.py `stores_in_bounds`, remembered per dispatch shape: the
    proof depends on the geometry, the buffers' sizes, their addresses'
    alignment and the scalars it read from them, so a dispatch that repeats
    all of these (a loop calling the kernel on the same tensors) reuses it
    after re-reading those scalars (a proof can cost a millisecond)."""
    from ..check.prove import read_scalar, stores_in_bounds

    key = _proof_key(b, grid, group, ngroups)
    memo = kernel._store_proofs
    hit = memo.get(key)
    if hit is not None and all(read_scalar(b.ptrs, b.sizes, i, off, ty) == v for i, off, ty, v in hit[0]):
        return hit[1]
    reads: list = []
    proven = stores_in_bounds(facts, grid, group, ngroups, b.ptrs, b.sizes, reads)
    if len(memo) >= PROOFS_KEPT:
        memo.clear()
    memo[key] = (reads, proven)
    return proven


class Fenced:
    """Guarded copies of the written buffers (and of every buffer sharing
    memory with one), standing in for the bound buffers of a dispatch."""

    def __init__(self, b, written: list[int]):
        from ..check.guarded import GuardedCopy

        self.b = b
        spans = [(p, p + n) for p, n in zip(b.ptrs, b.sizes)]
        # Buffers whose memory overlaps form one region, copied as a whole,
        # so that aliases (an in-place op's input and output) stay aliases.
        regions: list[list] = []  # [lo, hi, members]
        for i in sorted(range(len(spans)), key=lambda k: spans[k][0]):
            lo, hi = spans[i]
            if not b.ptrs[i] or hi <= lo:
                continue
            if regions and lo < regions[-1][1]:
                regions[-1][1] = max(regions[-1][1], hi)
                regions[-1][2].append(i)
            else:
                regions.append([lo, hi, [i]])
        wanted = set(written)
        self.copies = []  # (GuardedCopy, lo, members)
        self.ptrs, self.sizes, self.names = list(b.ptrs), list(b.sizes), b.names
        try:
            for lo, hi, members in regions:
                if not wanted & set(members):
                    continue
                copy = GuardedCopy(lo, hi - lo, REACH, exact_end=True)
                self.copies.append((copy, lo, members))
                for i in members:
                    self.ptrs[i] = copy.address + (b.ptrs[i] - lo)
        except BaseException:
            self.close()
            raise
        self.keep = [self]

    def copy_back(self):
        import ctypes

        for copy, lo, _ in self.copies:
            ctypes.memmove(lo, copy.address, copy.size)

    def written_before(self) -> tuple[int, int] | None:
        """(buffer, negative offset) when the dispatch wrote into the
        accessible bytes just before a copy (the fence starts at a page)."""
        for copy, lo, members in self.copies:
            off = copy.slack_written()
            if off is not None:
                first = min(members, key=lambda i: self.b.ptrs[i])
                return first, off - (self.b.ptrs[first] - lo)
        return None

    def where(self, address: int) -> tuple[int, int] | None:
        """(buffer, offset from its start) of a faulting address inside a
        fence or copy."""
        for copy, lo, members in self.copies:
            off = copy.offset_of(address)
            if off is None:
                continue
            target = address - copy.address + lo
            best = min(members, key=lambda i: 0 if self.b.ptrs[i] <= target < self.b.ptrs[i] + self.b.sizes[i]
                       else min(abs(target - self.b.ptrs[i]), abs(target - self.b.ptrs[i] - self.b.sizes[i])))
            return best, target - self.b.ptrs[best]
        return None

    def close(self):
        for copy, _, _ in self.copies:
            copy.close()
        self.copies = []


def run_fenced(kernel, b, written: list[int], launch_fn):
    """Runs `launch_fn(bound)` on fenced copies of `written`; copies the
    results back when it succeeds. A fault in a fence becomes a KernelError
    naming the buffer; the caller's buffers then keep their contents."""
    from .errors import KernelError

    fenced = Fenced(b, written)
    try:
        try:
            launch_fn(fenced)
        except KernelError as e:
            hit = fenced.where(e.address) if e.address is not None else None
            if hit is None:
                raise
            raise _out_of_bounds(kernel, b, *hit, e) from None
        before = fenced.written_before()
        if before is not None:
            raise _out_of_bounds(kernel, b, *before, None)
        fenced.copy_back()
    finally:
        fenced.close()


def _out_of_bounds(kernel, b, i: int, off: int, err):
    """The KernelError of a store out of bounds; `err`: the fault's, as the
    kernel's language named its thread (None: found by the canary)."""
    from .errors import KernelError

    name = kernel._buffers.get(i, ("?", None))[0]
    size = b.sizes[i]
    where = (f"byte offset {off} of buffer {i} '{name}', which holds {size} bytes" if off >= size
             else f"{-off} bytes before the start of buffer {i} '{name}'")
    what = "an access" if err is not None else "a store"
    block = getattr(err, "block", None)  # a CUDA kernel's: thread within block
    thread = ""
    if err is not None and err.thread:
        thread = (f" by thread {err.thread} of block {block}" if block is not None
                  else f" by thread {err.thread} (threadgroup {err.threadgroup})")
    out = KernelError(
        f"kernel '{kernel.name}': {what} out of bounds{thread}: {where}. Nothing was written to the "
        "buffers (they keep their contents from before the dispatch); run the dispatch under "
        "metal_kernel.check() for the thread and line", kernel=kernel.name,
        thread=err.thread if err is not None else None, threadgroup=err.threadgroup if err is not None else None,
        address=err.address if err is not None else None)
    if block is not None:
        out.block = block
    return out
