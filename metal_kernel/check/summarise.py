"""Loop summaries: the checks of a loop's accesses done once, as ranges, in
its preheader, instead of once per iteration (the kernel side is
mk/check_loop.h).

A loop is summarised when

- it is a counted loop (check/loops.py) with one latch, which is also its
  only exit, entered from one block outside it;
- it makes no call but to pure intrinsics (no barrier, no simd function);
- an access to summarise is a plain load or store through a buffer, a
  program-scope constant, or (loads only) threadgroup memory, in a block
  that runs once per iteration (it dominates the latch, outside any inner
  loop), with an address affine in the induction variable: made of adds,
  subtractions, multiplications by loop invariants, shifts by them, integer
  extensions and truncations and getelementptr from loop invariants;
- for threadgroup reads, every other threadgroup access of the loop (or one
  through a pointer of unknown origin) is a summarised read too, so that
  their reader stamps can be replayed in the order they ran.

The new preheader computes the trip count (__mk_chk_trips), the address of
the first, second and last iterations of each summarised access (its
address computation copied three times, with the induction variable's value
there) and checks every range (__mk_chk_*_range). An integer extension in an
address could wrap mid-loop: each is checked to stay on the line through its
first two values at the last iteration, which for a sequence that is linear
modulo 2^n rules out every wrap in between. When all is clean, each
summarised access's check is skipped in the loop (__mk_chk_*_in); otherwise
the loop runs checked access by access, exactly as without the summary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .cfg import ENTRY, Blocks
from .loops import counted_loop

_LOCAL = re.compile(r"%[-\w.$]+")
_END = r"(?![-\w.$])"
_FLAGS = re.compile(r"\b(nuw|nsw|nusw|exact|inbounds|nneg|disjoint)\s+|\binrange\(\d+,\s*\d+\)\s*")
_META = re.compile(r",\s*![-\w.]+ !\d+")
_INCOMING = re.compile(r"\[\s*([^,\]]+?),\s*(%[-\w.$]+)\s*\]")
# The address arithmetic a summary can follow, and how it combines the
# induction variable's degree.
_ARITH = {"add", "sub", "mul", "shl", "or", "zext", "sext", "trunc", "getelementptr"}
_PURE_CALL = re.compile(r"@(llvm\.(?!memcpy|memmove|memset)[\w.]+|__mk_chk_buffer|__mk_chk_tgparam|__mk_tg_alloc)\(")
RANGE_FN = {"buf": "__mk_chk_buf_range", "tg": "__mk_chk_tg_range", "tgp": "__mk_chk_tg_range",
            "glob": "__mk_chk_glob_range"}


@dataclass
class Check:
    """One checked pointer of an access, as the instrumentation made it."""
    line: int       # the access's line in the function
    slot: int       # which pointer of the access
    ptr: str
    write: bool
    plain: bool     # a non-atomic load or store
    root_kind: str  # check/roots.py Root.kind
    size: str
    bits: int
    site: int
    tail: str       # the check call's arguments after the site (the object)


@dataclass
class Plan:
    """What the instrumentation changes for the summaries of a function."""
    clean: dict[tuple[int, int], str] = field(default_factory=dict)  # (line, slot) -> i1 value
    before_line: dict[int, list[str]] = field(default_factory=dict)  # new blocks, before a label line
    retarget: list[tuple[int, str, str]] = field(default_factory=list)  # (line, old label, new label)


@dataclass
class _Loop:
    header: str
    latch: str
    blocks: set[str]


def plan(lines: list[str], defs: dict[str, str], g: str, lin: str, checks: list[Check]) -> Plan:
    """The summaries of the per-thread function `lines` (with `defs`, its
    values' definitions) whose accesses are checked as `checks`."""
    blocks = Blocks(lines)
    out = Plan()
    loops = _natural_loops(blocks)
    label_line = {"%" + ln.split(":", 1)[0]: i for i, ln in enumerate(lines) if re.match(r"^[-\w.$]+:", ln)}
    for n, loop in enumerate(loops):
        s = _Summary(n, loop, loops, blocks, lines, defs, g, lin)
        found = s.build(checks)
        if not found:
            continue
        pre_label = s.pre_label
        header_line = label_line.get(loop.header)
        if header_line is None:
            continue
        new = f"%mk.ph{n}"
        out.before_line.setdefault(header_line, []).extend([f"mk.ph{n}:", *s.code, f"  br label {loop.header}"])
        out.retarget.append((s.pre_terminator, loop.header, new))
        for i in s.header_phis:
            out.retarget.append((i, pre_label, new))
        for c, name in found:
            out.clean[(c.line, c.slot)] = name
    return out


def apply(out: list[str], p: Plan) -> None:
    """Puts the plan's new blocks and edge changes into `out` (the
    function's lines, instrumented in place)."""
    for i, old, new in p.retarget:
        out[i] = re.sub(re.escape(old) + _END, new, out[i])
    for i, block in p.before_line.items():
        out[i] = "\n".join(block) + "\n" + out[i]


def _natural_loops(blocks: Blocks) -> list[_Loop]:
    """Loops with one back edge, innermost first."""
    out = []
    for h in blocks.order:
        latches = [p for p in blocks.preds.get(h, []) if blocks.dominates(h, p)]
        if len(latches) != 1:
            continue
        body, work = {h}, [latches[0]]
        while work:
            b = work.pop()
            if b not in body:
                body.add(b)
                work.extend(blocks.preds.get(b, []))
        out.append(_Loop(h, latches[0], body))
    return sorted(out, key=lambda lp: len(lp.blocks))


class _Summary:
    def __init__(self, n: int, loop: _Loop, loops: list[_Loop], blocks: Blocks, lines: list[str],
                 defs: dict[str, str], g: str, lin: str):
        self.n, self.loop, self.blocks, self.lines, self.defs = n, loop, blocks, lines, defs
        self.g, self.lin = g, lin
        # blocks of loops nested in this one: their accesses run several times an iteration
        self.inner = set().union(*([lp.blocks for lp in loops if lp.header != loop.header and
                                    lp.header in loop.blocks] or [set()]))
        self.code: list[str] = []
        self.preheader = ""
        self.pre_terminator = -1
        self.header_phis: list[int] = []
        self.pre_label = ""

    def _in_loop(self, v: str) -> bool:
        return self.blocks.block_of.get(v) in self.loop.blocks

    def _shape(self) -> dict | None:
        """The induction variable and entry of a loop of the right shape."""
        lp, bl = self.loop, self.blocks
        outside = [p for p in bl.preds.get(lp.header, []) if p not in lp.blocks]
        if len(outside) != 1:
            return None
        for b in lp.blocks:  # the latch is the only exit
            if b != lp.latch and any(s not in lp.blocks for s in bl.succs.get(b, [])):
                return None
        if not any(s not in lp.blocks for s in bl.succs.get(lp.latch, [])):
            return None
        self.preheader = outside[0]
        term = bl.terminator.get(self.preheader, "")
        if not term.startswith("br ") or term.count(f"label {lp.header}") != 1 or "switch" in term:
            return None
        for i, ln in enumerate(self.lines):
            b = bl.block_at[i] if i < len(bl.block_at) else None
            if b == self.preheader and ln.strip() == term:
                self.pre_terminator = i
            if b == lp.header and re.search(r"= phi ", ln):
                self.header_phis.append(i)
            if b in lp.blocks and re.search(r"\bcall\b|\binvoke\b", ln) and not _PURE_CALL.search(ln):
                return None
        if self.pre_terminator < 0:
            return None
        for i in self.header_phis:
            v = self.lines[i].split("=", 1)[0].strip()
            info = counted_loop(v, self.defs.get(v, ""), self.defs, bl)
            if info is None or not re.fullmatch(r"(%[-\w.$]+|-?\d+)", info["bound"]):
                continue
            if _LOCAL.fullmatch(info["bound"]) and self._in_loop(info["bound"]):
                continue
            # the phi's value from outside the loop: the start, from the preheader
            entering = [(val.strip(), lab) for val, lab in _INCOMING.findall(self.defs[v]) if lab != lp.latch]
            if len(entering) != 1 or entering[0][0] != info["start"]:
                continue
            self.pre_label = entering[0][1]
            if self.preheader != ENTRY and self.pre_label != self.preheader:
                continue
            return {"iv": v, **info}
        return None

    def build(self, checks: list[Check]) -> list[tuple[Check, str]]:
        """The accesses summarised, each with the value that says its
        range was clean."""
        lp, bl = self.loop, self.blocks
        mine = [c for c in checks if bl.block_at[c.line] in lp.blocks]
        if not mine:
            return []
        shape = self._shape()
        if shape is None:
            return []
        self.iv = shape["iv"]
        tg_ok = True
        found: list[Check] = []
        slices: dict[str, list[str]] = {}
        for c in mine:
            b = bl.block_at[c.line]
            tgish = c.root_kind in ("tg", "tgp", "unknown")
            ok = (c.plain and c.root_kind in RANGE_FN and c.size.isdigit() and int(c.size) > 0
                  and not (tgish and c.write) and b not in self.inner and bl.dominates(b, lp.latch))
            sl = self._slice(c.ptr) if ok else None
            if sl is None:
                tg_ok = tg_ok and not tgish
                continue
            slices[c.ptr] = sl
            found.append(c)
        found = [c for c in found if tg_ok or c.root_kind not in ("tg", "tgp")]
        if not found:
            return []
        return list(zip(found, self._emit(shape, found, slices)))

    # -- the address as a function of the induction variable --
    def _slice(self, v: str) -> list[str] | None:
        """The loop's instructions computing `v` (operands first), when `v`
        is affine in the induction variable; [] for a loop invariant."""
        order: list[str] = []
        degree: dict[str, int] = {}

        def visit(x: str) -> int | None:
            if x in degree:
                return degree[x]
            if x == self.iv:
                return 1
            if '"' in x or not self._in_loop(x):
                return 0
            d = self.defs.get(x, "")
            op = d.split(None, 1)[0] if d else ""
            if op not in _ARITH or (op == "or" and " disjoint " not in f" {d} "):
                return None
            ops = [o for o in _LOCAL.findall(_META.sub("", d))]
            degs = []
            for o in ops:
                k = visit(o)
                if k is None:
                    return None
                degs.append(k)
            if op == "mul":
                k = sum(degs)
            elif op == "shl":
                k = None if len(degs) > 1 and degs[-1] else max(degs, default=0)
            else:
                k = max(degs, default=0)
            if k is None or k > 1:
                return None
            degree[x] = k
            order.append(x)
            return k

        if visit(v) is None:
            return None
        return [x for x in order if degree[x]]

    # -- the preheader --
    def _emit(self, shape: dict, found: list[Check], slices: dict[str, list[str]]):
        n, code = self.n, self.code
        ty = self._iv_type()
        bits = int(ty[1:])
        start, bound, step = shape["start"], shape["bound"], shape["step"]
        signed = shape.get("signed", False)
        ext = "sext" if signed else "zext"
        p = f"%mk.s{n}"
        if bits < 64:
            code += [f"  {p}.st = {ext} {ty} {start} to i64", f"  {p}.bd = {ext} {ty} {bound} to i64"]
            st, bd = f"{p}.st", f"{p}.bd"
        else:
            st, bd = start, bound
        flags = bits | (0x100 if signed else 0) | (0x200 if shape["kind"] == "ne" else 0) | \
            (0x400 if shape["bound_adjust"] else 0)
        code += [f"  {p}.trips = call i64 @__mk_chk_trips(i64 {st}, i64 {bd}, i64 {step}, i32 {flags})",
                 f"  {p}.tm1 = add i64 {p}.trips, -1",
                 f"  {p}.counted = icmp ne i64 {p}.trips, 0",
                 f"  {p}.iv1 = add {ty} {start}, {step}"]
        if bits < 64:
            code.append(f"  {p}.tmn = trunc i64 {p}.tm1 to {ty}")
        code += [f"  {p}.ivd = mul {ty} {p}.tmn, {step}" if bits < 64 else f"  {p}.ivd = mul i64 {p}.tm1, {step}",
                 f"  {p}.ivl = add {ty} {start}, {p}.ivd"]
        names = {"0": {}, "1": {}, "l": {}}
        iv_of = {"0": start, "1": f"{p}.iv1", "l": f"{p}.ivl"}
        everything = list(dict.fromkeys(x for c in found for x in slices[c.ptr]))
        no_wrap: dict[str, str] = {}
        for var in ("0", "1", "l"):
            ren = names[var]
            for x in everything:
                ren[x] = f"{p}.{var}.{x[1:]}"
                code.append(f"  {ren[x]} = {self._copy(self.defs[x], ren, iv_of[var])}")
        for k, x in enumerate(everything):  # the extensions' no-wrap conditions
            m = re.match(r"^(zext|sext)(?:\s+nneg)?\s+(i\d+)\s+(%[-\w.$]+|-?\d+)\s+to\s+(i\d+)", self.defs[x])
            if not m:
                continue
            kind, src_ty, operand = m.group(1), m.group(2), m.group(3)
            e = {}
            for var in ("0", "1", "l"):
                val = names[var].get(operand, iv_of[var] if operand == self.iv else operand)
                e[var] = f"{p}.x{k}.{var}"
                code.append(f"  {e[var]} = {kind} {src_ty} {val} to i64")
            code += [f"  {p}.x{k}.d = sub i64 {e['1']}, {e['0']}",
                     f"  {p}.x{k}.m = mul i64 {p}.tm1, {p}.x{k}.d",
                     f"  {p}.x{k}.e = add i64 {e['0']}, {p}.x{k}.m",
                     f"  {p}.x{k}.ok = icmp eq i64 {p}.x{k}.e, {e['l']}"]
            no_wrap[x] = f"{p}.x{k}.ok"
        ranges, clean = [], []
        for j, c in enumerate(found):
            ptrs = [names[var].get(c.ptr, c.ptr) for var in ("0", "1", "l")]
            ranges.append(ptrs)
            code.append(f"  {p}.r{j} = call i1 @{RANGE_FN[c.root_kind]}(ptr {self.g}, i32 {self.lin}, "
                        f"ptr {ptrs[0]}, ptr {ptrs[1]}, ptr {ptrs[2]}, i64 {p}.trips, i64 {c.size}, i32 {c.bits}, "
                        f"i32 {c.site}, {c.tail})")
            conds = [f"{p}.counted", *(no_wrap[x] for x in slices[c.ptr] if x in no_wrap), f"{p}.r{j}"]
            clean.append(self._all(conds, f"{p}.c{j}"))
        # A loop's threadgroup reads are summarised all or none (their log
        # replays them iteration by iteration); buffers and constants each.
        tg = [j for j, c in enumerate(found) if c.root_kind in ("tg", "tgp")]
        if tg:
            together = self._all([clean[j] for j in tg], f"{p}.tg")
            for j in tg:
                clean[j] = together
        for k, j in enumerate(tg):
            c, ptrs = found[j], ranges[j]
            base, _, slot = [t.strip() for t in c.tail.split(",")]
            code.append(f"  call void @__mk_chk_tg_range_log(ptr {self.g}, i32 {self.lin}, i1 {clean[j]}, "
                        f"ptr {ptrs[0]}, ptr {ptrs[1]}, i64 {p}.trips, i64 {c.size}, i32 {c.bits}, i32 {c.site}, "
                        f"{base}, {slot}, i32 {k}, i32 {len(tg)})")
        return clean

    def _all(self, conds: list[str], name: str) -> str:
        """`name`: the conjunction of `conds`, frozen (a copy of an address
        computation may be poison where the loop never goes)."""
        acc = conds[0]
        for k, cnd in enumerate(conds[1:]):
            self.code.append(f"  {name}.a{k} = and i1 {acc}, {cnd}")
            acc = f"{name}.a{k}"
        self.code.append(f"  {name} = freeze i1 {acc}")
        return name

    def _iv_type(self) -> str:
        return re.match(r"^phi (i\d+)", self.defs[self.iv]).group(1)

    def _copy(self, d: str, ren: dict[str, str], iv_value: str) -> str:
        """Instruction `d` with its loop operands renamed, the induction
        variable replaced, and the flags that could make poison of a value
        the loop never computes (the second iteration of a one-trip loop)
        dropped."""
        d = _META.sub("", d)
        if d.startswith("or "):
            d = "add " + d[3:]
        d = _FLAGS.sub("", d)
        return _LOCAL.sub(lambda m: iv_value if m.group(0) == self.iv else ren.get(m.group(0), m.group(0)), d)
