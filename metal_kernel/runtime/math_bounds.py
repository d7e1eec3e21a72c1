"""The accuracy Metal promises for its math functions: the one table behind
METAL_KERNEL_MATH=bounds (mk/bounds.h) and docs/math-bounds.md.

Source: Metal Shading Language Specification, version 3.2 (Apple, 2024-06-06;
the same tables in 4.0), section 8.4 "ULPs and Relative Error":
  Table 8.1  single precision (fast math off; the plain and precise:: functions)
  Table 8.2  single precision with fast math enabled (the fast:: functions)
  Table 8.3  half precision (the plain functions; precise:: and fast:: take
             floats only, as Apple's do)
  Table 8.4/8.5  bfloat: arithmetic only (Metal has no bfloat math functions)
https://developer.apple.com/metal/Metal-Shading-Language-Specification.pdf

In bounds mode every function below returns, instead of the (nearly)
correctly rounded value, a value drawn from the set the table allows around
the exact result, with a seeded hash of the function and its arguments (so a
run is reproducible and every thread that computes the same thing gets the
same answer). Functions the table marks correctly rounded or exact are not
perturbed. Regenerate the header and the doc after editing the table:

    python -m metal_kernel.runtime.math_bounds
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
INCLUDE = HERE / "include" / "mk" / "math_bounds.inc"
DOC = HERE.parent.parent / "docs" / "math-bounds.md"


@dataclass(frozen=True)
class Bound:
    """One cell of a table.

    kind: "cr"      correctly rounded (or exact: 0 ulp): not perturbed
          "ulp"     |result - exact| <= ulps * ulp(exact)
          "exp"     <= 3 + floor(|2x|) ulp (fast exp, exp2)
          "abs"     |result - exact| <= absolute, for x in [lo, hi]; outside,
                    `ulps` ulp (or, when ulps is 0, the same absolute error:
                    the specification only says "larger")
          "formula" computed as `text` says, from fast:: functions
          "same"    as the precise:: function (the spec gives no bound)
    """

    kind: str
    ulps: float = 0.0
    absolute: float = 0.0
    lo: float = 0.0
    hi: float = 0.0
    text: str = ""


CR = Bound("cr")


def ulp(n: float) -> Bound:
    return Bound("ulp", ulps=n)


def formula(text: str) -> Bound:
    return Bound("formula", text=text)


PI = math.pi
# function: (Table 8.1 float, Table 8.2 fast float, Table 8.3 half)
TABLE: dict[str, tuple[Bound, Bound, Bound]] = {
    "acos": (ulp(4), ulp(5), ulp(1)),
    "acosh": (ulp(4), formula("log(x + sqrt(x*x - 1.0))"), ulp(1)),
    "asin": (ulp(4), ulp(5), ulp(1)),
    "asinh": (ulp(4), formula("log(x + sqrt(x*x + 1.0))"), ulp(1)),
    "atan": (ulp(5), ulp(5), ulp(1)),
    "atan2": (ulp(6), formula("atan(y/x), +/- M_PI_F when x < 0 (undefined for x = 0 or y = 0: "
                              "there, the precise value)"), ulp(1)),
    "atanh": (ulp(5), formula("0.5*log((1.0 + x)/(1.0 - x)) (the specification prints "
                              "0.5*(log(1.0 + x)/(1.0 - x)), read as a misplaced parenthesis)"), ulp(1)),
    "ceil": (CR, CR, CR),
    "copysign": (CR, CR, CR),
    "cos": (ulp(4), Bound("abs", absolute=2 ** -13, lo=-PI, hi=PI), ulp(1)),
    "cosh": (ulp(4), formula("0.5*(exp(x) + exp(-x))"), ulp(1)),
    "cospi": (ulp(4), Bound("abs", absolute=2 ** -13, lo=-1, hi=1), ulp(1)),
    "divide": (CR, ulp(2.5), CR),
    "exp": (ulp(4), Bound("exp"), ulp(1)),
    "exp2": (ulp(4), Bound("exp"), ulp(1)),
    "exp10": (ulp(4), formula("exp2(x*log2(10))"), ulp(1)),
    "fabs": (CR, CR, CR),
    "fdim": (CR, CR, CR),
    "floor": (CR, CR, CR),
    "fma": (CR, CR, CR),
    "fmax": (CR, CR, CR),
    "fmin": (CR, CR, CR),
    "fmod": (CR, Bound("same", text="undefined in fast math: the precise value"), CR),
    "fract": (CR, CR, CR),
    "frexp": (CR, CR, CR),
    "ilogb": (CR, CR, CR),
    "ldexp": (CR, CR, CR),
    "log": (ulp(4), Bound("abs", absolute=2 ** -21, lo=0.5, hi=2.0, ulps=3), ulp(1)),
    "log2": (ulp(4), Bound("abs", absolute=2 ** -22, lo=0.5, hi=2.0, ulps=2), ulp(1)),
    "log10": (ulp(4), formula("log2(x)*log10(2)"), ulp(1)),
    "modf": (CR, CR, CR),
    "nextafter": (CR, CR, CR),
    "pow": (ulp(16), formula("exp2(y*log2(x))"), ulp(1)),
    "powr": (ulp(16), formula("exp2(y*log2(x))"), ulp(1)),
    "rint": (CR, CR, CR),
    "round": (CR, CR, CR),
    "rsqrt": (CR, ulp(2), CR),
    "sin": (ulp(4), Bound("abs", absolute=2 ** -13, lo=-PI, hi=PI), ulp(1)),
    "sincos": (ulp(4), Bound("abs", absolute=2 ** -13, lo=-PI, hi=PI), ulp(1)),
    "sinh": (ulp(4), formula("0.5*(exp(x) - exp(-x))"), ulp(1)),
    "sinpi": (ulp(4), Bound("abs", absolute=2 ** -13, lo=-1, hi=1), ulp(1)),
    "sqrt": (CR, formula("x*rsqrt(x), with 0, inf and NaN exact"), CR),
    "tan": (ulp(6), formula("sin(x)*(1.0/cos(x))"), ulp(1)),
    "tanh": (ulp(5), formula("(t - 1.0)/(t + 1.0), t = exp(2.0*x)"), ulp(1)),
    "tanpi": (ulp(6), formula("tan(x*pi)"), ulp(1)),
    "trunc": (CR, CR, CR),
}
# bfloat arithmetic (Tables 8.4, 8.5; section 8.2 allows round-to-nearest-even
# or round-toward-zero): in bounds mode each bfloat +, -, *, / rounds one way
# or the other, by the seeded hash.
BFLOAT_ARITHMETIC = "correctly rounded, to nearest even or toward zero (section 8.2)"

_KINDS = {"cr": 0, "ulp": 1, "exp": 2, "abs": 3, "formula": 4, "same": 0}


def _cell(b: Bound) -> str:
    return f"MK_CELL({_KINDS[b.kind]}, {b.ulps!r}, {b.absolute!r}, {b.lo!r}, {b.hi!r})"


def header() -> str:
    lines = ["// GENERATED by `python -m metal_kernel.runtime.math_bounds` from the table in",
             "// runtime/math_bounds.py (MSL specification 3.2, section 8.4): do not edit.",
             "// MK_BOUND(function, precise float, fast float, half); each MK_CELL(kind, ulps, abs, lo, hi)",
             "// with kind 0 = not perturbed, 1 = ulps, 2 = 3 + floor(|2x|) ulps, 3 = absolute",
             "// error on [lo, hi] (else ulps, or the same absolute error when ulps is 0),",
             "// 4 = computed from fast:: functions (mk/bounds.h)."]
    for name, (p, f, h) in TABLE.items():
        lines.append(f"MK_BOUND({name}, {_cell(p)}, {_cell(f)}, {_cell(h)})")
    return "\n".join(lines) + "\n"


def _describe(b: Bound) -> str:
    if b.kind == "cr":
        return "correctly rounded / exact"
    if b.kind == "ulp":
        return f"<= {b.ulps:g} ulp"
    if b.kind == "exp":
        return "<= 3 + floor(abs(2x)) ulp"
    if b.kind == "abs":
        dom = f"[{'-pi' if b.lo == -PI else f'{b.lo:g}'}, {'pi' if b.hi == PI else f'{b.hi:g}'}]"
        outside = f"{b.ulps:g} ulp" if b.ulps else "the same absolute error (spec: larger)"
        return f"absolute error <= 2^{int(math.log2(b.absolute))} on {dom}; elsewhere {outside}"
    return b.text


def markdown() -> str:
    out = ["# Math bounds (`METAL_KERNEL_MATH=bounds`)", "",
           "Generated by `python -m metal_kernel.runtime.math_bounds` from the table in",
           "`metal_kernel/runtime/math_bounds.py`; do not edit by hand.", "",
           "Source: *Metal Shading Language Specification*, version 3.2, section 8.4",
           "(Tables 8.1 single precision, 8.2 single precision with fast math, 8.3 half",
           "precision, 8.4/8.5 bfloat), "
           "<https://developer.apple.com/metal/Metal-Shading-Language-Specification.pdf>.", "",
           "Default (`exact`): every function is computed in float (or better) and rounded once,",
           "so results are more accurate than a GPU's and hide precision bugs. With",
           "`METAL_KERNEL_MATH=bounds` (or `compile_shader(..., math=\"bounds\")`; a seed:",
           "`bounds:<n>`), each function below returns a value drawn from the set its bound",
           "allows around the exact result, chosen by a hash of the seed, the function and",
           "its arguments (reproducible; equal inputs give equal outputs):", "",
           "- plain `metal::` and `precise::` functions: Table 8.1 for float (a library",
           "  compiled with fast math off, as PyTorch compiles its shaders); plain functions",
           "  of half: Table 8.3 (`precise::` and `fast::` hold float functions only, as in",
           "  Apple's library: a half argument converts to float);",
           "- `fast::` functions: Table 8.2 (the entries the specification gives as a formula",
           "  are computed from that formula with perturbed `fast::` parts);",
           "- bfloat `+ - * /`: " + BFLOAT_ARITHMETIC + ". Metal has no bfloat math",
           "  functions: a bfloat argument takes the float function.", "",
           "Not perturbed: functions the tables mark correctly rounded or exact; half and",
           "float arithmetic (correctly rounded in Tables 8.1 and 8.3: the only latitude is",
           "the rounding mode, not modelled for the built-in `half` and `float` operators);",
           "common and geometric functions the tables do not list (`mix`, `smoothstep`,",
           "`dot`, `length`, ...); double-precision reference values are computed with the",
           "C library, itself within a fraction of a double ulp.", "",
           "| function | float (Table 8.1) | fast float (Table 8.2) | half (Table 8.3) |",
           "|---|---|---|---|"]
    for name, (p, f, h) in TABLE.items():
        out.append(f"| `{name}` | {_describe(p)} | {_describe(f)} | {_describe(h)} |")
    return "\n".join(out) + "\n"


def main() -> None:
    INCLUDE.write_text(header())
    DOC.write_text(markdown())
    print(f"wrote {INCLUDE} and {DOC}")


if __name__ == "__main__":
    main()
