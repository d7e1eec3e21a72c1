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

from ..analyse import normalise_template_args
from ..parse import declarator_name, keywords, walk
from . import table as T
from .diagnostics import Diagnostic, make
from .facts import SYNC_COUNTER, SYNC_VOTES, Call, Facts, Function, Param, SharedVar, call_keys, resolve
from .source import CudaSource
from .spaces import MEMORY_SPACES, Env, Spaces, Var, declarator_kind, infer

_FLOAT_LITERAL = re.compile(r"^(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$")
_STATEMENTS = ("expression_statement", "declaration", "return_statement", "if_statement", "for_statement",
               "while_statement", "do_statement", "switch_statement", "compound_statement", "break_statement",
               "continue_statement", "field_declaration", "case_statement")
_CUDA_KEYWORD_TOKENS = {"__device__", "__host__", "__forceinline__", "__noinline__", "__inline__", "__global__"}
_SHORT = {"device": "dev", "threadgroup": "tg", "constant": "const", "thread": "th"}
_METHOD_NAMES_CG = {"thread_rank", "meta_group_rank", "meta_group_size", "shfl", "shfl_up", "shfl_down",
                    "shfl_xor", "ballot", "num_threads", "thread_index", "group_index", "dim_threads", "group_dim"}


def mangle(key: tuple) -> str:
    owner, name, targs = key
    if owner is None:
        return name
    out = f"{owner}_{name}"
    if targs:
        out += "_" + re.sub(r"\W+", "_", targs).strip("_")
    return out


def substitute(text: str, mapping: dict[str, str]) -> str:
    if not mapping:
        return text
    pattern = re.compile(r"\b(" + "|".join(re.escape(k) for k in mapping) + r")\b")
    return pattern.sub(lambda m: mapping[m.group(1)], text)


def split_template_args(targs: str) -> list[str]:
    return [a.strip() for a in normalise_template_args(targs).split(", ")] if targs else []


@dataclass
class Translation:
    """What all of a file's renderings share."""
    src: CudaSource
    facts: Facts
    fast_math: bool = False
    diagnostics: dict = field(default_factory=dict)  # (code, offset, message) -> Diagnostic
    helpers: set = field(default_factory=set)
    converted: Counter = field(default_factory=Counter)  # (category, name)
    unconverted: Counter = field(default_factory=Counter)
    unknown: Counter = field(default_factory=Counter)
    changed: set = field(default_factory=set)  # (file, line) of the user's source
    requests: dict = field(default_factory=dict)  # helper node start -> {sig: None}
    counted: set = field(default_factory=set)  # function nodes whose references are counted
    literal_note: set = field(default_factory=set)  # functions with a MK1019 note

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


class Renderer:
    """The Metal text of one function instance (or of a file-scope item)."""

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
        text = self.text(node)
        if text == "double":
            self.diag("MK1001", node, "'double': Apple GPUs have no 64-bit floating point")
            self.count_ref(T.BY_NAME["double"], "double", converted=False)
        return None

    def h_sized_type_specifier(self, node):
        text = " ".join(self.text(node).split())
        words = text.split()
        if "double" in words:
            self.diag("MK1001", node, f"'{text}': Apple GPUs have no 64-bit floating point")
            self.count_ref(T.BY_NAME["double"], "double", converted=False)
            return None
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

    def name(self, node):
        """An identifier or type name: renamed, flagged, or kept."""
        text = self.text(node)
        if text in self.facts.functor_args and self.in_template_args(node):
            self.changed(node)
            return text + "_fn"
        if text in self.facts.fnptr_aliases:
            return None
        for prefix, code, what in T.FLAGGED_PREFIXES:
            if text.startswith(prefix):
                self.diag(code, node, f"{what}: '{text}'")
                self.count_ref(T.Rule(text, "", "memory"), text, converted=False)
                return None
        rule = T.BY_NAME.get(text)
        if rule is None:
            return None
        if node.type == "identifier" and self.env.get(text) is not None and rule.kind == "name":
            return None  # a variable that happens to be named like a CUDA type (`int dim3`)
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
    def h_call_expression(self, node):
        fn = node.child_by_field_name("function")
        if fn is None:
            return None
        if fn.type == "template_function":
            name_node = fn.child_by_field_name("name")
            if name_node is not None and self.text(name_node) in ("reinterpret_cast", "static_cast", "const_cast"):
                return self.cast_call(node, fn)
        if fn.type == "field_expression":
            field_node = fn.child_by_field_name("field")
            if field_node is not None and self.text(field_node) in _METHOD_NAMES_CG:
                self.count_ref(T.Rule(self.text(field_node), "", "cooperative groups"), self.text(field_node))
            return None
        name_node = fn
        while name_node is not None and name_node.type == "qualified_identifier":
            name_node = name_node.child_by_field_name("name")
        if name_node is not None and name_node.type == "template_function":
            name_node = name_node.child_by_field_name("name")
        if name_node is None or name_node.type != "identifier":
            return None
        name = self.text(name_node)
        if name in self.fnptr_params:
            self.changed(node)
            return f"{name}{{}}{self.rw(node.child_by_field_name('arguments'))}"
        helpers = self.facts.helpers(name)
        if helpers and not self.facts.by_name.get(name, [None])[0].kernel:
            return self.helper_call(node, fn, name, helpers)
        if name in self.facts.by_name:  # a kernel launched from device code: kernel_call_syntax's diagnostic
            return None
        rule = T.BY_NAME.get(name)
        if rule is not None:
            return self.rule_call(node, name, rule)
        if name in T.SAME_IN_METAL or name in self.facts.fnptr_aliases:
            return None
        for prefix, code, what in T.FLAGGED_PREFIXES:
            if name.startswith(prefix):
                self.diag(code, node, f"{what}: '{name}'")
                self.count_ref(T.Rule(name, "", "memory"), name, converted=False)
                return None
        if self.is_local_callable(name):
            return None
        self.diag("MK1014", node, f"unknown identifier '{name}' left as it is")
        if self.count:
            self.tr.unknown[name] += 1
            self.tr.unconverted[("unknown", name)] += 1
        return None

    def is_local_callable(self, name: str) -> bool:
        """A type (constructor call), template parameter or struct defined in the file."""
        if self.fn is not None and name in self.fn.template_params:
            return True
        v = self.env.get(name)
        if v is not None:
            return True
        return re.search(rb"\b(struct|class|union|typedef|using)\s+[^;{]*\b" + re.escape(name.encode()) + rb"\b",
                         self.src.text) is not None

    def cast_call(self, node, fn):
        targs = fn.child_by_field_name("arguments")
        td = targs.named_children[0] if targs is not None and targs.named_children else None
        args = self.args(node)
        if td is None or not args or not any(c.type == "abstract_pointer_declarator" for c in walk(td)):
            return None
        space = self.sp.space_of(args[0])
        if space not in MEMORY_SPACES:
            return None
        self.changed(node)
        self.memory_type += 1
        inner = self.rw(td)
        self.memory_type -= 1
        return f"{self.text(fn.child_by_field_name('name'))}<{space} {inner}>({self.rw(args[0])})"

    def rule_call(self, node, name: str, rule: T.Rule):
        args = self.args(node)
        if rule.kind == "flag":
            self.diag(rule.code, node, f"'{name}' has no Metal counterpart")
            self.count_ref(rule, name, converted=False)
            return None
        if rule.kind == "statement":
            return None  # the statement's handler removes it
        if rule.kind == "name":  # a renamed function (cooperative groups): the identifier's handler
            self.tr.helpers.update(rule.helpers)
            return None
        if rule.kind == "warp":
            return self.warp_call(node, name, rule, args)
        if rule.kind == "atomic":
            return self.atomic_call(node, name, rule, args)
        if name in SYNC_VOTES:
            self.tr.helpers.update(rule.helpers)
            self.count_ref(rule, name)
            self.changed(node)
            self.diag(rule.code, node, f"'{name}' is emulated with a threadgroup counter")
            return rule.metal.format(*(self.rw(a) for a in args), sync=f"{SYNC_COUNTER}, threadIdx")
        if name == "__syncthreads":
            self.count_ref(rule, name)
            self.changed(node)
            flags = "mem_flags::mem_device | mem_flags::mem_threadgroup" if self.barrier_needs_device(node) \
                else "mem_flags::mem_threadgroup"
            return f"threadgroup_barrier({flags})"
        if name == "this_thread_block":
            self.tr.helpers.update(rule.helpers)
            self.count_ref(rule, name)
            self.changed(node)
            fn = node.child_by_field_name("function")
            return f"{self.text(fn)}(threadIdx, blockIdx, blockDim)"
        if rule.category == "math" and self.tr.fast_math and rule.metal.startswith("precise::"):
            rule = T.Rule(rule.cuda, rule.metal.replace("precise::", "fast::"), rule.category)
        if rule.code:
            what = T.DIAGNOSTICS[rule.code].title
            self.diag(rule.code, node, f"'{name}': {what}")
        self.tr.helpers.update(rule.helpers)
        self.count_ref(rule, name)
        self.changed(node)
        rendered = [self.rw(a) for a in args]
        spaces = {f"S{i}": (self.sp.space_of(a) or "thread") for i, a in enumerate(args[:2])}
        try:
            return rule.metal.format(*rendered, args=", ".join(rendered), **spaces)
        except IndexError:
            self.diag("MK1017", node, f"'{name}' called with {len(args)} argument(s)")
            return None

    def barrier_needs_device(self, node) -> bool:
        """mem_device when device memory this function writes before the
        barrier (or in a loop around it) may be read after it by another
        thread: a device store earlier in the text or in the same loop."""
        if self.fn is None or self.fn.body is None:
            return True
        loop = node.parent
        while loop is not None and loop.type not in ("for_statement", "while_statement", "do_statement"):
            loop = loop.parent
        lo = loop.start_byte if loop is not None else node.start_byte
        hi = loop.end_byte if loop is not None else node.start_byte
        for n in walk(self.fn.body):
            if n.start_byte >= max(hi, node.start_byte) and loop is None:
                break
            if n.type == "assignment_expression" or n.type == "update_expression":
                target = n.child_by_field_name("left") if n.type == "assignment_expression" else \
                    n.child_by_field_name("argument")
                if (n.start_byte < lo or lo <= n.start_byte < hi) and self.writes_device(target):
                    return True
            elif n.type == "call_expression" and n.start_byte < hi:
                fn = self.text(n.child_by_field_name("function"))
                if fn.startswith(("atomic", "__stcs", "__stcg", "__stwt")) and \
                        (n.start_byte < lo or lo <= n.start_byte < hi):
                    return True
        return False

    def writes_device(self, target) -> bool:
        from .spaces import _access_base
        base = _access_base(target)
        if base is None:
            if target is not None and target.type == "identifier":
                v = self.env.get(self.text(target))
                return v is not None and v.kind == "reference" and v.space == "device"
            return False
        return self.sp.space_of(base) == "device"

    def warp_call(self, node, name, rule, args):
        self.count_ref(rule, name)
        self.changed(node)
        self.tr.helpers.update(rule.helpers if rule.code == "MK1025" else ())
        if rule.code:
            self.diag(rule.code, node, f"'{name}': {T.DIAGNOSTICS[rule.code].title}")
        mask = args[0] if args else None
        if name == "__syncwarp":
            if mask is not None:
                self.check_mask(node, name, mask)
            return rule.metal
        if self.check_mask(node, name, mask):
            self.check_divergence(node, name)
        rendered = [self.rw(a) for a in args]
        value = args[1] if len(args) > 1 else None
        if value is not None and name not in ("__ballot_sync", "__any_sync", "__all_sync"):
            self.check_warp_type(node, name, value)
        width = args[3] if len(args) > 3 and name in ("__shfl_sync", "__shfl_up_sync", "__shfl_down_sync",
                                                       "__shfl_xor_sync") else None
        if width is not None:
            w = self.text(width).strip()
            try:
                wv = int(w.rstrip("uU"), 0)
            except ValueError:
                wv = None
            if wv is not None and wv > 32:
                self.diag("MK1007", node, f"'{name}' with width {wv}: Apple simdgroups are 32 lanes")
            if wv != 32:
                self.tr.helpers.add("shfl")
                return rule.alt.format(*rendered)
        return rule.metal.format(*rendered)

    def check_warp_type(self, node, name, value):
        v = self.env.get(self.text(value)) if value.type == "identifier" else None
        t = (v.elem if v is not None and v.kind == "value" else "") or ""
        if t.strip() in ("double", "long long", "unsigned long long", "long", "unsigned long", "int64_t",
                         "uint64_t", "size_t") or "long long" in t:
            self.diag("MK1029", node, f"'{name}' of a {t.strip()}")

    def check_mask(self, node, name, mask) -> bool:
        """Diagnoses a mask Metal cannot express; True for a full mask."""
        text = re.sub(r"\s+", "", self.text(mask)) if mask is not None else ""
        if text in T.FULL_MASKS or text.lower() in {m.lower() for m in T.FULL_MASKS}:
            return True
        if "__activemask()" in text:
            return False
        if mask is not None and mask.type == "identifier":
            origin = self.mask_origin(self.text(mask))
            if origin == "full":
                return True
            if origin is not None and self.inside_condition(node, origin):
                return False
        self.diag("MK1011", node, f"'{name}' with mask {text}: Metal's simd functions "
                                  "combine the active lanes, whatever the mask")
        return False

    # ----------------------------------------------------------- divergence --
    def check_divergence(self, node, name: str):
        """A full-mask warp function under a lane-dependent condition (or
        after a lane-dependent return) is where CUDA and Metal differ."""
        why = self.divergent_context(node)
        if why:
            self.diag("MK1035", node, f"'{name}' with a full mask {why}: the lanes that took another path do "
                                      "not take part in Metal")

    def divergent_context(self, node) -> str | None:
        varying = self.varying_names()
        p, child = node.parent, node
        while p is not None and p != (self.fn.body if self.fn else None):
            cond = None
            if p.type == "if_statement" and child != p.child_by_field_name("condition"):
                cond = p.child_by_field_name("condition")
            elif p.type == "conditional_expression" and child != p.child_by_field_name("condition"):
                cond = p.child_by_field_name("condition")
            elif p.type in ("for_statement", "while_statement", "do_statement"):
                cond = p.child_by_field_name("condition")
            if cond is not None and self.is_varying(cond, varying):
                return f"inside `{' '.join(self.text(cond).split())[:60]}`, which differs between lanes"
            p, child = p.parent, p
        if self.fn is not None and self.fn.body is not None:
            for n in walk(self.fn.body):
                if n.start_byte >= node.start_byte:
                    break
                if n.type == "return_statement":
                    q = n.parent
                    while q is not None and q.type != "if_statement":
                        q = q.parent
                    cond = q.child_by_field_name("condition") if q is not None else None
                    if cond is not None and self.is_varying(cond, varying) and q.end_byte <= node.start_byte:
                        return f"after lanes returned under `{' '.join(self.text(cond).split())[:60]}`"
        return None

    def varying_names(self) -> set:
        """Local variables whose value differs between the lanes of a warp
        (derived from threadIdx.x, the lane, a tile's thread_rank())."""
        cached = getattr(self, "_varying", None)
        if cached is not None:
            return cached
        out: set = set()
        if self.fn is None or self.fn.body is None:
            return out
        assigns = []
        for n in walk(self.fn.body):
            if n.type == "init_declarator":
                d = declarator_name(n.child_by_field_name("declarator"))
                if d is not None:
                    assigns.append((self.text(d), n.child_by_field_name("value")))
            elif n.type == "assignment_expression":
                left = n.child_by_field_name("left")
                if left is not None and left.type == "identifier":
                    assigns.append((self.text(left), n.child_by_field_name("right")))
        for p in self.fn.params:  # a helper's parameters may come from anywhere
            if not self.fn.kernel and not p.pointer:
                out.add(p.name)
        changed = True
        while changed:
            changed = False
            for name, value in assigns:
                if name not in out and value is not None and self.is_varying(value, out):
                    out.add(name)
                    changed = True
        self._varying = out
        return out

    def is_varying(self, n, varying: set) -> bool:
        t = n.type
        if t == "field_expression":
            arg, field_node = n.child_by_field_name("argument"), n.child_by_field_name("field")
            if arg is not None and self.text(arg) == "threadIdx":
                return field_node is not None and self.text(field_node) == "x"
            return self.is_varying(arg, varying) if arg is not None else False
        if t == "identifier":
            text = self.text(n)
            return text in varying or text == "mk_lane"
        if t == "binary_expression":
            op = n.child_by_field_name("operator")
            right = n.child_by_field_name("right")
            if op is not None and right is not None and (right.type == "number_literal" or
                                                         self.text(right) == "warpSize"):
                k = "32" if self.text(right) == "warpSize" else self.text(right).rstrip("uUlL")
                try:
                    v = int(k, 0)
                except ValueError:
                    v = 0
                if (self.text(op) == "/" and v and v % 32 == 0) or (self.text(op) == ">>" and v >= 5):
                    return False
        if t == "call_expression":
            fn = n.child_by_field_name("function")
            if fn is not None and fn.type == "field_expression":
                field_node = fn.child_by_field_name("field")
                method = self.text(field_node) if field_node is not None else ""
                if method in ("meta_group_rank", "meta_group_size", "size", "num_threads", "group_index"):
                    return False
                if method in ("thread_rank", "thread_index"):
                    return True
        return any(self.is_varying(c, varying) for c in n.named_children)

    def mask_origin(self, name: str):
        """How a mask variable was computed: 'full', the predicate of a
        __ballot_sync(full, pred) (its text), or None."""
        if self.fn is None or self.fn.body is None:
            return None
        for n in walk(self.fn.body):
            value = None
            if n.type == "init_declarator":
                d = declarator_name(n.child_by_field_name("declarator"))
                if d is not None and self.text(d) == name:
                    value = n.child_by_field_name("value")
            elif n.type == "assignment_expression":
                left = n.child_by_field_name("left")
                if left is not None and self.text(left) == name:
                    value = n.child_by_field_name("right")
            if value is None:
                continue
            text = re.sub(r"\s+", "", self.text(value))
            if text in T.FULL_MASKS or text == "__activemask()":
                return "full"
            if value.type == "call_expression" and self.text(value.child_by_field_name("function")) == "__ballot_sync":
                a = self.args(value)
                if len(a) == 2 and re.sub(r"\s+", "", self.text(a[0])) in T.FULL_MASKS:
                    return re.sub(r"\s+", "", self.text(a[1]))
        return None

    def inside_condition(self, node, predicate: str) -> bool:
        """Whether `node` runs only where `predicate` holds (inside `if (predicate)`)."""
        p = node.parent
        while p is not None:
            if p.type == "if_statement":
                cond = p.child_by_field_name("condition")
                cons = p.child_by_field_name("consequence")
                if cond is not None and cons is not None and cons.start_byte <= node.start_byte < cons.end_byte:
                    c = re.sub(r"\s+", "", self.text(cond)).strip("()")
                    if c == predicate.strip("()"):
                        return True
            p = p.parent
        return False

    def atomic_call(self, node, name, rule, args):
        if len(args) < 2:
            return None
        ptr = args[0]
        space = self.sp.space_of(ptr) or "device"
        elem = (self.sp.elem_of(ptr) or "").strip()
        elem = re.sub(r"\b(const|volatile)\b", "", elem).strip()
        metal_elem = self.render_type_text(elem) if elem else ""
        base = name.replace("_block", "").replace("_system", "")
        self.count_ref(rule, name)
        self.changed(node)
        rendered = [self.rw(a) for a in args]
        is64 = metal_elem in ("long", "ulong", "double", "int64_t", "uint64_t", "size_t", "unsigned long",
                              "long int", "unsigned long int")
        if is64:
            self.diag("MK1012", node, f"'{name}' on a 64-bit {elem}")
            return None
        if metal_elem in ("unsigned", "unsigned int"):
            metal_elem = "uint"
        word = f"({space} atomic_uint*)(({space} uchar*)({rendered[0]}) - (ulong({rendered[0]}) & 2))"
        shift = f"uint(ulong({rendered[0]}) & 2) * 8u"
        if base == "atomicCAS" and metal_elem in ("ushort", "short", "unsigned short", "uint16_t", "int16_t"):
            self.tr.helpers.add("atomic_cas")
            self.diag("MK1013", node, f"'{name}' on a 16-bit {elem} by a compare-and-swap of its 32-bit word")
            t = "ushort" if metal_elem in ("ushort", "unsigned short", "uint16_t") else "short"
            return f"mk_atomic_cas16({word}, {shift}, {t}({rendered[1]}), {t}({rendered[2]}))"
        if base in ("atomicCAS", "atomicInc", "atomicDec"):
            self.tr.helpers.update(rule.helpers)
            if rule.code:
                self.diag(rule.code, node, f"'{name}' by a compare-and-swap loop")
            if not metal_elem and base == "atomicCAS":
                return self.unknown_elem(node, name, ptr)
            return rule.metal.format(*rendered, S=space, T=metal_elem)
        if not metal_elem:
            return self.unknown_elem(node, name, ptr)
        if metal_elem in ("half", "bfloat", "half2", "bfloat2") and base == "atomicAdd":
            self.tr.helpers.add("atomic_update")
            self.diag("MK1013", node, f"'{name}' on {elem} by a compare-and-swap loop")
            if metal_elem in ("half2", "bfloat2"):
                return f"mk_atomic_add_cas32(({space} atomic_uint*)({rendered[0]}), {metal_elem}({rendered[1]}))"
            return f"mk_atomic_add_cas16({word}, {shift}, {metal_elem}({rendered[1]}))"
        if metal_elem == "float" and base in ("atomicMin", "atomicMax"):
            self.tr.helpers.add("atomic_update")
            self.diag("MK1013", node, f"'{name}' on float by a compare-and-swap loop")
            fn = "mk_atomic_fmin" if base == "atomicMin" else "mk_atomic_fmax"
            return f"{fn}(({space} atomic_uint*)({rendered[0]}), {rendered[1]})"
        return rule.metal.format(*rendered, S=space, T=metal_elem)

    def unknown_elem(self, node, name, ptr):
        self.diag("MK1017", node, f"'{name}': the element type of '{self.text(ptr)}' is not known to the "
                                  "translator; write the pointer's type where it is declared")
        return None

    def helper_call(self, node, fn_node, name: str, helpers: list[Function]):
        from .facts import _callee
        args = self.args(node)
        g = resolve(self.facts, Call(node, name, _callee(self.src, node)[1], args)) or helpers[0]
        sig = []
        for i, p in enumerate(g.params):
            a = args[i] if i < len(args) else None
            if p.pointer:
                sig.append(self.sp.space_of(a) or "device" if a is not None else "device")
            elif p.reference:
                sig.append(self.sp.lvalue_space(a) or "thread" if a is not None else "thread")
            else:
                sig.append(None)
        extra = self.extra_args(g, node)
        rendered_fn = self.rw(fn_node)
        inst = self.tr.request(g, tuple(sig))
        name = T.safe_name(name)
        if inst != name:
            self.changed(node)
            rendered_fn = re.sub(rf"\b{re.escape(name)}\b(?!.*\b{re.escape(name)}\b)", inst, rendered_fn, count=1)
        rendered_args = [self.rw(a) for a in args]
        if not extra:
            return f"{rendered_fn}({', '.join(rendered_args)})"
        self.changed(node)
        return f"{rendered_fn}({', '.join(extra + rendered_args)})"

    def extra_args(self, g: Function, call_node) -> list[str]:
        """What a call of helper `g` passes first: its threadgroup variables,
        builtins, dynamic threadgroup memory and global buffers (facts.Needs)."""
        from .facts import _callee
        needs = self.facts.needs[g.node.start_byte]
        _, targs = _callee(self.src, call_node)
        out = []
        for _, key, v in call_keys(g, targs, needs):
            if key[0] is not None and key[2] is None and any(x.template_params for x in self.facts.by_name[key[0]]) \
                    and self.mentions_template_param(v, key[0]):
                self.diag("MK1033", call_node, f"the __shared__ array '{v.name}' of '{key[0]}' has a type that "
                                               "depends on template arguments this call deduces")
            out.append(mangle(key))
        out += needs.builtins
        if needs.dynamic:
            out.append(self.dynamic_name())
        out += needs.globals
        return out

    def mentions_template_param(self, v: SharedVar, owner: str) -> bool:
        params = set()
        for f in self.facts.by_name.get(owner, []):
            params.update(f.template_params)
        words = set(re.findall(r"\w+", v.type_text + "".join(v.dims)))
        return bool(words & params)

    # -------------------------------------------------------- statements --
    def h_expression_statement(self, node):
        """printf, assert, __nanosleep: the statement is removed (with its diagnostic)."""
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

    def h_ERROR(self, node):
        self.diag("MK1017", node, f"the CUDA does not parse here: '{' '.join(self.text(node).split())[:40]}'")
        return None

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
