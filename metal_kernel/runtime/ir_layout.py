"""Sizes and alignments of LLVM IR types on x86-64: what an access
touches, and the element alignment a GPU needs for it."""

from __future__ import annotations

import re

from .ir import Unsupported, _name, _split_top


def _pow2_ceil(v: int) -> int:
    p = 1
    while p < v:
        p *= 2
    return p


class Layout:
    """Sizes and alignments of IR types on x86-64 (the data layout clang
    uses here): what an access reads or writes, and how aligned its element
    must be."""

    def __init__(self, named: dict[str, str]):
        self.named = named
        self.cache: dict[str, tuple[int, int]] = {}

    def size_align(self, t: str) -> tuple[int, int]:
        """(alloc size, ABI alignment)."""
        t = t.strip()
        if t in self.cache:
            return self.cache[t]
        r = self._compute(t)
        self.cache[t] = r
        return r

    def _compute(self, t: str) -> tuple[int, int]:
        simple = {"half": (2, 2), "bfloat": (2, 2), "float": (4, 4), "double": (8, 8),
                  "x86_fp80": (16, 16), "fp128": (16, 16), "ptr": (8, 8)}
        if t in simple or t.startswith("ptr "):
            return simple.get(t, (8, 8))
        m = re.fullmatch(r"i(\d+)", t)
        if m:
            bits = int(m.group(1))
            nbytes = (bits + 7) // 8
            size = _pow2_ceil(nbytes)
            return size, min(size, 16)
        m = re.fullmatch(r"<(\d+) x (.+)>", t)
        if m and not t.startswith("<{"):
            n = int(m.group(1))
            esize, _ = self.size_align(m.group(2))
            store = (n + 7) // 8 if m.group(2) == "i1" else n * esize
            a = _pow2_ceil(store)
            return ((store + a - 1) // a) * a, a
        m = re.fullmatch(r"\[(\d+) x (.+)\]", t)
        if m:
            esize, ealign = self.size_align(m.group(2))
            return int(m.group(1)) * esize, ealign
        packed = t.startswith("<{")
        if t.startswith("{") or packed:
            body = t[2:-2] if packed else t[1:-1]
            size, align = 0, 1
            for member in _split_top(body):
                s, a = self.size_align(member)
                if packed:
                    a = 1
                size = (size + a - 1) // a * a + s
                align = max(align, a)
            return (size + align - 1) // align * align, align
        if t.startswith("%"):
            body = self.named.get(_name(t), "")
            if not body or body == "opaque":
                raise Unsupported(f"type {t} has no layout")
            return self.size_align(body)
        raise Unsupported(f"no layout for type {t!r}")

    def store_size(self, t: str) -> int:
        """Bytes a load or store of `t` touches."""
        t = t.strip()
        m = re.fullmatch(r"i(\d+)", t)
        if m:
            return (int(m.group(1)) + 7) // 8
        m = re.fullmatch(r"<(\d+) x (.+)>", t)
        if m and not t.startswith("<{"):
            return int(m.group(1)) * self.store_size(m.group(2))
        return self.size_align(t)[0]

    def element_align(self, t: str) -> int:
        """The alignment an access of `t` needs on a GPU: its scalar
        element's (Apple GPUs tolerate vectors aligned to their element);
        aggregates: none checked."""
        t = t.strip()
        m = re.fullmatch(r"<(\d+) x (.+)>", t)
        if m and not t.startswith("<{"):
            return self.element_align(m.group(2))
        if t.startswith(("{", "<{", "[", "%")):
            return 1
        return min(self.store_size(t), 16) if t not in ("x86_fp80",) else 16

    def field(self, t: str, k: int) -> tuple[int, str]:
        """(byte offset, type) of member `k` of struct type `t`."""
        t = t.strip()
        if t.startswith("%"):
            t = self.named.get(_name(t), "")
        packed = t.startswith("<{")
        members = _split_top(t[2:-2] if packed else t[1:-1])
        off = 0
        for i, member in enumerate(members):
            size, align = self.size_align(member)
            if not packed:
                off = (off + align - 1) // align * align
            if i == k:
                return off, member.strip()
            off += size
        raise Unsupported(f"no member {k} in {t}")
