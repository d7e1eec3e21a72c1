"""Emitting the step functions: one per resume point (the start and every
sync point), each entering at the code after its cut and returning the id of
the next cut reached, or DONE. Values live across a cut are demoted to stack
slots (reg2mem: a store at the definition, a load before each use), so the
cut needs no SSA repair (clang's mem2reg rebuilds SSA afterwards)."""

from __future__ import annotations

import re

from ..ir import _DEF, _LOCAL, Unsupported, _name, _ref, parse_type
from .abi import DONE, WIGROUP_SIZE, WIGROUP_TG_ALLOCS
from .analysis import Analysis
from .cut import region_blocks
from .value_types import skip_flags

_SAVE = "save"  # StepEmitter: a save at a cut, decided per step function


def _stack_slot(v: str) -> str:
    """reg2mem: the stack slot of a value live across a cut."""
    return f"%mk.a.{v}"


class StepEmitter:
    """The step functions of one analysed function. `exits[k]`: the cuts (or
    DONE) step function k can end at, which the loop function reads."""

    def __init__(self, a: Analysis, ai_group: str | None):
        self.a = a
        self.fn = a.fn
        self.ai_group = ai_group  # attribute group of the step functions
        self._tmp = 0
        self.exits: list[set[int]] = []
        # Where the saved values live: a per-thread slot array each, a field
        # of the stage block for the uniform ones; private allocas: a frame field.
        self.slot_idx = {v: i for i, v in enumerate(a.slot_values)}
        self.stage_idx = {v: i for i, v in enumerate(a.uniform)}
        self.priv_idx = {x: i for i, x in enumerate(a.private)}

    def tmp(self, prefix: str) -> str:
        self._tmp += 1
        return f"mk.{prefix}{self._tmp}"

    def emit(self) -> list[str]:
        """The step functions, step_0 (the start) to step_K; fills `exits`."""
        out_blocks = self._demoted_blocks()
        resume_blocks = self._resume_blocks()
        entry = self._entry_lines()
        out = []
        self.exits = []
        for k in range(len(self.fn.syncs) + 1):
            out += self._step_function(k, entry, out_blocks, resume_blocks)
        return out

    def _demoted_blocks(self) -> dict[str, list]:
        """Every block's lines after reg2mem. A save at a cut stays a
        (_SAVE, value) pair: each step function decides whether it needs it."""
        L = self.fn.locals
        crossing = self.a.crossing
        priv_idx = self.priv_idx
        out_blocks: dict[str, list] = {}
        pending: dict[str, dict[str, list[str]]] = {}  # block -> pred -> loads for its phis
        for lb in self.fn.order:
            blk = self.fn.blocks[lb]
            lines: list[str] = []
            phi_stores = []
            pending_loads: dict[str, list[str]] = {}
            for ins in blk.insts:
                if ins.op == "alloca" and lb == self.fn.entry:
                    continue  # emitted in the new entry block
                if ins.op == "call" and "@llvm.lifetime." in ins.text and \
                        any(u in priv_idx or any(u in self.a.derived.get(a, ()) for a in priv_idx)
                            for u in ins.uses):
                    continue  # lifetime markers must name allocas
                text = ins.text
                if "!llvm.loop" in text:
                    text = re.sub(r",\s*!llvm\.loop !\d+", "", text)
                if ins.op == "phi":
                    mapping_needed = [u for u in ins.uses if u in crossing]
                    if mapping_needed:
                        # loads at the end of the predecessors
                        def fix_pair(m, pending_loads=pending_loads):
                            val, pred = m.group(1), _name(m.group(2))
                            used = [nm for _, nm in L.tokens(val) if nm in crossing]
                            if not used:
                                return m.group(0)
                            mp = {}
                            for u in used:
                                t = self.tmp("l")
                                pending_loads.setdefault(pred, []).append(
                                    f"  %{t} = load {self.a.types[u]}, ptr {_stack_slot(u)}")
                                mp[u] = f"%{t}"
                            return f"[ {L.subst(val, mp)}, {m.group(2)} ]"
                        text = re.sub(rf"\[\s*(.+?),\s*({_LOCAL})\s*\]", fix_pair, text)
                    lines.append(text)
                    if ins.name in crossing:
                        phi_stores.append(
                            f"  store {self.a.types[ins.name]} {_ref(ins.name)}, ptr {_stack_slot(ins.name)}")
                    continue
                if phi_stores:
                    lines += phi_stores
                    phi_stores = []
                mp = {}
                for u in ins.uses:
                    if u in crossing:
                        t = self.tmp("l")
                        lines.append(f"  %{t} = load {self.a.types[u]}, ptr {_stack_slot(u)}")
                        mp[u] = f"%{t}"
                if mp:
                    text = L.subst(text, mp)
                if text.strip() == "ret void":
                    text = f"  ret i32 {DONE}"
                lines.append(text)
                if ins.name in crossing:
                    lines.append(f"  store {self.a.types[ins.name]} {_ref(ins.name)}, ptr {_stack_slot(ins.name)}")
            if phi_stores:
                lines += phi_stores
            if blk.sync:
                # The saves (per step function: see _SAVE below) and the exit.
                sp = self.fn.syncs[blk.sync - 1]
                for v in sp.live:
                    if self.a.saved_at(sp, v):
                        lines.append((_SAVE, v))
                lines.append(f"  ret i32 {sp.id}")
            out_blocks[lb] = lines
            pending[lb] = pending_loads
        # loads for phi operands go before the predecessors' terminators
        for lb in self.fn.order:
            for pred, loads in pending[lb].items():
                pl = out_blocks[pred]
                pl[len(pl) - 1:len(pl) - 1] = loads
        return out_blocks

    def _resume_blocks(self) -> dict[int, list[str]]:
        """Per sync point, the code that restores its live values into their
        stack slots: loaded from the thread's slots (or the stage block), or
        recomputed."""
        resume_blocks: dict[int, list[str]] = {}
        resume_blocks: dict[int, list[str]] = {}
        for sp in self.fn.syncs:
            lines = []
            memo: dict[str, str] = {}
            for v in sp.live:
                if self.a.saved_at(sp, v):
                    t = self.tmp("r")
                    staged = self.a.staged_at(sp, v)
                    src = f"%mk.ua.{v}" if staged else f"%mk.sa.{v}"
                    lines.append(f"  %{t} = load {self.a.types[v]}, ptr {src}")
                    if staged and v in self.a.affine:
                        # the stage holds v - x (or - lin): this thread's v
                        tid = _ref({"x": self.fn.x, "lin": self.fn.lin, "y": self.fn.y}[self.a.affine[v]])
                        ty = self.a.types[v]
                        if ty == "i64":  # thread ids are below 1024: zext is sext
                            wide = self.tmp("r")
                            lines.append(f"  %{wide} = zext i32 {tid} to i64")
                            tid = f"%{wide}"
                        t2 = self.tmp("r")
                        lines.append(f"  %{t2} = add {ty} %{t}, {tid}")
                        t = t2
                    lines.append(f"  store {self.a.types[v]} %{t}, ptr {_stack_slot(v)}")
                else:
                    ref = self._emit_remat(v, memo, lines)
                    lines.append(f"  store {self.a.types[v]} {ref}, ptr {_stack_slot(v)}")
            lines.append(f"  br label {_ref(sp.cont)}")
            resume_blocks[sp.id] = lines
        return resume_blocks

    def _entry_lines(self) -> list[str]:
        """The entry block shared by the step functions (each keeps what it
        uses, _live_entry): allocas, this thread's addresses in the slots,
        stage block, frame and threadgroup memory."""
        n = self.fn.sym
        slot_idx, stage_idx, priv_idx = self.slot_idx, self.stage_idx, self.priv_idx
        entry_allocas = {i.name: i for i in self.fn.blocks[self.fn.entry].insts if i.op == "alloca"}
        entry = ["  %mk.tid64 = zext i32 " + _ref(self.fn.lin) + " to i64"]
        if self.a.private:
            entry.append(f"  %mk.frame = getelementptr inbounds %mk.frame.{n}, ptr %mk.frames, i64 %mk.tid64")
        for a, ins in entry_allocas.items():
            if a in priv_idx:
                entry.append(f"  {_ref(a)} = getelementptr inbounds %mk.frame.{n}, ptr %mk.frame, "
                             f"i64 0, i32 {priv_idx[a]}, i32 1")
            else:
                entry.append(ins.text)
        for v in sorted(self.a.crossing):
            entry.append(f"  {_stack_slot(v)} = alloca {self.a.types[v]}")
        for j in range(len(self.fn.tg_allocs)):
            entry.append(f"  %mk.tgp{j} = getelementptr inbounds i8, ptr {_ref(self.fn.g)}, "
                         f"i64 {WIGROUP_TG_ALLOCS + 8 * j}")
        nf = len(self.a.slot_values)
        entry.append(f"  %mk.simd_in = getelementptr inbounds %mk.slots.{n}, ptr %mk.slots, i64 0, i32 {nf}")
        entry.append(f"  %mk.simd_out = getelementptr inbounds %mk.slots.{n}, ptr %mk.slots, i64 0, i32 {nf + 1}")
        for sp in self.fn.syncs:
            if sp.kind == "simd" and sp.uses_arg:
                entry.append(f"  %mk.ap{sp.tag} = getelementptr inbounds %mk.slots.{n}, ptr %mk.slots, "
                             f"i64 0, i32 {nf + 2}, i64 %mk.tid64")
        for v, i in slot_idx.items():
            entry.append(f"  %mk.sa.{v} = getelementptr inbounds %mk.slots.{n}, ptr %mk.slots, "
                         f"i64 0, i32 {i}, i64 %mk.tid64")
        for v, i in stage_idx.items():
            entry.append(f"  %mk.ua.{v} = getelementptr inbounds %mk.stage.{n}, ptr %mk.stage, i64 0, i32 {i}")
        return entry

    def _step_function(self, k: int, entry: list[str], out_blocks: dict[str, list],
                       resume_blocks: dict[int, list[str]]) -> list[str]:
        """step_k: enters at the start (k = 0) or after cut k, holds only the
        blocks it can reach before the next cut."""
        n = self.fn.sym
        out = []
        attr = f" #{self.ai_group}" if self.ai_group else ""
        # No `noalias` here: the step is always inlined into the loop
        # function, whose own parameters say it; on the step's, inlining
        # leaves llvm.experimental.noalias.scope.decl calls in the thread
        # loop, which carry no access group and so make LLVM ignore the
        # loop's parallel_accesses (emit_loop.parallel_loop).
        params = (f"ptr readonly dereferenceable({WIGROUP_SIZE}) align 8 {_ref(self.fn.g)}, "
                  "ptr %mk.slots, ptr %mk.stage, ptr %mk.frames, "
                  f"i32 {_ref(self.fn.x)}, i32 {_ref(self.fn.y)}, i32 {_ref(self.fn.z)}, i32 {_ref(self.fn.lin)}")
        start = self.fn.entry if k == 0 else self.fn.syncs[k - 1].cont
        reach = region_blocks(self.fn, start)
        ex = set()
        for lb in reach:
            blk = self.fn.blocks[lb]
            if blk.sync:
                ex.add(blk.sync)
            elif blk.insts and blk.insts[-1].text.strip() == "ret void":
                ex.add(DONE)
        self.exits.append(ex)
        body = []
        if k == 0:
            body.append(f"  br label {_ref(self.fn.entry)}")
        else:
            body.append(f"  br label %mk.resume{k}")
            body.append(f"mk.resume{k}:")
            body += resume_blocks[k]
        # The values this region saves at a resume point in a loop are saved
        # at its other exits too (their current values: harmless where they
        # are dead, what the exit's own save writes where they are live), so
        # that the saves need no mask when the threads' loop is vectorised
        # (AVX2's masked stores are slow).
        def must_save(v: str) -> bool:
            # Unless this region cannot redefine v: then v was live at the
            # resume point too, restored from its slot, and the slot still
            # holds exactly that value (only this thread's saves write it).
            # Accumulators a region does not touch cost nothing. (Not for a
            # value saved only at points: elsewhere it was recomputed.)
            return self.fn.defs[v].block in reach or v in self.a.point_only

        def save(v: str):
            t = self.tmp("s")
            body.append(f"  %{t} = load {self.a.types[v]}, ptr {_stack_slot(v)}")
            body.append(f"  store {self.a.types[v]} %{t}, ptr %mk.sa.{v}")

        def saved_here(sp) -> list[str]:
            return [v for v in sp.live if self.a.saved_at(sp, v) and must_save(v)]
        point_saves: list[str] = []
        for lb in reach:
            blk = self.fn.blocks[lb]
            if blk.sync and self.fn.syncs[blk.sync - 1].kind == "point":
                point_saves += [v for v in saved_here(self.fn.syncs[blk.sync - 1]) if v not in point_saves]
        for lb in self.fn.order:
            if lb not in reach:
                continue
            body.append(f"{_ref(lb)[1:]}:")
            if point_saves and (self.fn.blocks[lb].sync or any(
                    isinstance(t, str) and t.strip() == f"ret i32 {DONE}" for t in out_blocks[lb])):
                own = set(saved_here(self.fn.syncs[self.fn.blocks[lb].sync - 1])) if self.fn.blocks[lb].sync else set()
                extra = [v for v in point_saves if v not in own]
            else:
                extra = []
            for text in out_blocks[lb]:
                if extra and (isinstance(text, tuple) or (isinstance(text, str) and text.strip().startswith("ret i32"))):
                    for v in extra:
                        save(v)
                    extra = []
                if isinstance(text, tuple):  # save v at this cut (must_save)
                    if must_save(text[1]):
                        save(text[1])
                    continue
                body.append(self._prune_phi(text, lb, reach, k))
        out.append(f"define internal i32 @__mk_wistep_{n}_{k}({params}){attr} {{")
        out.append("mk.entry:")
        out += self._live_entry(entry, body)
        out += body
        out.append("}")
        out.append("")
        return out


    def _live_entry(self, entry: list[str], body: list[str]) -> list[str]:
        """The entry lines (allocas, addresses) a step function uses."""
        used: set[str] = set()
        for text in body:
            for _, nm in self.fn.locals.tokens(text):
                used.add(nm)
        defs = []
        for text in entry:
            m = _DEF.match(text)
            defs.append(_name(m.group(1)) if m else None)
        keep = [d is None for d in defs]
        changed = True
        while changed:
            changed = False
            for i, d in enumerate(defs):
                if not keep[i] and d in used:
                    keep[i] = True
                    changed = True
                    for _, nm in self.fn.locals.tokens(entry[i]):
                        used.add(nm)
        return [t for t, kp in zip(entry, keep) if kp]

    def _prune_phi(self, text: str, lb: str, reach: set[str], k: int) -> str:
        """Drops a phi's incoming edges from blocks this step function lacks."""
        m = re.match(rf"(\s*{_LOCAL} = phi\s+)", text)
        if not m:
            return text
        j = m.end()
        s = skip_flags(text[j:])
        j = len(text) - len(s)
        _, j = parse_type(text, j)
        preds_ok = {p for p in self.fn.blocks[lb].preds if p in reach and self.fn.blocks[p].sync == 0}
        pairs = re.findall(rf"\[\s*(.+?),\s*({_LOCAL})\s*\]", text[j:])
        kept = [f"[ {v}, {p} ]" for v, p in pairs if _name(p) in preds_ok]
        if not kept:
            raise Unsupported("phi without a predecessor in a step function")
        return text[:j] + " " + ", ".join(kept)

    def _emit_remat(self, v: str, memo: dict[str, str], lines: list[str]) -> str:
        if v in self.a.avail or v.startswith("mk.tgp"):
            return _ref(v)
        if v in memo:
            return memo[v]
        d = self.fn.defs[v]
        mp = {}
        for u in d.uses:
            mp[u] = self._emit_remat(u, memo, lines)
        new = self.tmp("m")
        mp[v] = f"%{new}"
        text = self.fn.locals.subst(d.text, mp)
        lines.append(text)
        memo[v] = f"%{new}"
        return memo[v]
