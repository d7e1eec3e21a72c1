"""The cut: the synchronising markers of a parsed function become the ends
of blocks (sync points), the non-synchronising markers plain instructions,
then the CFG is built and the points numbered in program order."""

from __future__ import annotations

import re

from ..ir import _GLOBAL, Unsupported, _gref, _name, _ref
from .abi import (
    ARGLESS_SIMD_OPS,
    BARRIER,
    MAX_SIMD_BYTES,
    MAX_SYNC_POINTS,
    MAX_TG_ALLOCS,
    POINT_FLAGS,
    SIMD,
    SYNC_MARKERS,
    TG_ALLOC,
    THREAD_INDEX,
)
from .ir_model import _TERMINATORS, Block, Function, Inst, SyncPoint, branch_targets, reachable


def region_blocks(fn: Function, start: str) -> set[str]:
    """The blocks of the region entered at `start` (a step function's):
    those reachable from it without passing a cut."""
    return reachable([start], lambda b: () if fn.blocks[b].sync else fn.blocks[b].succs)  # a cut ends it


class Cutter:
    """Rewrites `fn` in place: lowers the markers, builds the CFG, orders
    the sync points."""

    def __init__(self, fn: Function):
        self.fn = fn

    def _simd_strides(self):
        """Row strides of the simd operand / result arrays: one per kernel
        (a power of two no smaller than any operand), so that rows of
        different sync points never overlap (simdgroups resolved in the same
        round may be at different points)."""
        ins_, outs = [1], [1]
        for lb in self.fn.order:
            for ins in self.fn.blocks[lb].insts:
                if ins.op == "call" and ins.call is not None and ins.call.callee == _gref(SIMD):
                    a = [v for _, v in ins.call.args]
                    try:
                        ins_.append(int(a[4]))
                        outs.append(int(a[5]))
                    except (ValueError, IndexError):
                        raise Unsupported("simd call with non-constant sizes")

        def pow2(v):
            p = 1
            while p < v:
                p *= 2
            return p
        self.fn.in_stride, self.fn.out_stride = pow2(max(ins_)), pow2(max(outs))
        if self.fn.in_stride > MAX_SIMD_BYTES or self.fn.out_stride > MAX_SIMD_BYTES:
            raise Unsupported("simd operand too large")

    def lower_markers(self):
        self._simd_strides()
        new_order = []
        renames = []
        for lb in self.fn.order:
            blk = self.fn.blocks[lb]
            pieces = [blk]
            cur = blk
            insts = blk.insts
            cur.insts = []
            for ins in insts:
                if ins.op == "call" and ins.call is not None:
                    name = _name(ins.call.callee) if ins.call.callee.startswith("@") else ""
                    if name == THREAD_INDEX:
                        ins = Inst(f"  {_ref(ins.name)} = add i32 {_ref(self.fn.lin)}, 0", self.fn.locals)
                    elif name == TG_ALLOC:
                        vals = [v for _, v in ins.call.args]
                        try:
                            key = tuple(int(v) for v in vals)
                        except ValueError:
                            raise Unsupported("threadgroup allocation with non-constant arguments")
                        if key not in self.fn.tg_allocs:
                            self.fn.tg_allocs.append(key)
                        j = self.fn.tg_allocs.index(key)
                        if j >= MAX_TG_ALLOCS:
                            raise Unsupported("too many threadgroup variables")
                        ins = Inst(f"  {_ref(ins.name)} = load ptr, ptr %mk.tgp{j}, align 8, !invariant.load !{{}}, "
                                   f"!nonnull !{{}}, !dereferenceable !{{i64 {key[1]}}}, !align !{{i64 {key[2]}}}",
                                   self.fn.locals)
                    elif name in SYNC_MARKERS:
                        k = len(self.fn.syncs) + 1
                        if k > MAX_SYNC_POINTS:
                            raise Unsupported("too many synchronisation points")
                        cont = Block(f"mk.c{k}")
                        sp = SyncPoint(k, "barrier" if name == BARRIER else "simd", cur.label, cont.label,
                                       tag=k)
                        self.fn.syncs.append(sp)
                        if name == SIMD:
                            self._lower_simd(sp, ins, cur, cont)
                        else:
                            # The barrier's mem_flags (and, in checked builds, its
                            # site): the driver needs them only when checking.
                            flags = ins.call.args[0][1] if ins.call.args else ""
                            sp.op = int(flags) if re.fullmatch(r"-?\d+", flags) else 0xff
                            if sp.op == POINT_FLAGS:
                                sp.kind, sp.op = "point", 0
                        cur.sync = k
                        cur.succs = [cont.label]
                        self.fn.locals.labels.add(cont.label)
                        pieces.append(cont)
                        cur = cont
                        continue
                ins.block = cur.label
                cur.insts.append(ins)
            for p in pieces:
                for ins in p.insts:
                    ins.block = p.label
                self.fn.blocks[p.label] = p
                new_order.append(p.label)
            if len(pieces) > 1:
                renames.append((lb, pieces[-1].label))
        self.fn.order = new_order
        # Successors' phis name the block that now ends in the terminator.
        for old, new in renames:
            for succ in self._term_succs(self.fn.blocks[new]):
                for ins in self.fn.blocks[succ].insts:
                    if ins.op != "phi":
                        break
                    ins.text = re.sub(rf"(,\s*){re.escape(_ref(old))}(\s*\])", rf"\g<1>{_ref(new)}\g<2>",
                                      ins.text)

    def _term_succs(self, blk: Block) -> list[str]:
        if not blk.insts:
            return []
        t = blk.insts[-1]
        if t.op not in _TERMINATORS:
            raise Unsupported(f"block {blk.label} does not end in a terminator")
        return branch_targets(t)

    def _lower_simd(self, sp: SyncPoint, ins: Inst, before: Block, after: Block):
        a = [v for _, v in ins.call.args]
        if len(a) != 8:
            raise Unsupported("unexpected simd marker signature")
        try:
            sp.op, sp.in_size, sp.out_size = int(a[3]), int(a[4]), int(a[5])
        except ValueError:
            raise Unsupported("simd call with non-constant sizes")
        if not re.fullmatch(_GLOBAL, a[6]) or not re.fullmatch(_GLOBAL, a[7]):
            raise Unsupported("simd call with a non-constant computation")
        if sp.in_size > MAX_SIMD_BYTES or sp.out_size > MAX_SIMD_BYTES:
            raise Unsupported("simd operand too large")
        sp.compute, sp.dense = a[6], a[7]
        k = sp.id
        L = self.fn.locals
        lowered = [
            Inst(f"  %mk.io{k} = mul i64 %mk.tid64, {self.fn.in_stride}", L),
            Inst(f"  %mk.ip{k} = getelementptr inbounds i8, ptr %mk.simd_in, i64 %mk.io{k}", L),
            Inst(f"  call void @llvm.memcpy.p0.p0.i64(ptr align 1 %mk.ip{k}, ptr align 1 {a[0]}, "
                 f"i64 {sp.in_size}, i1 false)", L),
        ]
        sp.uses_arg = (sp.op & 0xff) not in ARGLESS_SIMD_OPS  # checked builds: site and flags above
        if sp.uses_arg:
            lowered.append(Inst(f"  store i32 {a[2]}, ptr %mk.ap{k}, align 4", L))
        before.insts += lowered
        after.insts += [
            Inst(f"  %mk.oo{k} = mul i64 %mk.tid64, {self.fn.out_stride}", L),
            Inst(f"  %mk.op{k} = getelementptr inbounds i8, ptr %mk.simd_out, i64 %mk.oo{k}", L),
            Inst(f"  call void @llvm.memcpy.p0.p0.i64(ptr align 1 {a[1]}, ptr align 1 %mk.op{k}, "
                 f"i64 {sp.out_size}, i1 false)", L),
        ]
        for i in before.insts[-len(lowered):] + after.insts[-3:]:
            i.kind = "lowered"

    # --------------------------------------------------------------- CFG --
    def build_cfg(self):
        for lb in self.fn.order:
            blk = self.fn.blocks[lb]
            if blk.sync == 0:
                blk.succs = self._term_succs(blk)
            blk.preds = []
        for lb in self.fn.order:
            for s in self.fn.blocks[lb].succs:
                if s not in self.fn.blocks:
                    raise Unsupported(f"branch to unknown block {s}")
                self.fn.blocks[s].preds.append(lb)
        self.fn.defs: dict[str, Inst] = {}
        for lb in self.fn.order:
            for ins in self.fn.blocks[lb].insts:
                if ins.name:
                    self.fn.defs[ins.name] = ins

    def order_syncs(self):
        """Numbers the cuts in reverse postorder of the CFG (back edges
        ignored): the driver resolves, per simdgroup, the lowest-numbered
        point first, and a point that comes earlier in the program (e.g. a
        simd call in a loop) must go before one after it (the same call after
        the loop), whatever order the optimiser laid the blocks out in."""
        seen = set()
        post: list[str] = []
        stack = [(self.fn.entry, iter(self.fn.blocks[self.fn.entry].succs))]
        seen.add(self.fn.entry)
        while stack:
            lb, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                post.append(lb)
                stack.pop()
            elif nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, iter(self.fn.blocks[nxt].succs)))
        rank = {lb: i for i, lb in enumerate(reversed(post))}
        order = sorted(self.fn.syncs, key=lambda sp: (rank.get(sp.block, len(rank)), sp.id))
        old_to_new = {sp.id: i + 1 for i, sp in enumerate(order)}
        for sp in order:
            sp.id = old_to_new[sp.id]
        self.fn.syncs = order
        for lb in self.fn.order:
            blk = self.fn.blocks[lb]
            if blk.sync:
                blk.sync = old_to_new[blk.sync]
