"""Stage 2 of the port (map): one device function's syntax tree rewritten as
Metal, node by node, by the rules of table.py.

`Renderer.rw(node)` returns the node's Metal text: a handler for the node's
type builds it from its children's rewritten text, or the children are
spliced into the original text (so comments, spacing and anything the
table does not mention stay as written). A function is rendered once per
instance: a helper once per combination of address spaces its pointer
parameters get at the call sites (`sig`).

Every construct the table flags gets a Diagnostic, attached to the statement
it is in, which emit.py writes as a comment above that statement.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from ..parse import declarator_name, keywords, walk
from . import table as T
from .calls import CallRewriter
from .conversions import BfloatConversions
from .diagnostics import Diagnostic, make
from .divergence import WarpChecks
from .doubles import DoubleSites, demote
from .facts import Facts, Function, Param
from .lambdas import LambdaLowering
from .source import CudaSource
from .spaces import MEMORY_SPACES, Env, Spaces, Var, declarator_kind, infer

_FLOAT_LITERAL = re.compile(r"^(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$")
_STATEMENTS = ("expression_statement", "declaration", "return_statement", "if_statement", "for_statement",
               "while_statement", "do_statement", "switch_statement", "compound_statement", "break_statement",
               "continue_statement", "field_declaration", "case_statement")
_CUDA_KEYWORD_TOKENS = {"__device__", "__host__", "__forceinline__", "__noinline__", "__inline__", "__global__"}
_SHORT = {"device": "dev", "threadgroup": "tg", "constant": "const", "thread": "th"}


@dataclass
class Translation:
    """What all of a file's renderings share."""
    src: CudaSource
    facts: Facts
    fast_math: bool = False
    double: str = "reject"  # port_cuda's double=: "float" computes local doubles in float (doubles.py)
    diagnostics: dict = field(default_factory=dict)  # (code, offset, message) -> Diagnostic
    helpers: set = field(default_factory=set)
    converted: Counter = field(default_factory=Counter)  # (category, name)
    unconverted: Counter = field(default_factory=Counter)
    unknown: Counter = field(default_factory=Counter)
    changed: set = field(default_factory=set)  # (file, line) of the user's source
    requests: dict = field(default_factory=dict)  # helper node start -> {sig: None}
    counted: set = field(default_factory=set)  # function nodes whose references are counted
    literal_note: set = field(default_factory=set)  # functions with a MK1019 note

    @property
    def demote(self) -> bool:
        return self.double == "float"

    def diagnose(self, code: str, node, message: str, function: str = "") -> Diagnostic:
        d = make(code, self.src.where(node), message, function)
        key = (code, d.file, d.line, message)  # one per line: a call and its name are one construct
        return self.diagnostics.setdefault(key, d)

    def request(self, fn: Function, sig: tuple) -> str:
        """Asks for the instance of helper `fn` whose pointer parameters are
        in these address spaces; returns its name. Metal pointers carry their
        address space, so each combination is its own function: the first
        keeps the CUDA name, the others get the spaces as a suffix."""
        per = self.requests.setdefault(fn.node.start_byte, {})
        base = T.safe_name(fn.name)
        if sig not in per:
            per[sig] = base if not per else base + "_" + "_".join(_SHORT[s] for s in sig if s)
        return per[sig]


class Renderer(CallRewriter, WarpChecks, BfloatConversions, LambdaLowering, DoubleSites):
    """The Metal text of one function instance (or of a file-scope item); the
    calls are rewritten by calls.CallRewriter, warp masks and divergence
    checked by divergence.WarpChecks, double types by doubles.DoubleSites."""

    def __init__(self, tr: Translation, fn: Function | None, sig: tuple = (), kernel_spaces: dict | None = None):
        self.tr = tr
        self.src = tr.src
        self.facts = tr.facts
        self.fn = fn
        self.sig = sig
        self.count = fn is None or fn.node.start_byte not in tr.counted
        if fn is not None:
            tr.counted.add(fn.node.start_byte)
        self.pending: dict[int, list[Diagnostic]] = {}
        self.errors: list[Diagnostic] = []
        self.memory_type = 0  # > 0: rendering a type that lives in a buffer or struct (float3 -> packed)
        self.env = Env()
        self.sp = Spaces(self.src, self.env)
        self.kernel_spaces = kernel_spaces or {}
        self.fnptr_params = set()
        if fn is not None:
            self.setup_env()

    # ------------------------------------------------------------ context --
    @property
    def fname(self) -> str:
        return self.fn.name if self.fn is not None else ""

    def setup_env(self):
        fn, vars_ = self.fn, self.env.vars
        for g in self.facts.globals.values():
            space = "constant" if g.kind == "constant" else "device"
            vars_[g.name] = Var(space, "array" if g.dims else "value", g.type_text)
        for v in self.facts.file_shared.values():
            vars_[v.name] = Var("threadgroup", "array" if v.dims else "value", v.type_text)
        for i, p in enumerate(fn.params):
            if p.pointer:
                space = self.kernel_spaces.get(p.name, "device") if fn.kernel else (self.sig[i] if i < len(self.sig)
                                                                                     else "device")
                vars_[p.name] = Var(space, "pointer" if p.depth == 1 else "pointer2", p.elem,
                                    frozenset([p.name]) if fn.kernel else frozenset())
            elif p.reference:
                vars_[p.name] = Var(self.sig[i] if i < len(self.sig) and self.sig[i] else "thread", "reference",
                                    p.elem)
            else:
                vars_[p.name] = Var("thread", "value", p.elem)
        for v in fn.shared:
            vars_[v.name] = Var("threadgroup", "array" if v.dims else "value", v.type_text)
        if fn.template is not None:
            plist = fn.template.child_by_field_name("parameters")
            for p in plist.named_children if plist is not None else []:
                t = p.child_by_field_name("type")
                if p.type == "parameter_declaration" and t is not None and \
                        self.src.node_text(t) in self.facts.fnptr_aliases:
                    n = declarator_name(p.child_by_field_name("declarator"))
                    if n is not None:
                        self.fnptr_params.add(self.src.node_text(n))
        infer(self.src, fn.body, self.env)
        for node, name, a, b in self.env.conflicts:
            self.diag("MK1020", node, f"pointer '{name}' points into {a} memory and into {b} memory")

    # ---------------------------------------------------------- diagnostics --
    def diag(self, code: str, node, message: str) -> Diagnostic:
        d = self.tr.diagnose(code, node, message, self.fname)
        # The statement that is a member of a block: the comment goes on the line above it.
        stmt = node
        while stmt is not None and not (stmt.type in _STATEMENTS and stmt.parent is not None and
                                        stmt.parent.type in ("compound_statement", "field_declaration_list",
                                                             "declaration_list", "translation_unit")):
            stmt = stmt.parent
        key = stmt.start_byte if stmt is not None else -1
        lst = self.pending.setdefault(key, [])
        if d not in lst:
            lst.append(d)
        if d.severity == "error" and d not in self.errors:
            self.errors.append(d)
        return d

    def count_ref(self, rule: T.Rule | None, name: str, converted: bool = True):
        if not self.count:
            return
        category = rule.category if rule is not None else "unknown"
        if converted:
            self.tr.converted[(category, name)] += 1
        else:
            self.tr.unconverted[(category, name)] += 1

    def changed(self, node):
        f1, l1, _ = self.src.where(node.start_byte)
        _, l2, _ = self.src.where(max(node.end_byte - 1, node.start_byte))
        for ln in range(l1, max(l1, l2) + 1):
            self.tr.changed.add((f1, ln))

    def text(self, node) -> str:
        return self.src.node_text(node)

    # ------------------------------------------------------------ rewrite --
    def rw(self, node) -> str:
        if node is None:
            return ""
        if node.type in T.FLAGGED_NODES:
            code, what = T.FLAGGED_NODES[node.type]
            self.diag(code, node, what)
            if node.type == "gnu_asm_expression":
                self.count_ref(T.BY_NAME["asm"], "asm", converted=False)
        handler = getattr(self, "h_" + node.type, None) if node.is_named else self.h_token
        out = handler(node) if handler is not None else None
        if out is None:
            out = self.splice(node)
        if node.type in _STATEMENTS and node.start_byte in self.pending:
            out = self.with_comments(node, out)
        if node.type in _STATEMENTS:
            out = self.with_lambda_structs(node, out)
        return out

    def splice(self, node) -> str:
        if node.child_count == 0:
            return self.text(node)
        data = self.src.text
        parts, pos = [], node.start_byte
        for c in node.children:
            parts.append(data[pos:c.start_byte].decode("utf-8", errors="replace"))
            parts.append(self.rw(c))
            pos = c.end_byte
        parts.append(data[pos:node.end_byte].decode("utf-8", errors="replace"))
        return "".join(parts)

    def with_comments(self, node, out: str) -> str:
        diags = self.pending.pop(node.start_byte)
        _, _, col = self.src.where(node.start_byte)
        indent = " " * (col - 1)
        return "".join(d.comment() + "\n" + indent for d in diags) + out

    def args(self, call) -> list:
        a = call.child_by_field_name("arguments")
        return list(a.named_children) if a is not None else []

    # ------------------------------------------------------------ tokens --
    def h_token(self, node):
        t = node.type
        if t in _CUDA_KEYWORD_TOKENS:
            rule = T.KEYWORDS.get(t)
            self.count_ref(rule, t)
            self.changed(node)
            return rule.metal if rule is not None else ""
        return None

    def h_launch_bounds(self, node):
        return ""  # kernels get [[max_total_threads_per_threadgroup]] in their signature (emit.py)

    def h_type_qualifier(self, node):
        text = self.text(node).strip()
        if text == "__restrict__":
            self.count_ref(T.KEYWORDS["__restrict__"], text)
            self.changed(node)
            return ""
        if text in ("__shared__", "__constant__", "__device__", "__managed__"):
            return ""  # the declaration's handler decides
        return None

    def h_comment(self, node):
        return self.text(node)

    # ------------------------------------------------------------- types --
    def h_primitive_type(self, node):
        if self.text(node) == "double" and node.parent.type != "sized_type_specifier":
            return self.double_site(node, "double")
        return None

    def h_sized_type_specifier(self, node):
        text = " ".join(self.text(node).split())
        words = text.split()
        if "double" in words:
            return self.double_site(node, text)
        if words.count("long") == 2:
            unsigned = "unsigned" in words
            self.count_ref(T.BY_NAME["long long"], text)
            self.changed(node)
            return "ulong" if unsigned else "long"
        return None

    def h_type_identifier(self, node):
        return self.name(node)

    def h_namespace_identifier(self, node):
        text = self.text(node)
        if text == "cub":
            self.diag("MK1016", node, "CUB's block and warp primitives are not translated")
            self.count_ref(T.BY_NAME["cub"], "cub", converted=False)
            return None
        if text == "std" and self.fn is not None:
            return self.name(node)
        return None

    def name(self, node):
        """An identifier or type name: renamed, flagged, or kept."""
        text = self.text(node)
        if text in self.facts.functor_args and self.in_template_args(node):
            self.changed(node)
            return text + "_fn"
        if text in self.facts.fnptr_aliases:
            return None
        if self.flag_prefixed(node, text):
            return None
        rule = T.BY_NAME.get(text)
        if rule is None:
            return None
        if node.type == "identifier" and self.env.get(text) is not None and rule.kind == "name":
            return None  # a variable that happens to be named like a CUDA type (`int dim3`)
        if rule.kind == "flag" and rule.code == "MK1001":
            return self.double_site(node, text)
        if rule.kind == "flag":
            self.diag(rule.code, node, f"'{text}' has no Metal counterpart")
            self.count_ref(rule, text, converted=False)
            return None
        if rule.kind != "name":
            return None
        if rule.code == "MK1030":  # float3 & co.: packed only where they are memory
            if self.memory_type <= 0:
                return None
            self.diag("MK1030", node, f"'{text}' in memory is 12 bytes in CUDA: the port uses {rule.metal}")
        if rule.helpers:
            self.tr.helpers.update(rule.helpers)
        self.count_ref(rule, text)
        if rule.metal == text:
            return None
        self.changed(node)
        return rule.metal

    def in_template_args(self, node) -> bool:
        p = node.parent
        while p is not None and p.type in ("type_descriptor",):
            p = p.parent
        return p is not None and p.type == "template_argument_list"

    # ---------------------------------------------------------- literals --
    def h_number_literal(self, node):
        text = self.text(node)
        if text.lower().startswith("0x") or not _FLOAT_LITERAL.match(text) or re.fullmatch(r"\d+", text):
            return None
        key = self.fn.node.start_byte if self.fn is not None else -1
        if key not in self.tr.literal_note:
            self.tr.literal_note.add(key)
            self.diag("MK1019", node, f"'{text}' and the other unsuffixed floating literals in "
                                      f"{self.fname or 'this code'} are float in the port (double in CUDA)")
        self.changed(node)
        return text + "f"

    # ------------------------------------------------------- identifiers --
    def h_field_identifier(self, node):
        text = self.text(node)
        if text in T.METAL_KEYWORDS:
            self.changed(node)
            return T.safe_name(text)
        return None

    def h_identifier(self, node):
        text = self.text(node)
        if text in T.METAL_KEYWORDS:
            self.changed(node)
            return T.safe_name(text)
        if text == "warpSize":
            self.count_ref(T.BY_NAME["warpSize"], text)
            self.changed(node)
            return "32"
        if text in T.BUILTINS:
            self.count_ref(T.BUILTINS[text], text)
            return None
        parent = node.parent
        if parent is not None and parent.type == "call_expression" and parent.child_by_field_name("function") == node:
            rule = T.BY_NAME.get(text)
            if rule is not None and rule.kind == "name":
                return self.name(node)
            return None  # the call's handler
        return self.name(node)

    # ---------------------------------------------------- declarations --
    def h_declaration(self, node):
        kw = keywords(node)
        if "__shared__" in kw:
            self.scan_doubles(node.child_by_field_name("type"))  # the port writes its type with render_type_text
            return self.shared_declaration(node)
        prefix = self.declaration_space(node)
        if prefix is None:
            return None
        # The address space goes before the first type word (after static / constexpr).
        data = self.src.text
        parts, pos, done = [], node.start_byte, False
        for c in node.children:
            parts.append(data[pos:c.start_byte].decode("utf-8", errors="replace"))
            if not done and c.type not in ("storage_class_specifier", "comment", "attribute_declaration"):
                parts.append(prefix + " ")
                done = True
            self.memory_type += 1 if prefix in MEMORY_SPACES and c == node.child_by_field_name("type") else 0
            parts.append(self.rw(c))
            self.memory_type -= 1 if prefix in MEMORY_SPACES and c == node.child_by_field_name("type") else 0
            pos = c.end_byte
        parts.append(data[pos:node.end_byte].decode("utf-8", errors="replace"))
        self.changed(node)
        return "".join(parts)

    def declaration_space(self, node) -> str | None:
        """The address space a pointer or reference declaration needs spelled, or None."""
        spaces = set()
        for d in node.children_by_field_name("declarator"):
            kind, depth = declarator_kind(d)
            if kind not in ("pointer", "reference"):
                continue
            type_node = node.child_by_field_name("type")
            if type_node is not None and self.text(type_node) == "auto":
                continue
            name = declarator_name(d)
            v = self.env.get(self.text(name)) if name is not None else None
            if v is not None and v.space in MEMORY_SPACES:
                spaces.add(v.space)
        if len(spaces) > 1:
            self.diag("MK1020", node, f"one declaration of pointers into {' and '.join(sorted(spaces))} memory")
        return next(iter(spaces)) if len(spaces) == 1 else None

    def shared_declaration(self, node):
        self.count_ref(T.KEYWORDS["__shared__"], "__shared__")
        self.changed(node)
        extern = "extern" in keywords(node)
        if not extern:
            return ""  # declared at the top of the kernel, or a parameter of this helper (emit.py)
        # extern: the launch's dynamic threadgroup memory; the kernel's first one is its parameter.
        out = []
        for d in node.children_by_field_name("declarator"):
            name = declarator_name(d)
            if name is None or self.is_primary_extern(self.text(name)):
                continue
            v = next(x for x in self.fn.shared if x.name == self.text(name))
            elem = self.render_type_text(v.type_text) + "".join(v.dims[1:])
            out.append(f"threadgroup {elem}* {v.name} = (threadgroup {elem}*){self.dynamic_name()};")
        return " ".join(out)

    def render_type_text(self, text: str) -> str:
        """A type written as text (from a declaration), with the table's type renames."""
        def rename(m):
            rule = T.BY_NAME.get(m.group(0))
            return rule.metal if rule is not None and rule.kind == "name" and rule.code != "MK1030" else m.group(0)
        if self.tr.demote:  # each site is diagnosed where the CUDA spells it (scan_doubles)
            text = demote(text)
        text = re.sub(r"\bunsigned\s+long\s+long(\s+int)?\b", "ulong", text)
        text = re.sub(r"\blong\s+long(\s+int)?\b", "long", text)
        return re.sub(r"\b\w+\b", rename, text)

    def is_primary_extern(self, name: str) -> bool:
        return self.fn is not None and self.fn.kernel and name == self.primary_extern()

    def primary_extern(self) -> str | None:
        for v in self.fn.shared:
            if v.extern:
                return v.name
        for name in sorted(self.fn.file_shared_used):
            if self.facts.file_shared[name].extern:
                return name
        return None

    def dynamic_name(self) -> str:
        if self.fn.kernel:
            p = self.primary_extern()
            return f"(threadgroup uchar*){p}" if p else "mk_smem"
        return "mk_smem"

    def h_parameter_declaration(self, node):
        parent = node.parent
        if parent is not None and parent.type == "template_parameter_list":
            t = node.child_by_field_name("type")
            if t is not None and self.text(t) in self.facts.fnptr_aliases:
                name = declarator_name(node.child_by_field_name("declarator"))
                self.changed(node)
                return f"typename {self.text(name)}"
        return None

    # ------------------------------------------------------------- casts --
    def h_cast_expression(self, node):
        td = node.child_by_field_name("type")
        if td is None or not any(c.type == "abstract_pointer_declarator" for c in walk(td)):
            return None
        space = self.sp.space_of(node.child_by_field_name("value"))
        if space not in MEMORY_SPACES:
            return None
        self.changed(node)
        self.memory_type += 1
        inner = self.rw(td)
        self.memory_type -= 1
        value = node.child_by_field_name("value")
        return f"({space} {inner}){self.rw(value)}"

    # ------------------------------------------------------------- calls --
    # -------------------------------------------------------- statements --
    def h_expression_statement(self, node):
        """printf, assert, __nanosleep: the statement is removed (with its
        diagnostic); `__trap();` in a kernel's own body ends the thread."""
        if self.kernel_trap(node):
            self.diag("MK1039", node, "'__trap()' ends this thread in the port (CUDA aborts the whole grid)")
            self.count_ref(T.BY_NAME["__trap"], "__trap")
            self.changed(node)
            return "return;"
        for call in walk(node):
            if call.type != "call_expression":
                continue
            fn = call.child_by_field_name("function")
            name = self.text(fn) if fn is not None else ""
            rule = T.BY_NAME.get(name)
            if rule is not None and rule.kind == "statement":
                break
        else:
            return None
        name = "assert" if name == "__mk_cuda_assert_fail" else name
        self.diag(rule.code, call, f"'{name}' removed from the port: {T.DIAGNOSTICS[rule.code].title}")
        self.count_ref(rule, name, converted=False)
        self.changed(node)
        return ";"

    def kernel_trap(self, node) -> bool:
        """`__trap();` as a statement of a __global__ function's body (in any
        block or branch of it, not in a lambda): a `return` there ends the
        thread. In a device function it would only leave that function."""
        call = node.named_children[0] if node.named_children else None
        fn = call.child_by_field_name("function") if call is not None and call.type == "call_expression" else None
        if fn is None or self.text(fn) != "__trap" or self.args(call) or self.fn is None or not self.fn.kernel:
            return False
        p = node.parent
        while p is not None and p != self.fn.body:
            if p.type == "lambda_expression":
                return False
            p = p.parent
        return p is not None

    def h_ERROR(self, node):
        self.diag("MK1017", node, f"the CUDA does not parse here: '{' '.join(self.text(node).split())[:40]}'")
        return None

    def h_if_statement(self, node):
        token = next((c for c in node.children if c.type == "constexpr"), None)
        if token is None:
            return None
        self.diag("MK1037", node, "`if constexpr` is C++17: a plain `if` in the port")
        self.changed(token)
        data = self.src.text
        parts, pos = [], node.start_byte
        for c in node.children:
            parts.append(data[pos:c.start_byte].decode("utf-8", errors="replace"))
            parts.append("" if c == token else self.rw(c))
            pos = c.end_byte
        return "".join(parts)

    def h_namespace_alias_definition(self, node):
        if "cooperative_groups" in self.text(node):
            self.tr.helpers.add("cg")
        return None

    h_using_declaration = h_namespace_alias_definition

    def h_alias_declaration(self, node):
        name = node.child_by_field_name("name")
        if name is not None and self.text(name) in self.facts.fnptr_aliases:
            self.changed(node)
            return "// (a function pointer type: Metal has none; its template uses take a functor type)"
        return None

    h_type_definition = h_alias_declaration


def kernel_param_is_modified(src: CudaSource, fn: Function, p: Param) -> bool:
    """Whether a by-value kernel parameter is assigned in the body (Metal's
    `constant T&` cannot be)."""
    for n in walk(fn.body) if fn.body is not None else []:
        if n.type == "assignment_expression":
            left = n.child_by_field_name("left")
        elif n.type == "update_expression":
            left = n.child_by_field_name("argument")
        else:
            continue
        if left is not None and left.type == "identifier" and src.node_text(left) == p.name:
            return True
    return False
