"""`double` in the port: port_cuda's `double=` option.

Apple GPUs have no 64-bit floating point. By default (double="reject")
every use of `double` is MK1001 and keeps its kernel out of the port. With
double="float" what a kernel computes in double inside itself — local
variables, casts, `double2`..`double4`, `make_double*`, math on them,
template arguments of such locals, `__shared__` arrays, helpers — is
computed in float, each site a MK1038 warning; verify then compares the
port with the original, which still computes in double.

What the host lays out stays MK1001 in both modes: a kernel parameter of a
type that holds a double (a pointer to double, a double by value, a struct
with a double field, through typedefs and template arguments) and a
`__constant__` / `__device__` double the host writes or reads. Demoting it
would change the bytes of the buffer the host fills.
"""

from __future__ import annotations

import ast
import re

from ..parse import declarator_name, walk
from . import table as T

MODES = ("reject", "float")
# The CUDA double types -> the float type the port computes them in: the
# table's MK1001 rules, whose Metal is the float spelling (double1 has none:
# Metal has no 1-component vector); calls (make_double2, __dadd_rn ...) too.
DEMOTED = {"long double": "float", **{t: T.BY_NAME[t].metal for t in ("double", "double2", "double3", "double4")}}
_WORD = re.compile(r"\b(?:long\s+)?double[1-4]?\b")


def float_spelling(spelling: str) -> str | None:
    """What the port writes for this double type or call with double="float";
    None when it has no float counterpart."""
    rule = T.BY_NAME.get("double" if spelling == "long double" else spelling)
    return rule.metal or None if rule is not None and rule.code == "MK1001" else None


def check_mode(double) -> str:
    if double not in MODES:
        raise ValueError(f"double={double!r}: expected one of {', '.join(repr(m) for m in MODES)} ('reject': a "
                         "kernel using double is not translated, MK1001; 'float': double computed in float, "
                         "MK1038)")
    return double


def mentions_double(text: str) -> bool:
    return _WORD.search(text) is not None


def demote(text: str) -> str:
    """A type spelled in the CUDA with each double type as the float type the
    port computes it in."""
    return _WORD.sub(lambda m: DEMOTED.get(" ".join(m.group(0).split()), m.group(0)), text)


class Layouts:
    """Which types hold a double in their bytes: their own words, through the
    file's typedefs and the fields of its structs, classes and unions."""

    def __init__(self, src, typedefs: dict[str, str]):
        self.typedefs = typedefs
        self.fields: dict[str, list[str]] = {}
        for n in walk(src.pp.root):
            if n.type not in ("struct_specifier", "class_specifier", "union_specifier"):
                continue
            name, body = n.child_by_field_name("name"), n.child_by_field_name("body")
            if name is None or body is None:
                continue
            types = [c.child_by_field_name("type") for c in body.named_children if c.type == "field_declaration"]
            self.fields.setdefault(src.node_text(name), []).extend(src.node_text(t) for t in types if t is not None)

    def holds_double(self, text: str, seen: frozenset = frozenset()) -> bool:
        if mentions_double(text):
            return True
        for w in set(re.findall(r"[A-Za-z_]\w*", text)) - seen:
            inner = [self.typedefs[w]] if w in self.typedefs else self.fields.get(w, [])
            if any(self.holds_double(t, seen | {w}) for t in inner):
                return True
        return False


def interface_message(param: str, declaration: str, where: str = "") -> str:
    return (f"parameter '{param}'{where} ('{' '.join(declaration.split())}') holds a double: the host lays this "
            "argument out as 8-byte doubles, so the port cannot compute it in float, not even with "
            "double=\"float\"")


class DoubleSites:
    """Each spelling of a double type in a function the renderer rewrites
    (a mixin of mapper.Renderer)."""

    interface: tuple | None = None  # (name, declared type) of the kernel parameter being rendered
    demotions = 0  # MK1038 sites in this rendering

    def double_site(self, node, spelling: str) -> str | None:
        """`spelling` (double, long double, double2, make_double2 ...) at `node`:
        its float spelling (float_spelling) with a MK1038 warning when the port
        computes double in float, else a MK1001 error and None (the text stays
        as it is)."""
        rule = T.BY_NAME.get(spelling) or T.BY_NAME["double"]
        metal = float_spelling(spelling)
        if self.interface:
            self.diag("MK1001", node, interface_message(*self.interface))
        elif not self.tr.demote or metal is None:
            why = rule.note if self.tr.demote else "Apple GPUs have no 64-bit floating point"
            self.diag("MK1001", node, f"'{spelling}': {why}")
        else:
            self.diag("MK1038", node, f"'{spelling}' computed in float (double=\"float\")")
            self.count_ref(rule, spelling)
            self.changed(node)
            self.demotions += 1
            return metal
        self.count_ref(rule, spelling, converted=False)
        return None

    def scan_doubles(self, node):
        """Diagnoses the double types in a type the port writes from its text
        (render_type_text: `__shared__` declarations)."""
        for n in walk(node) if node is not None else []:
            text = " ".join(self.text(n).split())
            if n.type in ("primitive_type", "sized_type_specifier", "type_identifier") and \
                    n.parent.type != "sized_type_specifier" and (text in DEMOTED or text == "double1"):
                self.double_site(n, text)


# ------------------------------------------------------------------ verify --
def accumulations(src, fn, holds_double) -> list[list[str]]:
    """Where a kernel updates a local variable of a double type (`sum += x`,
    `s = s * a + b`): per update, the bounds of the loops around it as the
    CUDA writes them (`C`, `B * T`; None for a loop whose trip count is not
    `i < BOUND`). verify evaluates them at the launch's scalars: the length
    of the port's float accumulation."""
    names = set()
    for n in walk(fn.body) if fn.body is not None else []:
        t = n.child_by_field_name("type") if n.type == "declaration" else None
        if t is not None and holds_double(src.node_text(t)):
            names |= {src.node_text(d) for d in map(declarator_name, n.children_by_field_name("declarator")) if d}
    out = []
    for n in walk(fn.body) if names else []:
        left = n.child_by_field_name("left" if n.type == "assignment_expression" else "argument") \
            if n.type in ("assignment_expression", "update_expression") else None
        if left is None or left.type != "identifier" or src.node_text(left) not in names:
            continue
        bounds, p = [], n.parent
        while p is not None and p != fn.body:
            if p.type in ("for_statement", "while_statement", "do_statement"):
                bounds.append(_trip_bound(src, p))
            p = p.parent
        out.append(bounds)
    return out


def _trip_bound(src, loop) -> str | None:
    cond = loop.child_by_field_name("condition") if loop.type == "for_statement" else None
    op = cond.child_by_field_name("operator") if cond is not None and cond.type == "binary_expression" else None
    if op is None or src.node_text(op) not in ("<", "<=", "!="):
        return None
    bound = src.node_text(cond.child_by_field_name("right"))
    return f"({bound}) + 1" if src.node_text(op) == "<=" else bound


def accumulated_length(sites: list[list[str]], scalars: dict) -> int | None:
    """The longest accumulation of `accumulations` at these scalar values (the
    product of its loops' bounds), or None when a bound is not an integer
    expression of the kernel's scalar parameters."""
    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name) and isinstance(scalars.get(node.id), int):
            return scalars[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
            a, b = value(node.left), value(node.right)
            ops = {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}
            return ops[type(node.op)] if type(node.op) in ops else (a // b if b else 0)
        raise ValueError(ast.dump(node))

    longest = 0
    for bounds in sites:
        n = 1
        for b in bounds:
            try:
                text = re.sub(r"\b(\d+)[uUlL]+\b", r"\1", b or "")
                n *= max(value(ast.parse(text, mode="eval").body), 1)
            except (SyntaxError, ValueError, RecursionError):
                return None
        longest = max(longest, n)
    return longest
