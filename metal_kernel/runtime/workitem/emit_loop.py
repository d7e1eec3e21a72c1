"""Emitting the loop function of a kernel: for the threads [b, e) of a
group, in rows of x, call the step function of the region they resume at
and store their new states; return the summary the group driver reads."""

from __future__ import annotations

from .abi import DONE, WIGROUP_SIZE
from .ir_model import Function
from .prefix_guard import Guard

SIMD_WIDTH = 32  # MK_SIMD_WIDTH

# Rows run together by the jammed loop (_jammed_rows), and the multiple of
# the group's width it needs: narrower rows fill no vector of AVX-512 (16
# floats) or two of AVX2 (the loop's interleave count there, rewrite_module)
# and stay on the row-by-row loop.
ROW_JAM = 4
JAM_ROW_MULTIPLE = 16


def chunked(fn: Function) -> bool:
    """Rows of the region loops end at simdgroup boundaries."""
    return any(sp.kind == "simd" for sp in fn.syncs)


def loop_text(fn: Function, exits: list[set[int]], loop_group: str | None,
              guards: dict[int, Guard] | None = None, jam: int = 1) -> list[str]:
    """loop(g, slots, stage, frames, states, b, e, resume, spans, nspans):
    threads [b, e) in rows of x (x innermost, so ids stay affine), each
    from `resume` to its next cut; returns the summary the driver reads
    (mk/workitem/descriptor.h, Summary: lowest state, highest state other than DONE,
    number of threads DONE, span of the threads not DONE).

    With `nspans` > 0 the threads run as the spans `spans[i]` (lo | hi <<
    16, together [b, e) exactly), one after the other in that order: the
    driver's other legal orders of a region (Launch::order) in one call,
    each span's rows still vectorised (`_span_start`).

    In kernels with simd functions a row is cut at simdgroup boundaries
    (lane ids affine in each inner loop), and whole simdgroups go through
    a loop of exactly MK_SIMD_WIDTH threads starting at a multiple of 32:
    its trip count is a constant (no vectoriser set-up, remainder or
    overflow checks per simdgroup) and the lane of every iteration is
    known, so `lane == 0` conditions fold to one scalar store. When
    every exit of the region is the same point, a simdgroup's states are
    one vector store and the summary is known without reading them;
    otherwise one loop over the states of [b, e) after the region (not
    one per row) computes it.

    `guards[k]` (prefix_guard.py): in region k only threads with x (or
    lin) below a constant do anything, the others return the same state; a
    row's threads past the bound are not called, their state is stored
    directly (`_guarded_row`).

    `jam` > 1: in regions without simd functions or guard, `jam` whole rows
    at once where they fit (`_jammed_rows`)."""
    n = fn.sym
    group = loop_group or fn.attr_group
    attr = f" #{group}" if group else ""
    out = [
        (f"define internal {{ i64, i64 }} @__mk_wiloop_{n}("
         f"ptr noalias readonly dereferenceable({WIGROUP_SIZE}) align 8 %g, ptr noalias %slots, ptr noalias %stage, "
         f"ptr %frames, ptr noalias %states, i32 %b, i32 %e, i32 %resume, ptr noalias readonly %spans, "
         f"i32 %nspans){attr} {{"),
        "entry:",
        "  %gsx = load i32, ptr %g, align 4",
        "  %gsyp = getelementptr inbounds i8, ptr %g, i64 4",
        "  %gsy = load i32, ptr %gsyp, align 4",
        "  %list = icmp ne i32 %nspans, 0",
        "  switch i32 %resume, label %done [",
    ]
    for k in range(len(fn.syncs) + 1):
        out.append(f"    i32 {k}, label %L{k}.pre")
    out.append("  ]")
    chunk = chunked(fn)
    for k in range(len(fn.syncs) + 1):
        out += _region_rows(n, k, chunk, exits[k], (guards or {}).get(k), jam)
        # A guarded region's threads past the bound leave at the guard's
        # state and the others elsewhere: no quick min/max pass there.
        out += _summary(k, exits[k], quick=k not in (guards or {}))
        out += _packed_summary(k)
    # no thread: lowest state ~0, no live thread (live_lo 0xffff)
    out += ["done:", f"  ret {{ i64, i64 }} {{ i64 4294967295, i64 {0xFFFF << 32} }}", "}", ""]
    return out


def access_group(n: int) -> str:
    """The placeholder of kernel n's access group (rewrite_module.py numbers
    it): every memory access of a step call and of the state stores."""
    return f"!mk.ag.{n}"


def parallel_loop(n: int, k: int, which: str) -> str:
    """The placeholder of the loop metadata of one thread loop of region k
    (rewrite_module.py numbers it): llvm.loop.parallel_accesses over the
    kernel's access group, and llvm.loop.vectorize.enable (the 32-bit index
    arithmetic still needs overflow checks, which the cost model wanted 24
    iterations to pay for).

    The iterations are the threads of a group between two synchronisation
    points. Metal orders nothing between them there: a thread that reads
    what another writes in the same region races (undefined, and what the
    checker reports), so no iteration depends on another through memory.
    Said to LLVM, the vectoriser needs no run-time alias checks between the
    buffers, threadgroup memory and the context arrays; with them it ran a
    16-thread row scalar whenever the checks' cost asked for more
    iterations than the row has (AVX2: 32)."""
    return f"!mk.lp.{n}.{k}.{which}"


def _call_step(n: int, k: int, x: str, tid: str, suffix: str, store_state: bool = True,
               y: str | None = None) -> list[str]:
    """The call of region k's step for one thread, and the store of
    its new state unless the caller stores the states itself. Both are in
    the kernel's access group (the inliner gives the step's own accesses
    the call's group)."""
    ag = access_group(n)
    call = [(f"  %r{suffix} = call i32 @__mk_wistep_{n}_{k}(ptr %g, ptr %slots, ptr %stage, ptr %frames, "
             f"i32 {x}, i32 {y or f'%y{k}'}, i32 %z{k}, i32 {tid}), !llvm.access.group {ag}")]
    if not store_state:
        return call
    return call + [
        f"  %t64{suffix} = zext i32 {tid} to i64",
        f"  %sp{suffix} = getelementptr inbounds i32, ptr %states, i64 %t64{suffix}",
        f"  store i32 %r{suffix}, ptr %sp{suffix}, align 4, !llvm.access.group {ag}",
    ]


def _region_rows(n: int, k: int, chunk: bool, exits_k: set[int], guard: Guard | None = None,
                 jam: int = 1) -> list[str]:
    """Region k over the threads [b, e), row by row (x innermost); a row in
    pieces at simdgroup boundaries when `chunk`; with a `guard`, a piece
    ends at the guard's bound and the threads past it are `_guarded_row`;
    else, with `jam` > 1, `jam` rows at a time where they fit."""
    jam = 1 if chunk or guard else jam

    def jam_in(value: str) -> str:
        if jam == 1:
            return ""
        v = value if not value.startswith("%") else f"{value}{k}"
        return f", [ {v}, %L{k}.jstep ]"

    out = _span_start(k) + [
        f"L{k}.outer:",
        f"  %lin{k} = phi i32 [ %sb{k}, %L{k}.first ], [ %next{k}, %L{k}.step ]" + jam_in("%jnext"),
        f"  %x0.{k} = phi i32 [ %bx{k}, %L{k}.first ], [ %nx{k}, %L{k}.step ]" + jam_in("0"),
        f"  %y{k} = phi i32 [ %by{k}, %L{k}.first ], [ %ny{k}, %L{k}.step ]" + jam_in("%jny"),
        f"  %z{k} = phi i32 [ %bz{k}, %L{k}.first ], [ %nz{k}, %L{k}.step ]" + jam_in("%jnz"),
        f"  %more{k} = icmp ult i32 %lin{k}, %se{k}",
        f"  br i1 %more{k}, label %L{k}.{'rowg' if guard else 'row'}, label %L{k}.end",
    ]
    if guard:
        out += _guarded_row(k, guard)
    else:
        out += [
            f"L{k}.row:",
            f"  %row{k} = sub i32 %lin{k}, %x0.{k}",
            f"  %left{k} = sub i32 %se{k}, %row{k}",
            f"  %x1w.{k} = call i32 @llvm.umin.i32(i32 %left{k}, i32 %gsx)",
        ]
    if chunk:
        out += _whole_simdgroups(n, k, exits_k)
    elif jam > 1:
        out += [f"  %x1.{k} = add i32 %x1w.{k}, 0"] + _jammed_rows(n, k, jam)
    else:
        out += [f"  %x1.{k} = add i32 %x1w.{k}, 0", f"  br label %L{k}.inner"]
    prev = f"%L{k}.row"
    out += [
        # the threads of this piece: only the kernel's code and the state
        f"L{k}.inner:",
        f"  %x{k} = phi i32 [ %x0.{k}, {prev} ], [ %xn{k}, %L{k}.inner ]",
        f"  %tid{k} = add i32 %row{k}, %x{k}",
    ]
    out += _call_step(n, k, f"%x{k}", f"%tid{k}", f"{k}")
    out += [
        f"  %xn{k} = add nuw i32 %x{k}, 1",
        f"  %c{k} = icmp ult i32 %xn{k}, %x1.{k}",
        f"  br i1 %c{k}, label %L{k}.inner, label %L{k}.step, !llvm.loop {parallel_loop(n, k, 'i')}",
        f"L{k}.step:",
        f"  %xe{k} = phi i32 [ %x1.{k}, %L{k}.inner ]" + (f", [ %xce{k}, %L{k}.cexit ]" if chunk else "")
        + (f", [ %x1r.{k}, %L{k}.fill ]" if guard else ""),
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
        # the next span; after the last, the summary of [b, e) (none
        # for an empty range)
        f"L{k}.end:",
        f"  br i1 %list, label %L{k}.snext, label %L{k}.fin",
        f"L{k}.snext:",
        f"  %sin{k} = add nuw i32 %sic{k}, 1",
        f"  %smore{k} = icmp ult i32 %sin{k}, %nspans",
        f"  br i1 %smore{k}, label %L{k}.span, label %L{k}.fin",
        f"L{k}.fin:",
        f"  %any{k} = icmp ult i32 %b, %e",
        f"  br i1 %any{k}, label %L{k}.summ, label %done",
        f"L{k}.summ:",
    ]
    return out


def _jammed_rows(n: int, k: int, jam: int) -> list[str]:
    """`jam` whole rows at once, when the piece starts a row, the range
    holds `jam` rows more, they are in one z plane, the row is a multiple of
    JAM_ROW_MULTIPLE wide, and there is no span list (Launch::order's orders
    stay as they are): one loop over x calls the step for (x, y), (x, y +
    1), ... (threads of a region are unordered, as in parallel_loop), each
    thread's state stored as L<k>.inner stores it. Else the piece goes on
    at L<k>.inner.

    Why: vectorised over x, a row-by-row loop's iteration holds one copy of
    the step, and a step that is one long dependency chain (a tiled
    matmul's 16-term dot product: 16 dependent FMAs) leaves the FMA units
    idle between rows; the jammed loop's iteration holds `jam` independent
    chains, and the rows' common loads (the same threadgroup memory for
    every row) are loaded once."""
    out = [
        f"  %jwm{k} = and i32 %gsx, {JAM_ROW_MULTIPLE - 1}",
        f"  %jw{k} = icmp eq i32 %jwm{k}, 0",
        f"  %jx0w.{k} = icmp eq i32 %x0.{k}, 0",
        f"  %jx0.{k} = and i1 %jx0w.{k}, %jw{k}",
        f"  %jneed{k} = mul nuw i32 %gsx, {jam}",
        f"  %jrows{k} = icmp uge i32 %left{k}, %jneed{k}",
        f"  %jy{k} = add nuw i32 %y{k}, {jam}",
        f"  %jyok{k} = icmp ule i32 %jy{k}, %gsy",
        f"  %ja{k} = and i1 %jx0.{k}, %jrows{k}",
        f"  %jb{k} = and i1 %ja{k}, %jyok{k}",
        f"  %jnl{k} = xor i1 %list, true",
        f"  %jgo{k} = and i1 %jb{k}, %jnl{k}",
        f"  br i1 %jgo{k}, label %L{k}.jam, label %L{k}.inner",
        f"L{k}.jam:",
        f"  %jx{k} = phi i32 [ 0, %L{k}.row ], [ %jxn{k}, %L{k}.jam ]",
    ]
    for r in range(jam):
        out += [
            f"  %jo{r}.{k} = mul nuw i32 %gsx, {r}",
            f"  %jr{r}.{k} = add i32 %row{k}, %jo{r}.{k}",
            f"  %jt{r}.{k} = add i32 %jr{r}.{k}, %jx{k}",
            f"  %jyy{r}.{k} = add nuw i32 %y{k}, {r}",
        ]
        out += _call_step(n, k, f"%jx{k}", f"%jt{r}.{k}", f"j{r}.{k}", y=f"%jyy{r}.{k}")
    out += [
        f"  %jxn{k} = add nuw i32 %jx{k}, 1",
        f"  %jc{k} = icmp ult i32 %jxn{k}, %gsx",
        f"  br i1 %jc{k}, label %L{k}.jam, label %L{k}.jstep, !llvm.loop {parallel_loop(n, k, 'j')}",
        f"L{k}.jstep:",
        f"  %jnext{k} = add i32 %row{k}, %jneed{k}",
        f"  %jwrap{k} = icmp eq i32 %jy{k}, %gsy",
        f"  %jny{k} = select i1 %jwrap{k}, i32 0, i32 %jy{k}",
        f"  %jz1.{k} = add i32 %z{k}, 1",
        f"  %jnz{k} = select i1 %jwrap{k}, i32 %jz1.{k}, i32 %z{k}",
        f"  br label %L{k}.outer",
    ]
    return out


def _span_start(k: int) -> list[str]:
    """Region k's next span [sb, se) (the whole [b, e) when there is no
    span list) and the (x, y, z) of its first thread, from which the rows
    step without dividing (and in one-dimensional groups, sb < gsx, not
    even once)."""
    return [
        f"L{k}.pre:",
        f"  br i1 %list, label %L{k}.span, label %L{k}.sgo",
        f"L{k}.span:",
        f"  %si{k} = phi i32 [ 0, %L{k}.pre ], [ %sin{k}, %L{k}.snext ]",
        f"  %si64.{k} = zext i32 %si{k} to i64",
        f"  %spp{k} = getelementptr inbounds i32, ptr %spans, i64 %si64.{k}",
        f"  %sv{k} = load i32, ptr %spp{k}, align 4",
        f"  %svb{k} = and i32 %sv{k}, 65535",
        f"  %sve{k} = lshr i32 %sv{k}, 16",
        f"  br label %L{k}.sgo",
        f"L{k}.sgo:",
        f"  %sic{k} = phi i32 [ 0, %L{k}.pre ], [ %si{k}, %L{k}.span ]",
        f"  %sb{k} = phi i32 [ %b, %L{k}.pre ], [ %svb{k}, %L{k}.span ]",
        f"  %se{k} = phi i32 [ %e, %L{k}.pre ], [ %sve{k}, %L{k}.span ]",
        f"  %inrow{k} = icmp ult i32 %sb{k}, %gsx",
        f"  br i1 %inrow{k}, label %L{k}.first, label %L{k}.div",
        f"L{k}.div:",
        f"  %bxd{k} = urem i32 %sb{k}, %gsx",
        f"  %byz{k} = udiv i32 %sb{k}, %gsx",
        f"  %byd{k} = urem i32 %byz{k}, %gsy",
        f"  %bzd{k} = udiv i32 %byz{k}, %gsy",
        f"  br label %L{k}.first",
        f"L{k}.first:",
        f"  %bx{k} = phi i32 [ %sb{k}, %L{k}.sgo ], [ %bxd{k}, %L{k}.div ]",
        f"  %by{k} = phi i32 [ 0, %L{k}.sgo ], [ %byd{k}, %L{k}.div ]",
        f"  %bz{k} = phi i32 [ 0, %L{k}.sgo ], [ %bzd{k}, %L{k}.div ]",
        f"  br label %L{k}.outer",
    ]


def _guarded_row(k: int, guard: Guard) -> list[str]:
    """The start of a row piece in a guarded region: the piece ends at the
    guard's bound (x < C, or lin < C: x < C - row) and goes on at L<k>.row
    as any piece does; a piece that starts at or past the bound runs no
    step: its threads, to the end of the row, get the guard's state."""
    if guard.coord == "x":
        limit = [f"  %lim{k} = add i32 {guard.below}, 0"]
    else:
        limit = [f"  %rowlo{k} = icmp ult i32 %row{k}, {guard.below}",
                 f"  %rowlim{k} = sub i32 {guard.below}, %row{k}",
                 f"  %lim{k} = select i1 %rowlo{k}, i32 %rowlim{k}, i32 0"]
    return [
        f"L{k}.rowg:",
        f"  %row{k} = sub i32 %lin{k}, %x0.{k}",
        f"  %left{k} = sub i32 %se{k}, %row{k}",
        f"  %x1r.{k} = call i32 @llvm.umin.i32(i32 %left{k}, i32 %gsx)",
        *limit,
        f"  %x1w.{k} = call i32 @llvm.umin.i32(i32 %x1r.{k}, i32 %lim{k})",
        f"  %hasg{k} = icmp ult i32 %x0.{k}, %x1w.{k}",
        f"  br i1 %hasg{k}, label %L{k}.row, label %L{k}.fill",
        f"L{k}.fill:",
        f"  %xf{k} = phi i32 [ %x0.{k}, %L{k}.rowg ], [ %xfn{k}, %L{k}.fill ]",
        f"  %tidf{k} = add i32 %row{k}, %xf{k}",
        f"  %tf64.{k} = zext i32 %tidf{k} to i64",
        f"  %spf{k} = getelementptr inbounds i32, ptr %states, i64 %tf64.{k}",
        f"  store i32 {guard.state}, ptr %spf{k}, align 4",
        f"  %xfn{k} = add nuw i32 %xf{k}, 1",
        f"  %cf{k} = icmp ult i32 %xfn{k}, %x1r.{k}",
        f"  br i1 %cf{k}, label %L{k}.fill, label %L{k}.step",
        f"L{k}.row:",
    ]


def _whole_simdgroups(n: int, k: int, exits_k: set[int]) -> list[str]:
    """A row in pieces: whole simdgroups from an aligned start, each
    through a loop of exactly SIMD_WIDTH threads, else the threads up to the
    next simdgroup boundary (the branch to L<k>.inner)."""
    # A piece of a row: up to the next simdgroup boundary, or as
    # many whole simdgroups as the row holds from an aligned start.
    out = [
        f"  %cb{k} = and i32 %lin{k}, -{SIMD_WIDTH}",
        f"  %ce{k} = add i32 %cb{k}, {SIMD_WIDTH}",
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
    single = len(exits_k) == 1
    out += _call_step(n, k, f"%xc{k}", f"%tc{k}", f"c{k}", store_state=not single)
    out += [
        f"  %in{k} = add nuw nsw i32 %i{k}, 1",
        f"  %ic{k} = icmp ult i32 %in{k}, {SIMD_WIDTH}",
        f"  br i1 %ic{k}, label %L{k}.cinner, label %L{k}.clatch, !llvm.loop {parallel_loop(n, k, 'c')}",
        f"L{k}.clatch:",
    ]
    if single:
        (c,) = exits_k
        out += [
            f"  %ct64.{k} = zext i32 %ct{k} to i64",
            f"  %csp{k} = getelementptr inbounds i32, ptr %states, i64 %ct64.{k}",
            f"  store <{SIMD_WIDTH} x i32> <{', '.join([f'i32 {c}'] * SIMD_WIDTH)}>, ptr %csp{k}, align 4",
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
    return out


def _summary(k: int, exits_k: set[int], quick: bool = True) -> list[str]:
    """Region k's summary after its rows: lowest and highest live state,
    threads DONE and the span of the live ones. With more than one exit and
    `quick`, a min/max pass first settles the case of every thread at one
    exit."""
    out = []
    if len(exits_k) == 1:
        # Every thread ends at the same point: the summary is known.
        (c,) = exits_k
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
        # and one horizontal reduction per call, not per row). First only
        # the lowest and highest state (two vector operations per 8 or 16
        # states): when they are equal, as when a uniform branch chose the
        # exit, the rest is known; else the loop of five reductions.
        out += [f"  br label %L{k}.{'mm' if quick else 'sumgo'}"]
        out += _quick_summary(k) if quick else []
        out += [
            f"L{k}.sumgo:",
            f"  br label %L{k}.sum",
            f"L{k}.sum:",
            f"  %st{k} = phi i32 [ %b, %L{k}.sumgo ], [ %stn{k}, %L{k}.sum ]",
            f"  %smn{k} = phi i32 [ -1, %L{k}.sumgo ], [ %smn2.{k}, %L{k}.sum ]",
            f"  %smx{k} = phi i32 [ 0, %L{k}.sumgo ], [ %smx2.{k}, %L{k}.sum ]",
            f"  %sdn{k} = phi i32 [ 0, %L{k}.sumgo ], [ %sdn2.{k}, %L{k}.sum ]",
            f"  %slo{k} = phi i32 [ 65535, %L{k}.sumgo ], [ %slo2.{k}, %L{k}.sum ]",
            f"  %shi{k} = phi i32 [ 0, %L{k}.sumgo ], [ %shi2.{k}, %L{k}.sum ]",
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
            f"  br label %L{k}.join",
            f"L{k}.join:",
        ]
        same = {"mn": f"%mmn2.{k}", "mx": f"%qmx{k}", "dn": f"%qdn{k}", "llo": f"%qlo{k}", "lhi": f"%qhi{k}"}
        for name, full in (("mn", "smn2"), ("mx", "smx2"), ("dn", "sdn2"), ("llo", "slo2"), ("lhi", "shi2")):
            quick_in = f", [ {same[name]}, %L{k}.same ]" if quick else ""
            out.append(f"  %{name}{k} = phi i32 [ %{full}.{k}, %L{k}.sumx ]{quick_in}")
        out.append(f"  br label %L{k}.ret")
    return out


def _quick_summary(k: int) -> list[str]:
    """The min/max pass over the states of [b, e): when every thread left at
    the same point the summary is known (L<k>.same), else L<k>.sumgo."""
    return [
        f"L{k}.mm:",
        f"  %mt{k} = phi i32 [ %b, %L{k}.summ ], [ %mtn{k}, %L{k}.mm ]",
        f"  %mmn{k} = phi i32 [ -1, %L{k}.summ ], [ %mmn2.{k}, %L{k}.mm ]",
        f"  %mmx{k} = phi i32 [ 0, %L{k}.summ ], [ %mmx2.{k}, %L{k}.mm ]",
        f"  %mt64.{k} = zext i32 %mt{k} to i64",
        f"  %msp{k} = getelementptr inbounds i32, ptr %states, i64 %mt64.{k}",
        f"  %mr{k} = load i32, ptr %msp{k}, align 4",
        f"  %mmn2.{k} = call i32 @llvm.umin.i32(i32 %mmn{k}, i32 %mr{k})",
        f"  %mmx2.{k} = call i32 @llvm.umax.i32(i32 %mmx{k}, i32 %mr{k})",
        f"  %mtn{k} = add nuw i32 %mt{k}, 1",
        f"  %mc{k} = icmp ult i32 %mtn{k}, %e",
        f"  br i1 %mc{k}, label %L{k}.mm, label %L{k}.mmx",
        f"L{k}.mmx:",
        f"  %msame{k} = icmp eq i32 %mmn2.{k}, %mmx2.{k}",
        f"  br i1 %msame{k}, label %L{k}.same, label %L{k}.sumgo",
        f"L{k}.same:",
        f"  %sdone{k} = icmp eq i32 %mmn2.{k}, {DONE}",
        f"  %scnt{k} = sub i32 %e, %b",
        f"  %qmx{k} = select i1 %sdone{k}, i32 0, i32 %mmn2.{k}",
        f"  %qdn{k} = select i1 %sdone{k}, i32 %scnt{k}, i32 0",
        f"  %qlo{k} = select i1 %sdone{k}, i32 65535, i32 %b",
        f"  %qhi{k} = select i1 %sdone{k}, i32 0, i32 %e",
        f"  br label %L{k}.join",
    ]


def _packed_summary(k: int) -> list[str]:
    """The summary packed into the { i64, i64 } the driver reads."""
    return [
        f"L{k}.ret:",
        f"  %mnz{k} = zext i32 %mn{k} to i64",
        f"  %hiz{k} = zext i32 %mx{k} to i64",
        f"  %his{k} = shl i64 %hiz{k}, 32",
        f"  %lo{k} = or i64 %his{k}, %mnz{k}",
        # ndone | live_lo << 32 | live_hi << 48 (mk/workitem/descriptor.h, Summary)
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
