"""Stage 2 of the port (map), lambdas: Metal has none (MSL 3.x, §1.5.4), so a
lambda in device code becomes a local struct, declared just before the
statement holding the lambda, and the lambda expression a construction of it:

    auto step = [&](int k) { acc[k] += row[k] * scale; };
->
    struct mk_lambda_1 { thread decltype(acc)& acc; thread decltype(row)& row; decltype(scale) scale;
                         auto operator()(int k) const { acc[k] += row[k] * scale; } };
    auto step = mk_lambda_1{acc, row, scale};

Calls (`step(k)`, or `f(x)` inside a template the lambda is passed to) stay
as they are. Each capture is a member:
- by reference: `thread decltype(x)& x` (a reference to the thread's
  variable); a variable that is already a reference in Metal (a kernel's
  `constant T&` scalar, a helper's `thread T&`) keeps its own type and
  address space (`decltype(x) x`);
- by copy: `decltype(x) x` (a kernel's `device T*` stays `device T*`).
Names the port makes kernel parameters or kernel-scope variables (threadIdx
& co., __shared__ arrays, global buffers) are not captured in CUDA (they are
not automatic variables) but are in Metal: threadgroup variables by
reference, the rest (values and pointers that never change) by copy. They
are found in the body's Metal text, because calls of helpers that need them
pass them there.

What cannot be lowered keeps MK1017 with the reason: generic lambdas (a
local struct cannot have a template operator()), pointer parameters (their
address space is not known), `this` and init captures, arrays and non-constant
references captured by copy, a capture declared in the statement that holds
the lambda (the struct comes first).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..parse import declarator_name, keywords, parse, walk
from . import table as T
from .facts import SYNC_COUNTER
from .spaces import declarator_kind
from .symbols import mangle

# The nodes that open a scope for the declarations in them.
_SCOPES = ("compound_statement", "for_statement", "for_range_loop", "if_statement", "while_statement",
           "switch_statement", "lambda_expression", "function_definition", "condition_clause")
_STATEMENT_PARENTS = ("compound_statement", "case_statement")


@dataclass
class Local:
    """An automatic variable the lambda may capture, as Metal declares it."""
    start: int  # where its declaration starts
    array: bool
    reference: bool  # a reference in Metal (decltype gives `... &`)
    const_member: bool = False  # a by-copy member of an enclosing lambda (const in its operator())


@dataclass
class _Scope:
    """A lambda whose body is being rendered (lambdas inside it capture from it)."""
    node: object
    default: str | None
    explicit: dict
    params: dict
    mutable: bool


class Unlowerable(Exception):
    """Why a lambda stays MK1017."""


class LambdaLowering:
    """A mixin of mapper.Renderer: `h_lambda_expression` and the structs it
    puts before statements (`lambda_prelude`, written by `rw`)."""

    def h_lambda_expression(self, node):
        try:
            struct, ctor = self.lower_lambda(node)
        except Unlowerable as e:
            self.diag("MK1017", node, f"a lambda expression Metal cannot express ({e}): Metal has no lambdas "
                                      "(write a struct with operator())")
            return None
        stmt = self.lambda_statement(node)
        preludes = self.__dict__.setdefault("lambda_prelude", {})
        preludes.setdefault((stmt.start_byte, stmt.end_byte), {})[node.start_byte] = struct
        self.changed(node)
        self.count_ref(T.Rule("lambda", "struct", "device function"), "lambda")
        return ctor

    def with_lambda_structs(self, node, out: str) -> str:
        """`out` (the statement `node`'s text) after the structs of its lambdas."""
        structs = self.__dict__.get("lambda_prelude", {}).pop((node.start_byte, node.end_byte), None)
        if not structs:
            return out
        _, _, col = self.src.where(node.start_byte)
        indent = " " * (col - 1)
        return "".join(s + "\n" + indent for _, s in sorted(structs.items())) + out

    # ----------------------------------------------------------- lowering --
    def lambda_statement(self, node):
        """The statement of a block that holds the lambda: its struct goes before it."""
        stmt = node
        while stmt.parent is not None and stmt.parent.type not in _STATEMENT_PARENTS:
            stmt = stmt.parent
        if stmt.parent is None or stmt == self.fn.body:
            raise Unlowerable("it is not inside a statement of a block")
        return stmt

    def lower_lambda(self, node) -> tuple[str, str]:
        if self.fn is None:
            raise Unlowerable("it is outside a function")
        stmt = self.lambda_statement(node)
        default, explicit = self.lambda_captures(node)
        decl = node.child_by_field_name("declarator")
        params, param_names, ref_params = self.lambda_params(decl)
        mutable = decl is not None and any(c.type == "lambda_specifier" and "mutable" in self.text(c)
                                           for c in decl.children)
        ret = next((c for c in decl.children if c.type == "trailing_return_type"), None) if decl else None
        inner = self.declared_inside(node) | param_names
        outer = self.visible_locals(node)
        name = self.lambda_name(node)
        # What a lambda inside this one needs to know to capture from it.
        params_here = {p: Local(node.start_byte, False, p in ref_params) for p in param_names}
        self.__dict__.setdefault("lambda_scopes", []).append(_Scope(node, default, explicit, params_here, mutable))
        try:
            body = self.rw(node.child_by_field_name("body"))
        finally:
            self.lambda_scopes.pop()
        members, args = [], []
        for ident in self.metal_identifiers(body):
            if ident in inner or ident in (m for m, _ in members):
                continue
            member = self.implicit_member(ident)
            if member is None:
                local = self.enclosing_local(ident, outer)
                if local is None:
                    continue
                if local.start >= stmt.start_byte and local.start < node.start_byte:
                    raise Unlowerable(f"it captures '{ident}', declared in the statement that holds it")
                by_ref = explicit.get(ident, default == "&")
                if ident not in explicit and default is None:
                    continue  # not captured: a constant the body only reads (C++ needs no capture)
                member = self.capture_member(ident, local, by_ref)
            members.append((ident, member))
            args.append(ident)
        head = f"auto operator(){params}{'' if mutable else ' const'}"
        if ret is not None:
            head += " " + self.rw(ret)
        fields = "".join(f"{m}; " for _, m in members)
        struct = f"struct {name} {{ {fields}{head} {body} }};"
        return struct, f"{name}{{{', '.join(args)}}}"

    def lambda_name(self, node) -> str:
        starts = sorted(n.start_byte for n in walk(self.fn.node) if n.type == "lambda_expression")
        return f"mk_lambda_{starts.index(node.start_byte) + 1}"

    def lambda_captures(self, node) -> tuple[str | None, dict[str, bool]]:
        """The default capture ('&', '=' or None) and the explicit ones (name -> by reference)."""
        spec = node.child_by_field_name("captures")
        default, explicit, by_ref = None, {}, False
        for c in spec.children if spec is not None else []:
            if c.type == "lambda_default_capture":
                default = self.text(c).strip()
            elif c.type == "&":
                by_ref = True
            elif c.type == "identifier":
                explicit[self.text(c)] = by_ref
                by_ref = False
            elif c.type in ("this", "lambda_capture_initializer") or c.is_named:
                raise Unlowerable(f"the capture '{' '.join(self.text(c).split())}'")
        return default, explicit

    def lambda_params(self, decl) -> tuple[str, set[str], set[str]]:
        """The operator()'s parameter list, the names and those that are references."""
        plist = decl.child_by_field_name("parameters") if decl is not None else None
        if plist is None:
            return "()", set(), set()
        out, names, refs = [], set(), set()
        for p in plist.named_children:
            if p.type == "comment":
                continue
            if p.type not in ("parameter_declaration", "optional_parameter_declaration"):
                raise Unlowerable(f"the parameter '{self.text(p)}'")
            t = p.child_by_field_name("type")
            if t is not None and t.type == "placeholder_type_specifier":
                raise Unlowerable("a generic lambda: a local struct cannot have a template operator()")
            d = p.child_by_field_name("declarator")
            kind, _ = declarator_kind(d) if d is not None else ("value", 0)
            n = declarator_name(d) if d is not None else None
            if kind == "pointer" or kind == "array":
                raise Unlowerable(f"the pointer parameter '{self.text(p)}': its address space is not known")
            if n is not None:
                names.add(self.text(n))
            if kind == "reference":
                refs.add(self.text(n)) if n is not None else None
                out.append("thread " + self.rw(p))
            else:
                out.append(self.rw(p))
        return "(" + ", ".join(out) + ")", names, refs

    # --------------------------------------------------------------- names --
    def declared_inside(self, node) -> set[str]:
        out = set()
        body = node.child_by_field_name("body")
        for n in walk(body) if body is not None else []:
            if n.type in ("declaration", "parameter_declaration", "for_range_loop"):
                for d in n.children_by_field_name("declarator"):
                    name = declarator_name(d)
                    if name is not None:
                        out.add(self.text(name))
        return out

    def visible_locals(self, node) -> dict[str, Local]:
        """The function's automatic variables in scope at the lambda: its
        parameters, and the declarations before it whose scope holds it (the
        innermost of a name last). constexpr and __shared__ ones are not
        captured (C++ reads a constant without capturing it; shared memory
        is not automatic)."""
        out: dict[str, Local] = {}
        fn = self.fn
        for p in fn.params:
            ref = p.reference or (fn.kernel and not p.pointer and p.name not in getattr(self, "modified", ()))
            out[p.name] = Local(fn.node.start_byte, False, ref)
        for n in walk(fn.body) if fn.body is not None else []:
            if n.start_byte >= node.start_byte:
                break
            if n.type not in ("declaration", "parameter_declaration", "for_range_loop"):
                continue
            if n.type == "parameter_declaration" and (n.parent is None or n.parent.parent is None or
                                                       n.parent.parent.type != "lambda_declarator"):
                continue
            kw = keywords(n)
            if kw & {"constexpr", "__shared__", "static"}:
                continue
            scope = n.parent
            while scope is not None and scope.type not in _SCOPES:
                scope = scope.parent
            if n.type == "parameter_declaration":
                scope = n.parent.parent.parent  # the lambda
            if scope is None or not (scope.start_byte <= node.start_byte and node.end_byte <= scope.end_byte):
                continue
            for d in n.children_by_field_name("declarator"):
                name = declarator_name(d)
                if name is None:
                    continue
                kind, _ = declarator_kind(d)
                out[self.text(name)] = Local(n.start_byte, kind == "array", kind == "reference")
        return out

    def enclosing_local(self, ident: str, outer: dict[str, Local]) -> Local | None:
        """The automatic variable `ident` names, as the code around this
        lambda sees it: inside another lambda's operator(), a variable from
        outside that one is its member (a reference when it captured it by
        reference, else a value, const unless it is mutable)."""
        scopes = self.__dict__.get("lambda_scopes", [])
        local = outer.get(ident)
        if not scopes:
            return local
        e = scopes[-1]
        if ident in e.params:
            return e.params[ident]
        if local is None or local.start > e.node.start_byte:
            return local  # declared inside the enclosing lambda, or not automatic
        by_ref = e.explicit.get(ident, e.default == "&")
        return Local(e.node.start_byte, local.array, by_ref or local.reference,
                     const_member=not by_ref and not e.mutable)

    def implicit_member(self, ident: str) -> str | None:
        """The member for a name the port declares at kernel scope or as a
        helper's parameter (not an automatic variable in CUDA), or None."""
        fn = self.fn
        needs = getattr(self, "needs", None)
        shared = {v.name: v for v in fn.shared}
        for name in fn.file_shared_used:
            shared.setdefault(name, self.facts.file_shared[name])
        mangled = {mangle(k) for k in needs.shared} if needs is not None else set()
        if ident in T.BUILTIN_PARAMS or ident in ("mk_smem", "mk_present") or ident in self.facts.globals:
            return f"decltype({ident}) {ident}"  # values and pointers that never change
        if ident in shared or ident in mangled or ident == SYNC_COUNTER:
            v = shared.get(ident)
            if v is not None and v.extern:
                return f"decltype({ident}) {ident}"  # a pointer into the dynamic threadgroup memory
            if fn.kernel and not self.__dict__.get("lambda_scopes"):
                return f"threadgroup decltype({ident})& {ident}"  # declared in the kernel
            return f"decltype({ident}) {ident}"  # a helper's `threadgroup T (&x)[N]`, an enclosing lambda's member
        return None

    def capture_member(self, ident: str, local: Local, by_ref: bool) -> str:
        if by_ref:
            if local.reference:
                return f"decltype({ident}) {ident}"  # its own address space
            const = "const " if local.const_member else ""
            return f"thread {const}decltype({ident})& {ident}"
        if local.array:
            raise Unlowerable(f"it captures the array '{ident}' by copy")
        if local.reference and not self.is_constant_param(ident):
            raise Unlowerable(f"it captures the reference '{ident}' by copy")
        return f"decltype({ident}) {ident}"

    def is_constant_param(self, ident: str) -> bool:
        """A kernel's by-value scalar: `constant T&` in Metal, read-only, so a
        reference to it is as good as a copy."""
        fn = self.fn
        return fn.kernel and any(p.name == ident and not p.pointer for p in fn.params) and \
            ident not in getattr(self, "modified", ())

    def metal_identifiers(self, text: str) -> list[str]:
        """The identifiers of the body's Metal text (parsed: it holds the
        names the port added, such as a helper's builtins), in order."""
        out = []
        for n in walk(parse(text).root):
            if n.type == "identifier" and (n.parent is None or n.parent.type != "field_expression" or
                                           n.parent.child_by_field_name("field") != n):
                name = n.text.decode("utf-8", errors="replace") if n.text is not None else ""
                if name not in out:
                    out.append(name)
        return out
