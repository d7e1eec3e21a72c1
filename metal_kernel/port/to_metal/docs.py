"""docs/port-diagnostics.md, generated from table.py (the table the
translator uses):

    python -m metal_kernel.port.to_metal.docs > docs/port-diagnostics.md
    python -m metal_kernel.port.to_metal.docs --check    # exit 1 when the committed file is stale
"""

from __future__ import annotations

import sys
from pathlib import Path

from . import table as T

DOC = Path(__file__).resolve().parents[3] / "docs" / "port-diagnostics.md"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def generate() -> str:
    out = ["# `metal-kernel port` diagnostics and mapping",
           "",
           "Generated from `metal_kernel/port/to_metal/table.py`, the table the translator reads "
           "(`python -m metal_kernel.port.to_metal.docs > docs/port-diagnostics.md`; a test checks that "
           "this file is current). How to port and verify: [port.md](port.md).",
           "",
           "Severity: **error**, not translated: the kernel is left out of the port (kept in `#if 0` with the "
           "diagnostic); **warning**, translated, but the behaviour may differ from CUDA's: verify it; "
           "**note**, translated by an emulation or with a documented difference.",
           "",
           "## Diagnostics",
           ""]
    by_code: dict[str, list[str]] = {}
    for r in T.RULES:
        if r.code:
            by_code.setdefault(r.code, []).append(r.cuda)
    for code, d in T.DIAGNOSTICS.items():
        out += [f"### {code}", "",
                f"**{d.severity}**: {d.title}.", "",
                d.why, "",
                f"*Fix:* {d.suggestion}", ""]
        if code in by_code:
            names = ", ".join(f"`{n}`" for n in sorted(set(by_code[code])))
            out += [f"Raised by: {names}.", ""]
    out += ["## Mapping", "",
            "Each CUDA identifier the translator knows, by category. `{0}`, `{1}` are the call's arguments "
            "(translated), `{args}` all of them, `{S}` / `{T}` the address space and element type of an "
            "atomic's address, `{S0}` / `{S1}` the address spaces of the first two arguments. Helpers "
            "(`mk_*`) are Metal functions the port writes at the top of the file when used. Identifiers "
            "the table does not know are kept and reported (MK1014), and counted as unconverted.", ""]
    for cat in T.CATEGORIES:
        rules = [r for r in T.RULES if r.category == cat]
        if not rules:
            continue
        out += [f"### {cat}", "", "| CUDA | Metal | diagnostic | note |", "|---|---|---|---|"]
        for r in rules:
            metal = r.metal if r.metal else "(removed)" if r.kind == "statement" else "(not translated)" \
                if r.kind == "flag" else "(removed)"
            if r.kind == "builtin":
                metal = f"parameter `uint3 {r.cuda} {r.metal}`"
            elif r.metal:
                metal = f"`{_cell(r.metal)}`"
            if r.alt:
                metal += f"; width < 32: `{_cell(r.alt)}`"
            out.append(f"| `{r.cuda}` | {metal} | {r.code} | {_cell(r.note)} |")
        out.append("")
    out += ["### Flagged syntax", "", "| construct | diagnostic | why |", "|---|---|---|"]
    out += [f"| `{node}` | {code} | {_cell(what)} |" for node, (code, what) in T.FLAGGED_NODES.items()]
    out += ["", "### Flagged by prefix", "", "| CUDA names starting with | diagnostic | what |", "|---|---|---|"]
    out += [f"| `{p}` | {code} | {what} |" for p, code, what in T.FLAGGED_PREFIXES]
    out += ["", "### Same in Metal", "",
            "Known, not counted as conversions: " + ", ".join(f"`{n}`" for n in sorted(T.SAME_IN_METAL)) + ".", ""]
    return "\n".join(out)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = generate()
    if "--check" in argv:
        current = DOC.read_text() if DOC.exists() else ""
        if current != text:
            print(f"{DOC} is stale: run python -m metal_kernel.port.to_metal.docs > docs/port-diagnostics.md",
                  file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
