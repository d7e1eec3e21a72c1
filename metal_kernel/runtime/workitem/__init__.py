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

0. puts a resume point (a cut that synchronises nothing) on the back edge
   of each strided loop, ``for (i = lid; i < n; i += lsize)``, so that its
   iterations run as passes over the threads, vectorised across them
   (loop_points.py);
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
   agree, unless run_invariance.py proved they do), which keeps them
   loop-invariant;
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

The stages, one module each (in pipeline order):

    abi.py             markers, limits and layouts shared with mk/workitem.h
    pair_bitcasts.py   a pre-pass on the module text (fold_pair_bitcasts)
    ir_model.py        Inst, Locals, Block, SyncPoint, Function
    parse.py           the per-thread function's text -> Function
    loop_points.py     resume points on the back edges of strided loops
    checks.py          does it synchronise; what the cut cannot handle
    cut.py             step 1: markers lowered, blocks cut, CFG, sync order
    analysis.py        step 2: liveness, recomputed vs saved values
    value_types.py     the IR type of a value (what a slot stores)
    uniformity.py      step 2: saved values every thread agrees on
    privatise.py       step 3: allocas moved to per-thread frames
    emit_steps.py      step 4: the step functions (reg2mem)
    emit_loop.py       step 5: the loop function over the threads
    emit_layout.py     step 5: slot / stage / frame types, the descriptor
    interleave.py      after LLVM's optimisation: independent chains interleaved
    per_thread.py      PerThread: one function through the stages
    rewrite_module.py  transform(): every kernel of a module, the module text
"""

# What the rest of the package uses: pass2.py and check/build.py call
# transform and link with CODEGEN_FLAGS; tests build a PerThread and call
# fold_pair_bitcasts directly.
from ..ir import Unsupported  # the kernel stays on the fiber path (the message says why)
from .emit_loop import ROW_JAM
from .pair_bitcasts import fold_pair_bitcasts
from .per_thread import PerThread
from .rewrite_module import CODEGEN_FLAGS, Result, transform

__all__ = ["CODEGEN_FLAGS", "ROW_JAM", "PerThread", "Result", "Unsupported", "fold_pair_bitcasts", "transform"]
