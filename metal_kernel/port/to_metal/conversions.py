"""Implicit conversions to bfloat that CUDA makes and Metal does not.

CUDA's __nv_bfloat16 has an implicit constructor from float (and double),
so `out[i] = x * 0.5f` with `floatX* out` and `typedef __nv_bfloat16 floatX`
compiles; Metal's bfloat converts from float only explicitly (MSL 3.1:
"bfloat ... only allows implicit conversion to a type of greater floating
point rank"). Where the translator can tell from the declarations that the
target of an assignment, an initialisation or a return is a bfloat scalar,
it writes the conversion CUDA makes implicitly: `out[i] = bfloat(x * 0.5f)`.
A compound assignment converts its right-hand side (`b += f` is CUDA's
`operator+=(bfloat16&, bfloat16(f))`).

Types come from the declarations in scope (parameters, locals, the nearest
enclosing declaration of a name), typedef / using aliases, pointer and array
element types, and a class template's `T& operator[]` returning its template
parameter (llm.c's Packed128<floatX>). Where the type of the target is not
known (template parameters, members, calls) nothing is inserted, and a
wrong-typed assignment stays a compile error (MK1021).
"""

from __future__ import annotations

import re

from ..parse import declarator_name, walk
from .spaces import declarator_kind

BFLOAT_NAMES = ("__nv_bfloat16", "nv_bfloat16")
_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict|struct|static|constexpr|__device__|"
                         r"__shared__|__constant__|inline|__forceinline__|register)\b")
_SCOPES = ("compound_statement", "for_statement", "for_range_loop", "function_definition", "lambda_expression",
           "translation_unit", "if_statement", "while_statement", "declaration_list")


class _Types:
    """The translation unit's type aliases and subscriptable class templates."""

    def __init__(self, src):
        self.src = src
        self.aliases: dict[str, str] = {}
        self.subscripts: dict[str, int] = {}  # class template -> index of the parameter its operator[] returns
        root = src.pp.root
        for n in walk(root):
            if n.type == "type_definition":
                t = n.child_by_field_name("type")
                for d in n.children_by_field_name("declarator"):
                    if d.type == "type_identifier" and t is not None:
                        self.aliases.setdefault(src.node_text(d), src.node_text(t))
            elif n.type == "alias_declaration":
                name, t = n.child_by_field_name("name"), n.child_by_field_name("type")
                if name is not None and t is not None and not any(c.type == "abstract_function_declarator"
                                                                  for c in walk(t)):
                    self.aliases.setdefault(src.node_text(name), src.node_text(t))
            elif n.type == "template_declaration":
                self._class_template(n)

    def _class_template(self, n):
        plist = n.child_by_field_name("parameters")
        cls = next((c for c in n.named_children if c.type in ("struct_specifier", "class_specifier")), None)
        if plist is None or cls is None or cls.child_by_field_name("name") is None:
            return
        params = [self.src.node_text(p.named_children[-1]) for p in plist.named_children
                  if p.type == "type_parameter_declaration" and p.named_children]
        text = self.src.node_text(cls)
        m = re.search(r"\b(\w+)\s*&\s*operator\s*\[\s*\]", text)
        if m and m.group(1) in params:
            self.subscripts[self.src.node_text(cls.child_by_field_name("name"))] = params.index(m.group(1))

    def canonical(self, text: str, depth: int = 0) -> str:
        t = " ".join(_QUALIFIERS.sub(" ", text).split())
        if depth < 8 and t in self.aliases:
            return self.canonical(self.aliases[t], depth + 1)
        return t

    def subscript_of(self, type_text: str) -> str | None:
        """Element type of `x[i]` for a value of class type `C<A, ...>` whose operator[] returns a parameter."""
        m = re.fullmatch(r"(\w+)\s*<(.*)>", self.canonical(type_text))
        if not m or m.group(1) not in self.subscripts:
            return None
        args = [a.strip() for a in m.group(2).split(",")]
        i = self.subscripts[m.group(1)]
        return args[i] if i < len(args) else None


def _types(src) -> _Types:
    t = getattr(src, "_mk_types", None)
    if t is None:
        t = _Types(src)
        try:
            src._mk_types = t
        except AttributeError:  # pragma: no cover - frozen dataclass
            pass
    return t


class BfloatConversions:
    """Renderer mixin: explicit bfloat(...) where CUDA converts implicitly."""

    # ---------------------------------------------------------- types --
    def _decl_of(self, name: str, at):
        """(type text, declarator) of the nearest declaration of `name` visible at node `at`."""
        node, child = at.parent, at
        while node is not None:
            if node.type in _SCOPES:
                cands = []
                if node.type == "function_definition":
                    d = node.child_by_field_name("declarator")
                    while d is not None and d.type != "function_declarator":
                        d = d.child_by_field_name("declarator")
                    plist = d.child_by_field_name("parameters") if d is not None else None
                    cands = list(plist.named_children) if plist is not None else []
                else:
                    cands = [c for c in node.named_children if c.start_byte < child.start_byte or
                             (node.type != "compound_statement" and c is not child)]
                    if node.type == "for_statement":
                        init = node.child_by_field_name("initializer")
                        cands = [init] if init is not None else []
                    elif node.type == "compound_statement":
                        cands = [c for c in node.named_children if c.end_byte <= child.start_byte]
                found = None
                for c in cands:
                    if c.type not in ("declaration", "parameter_declaration", "optional_parameter_declaration"):
                        continue
                    t = c.child_by_field_name("type")
                    for d in c.children_by_field_name("declarator"):
                        n = declarator_name(d)
                        if n is not None and self.text(n) == name and t is not None:
                            found = (self.text(t), d)
                if found is not None:
                    return found
                if node.type == "function_definition":
                    return None  # globals: not looked up (their space is handled elsewhere)
            child, node = node, node.parent
        return None

    def _type_of(self, e) -> tuple[str, str] | None:
        """(kind, type): kind 'value' (type is the value's) or 'pointer' (type is the element's)."""
        t = e.type
        if t == "parenthesized_expression":
            return self._type_of(e.named_children[0]) if e.named_children else None
        if t == "identifier":
            found = self._decl_of(self.text(e), e)
            if found is None:
                return None
            type_text, d = found
            kind, depth = declarator_kind(d)
            if kind in ("pointer", "array"):
                if kind == "pointer" and depth != 1:
                    return None
                arrays = sum(1 for x in walk(d) if x.type == "array_declarator")
                if kind == "array" and arrays != 1:
                    return None
                return ("pointer", type_text)
            return ("value", type_text)
        if t == "subscript_expression":
            base = self._type_of(e.child_by_field_name("argument"))
            if base is None:
                return None
            if base[0] == "pointer":
                return ("value", base[1])
            elem = _types(self.src).subscript_of(base[1])
            return ("value", elem) if elem is not None else None
        if t == "pointer_expression":
            op = e.child_by_field_name("operator")
            if op is not None and self.text(op) == "*":
                base = self._type_of(e.child_by_field_name("argument"))
                return ("value", base[1]) if base is not None and base[0] == "pointer" else None
            return None
        if t == "cast_expression":
            td = e.child_by_field_name("type")
            if td is not None and not any(c.type == "abstract_pointer_declarator" for c in walk(td)):
                return ("value", self.text(td))
            return None
        if t == "call_expression":  # `(floatX)(x)` parses as a call of a parenthesized name
            fn = e.child_by_field_name("function")
            if fn is not None and fn.type == "parenthesized_expression" and len(fn.named_children) == 1 and \
                    fn.named_children[0].type == "identifier" and \
                    self.text(fn.named_children[0]) in _types(self.src).aliases:
                return ("value", self.text(fn.named_children[0]))
        return None

    def _is_bfloat(self, e) -> bool:
        ty = self._type_of(e) if e is not None else None
        return ty is not None and ty[0] == "value" and _types(self.src).canonical(ty[1]) in BFLOAT_NAMES

    def _needs_bfloat(self, value) -> bool:
        """Whether a value assigned to a bfloat needs the explicit conversion."""
        if value is None or value.type in ("initializer_list", "number_literal", "char_literal", "true", "false"):
            return value is not None and value.type == "number_literal" and \
                bool(re.search(r"[.eEpP]|[fF]$", self.text(value))) and not self.text(value).lower().startswith("0x")
        return not self._is_bfloat(value)

    def _convert(self, value) -> str:
        self.changed(value)
        return f"bfloat({self.rw(value)})"

    # ------------------------------------------------------- handlers --
    def h_assignment_expression(self, node):
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if left is None or right is None or not self._is_bfloat(left) or not self._needs_bfloat(right):
            return None
        op = node.child_by_field_name("operator")
        if op is None or self.text(op) not in ("=", "+=", "-=", "*=", "/="):
            return None
        data = self.src.text
        mid = data[left.end_byte:right.start_byte].decode("utf-8", errors="replace")
        return self.rw(left) + mid + self._convert(right)

    def h_init_declarator(self, node):
        value = node.child_by_field_name("value")
        decl = node.parent
        if value is None or decl is None or decl.type != "declaration" or value.type in ("argument_list",
                                                                                       "initializer_list"):
            return None
        t = decl.child_by_field_name("type")
        kind, _ = declarator_kind(node)
        if t is None or kind != "value" or _types(self.src).canonical(self.text(t)) not in BFLOAT_NAMES or \
                not self._needs_bfloat(value):
            return None
        data = self.src.text
        d = node.child_by_field_name("declarator")
        mid = data[d.end_byte:value.start_byte].decode("utf-8", errors="replace")
        return self.rw(d) + mid + self._convert(value)

    def h_return_statement(self, node):
        value = next((c for c in node.named_children if c.type != "comment"), None)
        fn = node.parent
        while fn is not None and fn.type not in ("function_definition", "lambda_expression"):
            fn = fn.parent
        if value is None or fn is None or fn.type != "function_definition":
            return None
        t = fn.child_by_field_name("type")
        d = fn.child_by_field_name("declarator")
        if t is None or d is None or d.type != "function_declarator" or \
                _types(self.src).canonical(self.text(t)) not in BFLOAT_NAMES or not self._needs_bfloat(value):
            return None
        data = self.src.text
        return data[node.start_byte:value.start_byte].decode("utf-8", errors="replace") + self._convert(value) + \
            data[value.end_byte:node.end_byte].decode("utf-8", errors="replace")
