"""Work-item loops: kernels with barriers and simdgroup functions as loops over
the threads of a group, one loop per region between synchronisation points
(PoCL's approach), instead of one fiber per thread.

Input: the optimised LLVM IR (textual, one instruction per line, no debug
info) of a kernel library built with MK_WORKITEM. For every kernel the
rewriter emitted a per-thread function

    void __mk_wi_<n>(const WiGroup* g, u32 x, u32 y, u32 z, u32 lin)

(the kernel, inlined, as thread (x, y, z) of a group), in which every
synchronising call is a call to a marker (mk/workitem.h):
``__mk_sync_barrier(flags)`` and ``__mk_sync_simd(in, out, arg, op, in_size,
out_size, compute)``; ``__mk_thread_index()`` and ``__mk_tg_alloc(...)`` are
markers that do not synchronise.

For each per-thread function this module

1. cuts its blocks at the synchronising markers (sync point k = 1..K; 0 is
   the start), lowering a simd call into "copy the operand to the thread's
   row of the simd_in array, store the lane argument" before the cut and
   "copy the thread's row of simd_out into the result" after it;
2. computes which SSA values are live across each cut (backward liveness,
   phi uses on their edges) and classifies them: values computed only from
   the arguments and from the (immutable) WiGroup are *recomputed* after a
   cut (so thread ids stay affine in the loop counter and the loops
   vectorise); the others are *saved* in per-thread context arrays
   (structure of arrays, ``[1024 x T]`` per value); saved values a simple
   divergence analysis finds uniform are additionally read from a stage
   block the driver fills once per run (after checking that all threads
   agree), which keeps them loop-invariant;
3. privatises the allocas whose contents (or addresses) live across a cut:
   they move to a per-thread frame; the others stay on the stack;
4. demotes every value live across a cut to a stack slot (reg2mem: store at
   the definition, load before each use), so that the cut needs no SSA
   repair (clang's mem2reg rebuilds SSA afterwards), and emits one step
   function per resume point: ``i32 step_k(g, slots, stage, frames, x, y, z,
   lin)`` enters at the code after cut k (restoring the live values) and
   returns the id of the next cut reached (saving the live values), or
   DONE;
5. emits ``loop(g, slots, stage, frames, states, b, e, resume)``: for threads
   [b, e) in rows of x, call step_<resume> (inlined) and store the state
   (in kernels with simd functions, whole simdgroups in a loop of exactly 32
   threads); it returns a summary of the new states (lowest, highest live,
   number DONE, span of the live threads), known in advance when every exit
   of the region is the same point, else from one loop over the states;
   plus the kernel's descriptor and ``__mk_wientry_<n>``, which hands both
   to the group driver ``__mk_wi_run_group`` (mk/workitem.h).

Anything it does not handle (a synchronising call inside a function that was
not inlined, indirect calls, dynamic allocas, exceptions, unknown value
types, ...) leaves that kernel on the fiber path. Correctness first: every
decision on doubt goes to the conservative side, and a module that clang
rejects after the transform is rebuilt without it (compiler.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .ir import _DEF, _FMF, _GLOBAL, _LABEL_LINE, _LOCAL, _TOKEN, _WORD, Call, Module
from .ir import Unsupported  # the kernel stays on the fiber path (the message says why)
from .ir import _gref, _matching, _name, _ref, _split_top, _strip_attrs, parse_call, parse_type

BARRIER = "__mk_sync_barrier"
SIMD = "__mk_sync_simd"
THREAD_INDEX = "__mk_thread_index"
TG_ALLOC = "__mk_tg_alloc"
SYNC_MARKERS = (BARRIER, SIMD)
ALL_MARKERS = (BARRIER, SIMD, THREAD_INDEX, TG_ALLOC)
FIBER_PREFIX = "__mk_fiber_"  # the markers' fiber-mode bodies (mk/workitem.h)

# Flags for compiling the transformed module. Region loops branch on values
# that are the same for every thread of a run (a loop counter read from the
# stage block, `t + 16 < N`): clang at -O2 turns such a branch inside the
# vectorised loop into masks on every store (an AVX-512 masked store to C
# that never happens, on every row of every tile of a matmul); unswitching
# makes one plain loop per outcome (the benchmark's 16x16-tiled matmul:
# ~25% less time).
CODEGEN_FLAGS = ("-mllvm", "-enable-nontrivial-unswitch")

DONE = 0x7FFFFFFF
_SAVE = "save"  # PerThread.emit: a save at a cut, decided per step function
MAX_THREADS = 1024
WIGROUP_TG_ALLOCS = 80  # offsetof(WiGroup, tg_allocs), mk/workitem.h
WIGROUP_SIZE = 1624  # sizeof(WiGroup)
MAX_TG_ALLOCS = 64
MAX_SYNC_POINTS = 512
MAX_REMAT = 48  # instructions recomputed per value and resume point
MAX_SIMD_BYTES = 256  # operand / result of one simd call
# simd operations whose computation never reads the lane argument (mk/simd.h,
# enum SimdOp): barrier, the reductions and scans, broadcast_first, ballot,
# any, all, is_first, active mask. Their calls store no argument per thread.
# (Shuffles, broadcast and simdgroup matrices read it.)
ARGLESS_SIMD_OPS = frozenset(range(1, 13)) | frozenset(range(22, 28))


def _sync_functions(mod: Module, markers=SYNC_MARKERS) -> set[str]:
    """Defined functions that may reach one of `markers` (by default the
    synchronising ones)."""
    return mod.reaching(markers, FIBER_PREFIX)


# ---------------------------------------------------------- instructions --

_PURE_OPS = {
    "add", "sub", "mul", "shl", "lshr", "ashr", "and", "or", "xor", "udiv", "sdiv", "urem", "srem",
    "fadd", "fsub", "fmul", "fdiv", "frem", "fneg", "icmp", "fcmp", "trunc", "zext", "sext",
    "fptrunc", "fpext", "fptoui", "fptosi", "uitofp", "sitofp", "ptrtoint", "inttoptr", "bitcast",
    "addrspacecast", "getelementptr", "select", "extractelement", "insertelement",
    "shufflevector", "extractvalue", "insertvalue",
}
_PURE_INTRINSIC = re.compile(
    r"llvm\.(umin|umax|smin|smax|abs|fshl|fshr|ctpop|ctlz|cttz|bswap|bitreverse|fabs|copysign|"
    r"minnum|maxnum|minimum|maximum|uadd\.sat|usub\.sat|sadd\.sat|ssub\.sat|fmuladd|fma)\.")
_BINOPS = {"add", "sub", "mul", "shl", "lshr", "ashr", "and", "or", "xor", "udiv", "sdiv", "urem",
           "srem", "fadd", "fsub", "fmul", "fdiv", "frem"}
_CASTS = {"trunc", "zext", "sext", "fptrunc", "fpext", "fptoui", "fptosi", "uitofp", "sitofp",
          "ptrtoint", "inttoptr", "bitcast", "addrspacecast"}
_FLAGS = {"nuw", "nsw", "exact", "disjoint", "nneg", "samesign", "inbounds", "volatile", "weak"} | _FMF
_TERMINATORS = {"br", "switch", "ret", "unreachable"}
_UNSUPPORTED_OPS = {"invoke", "callbr", "indirectbr", "resume", "landingpad", "catchswitch",
                    "catchret", "cleanupret", "catchpad", "cleanuppad", "va_arg"}


class Inst:
    __slots__ = ("text", "name", "op", "uses", "call", "block", "kind", "sync")

    def __init__(self, text: str, locals_: "Locals"):
        self.text = text
        m = _DEF.match(text)
        self.name = _name(m.group(1)) if m else None
        rest = text[m.end():] if m else text.strip()
        w = rest.split(None, 1)
        op = w[0] if w else ""
        if op in ("tail", "musttail", "notail"):
            op = "call"
        self.op = op
        self.call: Call | None = None
        self.kind = ""  # "", "sync", "lowered"
        self.sync = 0
        self.block = ""
        self.uses = locals_.uses(text, self.name)

    @property
    def rest(self) -> str:
        m = _DEF.match(self.text)
        return self.text[m.end():] if m else self.text.strip()


class Locals:
    """Local names of one function: which tokens are values, which labels."""

    def __init__(self, type_names: set[str]):
        self.type_names = type_names
        self.labels: set[str] = set()

    def tokens(self, text: str):
        for m in _TOKEN.finditer(text):
            tok = m.group(0)
            if tok[0] == "%" and _name(tok) not in self.type_names:
                yield m, _name(tok)

    def uses(self, text: str, defined: str | None) -> list[str]:
        out = []
        first_def = defined is not None
        for _, nm in self.tokens(text):
            if first_def and nm == defined:
                first_def = False
                continue
            if nm in self.labels:
                continue
            if nm not in out:
                out.append(nm)
        return out

    def subst(self, text: str, mapping: dict[str, str]) -> str:
        """Replaces local value names (mapping values are full references)."""
        def repl(m):
            tok = m.group(0)
            if tok[0] != "%":
                return tok
            nm = _name(tok)
            if nm in self.type_names:
                return tok
            return mapping.get(nm, tok)
        return _TOKEN.sub(repl, text)


@dataclass
class Block:
    label: str
    insts: list[Inst] = field(default_factory=list)
    succs: list[str] = field(default_factory=list)  # including the fall-through of a cut
    preds: list[str] = field(default_factory=list)
    sync: int = 0  # > 0: the block ends at cut `sync`, continuing in succs[0]

    def phis(self) -> list[Inst]:
        return [i for i in self.insts if i.op == "phi"]


def _phi_incoming(inst: Inst) -> list[tuple[str, str]]:
    """[(value text, pred label)] of a phi."""
    body = inst.rest
    out = []
    for m in re.finditer(rf"\[\s*(.+?),\s*({_LOCAL})\s*\]", body):
        out.append((m.group(1).strip(), _name(m.group(2))))
    return out


# -------------------------------------------------------------- analysis --

@dataclass
class SyncPoint:
    id: int
    kind: str  # "barrier" | "simd"
    block: str  # the block that ends at the cut
    cont: str  # the block after the cut
    op: int = 0
    in_size: int = 0
    out_size: int = 0
    compute: str = ""  # '@fn' (SimdLanes form)
    dense: str = ""  # '@fn' (DenseLanes form, what the driver calls)
    live: list[str] = field(default_factory=list)
    tag: int = 0  # the number in the names of its lowered instructions (ids are renumbered)
    uses_arg: bool = False  # simd: its computation reads the lane argument


@dataclass
class Result:
    text: str
    modes: dict[int, str]
    reasons: dict[int, str]
    force_inline: set[str]


class PerThread:
    """One per-thread function, cut into step functions."""

    def __init__(self, mod: Module, sym: int, sync_funcs: set[str], uniform: bool = False):
        self.mod = mod
        self.sym = sym
        self.whole_simdgroup = uniform  # has __mk_sgu_<n> (runtime/simdgroup_uniform.py)
        self.fname = f"__mk_wi_{sym}"
        self.sync_funcs = sync_funcs
        self.locals = Locals(set(mod.types))
        self.force_inline: set[str] = set()
        self.tg_allocs: list[tuple[int, int, int]] = []
        self.syncs: list[SyncPoint] = []
        self._tmp = 0
        self.ai_group: str | None = None    # attributes of the step functions
        self.loop_group: str | None = None  # and of the loop function

    def tmp(self, prefix: str) -> str:
        self._tmp += 1
        return f"mk.{prefix}{self._tmp}"

    # ------------------------------------------------------------ parse --
    def parse(self):
        lines = self.mod.body(self.fname)
        header = lines[0]
        m = re.match(r"define (.*?)(" + _GLOBAL + r")\((.*)\)(.*)\{\s*$", header)
        if not m:
            raise Unsupported("cannot parse the per-thread function's header")
        params = _split_top(m.group(3))
        self.param_names = []
        for p in params:
            toks = re.findall(_LOCAL, p)
            if not toks:
                raise Unsupported("unnamed parameter")
            self.param_names.append(_name(toks[-1]))
        if len(self.param_names) != 5:
            raise Unsupported("unexpected per-thread signature")
        am = re.search(r"#(\d+)", m.group(4))
        self.attr_group = am.group(1) if am else None
        # Rename every local to 'v<name>' so generated names ('mk.*') never
        # collide and numbered values need no renumbering.
        body = lines[1:-1]
        entry_label = None
        first = next((ln for ln in body if ln.strip() and not ln.lstrip().startswith(";")), "")
        named_entry = _LABEL_LINE.match(first)
        if named_entry:
            # The optimiser may name the entry block (a block it merged
            # into it, as '_Z11ndtri_valuef.exit:'): that label is the entry.
            entry_label = named_entry.group(1).strip('"')
        elif all(p.isdigit() for p in self.param_names):
            entry_label = str(len(self.param_names))
        else:
            entry_label = "entry.mk"
        # First pass: labels.
        labels = []
        for ln in body:
            lm = _LABEL_LINE.match(ln)
            if lm:
                labels.append(lm.group(1).strip('"'))
        type_names = self.locals.type_names

        def rn(name: str) -> str:
            return "v" + name

        def rename_text(text: str) -> str:
            def repl(mm):
                tok = mm.group(0)
                if tok[0] != "%":
                    return tok
                nm = _name(tok)
                if nm in type_names:
                    return tok
                return _ref(rn(nm))
            return _TOKEN.sub(repl, text)

        self.locals.labels = {rn(lb) for lb in labels} | {rn(entry_label)}
        self.params = [rn(p) for p in self.param_names]
        self.g, self.x, self.y, self.z, self.lin = self.params
        blocks: list[Block] = []
        cur = Block(rn(entry_label))
        blocks.append(cur)
        pending = None  # multi-line instruction (switch)
        for ln in body:
            if pending is not None:
                pending.append(ln)
                if ln.strip() == "]":
                    cur.insts.append(Inst(rename_text("\n".join(pending)), self.locals))
                    pending = None
                continue
            if not ln.strip() or ln.lstrip().startswith(";"):
                continue
            lm = _LABEL_LINE.match(ln)
            if lm:
                if named_entry and ln is first:
                    continue  # the entry block, made above
                cur = Block(rn(lm.group(1).strip('"')))
                blocks.append(cur)
                continue
            text = ln.rstrip()
            # Comments after an instruction (rare in clang output).
            if re.match(r"\s*switch ", text) and text.endswith("["):
                pending = [text]
                continue
            cur.insts.append(Inst(rename_text(text), self.locals))
        self.blocks = {b.label: b for b in blocks}
        self.order = [b.label for b in blocks]
        self.entry = blocks[0].label
        for b in blocks:
            for ins in b.insts:
                ins.block = b.label

    # ------------------------------------------------------------ checks --
    def synchronises(self) -> bool:
        """Whether the function calls a synchronising marker or a function
        that may reach one."""
        for lb in self.order:
            for ins in self.blocks[lb].insts:
                if ins.op == "call":
                    for tok in re.findall(_GLOBAL, ins.text):
                        nm = _name(tok)
                        if nm in SYNC_MARKERS or nm in self.sync_funcs:
                            return True
        return False

    def _runtime_service(self, callee: str, defs: dict[str, Inst]) -> bool:
        """An indirect call through the runtime's table (__mk_rt) to a service
        that neither synchronises nor depends on the running thread: fail
        (division-by-zero reports) and threadgroup_alloc."""
        d = defs.get(_name(callee))
        if d is None or d.op != "load" or len(d.uses) != 1:
            return False
        p = defs.get(d.uses[0])
        if p is None:
            return False
        if p.op == "getelementptr" and len(p.uses) == 1:
            m = re.search(r",\s*i64 (\d+)\s*$", p.rest)
            if not m or not p.rest.startswith("getelementptr inbounds nuw i8, ptr") and \
                    not p.rest.startswith("getelementptr inbounds i8, ptr"):
                return False
            offset = int(m.group(1))
            base = defs.get(p.uses[0])
        else:
            return False
        if base is None or base.op != "load" or not re.match(r"load ptr, ptr @__mk_rt\b", base.rest):
            return False
        return offset in (24, 32)  # RuntimeApi::threadgroup_alloc, ::fail (mk/abi.h)

    def check_and_classify_calls(self) -> bool:
        """Raises Unsupported for what the transform cannot cut; returns
        whether the function synchronises at all."""
        syncs = False
        defs = {i.name: i for lb in self.order for i in self.blocks[lb].insts if i.name}
        for lb in self.order:
            for ins in self.blocks[lb].insts:
                if ins.op in _UNSUPPORTED_OPS:
                    raise Unsupported(f"'{ins.op}' instruction")
                if ins.op == "alloca" and lb != self.entry:
                    raise Unsupported("alloca outside the entry block (dynamic stack allocation)")
                if ins.op != "call":
                    if "blockaddress" in ins.text:
                        raise Unsupported("blockaddress")
                    continue
                c = parse_call(ins.rest)
                ins.call = c
                if c.callee == "asm":
                    raise Unsupported("inline assembly")
                if c.callee.startswith("%"):
                    if self._runtime_service(c.callee, defs):
                        continue
                    raise Unsupported(f"indirect call: {ins.text.strip()[:120]}")
                name = _name(c.callee)
                if "musttail" in ins.text.split("call")[0]:
                    raise Unsupported("musttail call")
                if name in SYNC_MARKERS:
                    syncs = True
                elif name in (THREAD_INDEX, TG_ALLOC):
                    pass
                elif name in self.sync_funcs:
                    self.force_inline.add(name)
                elif name.startswith("llvm."):
                    if re.match(r"llvm\.(stacksave|stackrestore|localescape|localrecover|eh\.|"
                                r"coro\.|icall|call\.preallocated|experimental\.gc)", name):
                        raise Unsupported(f"intrinsic {name}")
        if self.force_inline:
            raise Unsupported("calls functions that synchronise and were not inlined: "
                              + ", ".join(sorted(self.force_inline)))
        return syncs

    # ------------------------------------------------------- cut & lower --
    def _simd_strides(self):
        """Row strides of the simd operand / result arrays: one per kernel
        (a power of two no smaller than any operand), so that rows of
        different sync points never overlap (simdgroups resolved in the same
        round may be at different points)."""
        ins_, outs = [1], [1]
        for lb in self.order:
            for ins in self.blocks[lb].insts:
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
        self.in_stride, self.out_stride = pow2(max(ins_)), pow2(max(outs))
        if self.in_stride > MAX_SIMD_BYTES or self.out_stride > MAX_SIMD_BYTES:
            raise Unsupported("simd operand too large")

    def lower_markers(self):
        self._simd_strides()
        new_order = []
        renames = []
        for lb in self.order:
            blk = self.blocks[lb]
            pieces = [blk]
            cur = blk
            insts = blk.insts
            cur.insts = []
            for ins in insts:
                if ins.op == "call" and ins.call is not None:
                    name = _name(ins.call.callee) if ins.call.callee.startswith("@") else ""
                    if name == THREAD_INDEX:
                        ins = Inst(f"  {_ref(ins.name)} = add i32 {_ref(self.lin)}, 0", self.locals)
                    elif name == TG_ALLOC:
                        vals = [v for _, v in ins.call.args]
                        try:
                            key = tuple(int(v) for v in vals)
                        except ValueError:
                            raise Unsupported("threadgroup allocation with non-constant arguments")
                        if key not in self.tg_allocs:
                            self.tg_allocs.append(key)
                        j = self.tg_allocs.index(key)
                        if j >= MAX_TG_ALLOCS:
                            raise Unsupported("too many threadgroup variables")
                        ins = Inst(f"  {_ref(ins.name)} = load ptr, ptr %mk.tgp{j}, align 8, !invariant.load !{{}}, "
                                   f"!nonnull !{{}}, !dereferenceable !{{i64 {key[1]}}}, !align !{{i64 {key[2]}}}",
                                   self.locals)
                    elif name in SYNC_MARKERS:
                        k = len(self.syncs) + 1
                        if k > MAX_SYNC_POINTS:
                            raise Unsupported("too many synchronisation points")
                        cont = Block(f"mk.c{k}")
                        sp = SyncPoint(k, "barrier" if name == BARRIER else "simd", cur.label, cont.label,
                                       tag=k)
                        self.syncs.append(sp)
                        if name == SIMD:
                            self._lower_simd(sp, ins, cur, cont)
                        else:
                            # The barrier's mem_flags (and, in checked builds, its
                            # site): the driver needs them only when checking.
                            flags = ins.call.args[0][1] if ins.call.args else ""
                            sp.op = int(flags) if re.fullmatch(r"-?\d+", flags) else 0xff
                        cur.sync = k
                        cur.succs = [cont.label]
                        self.locals.labels.add(cont.label)
                        pieces.append(cont)
                        cur = cont
                        continue
                ins.block = cur.label
                cur.insts.append(ins)
            for p in pieces:
                for ins in p.insts:
                    ins.block = p.label
                self.blocks[p.label] = p
                new_order.append(p.label)
            if len(pieces) > 1:
                renames.append((lb, pieces[-1].label))
        self.order = new_order
        # Successors' phis name the block that now ends in the terminator.
        for old, new in renames:
            for succ in self._term_succs(self.blocks[new]):
                for ins in self.blocks[succ].insts:
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
        out = []
        for m in re.finditer(rf"label\s+({_LOCAL})", t.text):
            nm = _name(m.group(1))
            if nm not in out:
                out.append(nm)
        return out

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
        L = self.locals
        lowered = [
            Inst(f"  %mk.io{k} = mul i64 %mk.tid64, {self.in_stride}", L),
            Inst(f"  %mk.ip{k} = getelementptr inbounds i8, ptr %mk.simd_in, i64 %mk.io{k}", L),
            Inst(f"  call void @llvm.memcpy.p0.p0.i64(ptr align 1 %mk.ip{k}, ptr align 1 {a[0]}, "
                 f"i64 {sp.in_size}, i1 false)", L),
        ]
        sp.uses_arg = (sp.op & 0xff) not in ARGLESS_SIMD_OPS  # checked builds: site and flags above
        if sp.uses_arg:
            lowered.append(Inst(f"  store i32 {a[2]}, ptr %mk.ap{k}, align 4", L))
        before.insts += lowered
        after.insts += [
            Inst(f"  %mk.oo{k} = mul i64 %mk.tid64, {self.out_stride}", L),
            Inst(f"  %mk.op{k} = getelementptr inbounds i8, ptr %mk.simd_out, i64 %mk.oo{k}", L),
            Inst(f"  call void @llvm.memcpy.p0.p0.i64(ptr align 1 {a[1]}, ptr align 1 %mk.op{k}, "
                 f"i64 {sp.out_size}, i1 false)", L),
        ]
        for i in before.insts[-len(lowered):] + after.insts[-3:]:
            i.kind = "lowered"

    # --------------------------------------------------------------- CFG --
    def build_cfg(self):
        for lb in self.order:
            blk = self.blocks[lb]
            if blk.sync == 0:
                blk.succs = self._term_succs(blk)
            blk.preds = []
        for lb in self.order:
            for s in self.blocks[lb].succs:
                if s not in self.blocks:
                    raise Unsupported(f"branch to unknown block {s}")
                self.blocks[s].preds.append(lb)
        self.defs: dict[str, Inst] = {}
        for lb in self.order:
            for ins in self.blocks[lb].insts:
                if ins.name:
                    self.defs[ins.name] = ins

    def order_syncs(self):
        """Numbers the cuts in reverse postorder of the CFG (back edges
        ignored): the driver resolves, per simdgroup, the lowest-numbered
        point first, and a point that comes earlier in the program (e.g. a
        simd call in a loop) must go before one after it (the same call after
        the loop), whatever order the optimiser laid the blocks out in."""
        seen = set()
        post: list[str] = []
        stack = [(self.entry, iter(self.blocks[self.entry].succs))]
        seen.add(self.entry)
        while stack:
            lb, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                post.append(lb)
                stack.pop()
            elif nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, iter(self.blocks[nxt].succs)))
        rank = {lb: i for i, lb in enumerate(reversed(post))}
        order = sorted(self.syncs, key=lambda sp: (rank.get(sp.block, len(rank)), sp.id))
        old_to_new = {sp.id: i + 1 for i, sp in enumerate(order)}
        for sp in order:
            sp.id = old_to_new[sp.id]
        self.syncs = order
        for lb in self.order:
            blk = self.blocks[lb]
            if blk.sync:
                blk.sync = old_to_new[blk.sync]

    def liveness(self):
        """live_in per block (phi defs excluded; phi uses on their edges)."""
        use, dfn, phi_uses = {}, {}, {}
        for lb in self.order:
            blk = self.blocks[lb]
            u, d = [], set()
            for ins in blk.insts:
                if ins.op == "phi":
                    d.add(ins.name)
                    continue
                for x in ins.uses:
                    if x not in d and x not in u:
                        u.append(x)
                if ins.name:
                    d.add(ins.name)
            use[lb], dfn[lb] = set(u), d
        for lb in self.order:
            for ins in self.blocks[lb].phis():
                for val, pred in _phi_incoming(ins):
                    for _, nm in self.locals.tokens(val):
                        if nm not in self.locals.labels:
                            phi_uses.setdefault((pred, lb), set()).add(nm)
        live_in = {lb: set() for lb in self.order}
        live_out = {lb: set() for lb in self.order}
        work = list(reversed(self.order))
        inq = set(work)
        while work:
            lb = work.pop()
            inq.discard(lb)
            blk = self.blocks[lb]
            out = set()
            for s in blk.succs:
                out |= live_in[s]
                out |= phi_uses.get((lb, s), set())
            live_out[lb] = out
            new_in = use[lb] | (out - dfn[lb])
            if new_in != live_in[lb]:
                live_in[lb] = new_in
                for p in blk.preds:
                    if p not in inq:
                        work.append(p)
                        inq.add(p)
        self.live_in = live_in

    # ---------------------------------------------------- classification --
    def classify(self):
        entry = self.blocks[self.entry]
        self.allocas = [i.name for i in entry.insts if i.op == "alloca"]
        self.avail = set(self.params) | set(self.allocas)
        crossing: set[str] = set()
        for sp in self.syncs:
            live = sorted(x for x in self.live_in[sp.cont] if x not in self.avail and not x.startswith("mk."))
            for x in live:
                if x not in self.defs:
                    raise Unsupported(f"value {x} live across a cut has no definition")
            sp.live = live
            crossing.update(live)
        self.crossing = crossing
        self.remat: dict[str, bool] = {}
        self.types: dict[str, str] = {}
        self.slot_values = []
        self.remat_values = []
        for v in sorted(crossing):
            self.types[v] = self.value_type(self.defs[v])
            if self.can_remat(v):
                self.remat_values.append(v)
            else:
                self.slot_values.append(v)

    def _inv_addr(self, p: str) -> bool:
        if p == self.g or p.startswith("mk.tgp"):
            return True
        d = self.defs.get(p)
        if d is None or d.op != "getelementptr" or len(d.uses) != 1:
            return False
        return self._inv_addr(d.uses[0])

    def can_remat(self, v: str) -> bool:
        count: set[str] = set()

        def ok(x: str) -> bool:
            if x in self.avail or x.startswith("mk.tgp"):
                return True
            if x in self.remat:
                if self.remat[x]:
                    count.add(x)
                return self.remat[x]
            d = self.defs.get(x)
            res = False
            if d is not None and d.kind == "":
                if d.op in _PURE_OPS:
                    res = all(ok(u) for u in d.uses)
                elif d.op == "load" and not re.search(r"\b(volatile|atomic)\b", d.text):
                    res = len(d.uses) == 1 and self._inv_addr(d.uses[0])
                elif d.op == "call" and d.call is not None and d.call.callee.startswith("@") \
                        and _PURE_INTRINSIC.match(_name(d.call.callee)):
                    res = all(ok(u) for u in d.uses)
            self.remat[x] = res
            if res:
                count.add(x)
            return res

        r = ok(v)
        return r and len(count) <= MAX_REMAT

    def value_type(self, ins: Inst) -> str:
        rest = ins.rest
        op = ins.op
        try:
            if op == "call":
                t = (ins.call or parse_call(rest)).ret
            elif op in ("phi", "freeze"):
                t, _ = parse_type(self._skip_flags(rest[len(op):]), 0)
            elif op == "load":
                s = re.sub(r"^load\s+(atomic\s+)?(volatile\s+)?", "", rest)
                t, _ = parse_type(s, 0)
            elif op == "alloca":
                t = "ptr"
            elif op in _BINOPS or op == "fneg":
                t, _ = parse_type(self._skip_flags(rest[len(op):]), 0)
            elif op in ("icmp", "fcmp"):
                s = self._skip_flags(rest[len(op):])
                s = re.sub(r"^\w+\s+", "", s)  # predicate
                ot, _ = parse_type(s, 0)
                vm = re.match(r"<(vscale x )?(\d+) x ", ot)
                t = f"<{vm.group(1) or ''}{vm.group(2)} x i1>" if vm else "i1"
            elif op in _CASTS:
                idx = rest.rfind(" to ")
                t, _ = parse_type(rest, idx + 4)
            elif op == "select":
                parts = _split_top(self._skip_flags(rest[len(op):]))
                t, _ = parse_type(parts[1], 0)
            elif op == "getelementptr":
                parts = _split_top(self._skip_flags(rest[len(op):]))
                t = "ptr"
                for p in parts[1:]:
                    vm = re.match(r"\s*<(vscale x )?(\d+) x (ptr|i\d+)>", p)
                    if vm:
                        t = f"<{vm.group(1) or ''}{vm.group(2)} x ptr>"
                        break
            elif op == "extractelement":
                vt, _ = parse_type(rest[len(op):], 0)
                vm = re.match(r"<(vscale x )?\d+ x (.*)>$", vt)
                t = vm.group(2)
            elif op == "insertelement":
                t, _ = parse_type(rest[len(op):], 0)
            elif op == "shufflevector":
                vt, _ = parse_type(rest[len(op):], 0)
                parts = _split_top(rest[len(op):])
                mt, _ = parse_type(parts[2], 0)
                em = re.match(r"<(vscale x )?\d+ x (.*)>$", vt)
                mm = re.match(r"<(vscale x )?(\d+) x ", mt)
                t = f"<{mm.group(1) or ''}{mm.group(2)} x {em.group(2)}>"
            elif op == "insertvalue":
                t, _ = parse_type(rest[len(op):], 0)
            elif op == "extractvalue":
                at, j = parse_type(rest[len(op):], 0)
                idx = [int(x) for x in re.findall(r",\s*(\d+)", rest[len(op) + j:])]
                t = self._aggregate_member(at, idx)
            elif op == "atomicrmw":
                parts = _split_top(re.sub(r"^atomicrmw\s+(volatile\s+)?\w+\s+", "", rest))
                t, _ = parse_type(parts[1], 0)
            elif op == "cmpxchg":
                parts = _split_top(re.sub(r"^cmpxchg\s+(weak\s+)?(volatile\s+)?", "", rest))
                vt, _ = parse_type(parts[1], 0)
                t = f"{{ {vt}, i1 }}"
            else:
                raise Unsupported(f"type of '{op}'")
        except Unsupported:
            raise
        except Exception as e:  # noqa: BLE001 - any parse surprise: stay on fibers
            raise Unsupported(f"cannot infer the type of {ins.text.strip()[:80]!r} ({e})")
        if t in ("void", "token", "label", "metadata"):
            raise Unsupported(f"value of type {t} live across a cut")
        return t

    @staticmethod
    def _skip_flags(s: str) -> str:
        s = s.lstrip()
        while True:
            m = _WORD.match(s)
            if m and m.group(0) in _FLAGS:
                s = s[m.end():].lstrip()
                continue
            return s

    def _aggregate_member(self, t: str, idx: list[int]) -> str:
        for k in idx:
            t = t.strip()
            if t.startswith("%"):
                body = self.mod.types.get(_name(t))
                if body is None or body == "opaque":
                    raise Unsupported("opaque struct")
                t = body.strip()
            if t.startswith("<{"):
                t = t[1:-1]
            if t.startswith("{"):
                t = _split_top(t[1:-1])[k]
            elif t.startswith("["):
                m = re.match(r"\[\d+ x (.*)\]$", t)
                t = m.group(1)
            else:
                raise Unsupported("extractvalue of a non-aggregate")
        return t.strip()

    # ------------------------------------------------------------ allocas --
    def privatise(self):
        """Allocas whose contents or addresses live across a cut get a
        per-thread frame slot instead of a stack slot."""
        derived: dict[str, set[str]] = {}
        users: dict[str, list[Inst]] = {}
        for lb in self.order:
            for ins in self.blocks[lb].insts:
                for u in ins.uses:
                    users.setdefault(u, []).append(ins)
        self.private: list[str] = []
        slot_set = set(self.slot_values)
        for a in self.allocas:
            ds = {a}
            work = [a]
            escape = False
            while work:
                v = work.pop()
                for ins in users.get(v, []):
                    if ins.op in ("getelementptr", "bitcast", "addrspacecast", "select", "phi") and ins.name:
                        if ins.name not in ds:
                            ds.add(ins.name)
                            work.append(ins.name)
                    elif ins.op == "store":
                        parts = _split_top(re.sub(r"^store\s+(atomic\s+)?(volatile\s+)?", "", ins.rest))
                        _, j = parse_type(parts[0], 0)
                        if re.search(rf"{re.escape(_ref(v))}(?![-a-zA-Z$._0-9])", parts[0][j:]):
                            escape = True
                    elif ins.op in ("ptrtoint", "atomicrmw", "cmpxchg", "ret"):
                        escape = True
                    elif ins.op == "call":
                        c = ins.call or parse_call(ins.rest)
                        callee = _name(c.callee) if c.callee.startswith("@") else ""
                        if callee.startswith("llvm.") and not callee.startswith("llvm.ptrmask"):
                            continue
                        for _, val in c.args:
                            if val == _ref(v) and not self._nocapture(ins, c, val):
                                escape = True
                        if ins.name and c.ret == "ptr":
                            if ins.name not in ds:
                                ds.add(ins.name)
                                work.append(ins.name)
            derived[a] = ds
            if escape or (ds & slot_set) or self._memory_crosses(ds):
                self.private.append(a)
        self.derived = derived

    def _nocapture(self, ins: Inst, c: Call, val: str) -> bool:
        """captures(none) / nocapture on every argument slot passing `val`."""
        m = re.search(re.escape(c.callee) + r"\(", ins.text)
        if not m:
            return False
        s = ins.text[m.end() - 1:]
        args = _split_top(s[1:_matching(s, 0)])
        found = False
        for a in args:
            if re.search(re.escape(val) + r"$", a.strip()):
                found = True
                if "captures(none)" not in a and "nocapture" not in a:
                    return False
        return found

    def _is_lifetime(self, ins: Inst, ds: set[str]) -> bool:
        return ins.op == "call" and "@llvm.lifetime." in ins.text and any(u in ds for u in ins.uses)

    def _memory_crosses(self, ds: set[str]) -> bool:
        """Could memory reached through `ds` be written before a cut and read
        after it? (Paths are cut by lifetime markers of the alloca.)"""
        def uses_ds(ins):
            return any(u in ds for u in ins.uses)

        for sp in self.syncs:
            if self._reach(sp.cont, 0, +1, ds, uses_ds) and self._reach(sp.block, None, -1, ds, uses_ds):
                return True
        return False

    def _reach(self, start: str, idx, direction: int, ds, pred) -> bool:
        seen = set()
        work = [(start, idx)]
        while work:
            lb, i = work.pop()
            blk = self.blocks[lb]
            insts = blk.insts
            rng = range(i if i is not None else 0, len(insts)) if direction > 0 else \
                range((i if i is not None else len(insts)) - 1, -1, -1)
            stopped = False
            for j in rng:
                ins = insts[j]
                if self._is_lifetime(ins, ds):
                    stopped = True
                    break
                if pred(ins):
                    return True
            if stopped:
                continue
            nxt = blk.succs if direction > 0 else blk.preds
            for s in nxt:
                if s not in seen:
                    seen.add(s)
                    work.append((s, None))
        return False

    # ---------------------------------------------------------- uniform --
    def uniform_candidates(self):
        varying = {self.x, self.y, self.z, self.lin}
        private = set()
        for a in self.allocas:
            private |= self.derived.get(a, {a})
        reach_cache: dict[str, set[str]] = {}

        def reach(s: str) -> set[str]:
            if s not in reach_cache:
                seen = {s}
                work = [s]
                while work:
                    b = work.pop()
                    for t in self.blocks[b].succs:
                        if t not in seen:
                            seen.add(t)
                            work.append(t)
                reach_cache[s] = seen
            return reach_cache[s]

        div_joins: set[str] = set()
        done_branches: set[str] = set()
        changed = True
        while changed:
            changed = False
            for lb in self.order:
                blk = self.blocks[lb]
                for ins in blk.insts:
                    if ins.name is None or ins.name in varying:
                        continue
                    v = False
                    if ins.op == "phi":
                        inc = _phi_incoming(ins)
                        if any(nm in varying for val, _ in inc for _, nm in self.locals.tokens(val)):
                            v = True
                        elif lb in div_joins and len({val for val, _ in inc}) > 1:
                            v = True
                    elif ins.op == "load":
                        v = any(u in varying or u in private for u in ins.uses)
                    elif ins.op in ("atomicrmw", "cmpxchg", "alloca"):
                        v = ins.op != "alloca"
                    elif ins.op == "call":
                        c = ins.call
                        callee = _name(c.callee) if c and c.callee.startswith("@") else ""
                        if callee.startswith("llvm.memcpy") or callee.startswith("llvm.memset"):
                            v = False
                        else:
                            v = any(u in varying or u in private for u in ins.uses)
                    else:
                        v = any(u in varying for u in ins.uses)
                    if v:
                        varying.add(ins.name)
                        changed = True
                # divergent branches
                if blk.insts and blk.sync == 0 and lb not in done_branches:
                    t = blk.insts[-1]
                    if t.op in ("br", "switch") and any(u in varying for u in t.uses) and len(blk.succs) > 1:
                        done_branches.add(lb)
                        for j in self.order:
                            jb = self.blocks[j]
                            if len(set(jb.preds)) < 2 or not jb.phis() or j in div_joins:
                                continue
                            origin = []
                            for p in set(jb.preds):
                                srcs = {s for s in blk.succs if (p == lb and s == j) or p in reach(s)}
                                origin.append(srcs)
                            found = False
                            for i1 in range(len(origin)):
                                for i2 in range(len(origin)):
                                    if i1 != i2 and any(a != b for a in origin[i1] for b in origin[i2]):
                                        found = True
                            if found:
                                div_joins.add(j)
                                changed = True
        self.varying = varying
        self.uniform = [v for v in self.slot_values
                        if v not in varying and not self.types[v].startswith("{")
                        and not re.match(r"<3 x", self.types[v])]

    # ------------------------------------------------------------ emit --
    def emit(self) -> list[str]:
        n = self.sym
        L = self.locals
        crossing = self.crossing
        slot_idx = {v: i for i, v in enumerate(self.slot_values)}
        stage_idx = {v: i for i, v in enumerate(self.uniform)}
        priv_idx = {a: i for i, a in enumerate(self.private)}
        entry_allocas = {i.name: i for i in self.blocks[self.entry].insts if i.op == "alloca"}

        # reg2mem: a stack slot per value live across a cut.
        def addr(v):
            return f"%mk.a.{v}"

        out_blocks: dict[str, list[str]] = {}
        for lb in self.order:
            blk = self.blocks[lb]
            lines: list[str] = []
            phi_stores = []
            pending_loads: dict[str, list[str]] = {}
            for ins in blk.insts:
                if ins.op == "alloca" and lb == self.entry:
                    continue  # emitted in the new entry block
                if ins.op == "call" and "@llvm.lifetime." in ins.text and \
                        any(u in priv_idx or any(u in self.derived.get(a, ()) for a in priv_idx)
                            for u in ins.uses):
                    continue  # lifetime markers must name allocas
                text = ins.text
                if "!llvm.loop" in text:
                    text = re.sub(r",\s*!llvm\.loop !\d+", "", text)
                if ins.op == "phi":
                    mapping_needed = [u for u in ins.uses if u in crossing]
                    if mapping_needed:
                        # loads at the end of the predecessors
                        def fix_pair(m):
                            val, pred = m.group(1), _name(m.group(2))
                            used = [nm for _, nm in L.tokens(val) if nm in crossing]
                            if not used:
                                return m.group(0)
                            mp = {}
                            for u in used:
                                t = self.tmp("l")
                                pending_loads.setdefault(pred, []).append(
                                    f"  %{t} = load {self.types[u]}, ptr {addr(u)}")
                                mp[u] = f"%{t}"
                            return f"[ {L.subst(val, mp)}, {m.group(2)} ]"
                        text = re.sub(rf"\[\s*(.+?),\s*({_LOCAL})\s*\]", fix_pair, text)
                    lines.append(text)
                    if ins.name in crossing:
                        phi_stores.append(f"  store {self.types[ins.name]} {_ref(ins.name)}, ptr {addr(ins.name)}")
                    continue
                if phi_stores:
                    lines += phi_stores
                    phi_stores = []
                mp = {}
                for u in ins.uses:
                    if u in crossing:
                        t = self.tmp("l")
                        lines.append(f"  %{t} = load {self.types[u]}, ptr {addr(u)}")
                        mp[u] = f"%{t}"
                if mp:
                    text = L.subst(text, mp)
                if text.strip() == "ret void":
                    text = f"  ret i32 {DONE}"
                lines.append(text)
                if ins.name in crossing:
                    lines.append(f"  store {self.types[ins.name]} {_ref(ins.name)}, ptr {addr(ins.name)}")
            if phi_stores:
                lines += phi_stores
            if blk.sync:
                # The saves (per step function: see _SAVE below) and the exit.
                sp = self.syncs[blk.sync - 1]
                for v in sp.live:
                    if v in slot_idx:
                        lines.append((_SAVE, v))
                lines.append(f"  ret i32 {sp.id}")
            out_blocks[lb] = lines
            blk._pending = pending_loads  # type: ignore[attr-defined]
        # loads for phi operands go before the predecessors' terminators
        for lb in self.order:
            for pred, loads in self.blocks[lb]._pending.items():  # type: ignore[attr-defined]
                pl = out_blocks[pred]
                pl[len(pl) - 1:len(pl) - 1] = loads

        # resume blocks
        resume_blocks: dict[int, list[str]] = {}
        for sp in self.syncs:
            lines = []
            memo: dict[str, str] = {}
            for v in sp.live:
                if v in slot_idx:
                    t = self.tmp("r")
                    src = f"%mk.ua.{v}" if v in stage_idx else f"%mk.sa.{v}"
                    lines.append(f"  %{t} = load {self.types[v]}, ptr {src}")
                    lines.append(f"  store {self.types[v]} %{t}, ptr {addr(v)}")
                else:
                    ref = self._emit_remat(v, memo, lines)
                    lines.append(f"  store {self.types[v]} {ref}, ptr {addr(v)}")
            lines.append(f"  br label {_ref(sp.cont)}")
            resume_blocks[sp.id] = lines

        # entry
        entry = ["  %mk.tid64 = zext i32 " + _ref(self.lin) + " to i64"]
        if self.private:
            entry.append(f"  %mk.frame = getelementptr inbounds %mk.frame.{n}, ptr %mk.frames, i64 %mk.tid64")
        for a, ins in entry_allocas.items():
            if a in priv_idx:
                entry.append(f"  {_ref(a)} = getelementptr inbounds %mk.frame.{n}, ptr %mk.frame, "
                             f"i64 0, i32 {priv_idx[a]}, i32 1")
            else:
                entry.append(ins.text)
        for v in sorted(crossing):
            entry.append(f"  {addr(v)} = alloca {self.types[v]}")
        for j in range(len(self.tg_allocs)):
            entry.append(f"  %mk.tgp{j} = getelementptr inbounds i8, ptr {_ref(self.g)}, "
                         f"i64 {WIGROUP_TG_ALLOCS + 8 * j}")
        nf = len(self.slot_values)
        entry.append(f"  %mk.simd_in = getelementptr inbounds %mk.slots.{n}, ptr %mk.slots, i64 0, i32 {nf}")
        entry.append(f"  %mk.simd_out = getelementptr inbounds %mk.slots.{n}, ptr %mk.slots, i64 0, i32 {nf + 1}")
        for sp in self.syncs:
            if sp.kind == "simd" and sp.uses_arg:
                entry.append(f"  %mk.ap{sp.tag} = getelementptr inbounds %mk.slots.{n}, ptr %mk.slots, "
                             f"i64 0, i32 {nf + 2}, i64 %mk.tid64")
        for v, i in slot_idx.items():
            entry.append(f"  %mk.sa.{v} = getelementptr inbounds %mk.slots.{n}, ptr %mk.slots, "
                         f"i64 0, i32 {i}, i64 %mk.tid64")
        for v, i in stage_idx.items():
            entry.append(f"  %mk.ua.{v} = getelementptr inbounds %mk.stage.{n}, ptr %mk.stage, i64 0, i32 {i}")

        # one step function per resume point: only what it can reach
        out = []
        attr = f" #{self.ai_group}" if self.ai_group else ""
        params = (f"ptr noalias readonly dereferenceable({WIGROUP_SIZE}) align 8 {_ref(self.g)}, ptr noalias %mk.slots, ptr noalias %mk.stage, ptr %mk.frames, "
                  f"i32 {_ref(self.x)}, i32 {_ref(self.y)}, i32 {_ref(self.z)}, i32 {_ref(self.lin)}")
        self.exits: list[set[int]] = []
        for k in range(len(self.syncs) + 1):
            start = self.entry if k == 0 else self.syncs[k - 1].cont
            reach = self._reachable(start)
            ex = set()
            for lb in reach:
                blk = self.blocks[lb]
                if blk.sync:
                    ex.add(blk.sync)
                elif blk.insts and blk.insts[-1].text.strip() == "ret void":
                    ex.add(DONE)
            self.exits.append(ex)
            body = []
            if k == 0:
                body.append(f"  br label {_ref(self.entry)}")
            else:
                body.append(f"  br label %mk.resume{k}")
                body.append(f"mk.resume{k}:")
                body += resume_blocks[k]
            for lb in self.order:
                if lb not in reach:
                    continue
                body.append(f"{_ref(lb)[1:]}:")
                for text in out_blocks[lb]:
                    if isinstance(text, tuple):
                        # Save v at this cut, unless this region cannot
                        # redefine it: then v was live at the resume point
                        # too, restored from its slot, and the slot still
                        # holds exactly that value (only this thread's saves
                        # write it). Accumulators a region does not touch
                        # cost nothing.
                        v = text[1]
                        if self.defs[v].block in reach:
                            t = self.tmp("s")
                            body.append(f"  %{t} = load {self.types[v]}, ptr {addr(v)}")
                            body.append(f"  store {self.types[v]} %{t}, ptr %mk.sa.{v}")
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
            for _, nm in self.locals.tokens(text):
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
                    for _, nm in self.locals.tokens(entry[i]):
                        used.add(nm)
        return [t for t, kp in zip(entry, keep) if kp]

    def _prune_phi(self, text: str, lb: str, reach: set[str], k: int) -> str:
        """Drops a phi's incoming edges from blocks this step function lacks."""
        m = re.match(rf"(\s*{_LOCAL} = phi\s+)", text)
        if not m:
            return text
        j = m.end()
        s = self._skip_flags(text[j:])
        j = len(text) - len(s)
        _, j = parse_type(text, j)
        preds_ok = {p for p in self.blocks[lb].preds if p in reach and self.blocks[p].sync == 0}
        pairs = re.findall(rf"\[\s*(.+?),\s*({_LOCAL})\s*\]", text[j:])
        kept = [f"[ {v}, {p} ]" for v, p in pairs if _name(p) in preds_ok]
        if not kept:
            raise Unsupported("phi without a predecessor in a step function")
        return text[:j] + " " + ", ".join(kept)

    def _reachable(self, start: str) -> set[str]:
        seen = {start}
        work = [start]
        while work:
            b = work.pop()
            blk = self.blocks[b]
            if blk.sync:
                continue  # the cut ends the region
            for s in blk.succs:
                if s not in seen:
                    seen.add(s)
                    work.append(s)
        return seen

    def _emit_remat(self, v: str, memo: dict[str, str], lines: list[str]) -> str:
        if v in self.avail or v.startswith("mk.tgp"):
            return _ref(v)
        if v in memo:
            return memo[v]
        d = self.defs[v]
        mp = {}
        for u in d.uses:
            mp[u] = self._emit_remat(u, memo, lines)
        new = self.tmp("m")
        mp[v] = f"%{new}"
        text = self.locals.subst(d.text, mp)
        lines.append(text)
        memo[v] = f"%{new}"
        return memo[v]

    def types_text(self) -> list[str]:
        n = self.sym
        # Each array a little longer than 1024 entries: element t of every
        # array would otherwise sit at the same offset modulo 4 KiB, and a
        # region loading one thread's value right after storing another's
        # waits on the store (4K aliasing: x86 cores compare the address's
        # low 12 bits first). 64 bytes more per array spreads them.
        fields = [f"[{MAX_THREADS + _padding(self.types[v])} x {self.types[v]}]" for v in self.slot_values]
        has_simd = any(sp.kind == "simd" for sp in self.syncs)
        max_in = self.in_stride if has_simd else 0
        max_out = self.out_stride if has_simd else 0
        fields.append(f"[{(MAX_THREADS * max_in + 15) // 16} x <16 x i8>]")
        fields.append(f"[{(MAX_THREADS * max_out + 15) // 16} x <16 x i8>]")
        fields.append(f"[{MAX_THREADS} x i32]")
        out = [f"%mk.slots.{n} = type {{ {', '.join(fields)} }}"]
        st = [self.types[v] for v in self.uniform] or ["i8"]
        out.append(f"%mk.stage.{n} = type {{ {', '.join(st)} }}")
        if self.private:
            pf = []
            for a in self.private:
                ins = next(i for i in self.blocks[self.entry].insts if i.name == a)
                m = re.match(r"alloca\s+(inalloca\s+)?", ins.rest)
                s = ins.rest[m.end():]
                t, j = parse_type(s, 0)
                rest = s[j:]
                cnt = re.match(r"\s*,\s*(i\d+)\s+(\d+)", rest)
                if cnt:
                    t = f"[{cnt.group(2)} x {t}]"
                elif re.match(r"\s*,\s*i\d+\s+%", rest):
                    raise Unsupported("alloca with a variable count")
                al = re.search(r"align (\d+)", rest)
                align = int(al.group(1)) if al else 16
                pf.append(f"{{ [0 x <{max(align, 1)} x i8>], {t} }}")
            out.append(f"%mk.frame.{n} = type {{ {', '.join(pf)} }}")
        return out

    def chunked(self) -> bool:
        """Rows of the region loops end at simdgroup boundaries."""
        return any(sp.kind == "simd" for sp in self.syncs)

    def loop_text(self) -> list[str]:
        """loop(g, slots, stage, frames, states, b, e, resume): threads
        [b, e) in rows of x (x innermost, so ids stay affine), each from
        `resume` to its next cut; returns the summary the driver reads
        (mk/workitem.h, Summary: lowest state, highest state other than DONE,
        number of threads DONE, span of the threads not DONE).

        In kernels with simd functions a row is cut at simdgroup boundaries
        (lane ids affine in each inner loop), and whole simdgroups go through
        a loop of exactly MK_SIMD_WIDTH threads starting at a multiple of 32:
        its trip count is a constant (no vectoriser set-up, remainder or
        overflow checks per simdgroup) and the lane of every iteration is
        known, so `lane == 0` conditions fold to one scalar store. When
        every exit of the region is the same point, a simdgroup's states are
        one vector store and the summary is known without reading them;
        otherwise one loop over the states of [b, e) after the region (not
        one per row) computes it."""
        n = self.sym
        group = self.loop_group or self.attr_group
        attr = f" #{group}" if group else ""
        out = [
            f"define internal {{ i64, i64 }} @__mk_wiloop_{n}(ptr noalias readonly dereferenceable({WIGROUP_SIZE}) align 8 %g, "
            f"ptr noalias %slots, ptr noalias %stage, "
            f"ptr %frames, ptr noalias %states, i32 %b, i32 %e, i32 %resume){attr} {{",
            "entry:",
            "  %gsx = load i32, ptr %g, align 4",
            "  %gsyp = getelementptr inbounds i8, ptr %g, i64 4",
            "  %gsy = load i32, ptr %gsyp, align 4",
            "  switch i32 %resume, label %done [",
        ]
        for k in range(len(self.syncs) + 1):
            out.append(f"    i32 {k}, label %L{k}.pre")
        out.append("  ]")
        chunk = self.chunked()
        W = 32  # MK_SIMD_WIDTH

        def call_step(k, x, tid, suffix, store_state=True):
            """The call of region k's step for one thread, and the store of
            its new state unless the caller stores the states itself."""
            call = [f"  %r{suffix} = call i32 @__mk_wistep_{n}_{k}(ptr %g, ptr %slots, ptr %stage, ptr %frames, "
                    f"i32 {x}, i32 %y{k}, i32 %z{k}, i32 {tid})"]
            if not store_state:
                return call
            return call + [
                f"  %t64{suffix} = zext i32 {tid} to i64",
                f"  %sp{suffix} = getelementptr inbounds i32, ptr %states, i64 %t64{suffix}",
                f"  store i32 %r{suffix}, ptr %sp{suffix}, align 4",
            ]

        for k in range(len(self.syncs) + 1):
            out += [
                # (x, y, z) of the first thread, then stepped row by row
                # (no division per row)
                f"L{k}.pre:",
                f"  %bx{k} = urem i32 %b, %gsx",
                f"  %byz{k} = udiv i32 %b, %gsx",
                f"  %by{k} = urem i32 %byz{k}, %gsy",
                f"  %bz{k} = udiv i32 %byz{k}, %gsy",
                f"  br label %L{k}.outer",
                f"L{k}.outer:",
                f"  %lin{k} = phi i32 [ %b, %L{k}.pre ], [ %next{k}, %L{k}.step ]",
                f"  %x0.{k} = phi i32 [ %bx{k}, %L{k}.pre ], [ %nx{k}, %L{k}.step ]",
                f"  %y{k} = phi i32 [ %by{k}, %L{k}.pre ], [ %ny{k}, %L{k}.step ]",
                f"  %z{k} = phi i32 [ %bz{k}, %L{k}.pre ], [ %nz{k}, %L{k}.step ]",
                f"  %more{k} = icmp ult i32 %lin{k}, %e",
                f"  br i1 %more{k}, label %L{k}.row, label %L{k}.end",
                f"L{k}.row:",
                f"  %row{k} = sub i32 %lin{k}, %x0.{k}",
                f"  %left{k} = sub i32 %e, %row{k}",
                f"  %x1w.{k} = call i32 @llvm.umin.i32(i32 %left{k}, i32 %gsx)",
            ]
            if chunk:
                # A piece of a row: up to the next simdgroup boundary, or as
                # many whole simdgroups as the row holds from an aligned start.
                out += [
                    f"  %cb{k} = and i32 %lin{k}, -{W}",
                    f"  %ce{k} = add i32 %cb{k}, {W}",
                    f"  %cl{k} = sub i32 %ce{k}, %row{k}",
                    f"  %x1.{k} = call i32 @llvm.umin.i32(i32 %x1w.{k}, i32 %cl{k})",
                    f"  %room{k} = sub i32 %x1w.{k}, %x0.{k}",
                    f"  %nch{k} = lshr i32 %room{k}, 5",
                    f"  %alg{k} = icmp eq i32 %cb{k}, %lin{k}",
                    f"  %hasch{k} = icmp ne i32 %nch{k}, 0",
                    f"  %full{k} = and i1 %alg{k}, %hasch{k}",
                    f"  br i1 %full{k}, label %L{k}.chunk, label %L{k}.inner",
                    # whole simdgroups: j-th one starts at thread cb + 32 j
                    f"L{k}.chunk:",
                    f"  %j{k} = phi i32 [ 0, %L{k}.row ], [ %jn{k}, %L{k}.clatch ]",
                    f"  %jo{k} = shl i32 %j{k}, 5",
                    f"  %cx{k} = add i32 %x0.{k}, %jo{k}",
                    f"  %ct{k} = add i32 %cb{k}, %jo{k}",
                    f"  br label %L{k}.cinner",
                    f"L{k}.cinner:",
                    f"  %i{k} = phi i32 [ 0, %L{k}.chunk ], [ %in{k}, %L{k}.cinner ]",
                    f"  %xc{k} = add i32 %cx{k}, %i{k}",
                    f"  %tc{k} = add nuw nsw i32 %ct{k}, %i{k}",
                ]
                # Every thread of a single-exit region ends at the same point:
                # the simdgroup's states are one aligned vector store after
                # its loop (not 32 stores the unroller splits unevenly).
                single = len(self.exits[k]) == 1
                out += call_step(k, f"%xc{k}", f"%tc{k}", f"c{k}", store_state=not single)
                out += [
                    f"  %in{k} = add nuw nsw i32 %i{k}, 1",
                    f"  %ic{k} = icmp ult i32 %in{k}, {W}",
                    f"  br i1 %ic{k}, label %L{k}.cinner, label %L{k}.clatch",
                    f"L{k}.clatch:",
                ]
                if single:
                    (c,) = self.exits[k]
                    out += [
                        f"  %ct64.{k} = zext i32 %ct{k} to i64",
                        f"  %csp{k} = getelementptr inbounds i32, ptr %states, i64 %ct64.{k}",
                        f"  store <{W} x i32> <{', '.join([f'i32 {c}'] * W)}>, ptr %csp{k}, align 4",
                    ]
                out += [
                    f"  %jn{k} = add nuw i32 %j{k}, 1",
                    f"  %jc{k} = icmp ult i32 %jn{k}, %nch{k}",
                    f"  br i1 %jc{k}, label %L{k}.chunk, label %L{k}.cexit",
                    f"L{k}.cexit:",
                    f"  %nchw{k} = shl i32 %nch{k}, 5",
                    f"  %xce{k} = add i32 %x0.{k}, %nchw{k}",
                    f"  br label %L{k}.step",
                ]
            else:
                out += [f"  %x1.{k} = add i32 %x1w.{k}, 0", f"  br label %L{k}.inner"]
            prev = f"%L{k}.row"
            out += [
                # the threads of this piece: only the kernel's code and the state
                f"L{k}.inner:",
                f"  %x{k} = phi i32 [ %x0.{k}, {prev} ], [ %xn{k}, %L{k}.inner ]",
                f"  %tid{k} = add i32 %row{k}, %x{k}",
            ]
            out += call_step(k, f"%x{k}", f"%tid{k}", f"{k}")
            out += [
                f"  %xn{k} = add nuw i32 %x{k}, 1",
                f"  %c{k} = icmp ult i32 %xn{k}, %x1.{k}",
                f"  br i1 %c{k}, label %L{k}.inner, label %L{k}.step",
                f"L{k}.step:",
                f"  %xe{k} = phi i32 [ %x1.{k}, %L{k}.inner ]"
                + (f", [ %xce{k}, %L{k}.cexit ]" if chunk else ""),
                f"  %next{k} = add i32 %row{k}, %xe{k}",
                # the next piece starts at xe, or at the start of the next y (z)
                f"  %wrap{k} = icmp eq i32 %xe{k}, %gsx",
                f"  %nx{k} = select i1 %wrap{k}, i32 0, i32 %xe{k}",
                f"  %y1.{k} = add i32 %y{k}, 1",
                f"  %ywrap{k} = icmp eq i32 %y1.{k}, %gsy",
                f"  %yw{k} = select i1 %ywrap{k}, i32 0, i32 %y1.{k}",
                f"  %z1.{k} = add i32 %z{k}, 1",
                f"  %zw{k} = select i1 %ywrap{k}, i32 %z1.{k}, i32 %z{k}",
                f"  %ny{k} = select i1 %wrap{k}, i32 %yw{k}, i32 %y{k}",
                f"  %nz{k} = select i1 %wrap{k}, i32 %zw{k}, i32 %z{k}",
                f"  br label %L{k}.outer",
                # an empty range: the summary of no thread
                f"L{k}.end:",
                f"  %any{k} = icmp ult i32 %b, %e",
                f"  br i1 %any{k}, label %L{k}.summ, label %done",
                f"L{k}.summ:",
            ]
            if len(self.exits[k]) == 1:
                # Every thread ends at the same point: the summary is known.
                (c,) = self.exits[k]
                live = 0 if c == DONE else c
                out += [
                    f"  %cnt{k} = sub i32 %e, %b",
                    f"  %mn{k} = add i32 {c}, 0",
                    f"  %mx{k} = add i32 {live}, 0",
                    f"  %dn{k} = " + (f"add i32 %cnt{k}, 0" if c == DONE else "add i32 0, 0"),
                    f"  %llo{k} = " + ("add i32 65535, 0" if c == DONE else "add i32 %b, 0"),
                    f"  %lhi{k} = " + ("add i32 0, 0" if c == DONE else "add i32 %e, 0"),
                    f"  br label %L{k}.ret",
                ]
            else:
                # The summary, from the states just written: one loop over
                # [b, e) after the region (no reductions in the kernel's loop,
                # and one horizontal reduction per call, not per row).
                out += [
                    f"  br label %L{k}.sum",
                    f"L{k}.sum:",
                    f"  %st{k} = phi i32 [ %b, %L{k}.summ ], [ %stn{k}, %L{k}.sum ]",
                    f"  %smn{k} = phi i32 [ -1, %L{k}.summ ], [ %smn2.{k}, %L{k}.sum ]",
                    f"  %smx{k} = phi i32 [ 0, %L{k}.summ ], [ %smx2.{k}, %L{k}.sum ]",
                    f"  %sdn{k} = phi i32 [ 0, %L{k}.summ ], [ %sdn2.{k}, %L{k}.sum ]",
                    f"  %slo{k} = phi i32 [ 65535, %L{k}.summ ], [ %slo2.{k}, %L{k}.sum ]",
                    f"  %shi{k} = phi i32 [ 0, %L{k}.summ ], [ %shi2.{k}, %L{k}.sum ]",
                    f"  %st64.{k} = zext i32 %st{k} to i64",
                    f"  %ssp{k} = getelementptr inbounds i32, ptr %states, i64 %st64.{k}",
                    f"  %sr{k} = load i32, ptr %ssp{k}, align 4",
                    f"  %isdone{k} = icmp eq i32 %sr{k}, {DONE}",
                    f"  %live{k} = select i1 %isdone{k}, i32 0, i32 %sr{k}",
                    f"  %dbit{k} = zext i1 %isdone{k} to i32",
                    f"  %smn2.{k} = call i32 @llvm.umin.i32(i32 %smn{k}, i32 %sr{k})",
                    f"  %smx2.{k} = call i32 @llvm.umax.i32(i32 %smx{k}, i32 %live{k})",
                    f"  %sdn2.{k} = add i32 %sdn{k}, %dbit{k}",
                    f"  %stn{k} = add nuw i32 %st{k}, 1",
                    # the span of the threads not DONE
                    f"  %lidx{k} = select i1 %isdone{k}, i32 65535, i32 %st{k}",
                    f"  %hidx{k} = select i1 %isdone{k}, i32 0, i32 %stn{k}",
                    f"  %slo2.{k} = call i32 @llvm.umin.i32(i32 %slo{k}, i32 %lidx{k})",
                    f"  %shi2.{k} = call i32 @llvm.umax.i32(i32 %shi{k}, i32 %hidx{k})",
                    f"  %sc{k} = icmp ult i32 %stn{k}, %e",
                    f"  br i1 %sc{k}, label %L{k}.sum, label %L{k}.sumx",
                    f"L{k}.sumx:",
                    f"  %mn{k} = phi i32 [ %smn2.{k}, %L{k}.sum ]",
                    f"  %mx{k} = phi i32 [ %smx2.{k}, %L{k}.sum ]",
                    f"  %dn{k} = phi i32 [ %sdn2.{k}, %L{k}.sum ]",
                    f"  %llo{k} = phi i32 [ %slo2.{k}, %L{k}.sum ]",
                    f"  %lhi{k} = phi i32 [ %shi2.{k}, %L{k}.sum ]",
                    f"  br label %L{k}.ret",
                ]
            out += [
                f"L{k}.ret:",
                f"  %mnz{k} = zext i32 %mn{k} to i64",
                f"  %hiz{k} = zext i32 %mx{k} to i64",
                f"  %his{k} = shl i64 %hiz{k}, 32",
                f"  %lo{k} = or i64 %his{k}, %mnz{k}",
                # ndone | live_lo << 32 | live_hi << 48 (mk/workitem.h, Summary)
                f"  %dnz{k} = zext i32 %dn{k} to i64",
                f"  %lloz{k} = zext i32 %llo{k} to i64",
                f"  %llos{k} = shl i64 %lloz{k}, 32",
                f"  %lhiz{k} = zext i32 %lhi{k} to i64",
                f"  %lhis{k} = shl i64 %lhiz{k}, 48",
                f"  %lsp{k} = or i64 %llos{k}, %lhis{k}",
                f"  %second{k} = or i64 %lsp{k}, %dnz{k}",
                f"  %res{k}.0 = insertvalue {{ i64, i64 }} poison, i64 %lo{k}, 0",
                f"  %res{k} = insertvalue {{ i64, i64 }} %res{k}.0, i64 %second{k}, 1",
                f"  ret {{ i64, i64 }} %res{k}",
            ]
        # no thread: lowest state ~0, no live thread (live_lo 0xffff)
        out += ["done:", f"  ret {{ i64, i64 }} {{ i64 4294967295, i64 {0xFFFF << 32} }}", "}", ""]
        return out

    def descriptor_text(self) -> list[str]:
        n = self.sym
        S = f"%mk.slots.{n}"
        T = f"%mk.stage.{n}"

        def off(ty, i):
            return f"i64 ptrtoint (ptr getelementptr ({ty}, ptr null, i32 0, i32 {i}) to i64)"

        def size(ty):
            return f"i64 ptrtoint (ptr getelementptr ({ty}, ptr null, i32 1) to i64)"

        slot_idx = {v: i for i, v in enumerate(self.slot_values)}
        stage_idx = {v: i for i, v in enumerate(self.uniform)}
        uniforms = []
        syncs = [f"%mk.WiSync {{ i32 0, i32 0, i32 0, i32 0, ptr null, ptr null, i32 0, i32 0 }}"]
        for sp in self.syncs:
            first = len(uniforms)
            for v in sp.live:
                if v in stage_idx:
                    uniforms.append(f"%mk.WiUniform {{ {off(S, slot_idx[v])}, {off(T, stage_idx[v])}, "
                                    f"{size(self.types[v])} }}")
            kind = 1 if sp.kind == "barrier" else 2
            comp = sp.compute if sp.kind == "simd" else "null"
            dense = sp.dense if sp.kind == "simd" else "null"
            syncs.append(f"%mk.WiSync {{ i32 {kind}, i32 {sp.op}, i32 {sp.in_size}, i32 {sp.out_size}, "
                         f"ptr {comp}, ptr {dense}, i32 {first}, i32 {len(uniforms) - first} }}")
        out = [f"@__mk_wisyncs_{n} = internal constant [{len(syncs)} x %mk.WiSync] [{', '.join(syncs)}]"]
        if uniforms:
            out.append(f"@__mk_wiunif_{n} = internal constant [{len(uniforms)} x %mk.WiUniform] "
                       f"[{', '.join(uniforms)}]")
            unif_ref = f"@__mk_wiunif_{n}"
        else:
            unif_ref = "null"
        if self.tg_allocs:
            tg = ", ".join(f"%mk.WiTg {{ i64 {a}, i64 {b}, i64 {c} }}" for a, b, c in self.tg_allocs)
            out.append(f"@__mk_witg_{n} = internal constant [{len(self.tg_allocs)} x %mk.WiTg] [{tg}]")
            tg_ref = f"@__mk_witg_{n}"
        else:
            tg_ref = "null"
        frame = size(f"%mk.frame.{n}") if self.private else "i64 0"
        nf = len(self.slot_values)
        out.append(
            f"@__mk_widesc_{n} = internal constant %mk.WiKernel {{ ptr @__mk_wiloop_{n}, "
            f"ptr @__mk_wisyncs_{n}, i64 {len(syncs)}, ptr {unif_ref}, ptr {tg_ref}, i64 {len(self.tg_allocs)}, "
            f"{size(S)}, {size(T)}, {frame}, {off(S, nf)}, {off(S, nf + 1)}, {off(S, nf + 2)}, "
            f"i64 {self.in_stride}, i64 {self.out_stride}, "
            f"ptr {'@__mk_sgu_' + str(n) if self.whole_simdgroup else 'null'} }}")
        attr = f" #{self.attr_group}" if self.attr_group else ""
        out += [
            f"define void @__mk_wientry_{n}(ptr %r){attr} {{",
            f"  tail call void @__mk_wi_run_group(ptr %r, ptr @__mk_widesc_{n}, ptr @__mk_entry_{n})",
            "  ret void",
            "}",
            "",
        ]
        return out


# --------------------------------------------------------------- module --

_SCALAR_BYTES = {"half": 2, "bfloat": 2, "float": 4, "double": 8, "ptr": 8}


def _bytes(t: str) -> int | None:
    """Size of a first-class IR type, or None when this does not know it."""
    t = t.strip()
    if t in _SCALAR_BYTES:
        return _SCALAR_BYTES[t]
    if m := re.fullmatch(r"i(\d+)", t):
        return max(1, int(m.group(1)) // 8)
    if m := re.fullmatch(r"<(\d+) x (.+)>", t):
        e = _bytes(m.group(2))
        return None if e is None else int(m.group(1)) * e
    if m := re.fullmatch(r"\[(\d+) x (.+)\]", t):
        e = _bytes(m.group(2))
        return None if e is None else int(m.group(1)) * e
    return None


def _padding(t: str) -> int:
    """Elements of type `t` that make 64 bytes (at least one)."""
    size = _bytes(t)
    return max(1, 64 // size) if size else 1


def _returning(body: str) -> str:
    """The kernel's attributes without what the cut makes untrue: a kernel
    that loops forever is `noreturn`, but its step functions return at every
    synchronisation point (and its loop function after every region)."""
    return re.sub(r"\b(noreturn|mustprogress|willreturn)\b", "", body)


def _no_scatter(body: str) -> str:
    """The attributes of a loop function: those of the kernel, preferring
    no scatter. In a region loop the vectoriser turns a store to a
    thread-uniform address under a per-thread condition (`if (lane == 0)
    partials[sg] = s;`) into a masked scatter per vector of threads, which
    costs ~20 cycles even with one lane set (Zen 4/5); stores it cannot
    vectorise otherwise are predicated per lane instead."""
    if "-prefer-no-scatter" in body:
        return body.replace("-prefer-no-scatter", "+prefer-no-scatter")
    if "prefer-no-scatter" in body:
        return body
    return re.sub(r'"target-features"="', '"target-features"="+prefer-no-scatter,', body, count=1)


_INSERT = re.compile(rf"^\s*({_LOCAL}) = insertelement <2 x i(16|32)> (poison|undef|{_LOCAL}), "
                     rf"i(?:16|32) ({_LOCAL}|-?\d+), i(?:32|64) ([01])$")
_PAIR_CAST = re.compile(rf"^\s*({_LOCAL}) = bitcast <2 x i(16|32)> ({_LOCAL}) to i(32|64)$")


def fold_pair_bitcasts(text: str) -> str:
    """Rewrites reads of one half of a 2-vector made of two scalars and cast
    to one integer: `lshr (bitcast <x, y>), 32` -> `zext y`, `and ..., 2^32-1`
    and `trunc ...` -> x. A 2-component thread id whose components are read
    as fields (mk/types.h's union of the vector and its x/y members) reaches
    the IR in this form, which hides from the loop vectoriser that an address
    is affine in the thread's x (a region loop then runs scalar)."""
    lines = text.split("\n")
    halves: dict[str, tuple[str, str | None, str | None]] = {}  # name -> (bits, x, y)
    pairs: dict[str, tuple[str, str, str]] = {}  # bitcast name -> (bits, x, y)
    for i, line in enumerate(lines):
        if line.startswith("define "):
            halves.clear()
            pairs.clear()
            continue
        if m := _INSERT.match(line):
            name, bits, base, val, idx = m.groups()
            x, y = halves.get(base, (bits, None, None))[1:] if base.startswith("%") else (None, None)
            halves[name] = (bits, val, y) if idx == "0" else (bits, x, val)
            continue
        if m := _PAIR_CAST.match(line):
            name, bits, vec, _ = m.groups()
            h = halves.get(vec)
            if h and h[1] is not None and h[2] is not None:
                pairs[name] = (bits, h[1], h[2])
            continue
        for name, (bits, x, y) in pairs.items():
            if name not in line:
                continue
            n, wide = int(bits), 2 * int(bits)
            ind = line[:len(line) - len(line.lstrip())]
            if m := re.match(rf"^\s*({_LOCAL}) = lshr(?: exact)? i{wide} {re.escape(name)}, {n}$", line):
                lines[i] = f"{ind}{m.group(1)} = zext i{n} {y} to i{wide}"
            elif m := re.match(rf"^\s*({_LOCAL}) = and i{wide} {re.escape(name)}, {(1 << n) - 1}$", line):
                lines[i] = f"{ind}{m.group(1)} = zext i{n} {x} to i{wide}"
            elif m := re.match(rf"^\s*({_LOCAL}) = trunc(?: nuw| nsw)* i{wide} {re.escape(name)} to i{n}$", line):
                lines[i] = f"{ind}{m.group(1)} = or i{n} {x}, 0"
            break
    return "\n".join(lines)


def transform(text: str, symbols: list[int], debug: bool = False, every_kernel: bool = False,
              uniform=frozenset()) -> Result:
    """Cuts every per-thread function of `text` that it can. Returns the new
    module text and, per kernel symbol, "workitem-loops", "fibers" or
    "direct" (never synchronises). `every_kernel` gives kernels that never
    synchronise work-item loops too (one region): checked builds run every
    kernel through the group driver, which holds the checker's hooks.
    `uniform`: kernels with a whole-simdgroup function `__mk_sgu_<n>`
    (runtime/simdgroup_uniform.py), which their descriptors name."""
    mod = Module(fold_pair_bitcasts(text))
    sync_funcs = _sync_functions(mod)
    # Functions that ask the runtime which thread is running (simdgroup
    # matrix loads/stores ask for the lane): such a kernel never
    # synchronises but needs the tracked loop, "direct-tracked".
    lane_funcs = _sync_functions(mod, (THREAD_INDEX,))
    modes: dict[int, str] = {}
    reasons: dict[int, str] = {}
    force_inline: set[str] = set()
    generated: list[str] = []
    type_lines: list[str] = []
    remove: list[str] = []
    ai_groups: dict[str, str] = {}
    loop_groups: dict[str, str] = {}
    new_attr_lines: list[str] = []
    next_group = max([int(k) for k in mod.attr_groups] + [0]) + 1
    for sym in symbols:
        fname = f"__mk_wi_{sym}"
        if fname not in mod.functions:
            modes[sym] = "fibers"
            reasons[sym] = "no per-thread function"
            continue
        remove.append(fname)
        pt = PerThread(mod, sym, sync_funcs, sym in uniform)
        try:
            pt.parse()
            if not every_kernel and not pt.synchronises():
                asks_lane = THREAD_INDEX in mod.globals_referenced(fname) or \
                    bool(mod.globals_referenced(fname) & lane_funcs)
                modes[sym] = "direct-tracked" if asks_lane else "direct"
                continue
            pt.check_and_classify_calls()
            pt.lower_markers()
            pt.build_cfg()
            pt.order_syncs()
            pt.liveness()
            pt.classify()
            pt.privatise()
            pt.uniform_candidates()
            g = pt.attr_group
            if g and g not in ai_groups and g in mod.attr_groups:
                body = mod.attr_groups[g]
                body = re.sub(r"\b(noinline|optnone|alwaysinline)\b", "", _returning(body))
                ai_groups[g] = str(next_group)
                new_attr_lines.append(f"attributes #{next_group} = {{ alwaysinline {body.strip()} }}")
                next_group += 1
            pt.ai_group = ai_groups.get(g) if g else None
            if g and g not in loop_groups and g in mod.attr_groups:
                loop_groups[g] = str(next_group)
                new_attr_lines.append(
                    f"attributes #{next_group} = {{ {_no_scatter(_returning(mod.attr_groups[g])).strip()} }}")
                next_group += 1
            pt.loop_group = loop_groups.get(g) if g else None
            steps = pt.emit()
            gen = pt.types_text(), steps + pt.loop_text() + pt.descriptor_text()
        except Unsupported as e:
            modes[sym] = "fibers"
            reasons[sym] = str(e)
            force_inline |= pt.force_inline
            continue
        except Exception as e:  # noqa: BLE001 - a surprise in the IR: stay on fibers
            if debug:
                raise
            modes[sym] = "fibers"
            reasons[sym] = f"internal: {type(e).__name__}: {e}"
            continue
        type_lines += gen[0]
        generated += gen[1]
        modes[sym] = "workitem-loops"
    # Drop the per-thread functions (their work is in the step functions).
    drop = set()
    for f in remove:
        a, b = mod.functions[f]
        drop.update(range(a, b + 1))
    lines = []
    for i, ln in enumerate(mod.lines):
        if i in drop:
            continue
        if ln.startswith("declare "):
            m = re.search(rf"({_GLOBAL})\(", ln)
            nm = _name(m.group(1)) if m else ""
            if nm in ALL_MARKERS and FIBER_PREFIX + nm[len("__mk_"):] in mod.functions:
                # The marker becomes an alias of its fiber-mode body.
                sig = _decl_type(ln, nm)
                lines.append(f"{_gref(nm)} = hidden alias {sig}, ptr {_gref(FIBER_PREFIX + nm[len('__mk_'):])}")
                continue
        lines.append(ln)
    header = [
        "%mk.WiSync = type { i32, i32, i32, i32, ptr, ptr, i32, i32 }",
        "%mk.WiUniform = type { i64, i64, i64 }",
        "%mk.WiTg = type { i64, i64, i64 }",
        "%mk.WiKernel = type { ptr, ptr, i64, ptr, ptr, i64, i64, i64, i64, i64, i64, i64, i64, i64, ptr }",
    ] + type_lines
    decls = []
    if generated:
        # Weak: null when the whole-simdgroup object is not linked after all.
        decls += [f"declare extern_weak hidden void @__mk_sgu_{s}(ptr, i32, i32, i32, i32)"
                  for s in sorted(uniform) if modes.get(s) == "workitem-loops"]
        if "llvm.memcpy.p0.p0.i64" not in mod.declares:
            decls.append("declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)")
        if "llvm.umin.i32" not in mod.declares:
            decls.append("declare i32 @llvm.umin.i32(i32, i32)")
        if "llvm.umax.i32" not in mod.declares:
            decls.append("declare i32 @llvm.umax.i32(i32, i32)")
    # Types go after the module header lines (target triple / datalayout).
    insert_at = 0
    for i, ln in enumerate(lines):
        if ln.startswith("target ") or ln.startswith("source_filename") or ln.startswith("; ModuleID"):
            insert_at = i + 1
    out = lines[:insert_at] + [""] + header + [""] + lines[insert_at:] + [""] + generated + decls + new_attr_lines
    return Result("\n".join(out) + "\n", modes, reasons, force_inline)


def _decl_type(line: str, name: str) -> str:
    """'declare void @f(i32 noundef) #3' -> 'void (i32)'."""
    m = re.match(r"declare\s+(.*?)" + re.escape(_gref(name)) + r"\((.*)\)", line)
    pre = _strip_attrs(re.sub(r"\b(dso_local|hidden|protected|default|local_unnamed_addr|unnamed_addr|"
                              r"extern_weak|external)\b", "", m.group(1))).strip()
    ret, _ = parse_type(pre, 0)
    params = []
    for p in _split_top(m.group(2)):
        if p == "...":
            params.append("...")
            continue
        t, _ = parse_type(p, 0)
        params.append(t)
    return f"{ret} ({', '.join(params)})"
