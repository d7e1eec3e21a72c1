"""Mutation score of metal_kernel.check: how many injected bugs it finds.

Takes the correct kernels of the checker's corpus (tests/check/corpus.py)
that use barriers or simd functions, and makes mutants of each, mechanically:

  barrier     delete one threadgroup_barrier / simdgroup_barrier
  fence       delete one atomic_thread_fence (a last-block hand-off's release
              or acquire, docs/checking.md)
  mem_none    weaken one mem_flags::mem_threadgroup / mem_device to mem_none
  le          turn one `<` of a bounds check into `<=` (a comparison whose left
              side appears in a subscript and whose right side is a variable
              or an array's extent)
  divergent   put one simd_shuffle* / simd_broadcast / quad_shuffle* call in a
              branch that leaves out the lane it reads for lane 0 (for the
              _up functions: lane 0, which lane `delta` reads); its result is
              used where it was
  init        drop one store into threadgroup memory (the first of each
              variable, which initialises it)

Every mutant runs under check() with its kernel's own inputs. It is *found*
when the check reports anything, or the dispatch fails (a KernelError names
the bad access). A mutant the check does not find is *equivalent* when it
cannot change the result on any GPU (the EQUIVALENT table says why for each,
after reading it); the others are *missed*. The score is

    found / (mutants - equivalent)

Usage:
    python benchmarks/check_mutants.py [--json OUT] [--kernels a,b,...] [--list]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "check"))
sys.path.insert(0, str(REPO))

import metal_kernel  # noqa: E402
from corpus import CLEAN, CLEAN_C10, HEADER  # noqa: E402

# Mutants the check cannot find because they change nothing a GPU could
# observe; each was read and the reason written down.
EQUIVALENT = {
    "clean_two_level_tickets:fence1":
        "the acquire fence after the row's ticket: the seq_cst fence thread 0 makes before its grid ticket "
        "acquires the row's ticket as well (it follows the atomic in the same thread), and nothing reads the "
        "row's partials in between",
    "clean_two_level_tickets:mem_none2":
        "the first barrier's mem_threadgroup: no thread touches threadgroup memory before it",
    "clean_two_level_tickets:mem_none3":
        "the acquire fence after the row's ticket made mem_none orders nothing, as if deleted (fence1: the "
        "seq_cst fence before the grid ticket acquires the row's ticket)",
    "clean_two_level_tickets:mem_none4":
        "the second barrier's mem_device: only thread 0 uses the row's acquisition before the third barrier, "
        "which orders device memory and hands it to the threads that read the partials",
    "clean_last_block_sum:mem_none2":
        "the first barrier's mem_threadgroup: no thread touches threadgroup memory before it (`last` is written "
        "after it), so it has nothing of threadgroup memory to order",
    "clean_scan_double_buffer:le0":
        "`off <= 64` adds one step with off = 64, where `lid >= off` is false for every thread: it copies one "
        "buffer into the other unchanged and the result is read from the copy",
}

# Mutants the check cannot find, though they change the result, and why.
WHY_MISSED = {
    "clean_scan_simd_prefix:le0":
        "`k <= sg` adds the simdgroup's own total: a wrong result, but the read is in bounds, initialised "
        "and ordered by the barrier (a functional bug, not a memory or concurrency error)",
    "clean_histogram_tg:mem_none0":
        "the barrier orders only relaxed atomics (the initialising atomic_store and the atomic adds); "
        "atomics are exempt from race detection, as in compute-sanitizer",
    "clean_histogram_tg:mem_none1":
        "the barrier orders only relaxed atomics (the atomic adds and the atomic_load); atomics are exempt "
        "from race detection, as in compute-sanitizer",
}


@dataclass
class Mutant:
    id: str
    kernel: str
    operator: str
    source: str  # the whole kernel, renamed
    name: str    # the mutant kernel's name


def _kernel_span(src: str, name: str) -> tuple[int, int]:
    start = src.index(f"kernel void {name}(")
    depth, i = 0, src.index("{", start)
    while True:
        if src[i] == "{":
            depth += 1
        elif src[i] == "}":
            depth -= 1
            if depth == 0:
                return start, i + 1
        i += 1


def _statement_around(body: str, pos: int) -> tuple[int, int]:
    """The statement (up to and including its ';') containing `pos`."""
    start = max(body.rfind(";", 0, pos), body.rfind("{", 0, pos), body.rfind("}", 0, pos)) + 1
    end = body.index(";", pos) + 1
    return start, end


def _matching_paren(text: str, i: int) -> int:
    depth = 0
    for j in range(i, len(text)):
        depth += text[j] == "("
        depth -= text[j] == ")"
        if depth == 0:
            return j
    raise ValueError("unbalanced parentheses")


def _statement_span(text: str, pos: int) -> tuple[int, int]:
    """The statement containing `pos`: it starts after a ';', '{' or '}', or
    after the header of a braceless for / if / while body."""
    i = pos - 1
    while i >= 0:
        ch = text[i]
        if ch in ";{}":
            break
        if ch == ")":
            depth, j = 0, i
            while j >= 0:
                depth += text[j] == ")"
                depth -= text[j] == "("
                if depth == 0:
                    break
                j -= 1
            if re.search(r"\b(for|if|while)\s*$", text[:j]):
                break  # a control header: the statement starts after it
            i = j
        i -= 1
    return i + 1, text.index(";", pos) + 1


def _excluding_source(fn: str, call: str) -> str:
    """A branch condition that leaves out the lane the call's lane 0 (or, for
    the _up functions, its lane `delta`) reads: a real divergent shuffle."""
    args = _call_args(call)
    width = 4 if fn.startswith("quad_") else 32
    lane_arg = args[2] if "and_fill" in fn and len(args) > 2 else args[1] if len(args) > 1 else "0"
    if fn.endswith(("_up", "and_fill_up")):
        src = "0u"
    elif fn.endswith("rotate_up"):
        src = f"({width}u - uint({lane_arg}) % {width}u) % {width}u"
    else:
        src = f"uint({lane_arg}) % {width}u"
    return f"__mut_lane % {width}u != {src}"


def _call_args(call: str) -> list[str]:
    inner = call[call.index("(") + 1:-1]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        depth += ch in "([{<"
        depth -= ch in ")]}>"
        cur += ch
    return parts + [cur.strip()]


def _with_lane_param(kernel: str) -> str:
    """The kernel with one more parameter, its lane in the simdgroup."""
    open_ = kernel.index("(")
    depth = 0
    for i in range(open_, len(kernel)):
        depth += kernel[i] == "("
        depth -= kernel[i] == ")"
        if depth == 0:
            return kernel[:i] + ", uint __mut_lane [[thread_index_in_simdgroup]]" + kernel[i:]
    raise ValueError("unbalanced parameter list")


def mutants_of(case) -> list[Mutant]:
    src = case.source
    a, b = _kernel_span(src, case.name)
    kernel = src[a:b]
    body_at = kernel.index("{")
    out: list[Mutant] = []

    def add(op: str, k: int, text: str):
        name = f"{case.name}__{op}{k}"
        out.append(Mutant(f"{case.name}:{op}{k}", case.name, op,
                          src[:a] + text.replace(f"kernel void {case.name}(", f"kernel void {name}(", 1) + src[b:],
                          name))

    for k, m in enumerate(re.finditer(r"(threadgroup|simdgroup)_barrier\([^;]*\);", kernel[body_at:])):
        s, e = body_at + m.start(), body_at + m.end()
        add("barrier", k, kernel[:s] + kernel[e:])
    for k, m in enumerate(re.finditer(r"atomic_thread_fence\([^;]*\);", kernel[body_at:])):
        s, e = body_at + m.start(), body_at + m.end()
        add("fence", k, kernel[:s] + kernel[e:])
    for k, m in enumerate(re.finditer(r"mem_flags::mem_(threadgroup|device)", kernel[body_at:])):
        s, e = body_at + m.start(), body_at + m.end()
        add("mem_none", k, kernel[:s] + "mem_flags::mem_none" + kernel[e:])
    body = kernel[body_at:]
    extents = set(re.findall(r"\[(\d+)\]", body))
    subscripts = " ".join(re.findall(r"\[([^\[\]]*)\]", body))
    indexed = set(re.findall(r"\b[A-Za-z_]\w*\b", subscripts))
    k = 0
    for m in re.finditer(r"\b(\w+) < (\w+)\b", body):
        lhs, rhs = m.group(1), m.group(2)
        if lhs not in indexed or (rhs.isdigit() and rhs not in extents):
            continue  # not a bounds check: the operator leaves it alone
        s, e = body_at + m.start(), body_at + m.end()
        add("le", k, kernel[:s] + f"{lhs} <= {rhs}" + kernel[e:])
        k += 1
    calls = list(re.finditer(r"\b(simd_shuffle\w*|simd_broadcast|quad_shuffle\w*|quad_broadcast)\(", body))
    for k, m in enumerate(calls):
        start = body_at + m.start()
        close = _matching_paren(kernel, body_at + m.end() - 1)
        call = kernel[start:close + 1]
        s, e = _statement_span(kernel, start)
        stmt = kernel[s:e]
        var = f"__mut_v{k}"
        cond = _excluding_source(m.group(1), call)
        hoisted = f"auto {var} = decltype({call}){{}}; if ({cond}) {var} = {call};"
        rest = kernel[s:start] + var + kernel[close + 1:e]
        declaration = re.match(r"\s*(const\s+)?[A-Za-z_][\w:<>]*\s+[A-Za-z_]\w*\s*=", stmt)
        new = f" {hoisted}{rest}" if declaration else f" {{ {hoisted}{rest} }}"
        add("divergent", k, _with_lane_param(kernel[:s] + new + kernel[e:]))
    tg_vars = re.findall(r"threadgroup\s+[\w:<>, ]+?\s+(\w+)\s*\[", kernel[body_at:])
    for k, var in enumerate(dict.fromkeys(tg_vars)):
        m = re.search(rf"\b{var}\[[^\]]*\](?:\[[^\]]*\])*\s*=[^=]", kernel[body_at:])
        if not m:
            continue
        s, e = _statement_around(kernel, body_at + m.start())
        add("init", k, kernel[:s] + kernel[e:])
    return out


def _call(case, mutant: Mutant):
    """Runs the case's dispatches against the mutant's kernel."""
    class Proxy:
        def __init__(self, lib):
            self.lib = lib

        def __getattr__(self, name):
            if name == case.name:
                return getattr(self.lib, mutant.name)
            return getattr(self.lib, name)
    return Proxy


def run(cases, only=None, verbose=False) -> dict:
    rows = []
    for case in cases:
        if only and case.name not in only:
            continue
        muts = mutants_of(case)
        if not muts:
            continue
        source = HEADER + "\n".join(m.source for m in muts)
        t0 = time.perf_counter()
        try:
            lib = metal_kernel.compile_shader(source, source_name=f"{case.name}.metal")
        except metal_kernel.MetalCompileError:
            # Some mutant does not compile (the operator made invalid code):
            # such mutants are left out of the score; the others run.
            valid = []
            for m in muts:
                try:
                    metal_kernel.compile_shader(HEADER + m.source)
                    valid.append(m)
                except metal_kernel.MetalCompileError as e:
                    rows.append({"id": m.id, "kernel": m.kernel, "operator": m.operator, "found": False,
                                 "invalid": str(e).splitlines()[0][:120], "how": "", "equivalent": ""})
            muts = valid
            lib = metal_kernel.compile_shader(HEADER + "\n".join(m.source for m in muts),
                                              source_name=f"{case.name}.metal")
        for m in muts:
            proxy = _call(case, m)(lib)
            how = ""
            try:
                with metal_kernel.check() as report:
                    case.run(proxy)
                found = not report.ok
                if found:
                    how = ", ".join(sorted({f.kind for f in report.findings}))
            except metal_kernel.KernelError as e:
                found, how = True, f"dispatch failed: {str(e)[:80]}"
            rows.append({"id": m.id, "kernel": m.kernel, "operator": m.operator, "found": found, "how": how,
                         "equivalent": EQUIVALENT.get(m.id, "") if not found else ""})
            if verbose:
                print(f"  {m.id:45s} {'found: ' + how if found else 'NOT FOUND'}", file=sys.stderr)
        if verbose:
            print(f"{case.name}: {len(muts)} mutants, {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    invalid = [r["id"] for r in rows if r.get("invalid")]
    rows_valid = [r for r in rows if not r.get("invalid")]
    total = len(rows_valid)
    found = sum(r["found"] for r in rows_valid)
    equivalent = sum(1 for r in rows_valid if not r["found"] and r["equivalent"])
    missed = [r["id"] for r in rows_valid if not r["found"] and not r["equivalent"]]
    by_op = {}
    for r in rows_valid:
        d = by_op.setdefault(r["operator"], {"mutants": 0, "found": 0, "equivalent": 0})
        d["mutants"] += 1
        d["found"] += r["found"]
        d["equivalent"] += bool(not r["found"] and r["equivalent"])
    score = found / (total - equivalent) if total - equivalent else 1.0
    return {"kernels": len({r["kernel"] for r in rows}), "mutants": total, "invalid": invalid, "found": found,
            "equivalent": equivalent, "missed": missed, "why_missed": {m: WHY_MISSED.get(m, "") for m in missed},
            "score": score, "by_operator": by_op, "rows": rows}


def markdown(res: dict) -> str:
    """The tables docs/checking.md quotes, from a saved result."""
    out = ["| operator | mutants | found | equivalent |", "|---|---|---|---|"]
    for op, d in sorted(res["by_operator"].items()):
        out.append(f"| {op} | {d['mutants']} | {d['found']} | {d['equivalent']} |")
    out.append(f"| **all** ({res['kernels']} kernels) | {res['mutants']} | {res['found']} | {res['equivalent']} |")
    out.append("")
    out.append(f"Mutation score: {res['found']} / {res['mutants'] - res['equivalent']} = **{res['score']:.1%}**.")
    if res["missed"]:
        out.append("")
        out.append("Missed:")
        out.append("")
        for m in res["missed"]:
            out.append(f"- `{m}`: {res.get('why_missed', {}).get(m) or WHY_MISSED.get(m, '')}")
    eq = [r for r in res["rows"] if r.get("equivalent")]
    if eq:
        out.append("")
        out.append("Equivalent (cannot change the result):")
        out.append("")
        for r in eq:
            out.append(f"- `{r['id']}`: {r['equivalent']}")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--kernels", help="comma-separated kernel names (default: all with barriers or simd functions)")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--markdown", metavar="JSON", help="print the Markdown table of a saved result and exit")
    args = ap.parse_args(argv)
    cases = [c for c in CLEAN + CLEAN_C10 if re.search(r"barrier\(|simd_|quad_", c.source)]
    only = set(args.kernels.split(",")) if args.kernels else None
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text())))
        return 0
    if args.list:
        for c in cases:
            for m in mutants_of(c):
                print(m.id)
        return 0
    res = run(cases, only, args.verbose)
    print(f"{'operator':10s} {'mutants':>8s} {'found':>6s} {'equiv.':>7s}")
    for op, d in sorted(res["by_operator"].items()):
        print(f"{op:10s} {d['mutants']:8d} {d['found']:6d} {d['equivalent']:7d}")
    print(f"kernels: {res['kernels']}, mutants: {res['mutants']}, found: {res['found']}, "
          f"equivalent: {res['equivalent']}, missed: {len(res['missed'])}")
    print(f"mutation score (found / non-equivalent): {res['score']:.1%}")
    if res["invalid"]:
        print(f"left out ({len(res['invalid'])} mutants that do not compile): {', '.join(res['invalid'])}")
    for mid in res["missed"]:
        print(f"  missed: {mid}: {WHY_MISSED.get(mid, '(not yet explained)')}")
    for r in res["rows"]:
        if r["equivalent"]:
            print(f"  equivalent: {r['id']}: {r['equivalent']}")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
