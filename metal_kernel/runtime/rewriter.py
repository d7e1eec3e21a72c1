"""Turns preprocessed MSL into C++ that clang compiles against mk/prelude.h.

What changes (everything else is left to the C++ compiler):
- Metal attributes `[[buffer(0)]]`, `[[thread_position_in_grid]]`,
  `[[host_name("x")]]`, ... are removed, after being recorded;
- the `kernel` qualifier becomes `inline` (a kernel is compiled only into
  the libraries that run it) and each kernel, or each `host_name`
  instantiation of a kernel template, gets entry points (runtime/entries.py)
  after it, in the same scope;
- `threadgroup` storage declared in a function body becomes a reference to
  per-threadgroup memory handed out by the runtime;
- kernel declarations are checked as Apple's compiler checks them
  (runtime/signatures.py);
- token-level rewrites (runtime/lexical.py): function constants become
  `constexpr` values, floating literals get `f` (Metal has no double),
  `#pragma unroll(N)` gets its macros expanded.

Edits of the user's text never add or remove a newline, so the
preprocessor's line markers keep every line (and every compiler diagnostic)
on the user's source. Entry points go on lines of their own, under a line
marker of their own (entries.GENERATED_FILE) and one restoring the user's
numbering after them.

A rewrite yields the C++ for any subset of the kernels (`RewriteResult.source`):
kernels outside the subset get no entry points and their explicit
instantiations are blanked, so clang generates code only for the kernels a
library needs (runtime/compiler.py compiles large files kernel by kernel).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .address_spaces import collapse as collapse_address_spaces
from .entries import EntrySpec, Param, check_code, entry_code, entry_position
from .lexical import LexicalRewrites
from .signatures import SignatureRules
from .threadgroup import ThreadgroupStorage

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

@dataclass
class KernelDef:
    name: str  # unqualified
    qualified: str  # "::ns::name"
    params: list[Param]
    file: str
    line: int
    is_template: bool
    max_threads: int
    fn_type: str  # non-templates: "void(<parameters>)"


@dataclass
class KernelEntry:
    host_name: str
    symbol: int  # entry points are __mk_entry_<symbol>
    params: list[Param]
    file: str
    line: int
    max_threads: int
    # "direct" (never synchronises), "direct-tracked", "workitem-loops" or
    # "fibers"; set by the compiler from the compiled code.
    mode: str = "fibers"
    # Direct kernels: whether the library has a __mk_stream_N variant with
    # non-temporal stores (runtime/streaming.py).
    streaming: bool = False
    # Work-item kernels: whether full simdgroups run the kernel once each
    # with whole matrices (runtime/simdgroup_uniform.py).
    whole_simdgroup: bool = False
    # Bytes of threadgroup memory the kernel declares in its body, read
    # from the compiled code (None: not known, measured at run time).
    tg_bytes: int | None = None
    # The library file (in the cache's objects/) that holds its entry points.
    object: str = ""
    # "metal" or "cuda": whose memory model orders its threadgroups (the
    # checker's fences and atomics, mk/check_sync.h).
    memory_model: str = "metal"


@dataclass
class RewriteResult:
    """The rewritten text without entry points, and what to add per kernel."""

    text: str
    kernels: list[KernelEntry]
    _edits: list[tuple[int, int, str]] = field(default_factory=list)
    _specs: dict[int, EntrySpec] = field(default_factory=dict)
    _entry_at: dict[int, tuple[int, str, str]] = field(default_factory=dict)  # offset, before, after
    _instantiations: dict[int, tuple[int, int]] = field(default_factory=dict)

    def source(self, symbols: Iterable[int] | None = None, workitem: bool = False) -> str:
        """C++ for the kernels `symbols` (all when None), with per-thread
        functions for the work-item compiler when `workitem`. Explicit
        instantiations of kernels are blanked: the entry points instantiate
        what they call, and nothing else gets code."""
        return self._render(symbols, lambda spec: entry_code(spec, workitem), keep_instantiations=False)

    def check_source(self) -> str:
        """C++ for a syntax check of the whole file: every instantiation, and
        every kernel called as its entry points call it."""
        return self._render(None, check_code, keep_instantiations=True)

    def _render(self, symbols, code, keep_instantiations: bool) -> str:
        wanted = set(self._specs) if symbols is None else set(symbols)
        edits = list(self._edits)
        for sym, spec in self._specs.items():
            if sym in wanted:
                at, before, after = self._entry_at[sym]
                edits.append((at, at, before + code(spec) + after))
            span = self._instantiations.get(sym)
            if span and not keep_instantiations:
                edits.append((span[0], span[1], _blank_text(self.text[span[0]:span[1]])))
        return _apply(self.text, edits)


def _blank_text(text: str) -> str:
    """What replaces `text` when it is removed: its newlines, or one space."""
    return "\n" * text.count("\n") or " "


def _apply(text: str, edits: list[tuple[int, int, str]]) -> str:
    out = []
    pos = 0
    for start, end, repl in sorted(edits, key=lambda e: (e[0], e[1])):
        if start < pos:  # inside an edit already applied (a blanked statement): skip
            continue
        out.append(text[pos:start])
        out.append(repl)
        pos = end
    out.append(text[pos:])
    return "".join(out)


class Rewriter(LexicalRewrites, SignatureRules, ThreadgroupStorage):
    """Declarations: kernels, their instantiations and their entry points."""

    def __init__(self, text: str, function_constants: dict | None = None):
        super().__init__(text)
        self.function_constants = function_constants or {}
        self.defs: dict[str, list[KernelDef]] = {}
        self.entries: list[KernelEntry] = []
        self.specs: dict[int, EntrySpec] = {}
        self.entry_at: dict[int, tuple[int, str, str]] = {}
        self.instantiations: dict[int, tuple[int, int]] = {}
        self.tg_slot = 0
        self._fc_indices: dict[str, int] = {}

    # -------------------------------------------------------------- passes --
    def run(self) -> RewriteResult:
        self.scan_directives()
        self.scan_literals_and_types()
        self.scan_declarations()
        self.scan_function_constant_queries()
        self.replace(len(self.text), len(self.text),
                     '\nextern "C" __attribute__((visibility("default"))) const ::mk::RuntimeApi* __mk_rt = nullptr;\n')
        return RewriteResult(self.text, self.entries, self.edits, self.specs, self.entry_at, self.instantiations)

    def scan_declarations(self):
        """Walks scopes: namespaces, function bodies, kernels, instantiations."""
        toks = self.toks
        # Open braces: ("ns", name) for a namespace (name "" when anonymous),
        # ("other", "") for classes and extern blocks, ("body", "") for a
        # function body or any block inside one.
        scopes: list[tuple[str, str]] = []
        i = 0
        n = len(toks)
        while i < n:
            t = toks[i]
            in_body = any(s[0] == "body" for s in scopes)
            if t.text == "{":
                scopes.append(("body", "") if in_body else self.brace_kind(i))
                i += 1
                continue
            if t.text == "}":
                if scopes:
                    scopes.pop()
                i += 1
                continue
            self._namespace = "::".join(s[1] for s in scopes if s[0] == "ns" and s[1])
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

    _namespace = ""

    def brace_kind(self, i: int) -> tuple[str, str]:
        start = self.statement_start(i)
        words = [t.text for t in self.toks[start:i]]
        if "namespace" in words:
            after = words[words.index("namespace") + 1:]
            return ("ns", "".join(w for w in after if w not in ("inline",)))
        if words and words[0] == "extern" and len(words) <= 2:
            return ("other", "")
        if any(w in ("struct", "class", "union", "enum") for w in words) and "(" not in words:
            return ("other", "")
        if words and words[-1] == "=" or (words and words[-1] in (",", "(")):
            return ("init", "")
        if "(" in words or (words and words[-1] in ("const", "noexcept", "override", "final")):
            return ("body", "")
        if "=" in words:
            return ("init", "")
        return ("other", "")

    def handle_attribute(self, i: int, in_body: bool) -> int:
        end, attrs = self.attribute_span(i)
        names = [a[0] for a in attrs]
        if all(n in CXX_ATTRIBUTES or "::" in n for n in names):
            return end
        if "kernel" in names and not in_body:
            # `[[kernel]] void f(...)` (MLX spelling)
            return self.handle_kernel(i, attr_end=end)
        self.blank(i, end)
        return end

    # ------------------------------------------------------------- kernels --
    def handle_kernel(self, i: int, attr_end: int | None = None) -> int:
        """A kernel (`kernel void f(...)`, or `[[kernel]] void f(...)` with
        the attribute at i ending at `attr_end`): its parameters, its checks,
        and entry points after its body when it is not a template."""
        toks = self.toks
        start = self.statement_start(i)
        if toks[start].text == "template" and start + 1 < len(toks) and toks[start + 1].text != "<":
            return i + 1  # part of an explicit instantiation, handled there
        is_template = toks[start].text == "template"
        # Non-template kernels become inline: each library compiles only the
        # kernels it runs (their entry points call them).
        self.blank(i, attr_end if attr_end is not None else i + 1, None if is_template else "inline")
        k = attr_end if attr_end is not None else i + 1
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
        is_definition = self.definition_follows(close)
        if is_definition:
            self.check_returns_void(start, name_i, name)
        params = self.parse_params(k, close, name, check=is_definition)
        fn_type = f"void({self.tokens_text(k + 1, close)})"
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
        file, line = self.where(name_i)
        qualified = f"::{self._namespace}::{name}" if self._namespace else f"::{name}"
        kdef = KernelDef(name, qualified, params, file, line, is_template, max_threads, fn_type)
        self.defs.setdefault(name, []).append(kdef)
        self.scan_body(j, body_close)
        if not is_template:
            self.add_entry(body_close, name, kdef, qualified, fn_type)
        return body_close + 1

    def definition_follows(self, close: int) -> bool:
        """Whether the parameter list closing at `close` is followed by a body."""
        j = close + 1
        while j < len(self.toks) and self.is_attr_open(j):
            j = self.attribute_span(j)[0]
        return j < len(self.toks) and self.toks[j].text == "{"

    def handle_instantiation(self, i: int) -> int:
        """`template [[host_name("x")]] kernel <type> name<args>(params);`
        (template arguments may be deduced; <type> may be a typedef or
        `decltype(...)` of the kernel)."""
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
        lt = None
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
        name_i = q
        while (q - 2 > i and toks[q - 1].text == "::" and toks[q - 2].kind == "ident"
               and toks[q - 2].text not in _DECL_KEYWORDS):
            q -= 2
        if q - 1 > i and toks[q - 1].text == "::":
            q -= 1
        name = toks[name_i].text
        targs = self.tokens_text(lt, stop) if lt is not None else ""
        params_span = (stop, self.match_close(stop)) if stop < end and toks[stop].text == "(" else None
        kdef = self.instantiated_def(i, name, host_name, params_span)
        if params_span:
            fn_type = f"void({self.tokens_text(params_span[0] + 1, params_span[1])})"
        else:  # `kernel some_t name<args>;` or `decltype(name<args>) name<args>;`
            fn_type = " ".join(w for w in self.tokens_text(i + 1, q).split(" ") if w != "kernel")
        sym = self.add_entry(end, host_name, kdef, kdef.qualified + targs, fn_type)
        self.instantiations[sym] = (toks[i].start, toks[end].end)
        return end + 1

    def instantiated_def(self, at: int, name: str, host_name: str, params_span) -> KernelDef:
        """The kernel template an instantiation names: of several with that
        name, the one with as many parameters."""
        candidates = self.defs.get(name, [])
        if not candidates:
            self.error(at, f"host_name('{host_name}'): no kernel template named '{name}' "
                       "is defined before this instantiation")
        if params_span is not None:
            count = len(self.split_params(*params_span))
            candidates = [d for d in candidates if len(d.params) == count]
            if not candidates:
                self.error(at, f"host_name('{host_name}'): the instantiation declares {count} parameter(s) "
                           f"but no kernel template '{name}' has that many")
        return candidates[-1]

    def add_entry(self, at: int, host_name: str, kdef: KernelDef, callee: str, fn_type: str) -> int:
        """Records the entry points of one kernel, to go after token `at`."""
        sym = len(self.entries)
        self.specs[sym] = EntrySpec(sym, callee, fn_type, kdef.params)
        self.entry_at[sym] = entry_position(self, at, sym)
        self.entries.append(KernelEntry(host_name, sym, kdef.params, kdef.file, kdef.line, kdef.max_threads))
        return sym


def rewrite(text: str, function_constants: dict | None = None) -> RewriteResult:
    # Overloads that differ only in address space: one copy (address_spaces.py).
    return Rewriter(collapse_address_spaces(text), function_constants).run()
