"""Address spaces and element types of a function's variables, as Metal
needs them spelled.

Every Metal pointer and reference carries an address space: `device`
(buffers), `threadgroup` (CUDA's shared memory), `constant`, `thread`
(locals). CUDA pointers have none, so the port infers each from where the
pointer comes from: kernel parameters are device buffers, __shared__ arrays
are threadgroup, a local pointer takes the space of its initializer or of
what is assigned to it, a helper's pointer parameter the space of the
argument at each call site. Also: which buffers a kernel reads and writes
(through every pointer derived from them), for verify_all's inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..parse import declarator_name, walk
from .source import CudaSource

MEMORY_SPACES = ("device", "threadgroup", "constant")
CASTS = ("reinterpret_cast", "static_cast", "const_cast")


@dataclass
class Var:
    space: str | None  # None: not known yet
    kind: str  # "pointer", "array", "value", "reference"
    elem: str  # element type (pointers, arrays), referenced / value type
    roots: frozenset = frozenset()  # kernel buffer parameters it may point into


@dataclass
class Env:
    vars: dict[str, Var] = field(default_factory=dict)
    conflicts: list[tuple[object, str, str, str]] = field(default_factory=list)  # (node, name, a, b)

    def get(self, name: str) -> Var | None:
        return self.vars.get(name)


def declarator_kind(d) -> tuple[str, int]:
    """('pointer' | 'reference' | 'array' | 'value', pointer depth) of a declarator."""
    kind, depth = "value", 0
    node = d
    while node is not None:
        t = node.type
        if t == "init_declarator":
            node = node.child_by_field_name("declarator")
            continue
        if t == "pointer_declarator":
            depth += 1
            kind = "pointer" if kind == "value" else kind
        elif t == "reference_declarator":
            kind = "reference"
            node = next((c for c in node.named_children), None)
            continue
        elif t == "array_declarator":
            kind = "array" if kind == "value" else kind
        node = node.child_by_field_name("declarator")
    return kind, depth


class Spaces:
    """Expression queries against an environment."""

    def __init__(self, src: CudaSource, env: Env):
        self.src = src
        self.env = env

    def text(self, n) -> str:
        return self.src.node_text(n)

    def space_of(self, n) -> str | None:
        """The address space a pointer-valued expression points into."""
        if n is None:
            return None
        t = n.type
        if t == "identifier":
            v = self.env.get(self.text(n))
            if v is None:
                return None
            return v.space if v.kind in ("pointer", "array") else None
        if t in ("parenthesized_expression",):
            inner = n.named_children
            return self.space_of(inner[0]) if inner else None
        if t == "binary_expression":
            return self.space_of(n.child_by_field_name("left")) or self.space_of(n.child_by_field_name("right"))
        if t == "pointer_expression":
            op = n.child_by_field_name("operator")
            arg = n.child_by_field_name("argument")
            if op is not None and self.text(op) == "&":
                return self.lvalue_space(arg)
            return None  # *pp: a pointer stored in memory
        if t in ("subscript_expression",):  # a row of a 2-D array
            return self.space_of(n.child_by_field_name("argument"))
        if t == "cast_expression":
            return self.space_of(n.child_by_field_name("value"))
        if t == "conditional_expression":
            return self.space_of(n.child_by_field_name("consequence")) or \
                self.space_of(n.child_by_field_name("alternative"))
        if t == "assignment_expression":
            return self.space_of(n.child_by_field_name("right"))
        if t == "call_expression":
            fn = n.child_by_field_name("function")
            if fn is not None and fn.type == "template_function":
                name = fn.child_by_field_name("name")
                if name is not None and self.text(name) in CASTS:
                    args = n.child_by_field_name("arguments")
                    return self.space_of(args.named_children[0]) if args and args.named_children else None
            return None
        if t == "field_expression":
            arg = n.child_by_field_name("argument")
            op = next((c for c in n.children if c.type in (".", "->")), None)
            if op is not None and op.type == "->":
                return self.space_of(arg)
            return self.lvalue_space(arg)
        if t == "string_literal":
            return "constant"
        if t == "this":
            return "thread"
        return None

    def lvalue_space(self, n) -> str | None:
        """Where an lvalue lives (for &x and references)."""
        if n is None:
            return None
        t = n.type
        if t == "identifier":
            v = self.env.get(self.text(n))
            if v is None:
                return None
            if v.kind in ("array", "reference"):
                return v.space
            return v.space if v.space in ("threadgroup", "device", "constant") else "thread"
        if t == "subscript_expression":
            return self.space_of(n.child_by_field_name("argument"))
        if t == "pointer_expression":
            return self.space_of(n.child_by_field_name("argument"))
        if t == "field_expression":
            return self.space_of(n)
        if t == "parenthesized_expression":
            inner = n.named_children
            return self.lvalue_space(inner[0]) if inner else None
        return None

    def elem_of(self, n) -> str | None:
        """The element type a pointer-valued expression points to (text)."""
        if n is None:
            return None
        t = n.type
        if t == "identifier":
            v = self.env.get(self.text(n))
            return v.elem if v is not None and v.kind in ("pointer", "array") else None
        if t == "parenthesized_expression":
            inner = n.named_children
            return self.elem_of(inner[0]) if inner else None
        if t == "binary_expression":
            return self.elem_of(n.child_by_field_name("left")) or self.elem_of(n.child_by_field_name("right"))
        if t == "pointer_expression":
            op = n.child_by_field_name("operator")
            if op is not None and self.text(op) == "&":
                return self.value_type(n.child_by_field_name("argument"))
            return None
        if t == "cast_expression":
            td = n.child_by_field_name("type")
            return pointee_text(self.src, td)
        if t == "call_expression":
            fn = n.child_by_field_name("function")
            if fn is not None and fn.type == "template_function":
                name = fn.child_by_field_name("name")
                if name is not None and self.text(name) in CASTS:
                    targs = fn.child_by_field_name("arguments")
                    td = targs.named_children[0] if targs is not None and targs.named_children else None
                    return pointee_text(self.src, td)
        return None

    def value_type(self, n) -> str | None:
        """The type of an lvalue (for &x)."""
        if n is None:
            return None
        t = n.type
        if t == "identifier":
            v = self.env.get(self.text(n))
            if v is None:
                return None
            return v.elem
        if t == "subscript_expression":
            return self.elem_of(n.child_by_field_name("argument"))
        if t == "pointer_expression":
            return self.elem_of(n.child_by_field_name("argument"))
        if t == "parenthesized_expression":
            inner = n.named_children
            return self.value_type(inner[0]) if inner else None
        return None

    def roots_of(self, n) -> frozenset:
        """The kernel buffers a pointer expression may point into."""
        out = set()
        for x in walk(n) if n is not None else []:
            if x.type == "identifier":
                v = self.env.get(self.text(x))
                if v is not None and v.kind in ("pointer", "array"):
                    out |= v.roots
        return frozenset(out)


def pointee_text(src: CudaSource, type_descriptor) -> str | None:
    """`const int4*` -> `int4` (the type without its last pointer level)."""
    if type_descriptor is None:
        return None
    t = type_descriptor.child_by_field_name("type")
    return src.node_text(t) if t is not None else None


def infer(src: CudaSource, body, env: Env) -> None:
    """Fills `env` with the function's local variables: their kind, element
    type and address space, from declarations and assignments (twice, so a
    pointer assigned from one declared later in the text still resolves)."""
    sp = Spaces(src, env)
    decls, assigns = [], []
    for n in walk(body) if body is not None else []:
        if n.type in ("declaration", "condition_clause", "for_range_loop"):
            if n.type == "declaration":
                decls.append(n)
        elif n.type == "assignment_expression":
            assigns.append(n)
    for _ in range(2):
        for d in decls:
            type_node = d.child_by_field_name("type")
            elem = src.node_text(type_node) if type_node is not None else ""
            shared = any(c.type == "type_qualifier" and src.node_text(c) == "__shared__" for c in d.children)
            for decl in d.children_by_field_name("declarator"):
                name_node = declarator_name(decl)
                if name_node is None:
                    continue
                name = src.node_text(name_node)
                kind, depth = declarator_kind(decl)
                init = decl.child_by_field_name("value") if decl.type == "init_declarator" else None
                old = env.vars.get(name)
                if shared:
                    env.vars[name] = Var("threadgroup", kind if kind != "value" else "array", elem)
                    continue
                if kind == "pointer":
                    space = sp.space_of(init) if init is not None else None
                    roots = sp.roots_of(init) if init is not None else frozenset()
                    if old is not None and old.kind == "pointer":
                        space = space or old.space
                        roots = roots | old.roots
                    env.vars[name] = Var(space, "pointer" if depth == 1 else "pointer2", elem, roots)
                elif kind == "reference":
                    env.vars[name] = Var(sp.lvalue_space(init) if init is not None else None, "reference", elem,
                                         sp.roots_of(init) if init is not None else frozenset())
                elif kind == "array":
                    env.vars[name] = Var("thread", "array", elem)
                else:
                    env.vars[name] = Var("thread", "value", elem)
        for a in assigns:
            left = a.child_by_field_name("left")
            if left is None or left.type != "identifier":
                continue
            v = env.get(src.node_text(left))
            if v is None or v.kind != "pointer":
                continue
            right = a.child_by_field_name("right")
            s = sp.space_of(right)
            if s is not None and v.space is not None and s != v.space and \
                    (a, src.node_text(left), v.space, s) not in env.conflicts:
                env.conflicts.append((a, src.node_text(left), v.space, s))
            v.space = v.space or s
            v.roots = v.roots | sp.roots_of(right)


def buffer_use(src: CudaSource, body, env: Env, since: int = -1) -> tuple[set[str], set[str]]:
    """(read, written): the kernel buffers read and written through any
    pointer derived from them, as far as the syntax shows (a pointer passed
    to a helper or an atomic counts as both); with `since`, only by code
    from that byte of the source on."""
    sp = Spaces(src, env)
    read, written = set(), set()
    for n in walk(body) if body is not None else []:
        if n.start_byte < since:
            continue
        t = n.type
        if t in ("assignment_expression", "update_expression"):
            target = n.child_by_field_name("left") if t == "assignment_expression" else \
                n.child_by_field_name("argument")
            base = _access_base(target)
            if base is None:
                continue
            roots = sp.roots_of(base)
            written |= roots
            op = n.child_by_field_name("operator")
            if t == "update_expression" or (op is not None and src.node_text(op) != "="):
                read |= roots
        elif t == "call_expression":
            args = n.child_by_field_name("arguments")
            for a in args.named_children if args is not None else []:
                roots = sp.roots_of(a) if _is_pointer_arg(sp, a) else frozenset()
                fn = src.node_text(n.child_by_field_name("function"))
                if fn.startswith(("__ldg", "__ldc", "__ldlu")):
                    read |= roots
                elif fn.startswith(("__stcs", "__stcg", "__stwb", "__stwt")):
                    written |= roots if a is args.named_children[0] else frozenset()
                    read |= roots if a is not args.named_children[0] else frozenset()
                else:
                    read |= roots
                    written |= roots
        elif t in ("subscript_expression", "pointer_expression", "field_expression"):
            if _is_store_target(n):
                continue
            base = _access_base(n)
            if base is not None:
                read |= sp.roots_of(base)
    return read, written


def _is_pointer_arg(sp: Spaces, a) -> bool:
    return sp.space_of(a) in MEMORY_SPACES or sp.roots_of(a) != frozenset() and a.type != "subscript_expression"


def _access_base(n):
    """The pointer expression an lvalue accesses through (p in p[i], *p, p->f)."""
    while n is not None:
        t = n.type
        if t == "subscript_expression":
            return n.child_by_field_name("argument")
        if t == "pointer_expression":
            return n.child_by_field_name("argument")
        if t == "field_expression":
            op = next((c for c in n.children if c.type in (".", "->")), None)
            if op is not None and op.type == "->":
                return n.child_by_field_name("argument")
            n = n.child_by_field_name("argument")
            continue
        if t == "parenthesized_expression":
            n = n.named_children[0] if n.named_children else None
            continue
        return None
    return None


def _is_store_target(n) -> bool:
    """Whether `n` is the left side of a plain `=` (a write, not a read)."""
    p = n.parent
    while p is not None and p.type == "parenthesized_expression":
        n, p = p, p.parent
    if p is None or p.type != "assignment_expression" or p.child_by_field_name("left") != n:
        return False
    op = p.child_by_field_name("operator")
    return op is not None and op.type == "="
