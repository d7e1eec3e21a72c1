"""Turns preprocessed MSL into C++ that clang compiles against mk/prelude.h.

What changes (everything else is left to the C++ compiler):
- Metal attributes `[[buffer(0)]]`, `[[thread_position_in_grid]]`,
  `[[host_name("x")]]`, ... are removed, after being recorded;
- the `kernel` qualifier is removed; each kernel (and each `host_name`
  instantiation of a kernel template) gets an entry point emitted right after
  it, in the same scope, so that names resolve as they did for the kernel;
- `threadgroup` storage declared in a function body becomes a reference to
  per-threadgroup memory handed out by the runtime;
- function constants become `constexpr` values from the compile options;
- floating literals without suffix get `f` (Metal has no double), `1.0h`
  becomes a half; `double` is rejected.

Edits never add or remove newlines, so the preprocessor's line markers keep
pointing every line (and every compiler diagnostic) at the user's source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .address_spaces import collapse as collapse_address_spaces
from .errors import MetalCompileError
from .lexer import LineMap, Token, tokenize

# Thread attributes and how the entry point computes them from the
# per-thread ids `t` and the run `r` (see mk/runtime.h).
THREAD_ATTRIBUTES = {
    "thread_position_in_grid": "t.thread_position_in_grid",
    "thread_position_in_threadgroup": "t.thread_position_in_threadgroup",
    "threadgroup_position_in_grid": "t.threadgroup_position_in_grid",
    "threads_per_threadgroup": "t.threads_per_threadgroup",
    "dispatch_threads_per_threadgroup": "r->launch->threads_per_threadgroup",
    "threadgroups_per_grid": "r->launch->threadgroups_per_grid",
    "threads_per_grid": "r->launch->threads_per_grid",
    "grid_size": "r->launch->threads_per_grid",
    "grid_origin": "::mk::u3{0u, 0u, 0u}",
    "thread_index_in_threadgroup": "t.thread_index_in_threadgroup",
    "thread_index_in_simdgroup": "(t.thread_index_in_threadgroup % 32u)",
    "simdgroup_index_in_threadgroup": "(t.thread_index_in_threadgroup / 32u)",
    "threads_per_simdgroup": "32u",
    "thread_execution_width": "32u",
    "simdgroups_per_threadgroup": "::mk::div_up(t.threads_per_threadgroup.x * "
    "t.threads_per_threadgroup.y * t.threads_per_threadgroup.z, 32u)",
    "dispatch_simdgroups_per_threadgroup": "::mk::div_up(r->launch->threads_per_threadgroup.x * "
    "r->launch->threads_per_threadgroup.y * r->launch->threads_per_threadgroup.z, 32u)",
    "thread_index_in_quadgroup": "(t.thread_index_in_threadgroup % 4u)",
    "quadgroup_index_in_threadgroup": "(t.thread_index_in_threadgroup / 4u)",
    "threads_per_quadgroup": "4u",
    "quadgroups_per_threadgroup": "::mk::div_up(t.threads_per_threadgroup.x * "
    "t.threads_per_threadgroup.y * t.threads_per_threadgroup.z, 4u)",
    "dispatch_quadgroups_per_threadgroup": "::mk::div_up(r->launch->threads_per_threadgroup.x * "
    "r->launch->threads_per_threadgroup.y * r->launch->threads_per_threadgroup.z, 4u)",
}

# Attributes C++ itself understands; every other [[...]] is Metal's.
CXX_ATTRIBUTES = {
    "noreturn", "carries_dependency", "deprecated", "fallthrough", "nodiscard",
    "maybe_unused", "likely", "unlikely", "no_unique_address", "assume",
}

# Words that can stand right before a qualified name in a declaration
# (`void ::ns::f`): never a namespace.
_DECL_KEYWORDS = {
    "void", "kernel", "inline", "static", "template", "typename", "auto", "const", "extern",
    "constexpr", "volatile", "bool", "char", "short", "int", "long", "float", "half", "unsigned",
    "signed", "uint", "ushort", "uchar", "ulong", "device", "constant", "thread", "threadgroup",
}

UNSUPPORTED_PARAMETER_ATTRIBUTES = {
    "stage_in": "vertex/stage_in inputs are not supported in compute kernels here",
    "texture": "textures are not supported yet",
    "sampler": "samplers are not supported yet",
}


@dataclass
class Param:
    name: str
    kind: str  # "buffer", "threadgroup", "attribute"
    index: int = -1  # buffer / threadgroup index
    attribute: str = ""  # thread attribute name


@dataclass
class KernelDef:
    name: str  # unqualified
    params: list[Param]
    file: str
    line: int
    template_header: str  # "" for non-templates
    max_threads: int
    tg_types: list[str] = field(default_factory=list)  # threadgroup storage types
    tg_preamble: list[str] = field(default_factory=list)  # local constants they use


@dataclass
class KernelEntry:
    host_name: str
    symbol: int  # entry points are __mk_entry_<symbol>
    params: list[Param]
    file: str
    line: int
    max_threads: int
    has_tg_size: bool
    # "direct" (never synchronises), "workitem-loops" or "fibers"; set by
    # the compiler (runtime/workitem.py decides between the last two).
    mode: str = "fibers"
    # Direct kernels: whether the library has a __mk_stream_N variant with
    # non-temporal stores (runtime/streaming.py).
    streaming: bool = False
    # Work-item kernels: whether full simdgroups run the kernel once each
    # with whole matrices (runtime/simdgroup_uniform.py).
    whole_simdgroup: bool = False


@dataclass
class RewriteResult:
    text: str
    kernels: list[KernelEntry]


class _Edits:
    def __init__(self):
        self.items: list[tuple[int, int, str]] = []

    def replace(self, start: int, end: int, text: str):
        self.items.append((start, end, text))

    def insert(self, pos: int, text: str):
        self.items.append((pos, pos, text))

    def apply(self, text: str) -> str:
        out = []
        pos = 0
        for start, end, repl in sorted(self.items, key=lambda e: (e[0], e[1])):
            if start < pos:  # overlapping edit: the earlier one wins
                continue
            out.append(text[pos:start])
            out.append(repl)
            pos = end
        out.append(text[pos:])
        return "".join(out)


_FLOAT_DEC = re.compile(r"^(\d[\d']*\.?[\d']*|\.\d[\d']*)([eE][+-]?\d+)?([a-zA-Z]*)$")
_FLOAT_HEX = re.compile(r"^(0[xX][0-9a-fA-F']*\.?[0-9a-fA-F']*[pP][+-]?\d+)([a-zA-Z]*)$")


def _float_literal(text: str):
    """(body, suffix) when `text` is a floating literal, else None."""
    if text[:2] in ("0x", "0X"):
        m = _FLOAT_HEX.match(text)
        return (m.group(1), m.group(2)) if m else None
    m = _FLOAT_DEC.match(text)
    if not m:
        return None
    body, exp, suffix = m.group(1), m.group(2) or "", m.group(3)
    if "." not in body and not exp:
        return None
    return body + exp, suffix


class Rewriter:
    def __init__(self, text: str, function_constants: dict | None = None):
        self.text = text
        self.toks: list[Token] = [t for t in tokenize(text) if t.kind != "marker"]
        self.lines = LineMap(text)
        self.edits = _Edits()
        self.function_constants = function_constants or {}
        self.defs: dict[str, list[KernelDef]] = {}
        self.entries: list[KernelEntry] = []
        self.tg_slot = 0
        self.tg_helpers = True
        self.workitem = False  # also emit per-thread functions (__mk_wi_<n>)
        self._fc_indices: dict[str, int] = {}

    # ------------------------------------------------------------ helpers --
    def where(self, i: int) -> tuple[str, int]:
        return self.lines.locate(self.toks[i].start)

    def error(self, i: int, message: str):
        file, line = self.where(min(i, len(self.toks) - 1))
        raise MetalCompileError(message, file=file, line=line)

    def blank(self, i: int, j: int):
        """Removes tokens i..j-1 (keeps line structure)."""
        if i < j:
            self.edits.replace(self.toks[i].start, self.toks[j - 1].end, " ")

    def match_close(self, i: int) -> int:
        """Index of the bracket closing the one at i."""
        pairs = {"(": ")", "[": "]", "{": "}"}
        open_, close = self.toks[i].text, pairs[self.toks[i].text]
        depth = 0
        for k in range(i, len(self.toks)):
            t = self.toks[k].text
            if t == open_:
                depth += 1
            elif t == close:
                depth -= 1
                if depth == 0:
                    return k
        self.error(i, f"unbalanced '{open_}'")

    def match_angle(self, i: int) -> int:
        """Index of the '>' closing the template argument list opened at i."""
        depth = 0
        k = i
        while k < len(self.toks):
            t = self.toks[k].text
            if t in ("(", "[", "{"):
                k = self.match_close(k)
            elif t == "<":
                depth += 1
            elif t == ">":
                depth -= 1
                if depth == 0:
                    return k
            elif t == ">>":
                depth -= 2
                if depth <= 0:
                    return k
            elif t in (";", "}"):
                break
            k += 1
        self.error(i, "unbalanced '<'")

    def is_attr_open(self, i: int) -> bool:
        return (
            self.toks[i].text == "["
            and i + 1 < len(self.toks)
            and self.toks[i + 1].text == "["
        )

    def attribute_span(self, i: int):
        """For `[[...]]` at i: (end index past ']]', list of (name, arg tokens))."""
        close = self.match_close(i)
        inner = self.toks[i + 2 : close - 1]
        attrs = []
        k = 0
        while k < len(inner):
            if inner[k].text == ",":
                k += 1
                continue
            name = inner[k].text
            k += 1
            while k + 1 < len(inner) and inner[k].text == "::":
                name += "::" + inner[k + 1].text
                k += 2
            args = []
            if k < len(inner) and inner[k].text == "(":
                depth = 0
                while k < len(inner):
                    if inner[k].text == "(":
                        depth += 1
                    elif inner[k].text == ")":
                        depth -= 1
                        if depth == 0:
                            break
                    args.append(inner[k])
                    k += 1
                args = args[1:]
                k += 1
            attrs.append((name, args))
        return close + 1, attrs

    @staticmethod
    def attr_int(args: list[Token]) -> int:
        text = "".join(t.text for t in args).rstrip("uUlL")
        try:
            return int(text, 0)
        except ValueError:
            return -1

    @staticmethod
    def attr_string(args: list[Token]) -> str:
        parts = []
        for t in args:
            if t.kind == "string":
                body = t.text[t.text.index('"') + 1 : -1]
                parts.append(body.encode().decode("unicode_escape"))
        return "".join(parts)

    def statement_start(self, i: int) -> int:
        """First token of the statement/declaration containing token i."""
        k = i - 1
        while k >= 0 and self.toks[k].text not in (";", "{", "}"):
            if self.toks[k].text in (")", "]"):
                # skip back over a bracketed group
                depth = 0
                while k >= 0:
                    if self.toks[k].text in (")", "]"):
                        depth += 1
                    elif self.toks[k].text in ("(", "["):
                        depth -= 1
                        if depth == 0:
                            break
                    k -= 1
            k -= 1
        return k + 1

    # -------------------------------------------------------------- passes --
    def run(self) -> RewriteResult:
        self.scan_literals_and_types()
        self.scan_declarations()
        self.scan_function_constant_queries()
        self.edits.insert(
            len(self.text),
            '\nextern "C" __attribute__((visibility("default"))) '
            "const ::mk::RuntimeApi* __mk_rt = nullptr;\n",
        )
        return RewriteResult(self.edits.apply(self.text), self.entries)

    def scan_literals_and_types(self):
        for i, t in enumerate(self.toks):
            if t.kind == "ident" and t.text == "double":
                self.error(
                    i,
                    "'double' is not supported in Metal (Apple GPUs have no 64-bit "
                    "floating point); use float",
                )
            if t.kind == "number":
                fl = _float_literal(t.text)
                if fl is None:
                    continue
                body, suffix = fl
                if suffix == "":
                    self.edits.replace(t.start, t.end, body + "f")
                elif suffix in ("h", "H"):
                    self.edits.replace(t.start, t.end, f"((half){body}f)")
                elif suffix in ("bf", "BF"):
                    self.edits.replace(t.start, t.end, f"((bfloat){body}f)")
                elif suffix in ("l", "L"):
                    self.error(i, "long double literals are not supported in Metal")

    def scan_declarations(self):
        """Walks scopes: namespaces, function bodies, kernels, instantiations."""
        toks = self.toks
        # Stack of scope kinds for open braces: "ns" (namespace/class/extern)
        # or "body" (function body or any block inside one).
        scopes: list[str] = []
        i = 0
        n = len(toks)
        while i < n:
            t = toks[i]
            in_body = "body" in scopes
            if t.text == "{":
                scopes.append("body" if in_body else self.brace_kind(i))
                i += 1
                continue
            if t.text == "}":
                if scopes:
                    scopes.pop()
                i += 1
                continue
            if self.is_attr_open(i):
                i = self.handle_attribute(i, in_body)
                continue
            if t.kind != "ident":
                i += 1
                continue
            if not in_body and t.text == "template" and i + 1 < n and toks[i + 1].text != "<":
                i = self.handle_instantiation(i)
                continue
            if not in_body and t.text == "kernel":
                i = self.handle_kernel(i)
                continue
            if not in_body and t.text == "constant":
                i = self.handle_function_constant(i)
                continue
            if in_body and t.text == "threadgroup":
                i = self.handle_threadgroup(i)
                continue
            i += 1

    def scan_function_constant_queries(self):
        """`is_function_constant_defined(x)` -> true/false (after declarations are known)."""
        toks = self.toks
        for i, t in enumerate(toks):
            if t.text == "is_function_constant_defined" and i + 1 < len(toks) and toks[i + 1].text == "(":
                close = self.match_close(i + 1)
                name = "".join(x.text for x in toks[i + 2 : close])
                defined = name in self.function_constants or (
                    name in self._fc_indices and self._fc_indices[name] in self.function_constants
                )
                self.edits.replace(t.start, toks[close].end, "true" if defined else "false")

    def brace_kind(self, i: int) -> str:
        start = self.statement_start(i)
        words = [t.text for t in self.toks[start:i]]
        if "namespace" in words or (words and words[0] == "extern" and len(words) <= 2):
            return "ns"
        if any(w in ("struct", "class", "union", "enum") for w in words) and "(" not in words:
            return "ns"
        if words and words[-1] == "=" or (words and words[-1] in (",", "(")):
            return "init"
        if "(" in words or (words and words[-1] in ("const", "noexcept", "override", "final")):
            return "body"
        if "=" in words:
            return "init"
        return "ns"

    def handle_attribute(self, i: int, in_body: bool) -> int:
        end, attrs = self.attribute_span(i)
        names = [a[0] for a in attrs]
        if all(n in CXX_ATTRIBUTES or "::" in n for n in names):
            return end
        self.blank(i, end)
        if "kernel" in names and not in_body:
            # `[[kernel]] void f(...)` (MLX spelling)
            return self.handle_kernel(i, attr_form=True, after=end)
        return end

    # ------------------------------------------------------------- kernels --
    def split_params(self, open_i: int, close_i: int) -> list[tuple[int, int]]:
        parts = []
        start = open_i + 1
        k = start
        angle = 0
        while k < close_i:
            t = self.toks[k].text
            if t in ("(", "[", "{"):
                k = self.match_close(k)
            elif t == "<" and k > start and self.toks[k - 1].kind == "ident":
                angle += 1
            elif t == ">" and angle > 0:
                angle -= 1
            elif t == ">>" and angle > 0:
                angle = max(0, angle - 2)
            elif t == "," and angle == 0:
                parts.append((start, k))
                start = k + 1
            k += 1
        if start < close_i:
            parts.append((start, close_i))
        return parts

    def parse_params(self, open_i: int, close_i: int, kernel_name: str) -> list[Param]:
        params: list[Param] = []
        explicit = set()
        pending = []
        for a, b in self.split_params(open_i, close_i):
            attrs = []
            name = ""
            k = a
            while k < b:
                if self.is_attr_open(k):
                    end, got = self.attribute_span(k)
                    attrs.extend(got)
                    k = end
                    continue
                if self.toks[k].kind == "ident":
                    name = self.toks[k].text
                k += 1
            p = Param(name=name, kind="buffer")
            for aname, args in attrs:
                if aname == "buffer":
                    p.index = self.attr_int(args)
                    explicit.add(p.index)
                elif aname == "threadgroup":
                    p.kind, p.index = "threadgroup", self.attr_int(args)
                elif aname in THREAD_ATTRIBUTES:
                    p.kind, p.attribute = "attribute", aname
                elif aname in UNSUPPORTED_PARAMETER_ATTRIBUTES:
                    self.error(a, f"kernel '{kernel_name}': parameter '{name}': "
                               + UNSUPPORTED_PARAMETER_ATTRIBUTES[aname])
                elif aname in ("function_constant",):
                    pass
                else:
                    self.error(a, f"kernel '{kernel_name}': parameter '{name}' has "
                               f"an attribute this runtime does not know: [[{aname}]]")
            if p.kind == "buffer" and p.index < 0:
                pending.append(p)
            params.append(p)
        # Buffers without [[buffer(n)]] take the free indices in order.
        nxt = 0
        for p in pending:
            while nxt in explicit:
                nxt += 1
            p.index = nxt
            explicit.add(nxt)
        return params

    def handle_kernel(self, i: int, attr_form: bool = False, after: int | None = None) -> int:
        toks = self.toks
        start = self.statement_start(i)
        if toks[start].text == "template" and start + 1 < len(toks) and toks[start + 1].text != "<":
            return i + 1  # part of an explicit instantiation, handled there
        if not attr_form:
            self.blank(i, i + 1)
        k = (after if attr_form else i + 1)
        # Find the parameter list: the first '(' at this level.
        while k < len(toks) and toks[k].text not in ("(", ";", "{"):
            if toks[k].text == "<":
                k = self.match_angle(k)
            elif self.is_attr_open(k):
                end, _ = self.attribute_span(k)
                self.blank(k, end)
                k = end
                continue
            k += 1
        if k >= len(toks) or toks[k].text != "(":
            return k
        name_i = k - 1
        name = toks[name_i].text
        close = self.match_close(k)
        params = self.parse_params(k, close, name)
        # Blank the parameter attributes.
        j = k
        while j < close:
            if self.is_attr_open(j):
                end, _ = self.attribute_span(j)
                self.blank(j, end)
                j = end
            else:
                j += 1
        # Function attributes after the parameter list.
        max_threads = 1024
        j = close + 1
        while j < len(toks) and self.is_attr_open(j):
            end, attrs = self.attribute_span(j)
            for aname, args in attrs:
                if aname == "max_total_threads_per_threadgroup":
                    max_threads = self.attr_int(args)
            self.blank(j, end)
            j = end
        # Function attributes before the name (e.g. `kernel [[max_total...]] void`).
        for q in range(start, name_i):
            if self.is_attr_open(q):
                _, attrs = self.attribute_span(q)
                for aname, args in attrs:
                    if aname == "max_total_threads_per_threadgroup":
                        max_threads = self.attr_int(args)
        if j >= len(toks) or toks[j].text != "{":
            return j  # a declaration; the definition comes later
        body_close = self.match_close(j)
        header = ""
        if toks[start].text == "template":
            header = self.text[toks[start].start : toks[self.match_angle(start + 1)].end]
        file, line = self.where(name_i)
        kdef = KernelDef(name, params, file, line, header, max_threads)
        self.defs.setdefault(name, []).append(kdef)
        # Threadgroup storage inside the body is collected while scanning it.
        self._current_def = kdef
        self.scan_body(j, body_close)
        self._current_def = None
        if not header:
            self.emit_entry(body_close, name, name, kdef, kdef.name)
        else:
            self.emit_tg_helper(body_close, kdef)
        return body_close + 1

    _current_def: KernelDef | None = None

    def scan_body(self, open_i: int, close_i: int):
        k = open_i + 1
        while k < close_i:
            t = self.toks[k]
            if self.is_attr_open(k):
                k = self.handle_attribute(k, True)
                continue
            if t.kind == "ident" and t.text == "threadgroup":
                k = self.handle_threadgroup(k)
                continue
            k += 1
        self._body_done = close_i

    def handle_threadgroup(self, i: int) -> int:
        toks = self.toks
        prev = toks[i - 1].text if i > 0 else ";"
        if prev not in (";", "{", "}", ":", ")"):
            return i + 1  # a qualifier inside an expression or a cast
        # The declaration runs to the next ';' at this level.
        k = i + 1
        end = k
        depth = 0
        while end < len(toks):
            tx = toks[end].text
            if tx in ("(", "[", "{"):
                depth += 1
            elif tx in (")", "]", "}"):
                depth -= 1
            elif tx == ";" and depth == 0:
                break
            end += 1
        decl = toks[k:end]
        if any(t.text in ("*", "&", "&&", "(") for t in decl):
            return i + 1  # pointer/reference to threadgroup memory: just a qualifier
        # Split declarators: `T a[4], b[8];`
        spec_end = None
        for q, t in enumerate(decl):
            if t.kind == "ident" and (q + 1 == len(decl) or decl[q + 1].text in ("[", ",", "=")):
                spec_end = q
                break
        if spec_end is None:
            return i + 1
        spec = self.text[decl[0].start : decl[spec_end - 1].end] if spec_end > 0 else ""
        spec = spec.replace("const ", "").strip()
        out = []
        q = spec_end
        while q < len(decl):
            name = decl[q].text
            q += 1
            dims = ""
            while q < len(decl) and decl[q].text == "[":
                close = q
                depth = 0
                while close < len(decl):
                    if decl[close].text == "[":
                        depth += 1
                    elif decl[close].text == "]":
                        depth -= 1
                        if depth == 0:
                            break
                    close += 1
                dims += self.text[decl[q].start : decl[close].end]
                q = close + 1
            if q < len(decl) and decl[q].text == "=":
                self.error(i, f"threadgroup variable '{name}' cannot have an initializer")
            if q < len(decl) and decl[q].text == ",":
                q += 1
            tg_type = f"{spec}{dims}"
            slot = self.tg_slot
            self.tg_slot += 1
            out.append(f"auto& {name} = ::mk::tg_ref<{tg_type}>({slot}u);")
            if self._current_def is not None:
                self._current_def.tg_types.append(tg_type)
        self.edits.replace(toks[i].start, toks[end].end, " ".join(out))
        return end + 1

    def handle_function_constant(self, i: int) -> int:
        """`constant T name [[function_constant(n)]];` at namespace scope."""
        toks = self.toks
        end = i
        while end < len(toks) and toks[end].text not in (";", "{", "("):
            if self.is_attr_open(end):
                end = self.attribute_span(end)[0]
                continue
            end += 1
        if end >= len(toks) or toks[end].text != ";":
            return i + 1
        for q in range(i, end):
            if self.is_attr_open(q):
                aend, attrs = self.attribute_span(q)
                for aname, args in attrs:
                    if aname == "function_constant":
                        index = self.attr_int(args)
                        name = toks[q - 1].text
                        type_text = self.text[toks[i + 1].start : toks[q - 2].end]
                        value = self.function_constants.get(name, self.function_constants.get(index))
                        self._fc_indices[name] = index
                        init = "{}" if value is None else f"({_cxx_value(value)})"
                        self.edits.replace(
                            toks[i].start, toks[end].end,
                            f"constexpr {type_text} {name} = {type_text}{init};",
                        )
                        return end + 1
        return i + 1

    def handle_instantiation(self, i: int) -> int:
        toks = self.toks
        end = i
        depth = 0
        while end < len(toks):
            tx = toks[end].text
            if tx in ("(", "["):
                depth += 1
            elif tx in (")", "]"):
                depth -= 1
            elif tx in (";", "{") and depth == 0:
                break
            end += 1
        host_name = None
        is_kernel = False
        k = i + 1
        while k < end:
            if self.is_attr_open(k):
                aend, attrs = self.attribute_span(k)
                for aname, args in attrs:
                    if aname == "host_name":
                        host_name = self.attr_string(args)
                    if aname == "kernel":
                        is_kernel = True
                self.blank(k, aend)
                k = aend
                continue
            if toks[k].text == "kernel":
                is_kernel = True
                self.blank(k, k + 1)
            k += 1
        if not is_kernel or host_name is None:
            return end + 1
        # The template-id: before the parameter list, or before ';'.
        k = i + 1
        stop = end
        while k < end:
            if self.is_attr_open(k):
                k = self.attribute_span(k)[0]
                continue
            if toks[k].text == "decltype" and k + 1 < end and toks[k + 1].text == "(":
                k = self.match_close(k + 1) + 1  # MLX: `decltype(f<T>) f<T>;`
                continue
            if toks[k].text == "<" and toks[k - 1].kind == "ident":
                k = self.match_angle(k) + 1
                continue
            if toks[k].text == "(":
                stop = k
                break
            k += 1
        # Walk back over `ns::name<args>`.
        q = stop - 1
        if toks[q].text in (">", ">>"):
            depth = 0
            while q > i:
                if toks[q].text == ">":
                    depth += 1
                elif toks[q].text == ">>":
                    depth += 2
                elif toks[q].text == "<":
                    depth -= 1
                    if depth == 0:
                        break
                q -= 1
            lt = q
            q -= 1
        else:
            lt = None
        name_i = q
        while (q - 2 > i and toks[q - 1].text == "::" and toks[q - 2].kind == "ident"
               and toks[q - 2].text not in _DECL_KEYWORDS):
            q -= 2
        if q - 1 > i and toks[q - 1].text == "::":
            q -= 1
        template_id = self.text[toks[q].start : toks[stop - 1].end]
        qualifier = self.text[toks[q].start : toks[name_i].start]
        name = toks[name_i].text
        targs = self.text[toks[lt].start : toks[stop - 1].end] if lt is not None else ""
        nparams = None
        if stop < end and toks[stop].text == "(":
            nparams = len(self.split_params(stop, self.match_close(stop)))
        candidates = self.defs.get(name, [])
        if nparams is not None:
            matching = [d for d in candidates if len(d.params) == nparams]
            candidates = matching or candidates
        if not candidates:
            self.error(i, f"host_name('{host_name}'): no kernel template named '{name}' "
                       "is defined before this instantiation")
        kdef = candidates[-1]
        helper = f"{qualifier}__mk_tgsize_{id(kdef)}{targs}" if kdef.tg_types and self.tg_helpers else None
        self.emit_entry(end, host_name, template_id, kdef, name, helper)
        return end + 1

    def emit_tg_helper(self, at: int, kdef: KernelDef):
        if not kdef.tg_types or not self.tg_helpers:
            return
        total = " + ".join(f"sizeof({t})" for t in kdef.tg_types)
        self.edits.insert(
            self.toks[at].end,
            f" {kdef.template_header} constexpr unsigned long long __mk_tgsize_{id(kdef)}() "
            f"{{ return {total}; }}",
        )

    def emit_entry(self, at: int, host_name: str, callee: str, kdef: KernelDef,
                   name: str, tg_helper: str | None = None):
        sym = len(self.entries)
        if not kdef.template_header and kdef.tg_types and self.tg_helpers:
            tg_expr = " + ".join(f"sizeof({t})" for t in kdef.tg_types)
        elif tg_helper:
            tg_expr = f"{tg_helper}()"
        else:
            tg_expr = None
        self.edits.insert(self.toks[at].end, entry_code(sym, callee, kdef.params, tg_expr, self.workitem))
        self.entries.append(
            KernelEntry(host_name, sym, kdef.params, kdef.file, kdef.line,
                        kdef.max_threads, tg_expr is not None)
        )


def entry_code(sym: int, callee: str, params: list[Param], tg_expr: str | None, workitem: bool) -> str:
    """The entry points of kernel `sym`, which calls `callee` with `params`
    bound: the tracked loop (__mk_entry_N), the direct loop (__mk_fast_N),
    the bytes each buffer must hold (__mk_sizes_N), the static threadgroup
    memory (__mk_tgmem_N, when `tg_expr` gives it) and, with `workitem`, the
    per-thread function for the work-item-loop compiler (__mk_wi_N). One
    line of C++, for the rewriters to append where the kernel is in scope."""
    args = []
    sizes = []
    for p_i, p in enumerate(params):
        ptype = f"::mk::arg_t<__mk_k{sym}::F, {p_i}>"
        if p.kind == "buffer":
            args.append(f"::mk::buffer_arg<{ptype}>(r->launch, {p.index}u)")
            sizes.append(f"{p.index}ull, ::mk::needed_bytes<{ptype}>()")
        elif p.kind == "threadgroup":
            args.append(f"::mk::threadgroup_arg<{ptype}>(r, {p.index}u)")
        else:
            args.append(f"::mk::attr<{ptype}>({THREAD_ATTRIBUTES[p.attribute]})")
    sizes.insert(0, f"{len(sizes)}ull")
    hoisted, fast_args = [], []
    for p_i, (p, a) in enumerate(zip(params, args)):
        if p.kind == "buffer":
            hoisted.append(f"decltype(auto) __mk_b{p_i} = {a};")
            fast_args.append(f"__mk_b{p_i}")
        else:
            fast_args.append(a)
    code = (
        f" namespace __mk_k{sym} {{ using F = decltype(&{callee}); }}"
        f' extern "C" __attribute__((visibility("default"))) void __mk_entry_{sym}(::mk::Run* r)'
        f" {{ ::mk::run_threads(r, [](::mk::Run* r, const ::mk::ThreadIds& t)"
        f" __attribute__((always_inline)) {{ (void)r; (void)t; [[clang::always_inline]] {callee}("
        + ", ".join(args)
        + "); }); }"
        # The same without per-thread bookkeeping, used when the kernel
        # turns out never to synchronise (mode "direct").
        # Buffers are bound once, before the loop: a store through one
        # could otherwise alias the launch record and force a reload of
        # every buffer address per thread.
        f' extern "C" __attribute__((visibility("default"))) void __mk_fast_{sym}(::mk::Run* r)'
        f" {{ {' '.join(hoisted)} ::mk::run_threads_fast(r, [&](::mk::Run* r, const ::mk::ThreadIds& t)"
        f" __attribute__((always_inline)) {{ (void)r; (void)t; [[clang::always_inline]] {callee}("
        + ", ".join(fast_args)
        + "); }); }"
        f' extern "C" __attribute__((visibility("default"))) const unsigned long long'
        f" __mk_sizes_{sym}[] = {{ {', '.join(sizes)} }};"
    )
    if tg_expr:
        code += (
            f' extern "C" __attribute__((visibility("default"))) const unsigned long long'
            f" __mk_tgmem_{sym} = {tg_expr};"
        )
    if workitem:
        # The kernel as one thread of a group described by `g`, for the
        # work-item-loop compiler (mk/workitem.h, runtime/workitem.py).
        wi_args = []
        for p_i, p in enumerate(params):
            ptype = f"::mk::arg_t<__mk_k{sym}::F, {p_i}>"
            if p.kind == "buffer":
                wi_args.append(f"::mk::buffer_arg<{ptype}>(g, {p.index}u)")
            elif p.kind == "threadgroup":
                wi_args.append(f"::mk::threadgroup_arg<{ptype}>(g, {p.index}u)")
            else:
                expr = THREAD_ATTRIBUTES[p.attribute].replace("r->launch->", "g->")
                wi_args.append(f"::mk::attr<{ptype}>({expr})")
        code += (
            f' extern "C" __attribute__((visibility("hidden"))) void __mk_wi_{sym}('
            "const ::mk::WiGroup* g, unsigned int x, unsigned int y, unsigned int z, unsigned int lin)"
            " { const ::mk::ThreadIds t = ::mk::wi_ids(g, x, y, z, lin); (void)t; (void)g;"
            f" [[clang::always_inline]] {callee}(" + ", ".join(wi_args) + "); }"
        )
    return code


def _cxx_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value}ll"
    if isinstance(value, float):
        return repr(float(value)) + "f" if "e" in repr(value) or "." in repr(value) else f"{value}.0f"
    raise TypeError(f"function constant values must be bool, int or float, not {type(value).__name__}")


def rewrite(text: str, function_constants: dict | None = None, tg_helpers: bool = True,
            workitem: bool = False) -> RewriteResult:
    # Overloads that differ only in address space: one copy (address_spaces.py).
    rw = Rewriter(collapse_address_spaces(text), function_constants)
    rw.tg_helpers = tg_helpers
    rw.workitem = workitem
    return rw.run()
