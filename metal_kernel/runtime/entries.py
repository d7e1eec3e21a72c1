"""The C++ the rewriter adds for each kernel: its entry points.

Per kernel (symbol n) a library exports
- `__mk_entry_n(Run*)`: the tracked loop over a threadgroup's threads
  (fibers, fault replay), `__mk_fast_n(Run*)`: the same without per-thread
  bookkeeping (direct mode);
- `__mk_wi_n(g, x, y, z, lin)`: the kernel as one thread of a group, for the
  work-item-loop compiler (only in builds for it);
- `__mk_sizes_n[]`: bytes each buffer parameter reads at least;
- `__mk_params_n[]`: what each parameter is (pointer or reference, const,
  element type; mk/binding.h), which the binding checks read.

Hygiene: this code sits in the user's scope (right after the kernel or its
instantiation, so names in template arguments resolve as they did there),
so it must not depend on what the user declared nor shadow anything the
user wrote. The kernel is called by its fully qualified name (qualified
lookup ignores `using namespace metal`, so a kernel named `max` or
`transpose` is never confused with the library's function), every
generated identifier is reserved (`__mk_…`), runtime names are written
`::mk::…`, and the kernel's type comes from its own declaration.
"""

from __future__ import annotations

from dataclasses import dataclass

# Thread attributes and how the entry computes them: `{t}` is the thread's
# ids (mk::ThreadIds), `{launch}` the dispatch (mk::Launch, or in a
# per-thread function the group's mk::WiGroup, which has the same fields).
THREAD_ATTRIBUTES = {
    "thread_position_in_grid": "{t}.thread_position_in_grid",
    "thread_position_in_threadgroup": "{t}.thread_position_in_threadgroup",
    "threadgroup_position_in_grid": "{t}.threadgroup_position_in_grid",
    "threads_per_threadgroup": "{t}.threads_per_threadgroup",
    "dispatch_threads_per_threadgroup": "{launch}->threads_per_threadgroup",
    "threadgroups_per_grid": "{launch}->threadgroups_per_grid",
    "threads_per_grid": "{launch}->threads_per_grid",
    "grid_size": "{launch}->threads_per_grid",
    "grid_origin": "::mk::u3{{0u, 0u, 0u}}",
    "thread_index_in_threadgroup": "{t}.thread_index_in_threadgroup",
    "thread_index_in_simdgroup": "({t}.thread_index_in_threadgroup % 32u)",
    "simdgroup_index_in_threadgroup": "({t}.thread_index_in_threadgroup / 32u)",
    "threads_per_simdgroup": "32u",
    "thread_execution_width": "32u",
    "simdgroups_per_threadgroup": "::mk::div_up({t}.threads_per_threadgroup.x * "
    "{t}.threads_per_threadgroup.y * {t}.threads_per_threadgroup.z, 32u)",
    "dispatch_simdgroups_per_threadgroup": "::mk::div_up({launch}->threads_per_threadgroup.x * "
    "{launch}->threads_per_threadgroup.y * {launch}->threads_per_threadgroup.z, 32u)",
    "thread_index_in_quadgroup": "({t}.thread_index_in_threadgroup % 4u)",
    "quadgroup_index_in_threadgroup": "({t}.thread_index_in_threadgroup / 4u)",
    "threads_per_quadgroup": "4u",
    "quadgroups_per_threadgroup": "::mk::div_up({t}.threads_per_threadgroup.x * "
    "{t}.threads_per_threadgroup.y * {t}.threads_per_threadgroup.z, 4u)",
    "dispatch_quadgroups_per_threadgroup": "::mk::div_up({launch}->threads_per_threadgroup.x * "
    "{launch}->threads_per_threadgroup.y * {launch}->threads_per_threadgroup.z, 4u)",
}

_EXPORT = 'extern "C" __attribute__((visibility("default")))'

# The file name generated code is compiled under (line markers), line n+1
# holding kernel n's entry points: runtime/diagnostics.py recognises it.
GENERATED_FILE = "<metal-kernel entry points>"


@dataclass
class Param:
    name: str
    kind: str  # "buffer", "threadgroup", "attribute"
    index: int = -1  # buffer / threadgroup index
    attribute: str = ""  # thread attribute name
    # A buffer declared coherent(device) (MSL 3.2): a fence and an atomic
    # order its accesses across threadgroups (mk/check_sync.h).
    coherent: bool = False


@dataclass
class EntrySpec:
    """What the entry code of one kernel needs."""

    symbol: int
    callee: str  # fully qualified, with template arguments when given
    fn_type: str  # the kernel's function type, e.g. "void(device float* o, uint i)"
    params: list[Param]
    # Export __mk_params_n (mk/binding.h, Metal types): front ends that bind
    # arguments their own way (CUDA) leave it out.
    describe: bool = True


def _args(spec: EntrySpec, launch: str, t: str, group: str) -> list[str]:
    """The call's arguments: buffers from `launch`, attributes from `t`."""
    out = []
    for i, p in enumerate(spec.params):
        ptype = f"::mk::arg_t<__mk_k{spec.symbol}::F*, {i}>"
        if p.kind == "buffer":
            out.append(f"::mk::buffer_arg<{ptype}>({launch}, {p.index}u)")
        elif p.kind == "threadgroup":
            out.append(f"::mk::threadgroup_arg<{ptype}>({group}, {p.index}u)")
        else:
            expr = THREAD_ATTRIBUTES[p.attribute].format(t=t, launch=launch)
            out.append(f"::mk::attr<{ptype}>({expr})")
    return out


def check_code(spec: EntrySpec) -> str:
    """What a syntax check needs of one kernel's entry points: the call
    with the bound arguments, in a plain function (the loops and lambdas of
    the real entry points cost ~10x more to analyse, per kernel)."""
    n = spec.symbol
    args = _args(spec, "__mk_r->launch", "__mk_t", "__mk_r")
    return (f" namespace __mk_k{n} {{ using F = {spec.fn_type}; }}"
            f" inline void __mk_check_{n}(::mk::Run* __mk_r, const ::mk::ThreadIds& __mk_t)"
            f" {{ {spec.callee}({', '.join(args)}); }}")


def entry_code(spec: EntrySpec, workitem: bool) -> str:
    """The entry points of one kernel, as one line of C++."""
    n = spec.symbol
    call = f"[[clang::always_inline]] {spec.callee}"
    ptypes = [f"::mk::arg_t<__mk_k{n}::F*, {i}>" for i in range(len(spec.params))]
    tracked = _args(spec, "__mk_r->launch", "__mk_t", "__mk_r")
    # Direct loop: buffers bound once, before the loop (a store through one
    # could otherwise alias the launch record and force a reload of every
    # buffer address per thread).
    hoisted, fast = [], []
    for i, (p, a) in enumerate(zip(spec.params, tracked)):
        if p.kind == "buffer":
            hoisted.append(f"decltype(auto) __mk_b{i} = {a};")
            fast.append(f"__mk_b{i}")
        else:
            fast.append(a)
    buffers = [(p.index, ptypes[i]) for i, p in enumerate(spec.params) if p.kind == "buffer"]
    sizes = [f"{len(buffers)}ull"] + [f"{idx}ull, ::mk::needed_bytes<{pt}>()" for idx, pt in buffers]
    codes = [f"{len(ptypes)}ull"] + [f"::mk::param_code<{pt}>()" for pt in ptypes]
    lam = "(::mk::Run* __mk_r, const ::mk::ThreadIds& __mk_t) __attribute__((always_inline))"
    code = (
        f" namespace __mk_k{n} {{ using F = {spec.fn_type}; }}"
        f" {_EXPORT} void __mk_entry_{n}(::mk::Run* __mk_r) {{ ::mk::run_threads(__mk_r, []{lam}"
        f" {{ (void)__mk_r; (void)__mk_t; {call}({', '.join(tracked)}); }}); }}"
        f" {_EXPORT} void __mk_fast_{n}(::mk::Run* __mk_r) {{ {' '.join(hoisted)}"
        f" ::mk::run_threads_fast(__mk_r, [&]{lam}"
        f" {{ (void)__mk_r; (void)__mk_t; {call}({', '.join(fast)}); }}); }}"
        f" {_EXPORT} const unsigned long long __mk_sizes_{n}[] = {{ {', '.join(sizes)} }};"
    )
    if spec.describe:
        code += f" {_EXPORT} const unsigned long long __mk_params_{n}[] = {{ {', '.join(codes)} }};"
    if workitem:
        # The kernel as one thread of a group described by `g`, for the
        # work-item-loop compiler (mk/workitem.h, runtime/workitem/).
        wi = _args(spec, "__mk_g", "__mk_t", "__mk_g")
        code += (
            f' extern "C" __attribute__((visibility("hidden"))) void __mk_wi_{n}('
            "const ::mk::WiGroup* __mk_g, unsigned int __mk_x, unsigned int __mk_y, unsigned int __mk_z,"
            " unsigned int __mk_lin) { const ::mk::ThreadIds __mk_t = ::mk::wi_ids(__mk_g, __mk_x, __mk_y,"
            f" __mk_z, __mk_lin); (void)__mk_t; (void)__mk_g; {call}({', '.join(wi)}); }}"
        )
    return code


def entry_position(view, at: int, sym: int) -> tuple[int, str, str]:
    """Where the entry points of kernel `sym` go, after token `at`: on
    lines of their own at the end of that line, under a line marker of
    the generated file (diagnostics then never show generated code, and
    name the kernel by the marker's line), when the rest of the line
    stays in the same scope; else right after the token."""
    end = view.toks[at].end
    nl, first, depth, low, last = _line_scopes(view, at)
    k = at - first
    if last not in (";", "}") or depth[-1] != depth[k] or low[k] < depth[k]:
        return end, " ", ""
    _, line, spelled = view.lines.locate_spelled(end)
    return nl, f'\n# {sym + 1} "{GENERATED_FILE}"\n', f"\n# {line + 1} {spelled}"


def _line_scopes(view, at: int):
    """For the line of token `at` (macro expansions put hundreds of
    instantiations on one): its end offset, its first token, the brace
    depth after each of its tokens, the lowest depth after each, and its
    last token. Computed once per line."""
    cache = view.__dict__.setdefault("_line_scope_cache", {})
    nl = view.text.find("\n", view.toks[at].end)
    nl = len(view.text) if nl < 0 else nl
    if nl not in cache:
        line_start = view.text.rfind("\n", 0, view.toks[at].start) + 1
        first = at
        while first > 0 and view.toks[first - 1].start >= line_start:
            first -= 1
        stop = at
        while stop < len(view.toks) and view.toks[stop].start < nl:
            stop += 1
        depth, d = [], 0
        for t in view.toks[first:stop]:
            d += {"{": 1, "}": -1}.get(t.text, 0)
            depth.append(d)
        low = depth[:]
        for k in range(len(low) - 2, -1, -1):
            low[k] = min(depth[k + 1], low[k + 1])
        low[-1] = depth[-1]
        cache[nl] = (nl, first, depth, low, view.toks[stop - 1].text)
    return cache[nl]
