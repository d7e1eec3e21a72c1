"""The file's own launches, for verify_all: the CUDA program (its host code,
port/program.py) built with launch capture (mkcuda/capture.h) and run; the
first launch of each kernel records its grid, block, dynamic shared memory,
scalar arguments and the contents of every buffer it is given.

A launch with deduced template arguments (`k<<<g, b>>>(x)` for a template
`k`) is named by the instantiation the kernel reports when it runs
(`[T = float]` in its __PRETTY_FUNCTION__); `explicit_instantiations` then
writes the `template __global__ void k<float>(...);` lines that let
load_cuda and the port name it too.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..analyse import normalise_spelling, normalise_template_args, split_top_level

def template_args(pretty: str) -> str | None:
    """`void k(float *, const T *) [T = float, N = 4]` -> `float, 4`."""
    m = re.search(r"\[(.*)\]\s*$", pretty or "")
    if not m:
        return None
    values = []
    for part in (x.strip() for x in split_top_level(m.group(1))):
        if "=" not in part:
            return None
        values.append(part.split("=", 1)[1].strip())
    return normalise_template_args(", ".join(values))


def spelling_of(record: dict) -> str:
    """The CUDA spelling of a recorded launch: `k`, `ns::k`, `k<float, 4>`."""
    name = " ".join(record["name"].split())
    # The instantiation the kernel reported wins: the launch may spell its
    # template arguments with names local to the host code (`k<int_const.value>`).
    targs = template_args(record.get("pretty", ""))
    if targs:
        return f"{name.partition('<')[0].strip()}<{targs}>"
    return normalise_spelling(name)


def read_captures(folder: str | Path) -> dict[str, dict]:
    """spelling -> the launch: grid, block, smem and args (buffers with their
    bytes, scalars with theirs)."""
    folder = Path(folder)
    path = folder / "launches.jsonl"
    out: dict[str, dict] = {}
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a launch that did not finish (the program died in it)
        spelling = spelling_of(rec)
        if spelling in out:
            continue
        args = []
        for a in rec["args"]:
            if a["kind"] == "buffer":
                args.append({"kind": "buffer", "data": (folder / a["file"]).read_bytes()})
            elif a["kind"] == "value":
                args.append({"kind": "value", "bytes": bytes.fromhex(a["hex"]), "type": a.get("type", "struct")})
            else:
                args.append({"kind": "pointer", "data": None, "null": a.get("null", False)})
        out[spelling] = {"grid": rec["grid"], "block": rec["block"], "smem": rec["smem"], "args": args,
                         "where": f"launch {rec['launch']} of the program ({rec['name']})",
                         "pretty": rec.get("pretty", "")}
    return out


def capture_launches(source: str, filename: str, runs: Sequence[Sequence[str]] = ((),), timeout: float = 300.0,
                     include_dirs=(), defines=None, cwd: str | None = None,
                     env: dict[str, str] | None = None) -> tuple[dict[str, dict], list[str]]:
    """Builds the program with capture and runs it once per argument list of
    `runs` (e.g. each kernel version of an llm.c file), with `env` added to
    the environment (e.g. MK_CUDA_SM_COUNT, mkcuda/host.h); returns
    (captures, problems: why a build or run did not capture)."""
    from ..frontend import CudaCompileError
    from ..program import build_program, run_program

    problems = []
    try:
        exe = build_program(source, filename=filename, include_dirs=include_dirs, defines=defines, capture=True)
    except (CudaCompileError, OSError) as e:
        return {}, [f"the program does not build: {str(e).splitlines()[0]}"]
    # Each run records into a folder of its own: a run numbers its launches
    # from 0 and names the buffers' files by them (mkcuda/capture.h), so in
    # one shared folder a later run overwrote the bytes an earlier run's
    # launches refer to (a kernel verified on another kernel's buffers).
    captures: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="mk-capture-") as root:
        env = dict(env or {})
        old = {k: os.environ.get(k) for k in ("MK_CUDA_CAPTURE", "MK_CUDA_CAPTURE_SKIP", *env)}
        try:
            for i, args in enumerate(runs):
                folder = os.path.join(root, f"run{i}")
                os.mkdir(folder)
                os.environ.update({"MK_CUDA_CAPTURE": folder, "MK_CUDA_CAPTURE_SKIP": "1", **env})
                r = run_program(exe, args, timeout=timeout, cwd=cwd)
                if r.timed_out:
                    problems.append(f"run {' '.join(args) or '(no arguments)'} timed out")
                elif r.returncode != 0:
                    # Launches before the failure are still recorded; the rest are not.
                    last = (r.stderr.strip().splitlines() or ["(no message)"])[-1][:160]
                    problems.append(f"run {' '.join(args) or '(no arguments)'} exited with {r.returncode}: {last}")
                for spelling, launch in read_captures(folder).items():
                    captures.setdefault(spelling, launch)  # the first launch of each kernel
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        return captures, problems


def explicit_instantiations(result, spellings) -> str:
    """`template __global__ void k<float>(float* out, ...);` for each captured
    instantiation of a kernel template the port does not have yet."""
    from .facts import collect
    from .symbols import split_template_args, substitute
    from .source import load_source

    have = {k.spelling for k in result.kernels}
    wanted = [s for s in spellings if "<" in s and s not in have]
    if not wanted:
        return ""
    src = load_source(result.source, result.filename, result.include_dirs, result.defines)
    facts = collect(src)
    lines = []
    for s in wanted:
        base, _, rest = s.partition("<")
        name = base.split("::")[-1]
        f = next((g for g in facts.functions if g.kernel and g.name == name and g.template is not None), None)
        if f is None:
            continue
        mapping = dict(zip(f.template_params, split_template_args(rest.rsplit(">", 1)[0])))
        params = ", ".join(substitute(src.node_text(p.node), mapping) for p in f.params)
        line = f"template __global__ void {name}<{rest.rsplit('>', 1)[0]}>({params});"
        for ns in reversed([x for x in f.scope if x]):
            line = f"namespace {ns} {{ {line} }}"
        lines.append(line)
    return "\n" + "\n".join(lines) + "\n" if lines else ""
