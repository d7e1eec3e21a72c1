"""Stage 3 of the port (emit): the .metal file.

- each kernel becomes `kernel void` with [[buffer(i)]] parameters in CUDA
  order (pointers in `device` memory, by-value scalars and structs as
  `constant T&`), then the index builtins it uses, its dynamic threadgroup
  memory ([[threadgroup(0)]]) and the global variables it reads as buffers;
  threadgroup arrays are declared at the top of its body, its helpers'
  among them;
- each instantiation of a kernel template the file launches gets a
  `template [[host_name("k_float")]] [[kernel]] void k<float>(...)` line;
- each helper is emitted once per combination of address spaces its call
  sites give its pointer parameters, with what it needs from its callers
  (facts.Needs) as leading parameters;
- types, constants and namespaces are kept; host code is left out;
- what a kernel needs that does not translate keeps it out of the port:
  its text stays, inside `#if 0`, with the diagnostics as comments.
"""

from __future__ import annotations

import re

from ..analyse import Analyser, Instantiation
from ..parse import declarator_name, keywords, walk
from . import table as T
from .diagnostics import Diagnostic, make
from .facts import SYNC_COUNTER, Facts, Function, Needs, SharedVar, _is_function_declarator
from .helpers import helper_text
from .mapper import Renderer, Translation, kernel_param_is_modified, mangle, split_template_args, substitute
from .model import ELEMENT_BYTES, SCALAR_DTYPES, Chunk, GlobalSpec, KernelPort, ParamSpec, canonical_type
from .globals_init import global_bytes
from .source import CudaSource
from .spaces import buffer_use

HEADER = """\
// Metal port of {file}, made by `metal-kernel port` from the CUDA source.
// Each CUDA kernel is a Metal kernel with its parameters in CUDA order ([[buffer(i)]]); template
// kernels are instantiated with [[host_name]] for each instantiation the CUDA file launches.
// Diagnostics (MKxxxx) are comments above the code they concern: see docs/port-diagnostics.md.
// Compile with fast math off (MTLCompileOptions.mathMode = .safe) to keep CUDA's IEEE semantics.
#include <metal_stdlib>
using namespace metal;
"""


def metal_name(spelling: str) -> str:
    """`ns::k<__half, 4>` -> `k___half_4` -> `k_half_4`: the Metal function name of an instantiation."""
    base, lt, rest = spelling.partition("<")
    return re.sub(r"_+", "_", re.sub(r"\W+", "_", base.split("::")[-1] + lt + rest)).strip("_")


class Emitter:
    def __init__(self, src: CudaSource, facts: Facts, tr: Translation):
        self.src = src
        self.facts = facts
        self.tr = tr
        self.typedefs = self.collect_typedefs()
        self.kernels: list[KernelPort] = []
        self.kernel_text: dict[int, tuple[str, list[KernelPort]]] = {}  # kernel node start -> (text, ports)
        self.instances: dict[int, dict[tuple, tuple[str, list[Diagnostic]]]] = {}  # helper start -> sig -> text
        self.errors_by_function: dict[str, list[Diagnostic]] = {}
        self.names: set[str] = set()

    # -------------------------------------------------------------- run --
    def run(self) -> tuple[list[Chunk], list[KernelPort]]:
        for f in self.facts.functions:
            if f.kernel:
                self.emit_kernel(f)
        self.render_requested_helpers()
        for f in self.facts.functions:
            if not f.kernel and f.node.start_byte not in self.instances:
                self.render_instance(f, self.default_sig(f))
        self.broken_names: dict[str, list[Diagnostic]] = {}
        self.tail: list[Chunk] = []  # explicit instantiations, after everything they may name
        self.device_names = self.names_device_code_uses()
        chunks = self.items(self.src.pp.root) + self.tail
        self.attribute_errors()
        head = HEADER.format(file=self.src.filename.split("/")[-1])
        helpers = helper_text(self.tr.helpers)
        out = [Chunk(head, name="header")]
        if helpers:
            out.append(Chunk("// ---- helpers for CUDA constructs Metal has no single call for ----\n" + helpers,
                             name="helpers"))
        return out + chunks, self.kernels

    def collect_typedefs(self) -> dict[str, str]:
        out = {}
        for n in walk(self.src.pp.root):
            if n.type == "type_definition":
                t = n.child_by_field_name("type")
                d = n.child_by_field_name("declarator")
                name = declarator_name(d) if d is not None else None
                if t is not None and name is not None and d.type == "type_identifier":
                    out[self.src.node_text(name)] = self.src.node_text(t)
            elif n.type == "alias_declaration":
                name = n.child_by_field_name("name")
                t = n.child_by_field_name("type")
                if name is not None and t is not None:
                    out[self.src.node_text(name)] = self.src.node_text(t)
        return out

    # ---------------------------------------------------------- kernels --
    def instantiations(self, f: Function) -> list[Instantiation]:
        end = f.body.end_byte if f.body is not None else f.node.end_byte
        return [i for i in self.src.unit.instantiations if i.kernel.end == end]

    def translator_failure(self, f: Function, e: Exception) -> tuple[str, Diagnostic]:
        """A bug of the translator on one function must not lose the file:
        that function is left out with a diagnostic, the rest is ported."""
        d = self.tr.diagnose("MK1017", f.node, f"the translator failed on '{f.name}' ({type(e).__name__}: {e}); "
                                               "please report it", f.name)
        return "// " + self.src.node_text(f.node).replace("\n", "\n// "), d

    def emit_kernel(self, f: Function):
        insts = self.instantiations(f) if f.template is not None else []
        r = KernelRenderer(self.tr, f, self)
        try:
            text = r.render()
        except Exception as e:  # noqa: BLE001 - reported as a diagnostic
            text, d = self.translator_failure(f, e)
            r.errors.append(d)
        ports = []
        spellings = []
        if f.template is None:
            spellings.append(("::".join([*(s for s in f.scope if s), f.name]), None))
        else:
            for inst in insts:
                spellings.append((inst.spelling, inst.template_args))
            if not insts:
                d = self.tr.diagnose("MK1022", f.node, f"kernel template '{f.name}' has no instantiation this "
                                                        "file names (launch it with explicit template arguments)",
                                     f.name)
                r.errors.append(d)
                spellings.append((f"{f.name}<>", None))
        lines = []
        for spelling, targs in spellings:
            name = self.unique_name(metal_name(spelling) if targs is not None else r.metal_function_name)
            port = r.port(spelling, name, targs)
            ports.append(port)
            if targs is not None:
                lines.append(r.instantiation_line(name, targs) if r.param_list else None)
                for a in split_template_args(targs):
                    if re.search(r"\bdouble\b", a):
                        port.diagnostics.append(self.tr.diagnose(
                            "MK1001", f.node, f"instantiation '{spelling}': 'double' (Apple GPUs have no 64-bit "
                                              "floating point)", spelling))
            else:
                lines.append(None)
        self.kernel_text[f.node.start_byte] = (text, ports, lines, r)
        self.kernels.extend(ports)

    def unique_name(self, name: str) -> str:
        base, k = name, 2
        while name in self.names:
            name = f"{base}_{k}"
            k += 1
        self.names.add(name)
        return name

    # ---------------------------------------------------------- helpers --
    def default_sig(self, f: Function) -> tuple:
        return tuple("device" if p.pointer else ("thread" if p.reference else None) for p in f.params)

    def render_requested_helpers(self):
        done = set()
        while True:
            todo = [(start, sig) for start, sigs in self.tr.requests.items() for sig in sigs
                    if (start, sig) not in done]
            if not todo:
                return
            for start, sig in todo:
                done.add((start, sig))
                f = next((g for g in self.facts.functions if g.node.start_byte == start), None)
                if f is not None:
                    self.render_instance(f, sig)

    def render_instance(self, f: Function, sig: tuple):
        per = self.instances.setdefault(f.node.start_byte, {})
        if sig in per:
            return
        r = HelperRenderer(self.tr, f, sig, self)
        try:
            text = r.render()
        except Exception as e:  # noqa: BLE001 - reported as a diagnostic
            text, d = self.translator_failure(f, e)
            r.errors.append(d)
        per[sig] = (text, r.errors)
        self.errors_by_function.setdefault(f.name, []).extend(d for d in r.errors
                                                              if d not in self.errors_by_function.get(f.name, []))

    def reachable(self, f: Function) -> set[str]:
        seen, todo = set(), [f]
        while todo:
            g = todo.pop()
            for c in g.calls:
                for h in self.facts.helpers(c.callee):
                    if h.name not in seen:
                        seen.add(h.name)
                        todo.append(h)
        return seen

    def file_scope_items(self):
        todo, out = [self.src.pp.root], []
        while todo:
            node = todo.pop()
            for n in node.children:
                if n.type in ("namespace_definition", "linkage_specification"):
                    body = n.child_by_field_name("body")
                    if body is not None:
                        todo.append(body)
                elif n.type != "function_definition" and not self.in_drops(n):
                    out.append(n)
        return out

    def declared_names(self, node) -> set[str]:
        """The names a file-scope type or constant declares (struct, typedef,
        alias, enum and its enumerators, variables)."""
        out = set()
        for n in walk(node):
            if n.type in ("compound_statement", "field_declaration_list") and n != node:
                continue
            p = n.parent
            if n.type == "type_identifier" and p is not None and p.type in (
                    "struct_specifier", "class_specifier", "union_specifier", "enum_specifier") and \
                    p.child_by_field_name("name") == n:
                out.add(self.src.node_text(n))
            elif n.type == "type_identifier" and p is not None and p.type in ("type_definition", "alias_declaration"):
                out.add(self.src.node_text(n))
            elif n.type == "enumerator":
                name = n.child_by_field_name("name")
                if name is not None:
                    out.add(self.src.node_text(name))
            elif n.type in ("init_declarator",) and p is not None and p.type == "declaration" and p.parent == node.parent:
                d = declarator_name(n.child_by_field_name("declarator"))
                if d is not None:
                    out.add(self.src.node_text(d))
        return out

    def names_device_code_uses(self) -> set[str]:
        """Every name device code reaches, through the file-scope types and
        constants it names (a fixpoint): host-only types are left out."""
        words = set()
        for f in self.facts.functions:
            words |= {self.src.node_text(n) for n in walk(f.node) if n.type in ("identifier", "type_identifier")}
        items = [(n, self.declared_names(n)) for n in self.file_scope_items()]
        changed = True
        while changed:
            changed = False
            for node, names in items:
                if names & words:
                    new = {self.src.node_text(x) for x in walk(node) if x.type in ("identifier", "type_identifier")}
                    if not new <= words:
                        words |= new
                        changed = True
        return words

    def host_only(self, node) -> bool:
        names = self.declared_names(node)
        return bool(names) and not (names & self.device_names)

    def names_used(self, f: Function) -> set[str]:
        return {self.src.node_text(n) for n in walk(f.node) if n.type in ("identifier", "type_identifier")}

    def warp_size_assumptions(self) -> list[tuple[str, Diagnostic]]:
        """`#define WARP_SIZE 64`, `constexpr int kWarpSize = 64;` in the user's
        files: (the name, its MK1007 diagnostic). Pass 1 expanded the macro,
        so kernels are matched by their original lines."""
        out = []
        pattern = re.compile(r"^\s*(?:#\s*define\s+(\w*warp\w*size\w*)\s*\(?\s*(\d+)"
                             r"|(?:static\s+)?(?:const|constexpr)[\w\s]*?\b(\w*warp\w*size\w*)\s*=\s*(\d+))",
                             re.IGNORECASE)
        for i, line in enumerate(self.src.original.splitlines(), 1):
            m = pattern.match(line)
            if not m:
                continue
            name, value = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            if int(value) != 32:
                d = make("MK1007", (self.src.filename, i, m.start(1) + 1 if m.group(1) else 1),
                         f"'{name}' is {value}: Apple simdgroups are 32 lanes wide")
                self.tr.diagnostics[("MK1007", i, name)] = d
                out.append((name, d))
        return out

    def original_text(self, f: Function) -> str:
        file, lo, _ = self.src.where(f.node.start_byte)
        _, hi, _ = self.src.where(max(f.node.end_byte - 1, f.node.start_byte))
        if file != self.src.filename:
            return ""
        return "\n".join(self.src.original.splitlines()[lo - 1:hi])

    def attribute_errors(self):
        """A kernel is not translated when it, a helper it calls, or a type or
        constant it names has an error."""
        warp_sizes = self.warp_size_assumptions()
        for start, (text, ports, lines, r) in self.kernel_text.items():
            f = r.fn
            errs = list(r.errors)
            if warp_sizes:
                texts = self.original_text(f) + "".join(self.original_text(g) for name in self.reachable(f)
                                                         for g in self.facts.by_name.get(name, []))
                errs += [d for name, d in warp_sizes if re.search(rf"\b{re.escape(name)}\b", texts)]
            reach = sorted(self.reachable(f))
            for name in reach:
                for d in self.errors_by_function.get(name, []):
                    if d not in errs:
                        errs.append(d)
            if self.broken_names:
                used = self.names_used(f)
                for name in reach:
                    for g in self.facts.by_name.get(name, []):
                        used |= self.names_used(g)
                for name in sorted(used & set(self.broken_names)):
                    errs += [d for d in self.broken_names[name] if d not in errs]
            for p in ports:
                p.diagnostics = errs + [d for d in p.diagnostics if d not in errs]
                p.translated = not p.diagnostics

    def kernels_reaching(self, name: str) -> frozenset:
        out = set()
        for start, (text, ports, lines, r) in self.kernel_text.items():
            if name in self.reachable(r.fn):
                out.update(p.spelling for p in ports)
        return frozenset(out)

    # ------------------------------------------------------------ items --
    def items(self, node, scope=()) -> list[Chunk]:
        out: list[Chunk] = []
        comments: list[str] = []
        for child in node.children:
            if child.type == "comment":
                if self.src.is_user(child.start_byte):
                    comments.append(self.src.node_text(child))
                continue
            if not self.src.is_user(child.start_byte):
                comments = []
                continue
            got = self.item(child, scope)
            if got:
                if comments:
                    got[0] = Chunk("\n".join(comments) + "\n" + got[0].text, got[0].kernels, got[0].name,
                                   got[0].function)
                out.extend(got)
            comments = []
        return out

    def in_drops(self, node) -> bool:
        return any(s <= node.start_byte and node.end_byte <= e for s, e in self.src.unit.drops)

    def item(self, node, scope) -> list[Chunk]:
        t = node.type
        if self.in_drops(node):
            return []
        if t == "namespace_definition":
            body = node.child_by_field_name("body")
            name = node.child_by_field_name("name")
            inner = self.items(body, scope) if body is not None else []
            if not inner:
                return []
            label = self.src.node_text(name) if name is not None else ""
            return [Chunk(f"namespace {label} {{")] + inner + [Chunk(f"}}  // namespace {label}")]
        if t == "linkage_specification":
            body = node.child_by_field_name("body")
            if body is None:
                return []
            return self.items(body, scope) if body.type == "declaration_list" else self.item(body, scope)
        if t == "function_definition":
            return self.function_chunks(node, None)
        if t == "template_declaration":
            inner = next((c for c in node.children if c.type in ("function_definition", "declaration",
                                                                  "class_specifier", "struct_specifier",
                                                                  "alias_declaration", "template_declaration")),
                         None)
            if inner is not None and inner.type == "function_definition":
                return self.function_chunks(inner, node)
            if inner is not None and inner.type == "declaration" and \
                    any(_is_function_declarator(d) for d in inner.children_by_field_name("declarator")):
                return []  # a prototype
            return self.file_chunk(node)
        if t == "declaration":
            return self.declaration_chunks(node)
        if t in ("type_definition", "alias_declaration"):
            name = declarator_name(node.child_by_field_name("declarator")) if t == "type_definition" else \
                node.child_by_field_name("name")
            if name is not None and self.src.node_text(name) in self.facts.fnptr_aliases:
                return []
            return self.file_chunk(node)
        if t in ("struct_specifier", "class_specifier", "union_specifier", "enum_specifier"):
            # The definition's `;` is a sibling token in the tree.
            chunks = self.file_chunk(node)
            return [Chunk(c.text + ";", c.kernels, c.name, c.function) for c in chunks]
        if t in ("static_assert_declaration", "using_declaration", "namespace_alias_definition",
                 "alias_declaration"):
            return self.file_chunk(node)
        if t == "ERROR":
            d = self.tr.diagnose("MK1017", node, "the CUDA does not parse here: "
                                                 f"'{' '.join(self.src.node_text(node).split())[:40]}'")
            for n in walk(node):
                if n.type in ("identifier", "type_identifier"):
                    self.broken_names.setdefault(self.src.node_text(n), []).append(d)
            return []
        return []

    def file_renderer(self) -> "FileRenderer":
        return FileRenderer(self.tr, self)

    def file_chunk(self, node) -> list[Chunk]:
        """A type, constant or template at file scope; with an error it is left
        out, and so is every kernel that names what it declares. A type only
        host code uses is not part of the port."""
        if self.host_only(node):
            return []
        r = self.file_renderer()
        text = r.rw(node)
        if not r.errors:
            return [Chunk(text)]
        for n in walk(node):
            if n.type in ("type_identifier", "identifier") and n.parent is not None and \
                    n.parent.type in ("struct_specifier", "class_specifier", "union_specifier", "type_definition",
                                      "alias_declaration", "init_declarator", "enum_specifier", "declaration"):
                self.broken_names.setdefault(self.src.node_text(n), []).extend(r.errors)
        return [Chunk(self.disable(text, r.errors))]

    def declaration_chunks(self, node) -> list[Chunk]:
        kw = keywords(node)
        declarators = node.children_by_field_name("declarator")
        if any(_is_function_declarator(d) for d in declarators):
            return []  # prototypes: the definitions follow
        if "__shared__" in kw:
            return []  # declared in the kernels that use them
        if kw & {"__constant__", "__device__", "__managed__"}:
            out = []
            for d in declarators:
                name = declarator_name(d)
                g = self.facts.globals.get(self.src.node_text(name)) if name is not None else None
                if g is None:
                    continue
                nbytes = global_bytes(g)
                if g.kind == "constant" and nbytes is not None and nbytes > T.MAX_CONSTANT_BYTES:
                    d = self.tr.diagnose("MK1009", node, f"__constant__ '{g.name}' holds {nbytes} bytes "
                                                         f"(CUDA's constant bank: {T.MAX_CONSTANT_BYTES})")
                    self.broken_names.setdefault(g.name, []).append(d)
                if g.buffer:
                    self.tr.diagnose("MK1023", node, f"'{g.name}' is a buffer parameter of the kernels that use it")
                    continue
                r = self.file_renderer()
                type_text = r.render_type_text(g.type_text)
                init = g.init if g.init is not None else "{}"
                out.append(Chunk(f"constant {type_text} {g.name}{''.join(g.dims)} = {init};"))
            return out
        return self.file_chunk(node)

    def function_chunks(self, fn_node, template) -> list[Chunk]:
        f = next((g for g in self.facts.functions if g.node.start_byte == fn_node.start_byte), None)
        if f is None:
            return []  # host code
        if f.kernel:
            text, ports, lines, r = self.kernel_text[fn_node.start_byte]
            if template is not None:
                text = self.with_template(template, fn_node, text)
            spellings = frozenset(p.spelling for p in ports)
            out = [Chunk(text, spellings, f.name, function=True)]
            for port, line in zip(ports, lines):
                if line is not None:  # one chunk per instantiation: each can be left out alone
                    for ns in reversed([x for x in f.scope if x]):
                        line = f"namespace {ns} {{ {line} }}"
                    self.tail.append(Chunk(line, frozenset([port.spelling]), port.spelling, function=True))
            return out
        out = []
        per = self.instances.get(fn_node.start_byte, {})
        reaching = self.kernels_reaching(f.name)
        for sig, (text, errors) in per.items():
            if template is not None:
                text = self.with_template(template, fn_node, text)
            if f.name in self.facts.functor_args and sig == next(iter(per)):
                text += "\n" + self.functor(f)
            broken = bool(errors) or (reaching and not any(k.translated for k in self.kernels
                                                           if k.spelling in reaching))
            out.append(Chunk(self.disable(text, errors) if broken and errors else text, reaching, f.name,
                             function=True))
        return out

    def with_template(self, template, fn_node, text: str) -> str:
        r = self.file_renderer()
        r.overrides[(fn_node.start_byte, fn_node.type)] = text
        return r.rw(template)

    def functor(self, f: Function) -> str:
        """A device function used as a template argument: Metal has no
        function pointers, so the template takes this functor type instead.
        Its call forwards the arguments as they are (their address spaces are
        part of the deduced types)."""
        needs = self.facts.needs[f.node.start_byte]
        if needs.builtins or needs.shared or needs.dynamic or needs.globals:
            d = self.tr.diagnose("MK1024", f.node, f"'{f.name}' is passed as a template argument but needs "
                                                   "the thread's indices or threadgroup memory", f.name)
            self.errors_by_function.setdefault(f.name, []).append(d)
        name = T.safe_name(f.name)
        return (f"struct {f.name}_fn {{ template <typename... A> auto operator()(A... a) const "
                f"{{ return {name}(a...); }} }};")

    @staticmethod
    def disable(text: str, errors: list[Diagnostic]) -> str:
        why = "; ".join(sorted({f"{d.code} line {d.line}" for d in errors}))
        return f"#if 0  // not translated ({why}): see the diagnostics above the code\n{text}\n#endif"


class FileRenderer(Renderer):
    """File-scope code: types, constants, templates; function definitions
    inside them are replaced by their rendered instances."""

    def __init__(self, tr: Translation, em: Emitter):
        super().__init__(tr, None)
        self.em = em
        self.overrides: dict = {}

    def rw(self, node) -> str:
        if node is not None and (node.start_byte, node.type) in self.overrides:
            return self.overrides[(node.start_byte, node.type)]
        return super().rw(node)

    def h_function_definition(self, node):
        per = self.em.instances.get(node.start_byte)
        if per:
            return "\n".join(text for text, _ in per.values())
        return None

    def h_field_declaration(self, node):
        # Struct fields are memory: 3-component vectors get CUDA's 12-byte layout.
        self.memory_type += 1
        try:
            return self.splice(node)
        finally:
            self.memory_type -= 1


def null_tests(src: CudaSource, fn: Function) -> dict[int, tuple[str, bool]]:
    """The comparisons of a kernel's pointer parameters with NULL / nullptr / 0:
    node start -> (parameter, True for ==)."""
    pointers = {p.name for p in fn.params if p.pointer}
    out = {}
    for n in walk(fn.body) if fn.body is not None else []:
        if n.type != "binary_expression":
            continue
        op = n.child_by_field_name("operator")
        if op is None or src.node_text(op) not in ("==", "!="):
            continue
        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
        for a, b in ((left, right), (right, left)):
            if a is not None and b is not None and a.type == "identifier" and src.node_text(a) in pointers and \
                    src.node_text(b).replace(" ", "") in ("nullptr", "NULL", "0", "__null", "(void*)0"):
                out[n.start_byte] = (src.node_text(a), src.node_text(op) == "==")
    return out


class FunctionRenderer(Renderer):
    """What kernels and helpers share: extra parameters and declarations."""

    def __init__(self, tr: Translation, fn: Function, sig: tuple, em: Emitter, kernel_spaces=None):
        super().__init__(tr, fn, sig, kernel_spaces)
        self.em = em
        self.needs: Needs = self.facts.needs[fn.node.start_byte]

    def shared_type(self, key: tuple, v: SharedVar) -> tuple[str, str]:
        """(element type, dims) of a callee's threadgroup variable at this call's template arguments."""
        owner, _, targs = key
        text, dims = v.type_text, "".join(v.dims)
        if owner is not None and targs:
            params = next((f.template_params for f in self.facts.by_name.get(owner, []) if f.template_params), [])
            mapping = dict(zip(params, split_template_args(targs)))
            text, dims = substitute(text, mapping), substitute(dims, mapping)
        return self.render_type_text(text), dims

    def global_param(self, name: str) -> str:
        g = self.facts.globals[name]
        space = "constant" if g.kind == "constant" else "device"
        t = self.render_type_text(g.type_text)
        return f"{space} {t}* {name}" if g.dims else f"{space} {t}& {name}"


class HelperRenderer(FunctionRenderer):
    def render(self) -> str:
        fn = self.fn
        decl = Analyser.function_declarator(fn.node)
        plist = decl.child_by_field_name("parameters") if decl is not None else None
        if plist is not None:
            self.overrides_plist = plist
        name_node = decl.child_by_field_name("declarator") if decl is not None else None
        self.name_node = name_node if name_node is not None and name_node.type == "identifier" else None
        self.instance_name = self.tr.requests.get(fn.node.start_byte, {}).get(self.sig, T.safe_name(fn.name))
        extra = []
        for v in fn.shared:
            if v.extern:
                continue
            t = "atomic_int" if v.name == SYNC_COUNTER else self.render_type_text(v.type_text)
            extra.append(f"threadgroup {t} (&{v.name}){''.join(v.dims)}" if v.dims else f"threadgroup {t}& {v.name}")
        for key, v in self.needs.shared.items():
            t, dims = self.shared_type(key, v)
            extra.append(f"threadgroup {t} (&{mangle(key)}){dims}" if dims else f"threadgroup {t}& {mangle(key)}")
        for b in self.needs.builtins:
            extra.append(f"{T.BUILTIN_PARAMS[b][0]} {b}")
        if self.needs.dynamic:
            extra.append("threadgroup uchar* mk_smem")
        extra += [self.global_param(g) for g in self.needs.globals]
        self.extra = extra
        text = self.rw(fn.node)
        comments = "".join(d.comment() + "\n" for d in self.pending.pop(-1, []))
        return comments + text

    def rw(self, node) -> str:
        if node is not None and node == getattr(self, "name_node", None):
            return self.instance_name
        if node is not None and getattr(self, "overrides_plist", None) is not None and \
                node.start_byte == self.overrides_plist.start_byte and node.type == "parameter_list":
            params = [self.param_text(i, p) for i, p in enumerate(self.fn.params)]
            return "(" + ", ".join(self.extra + params) + ")"
        if node is not None and self.fn.body is not None and node.start_byte == self.fn.body.start_byte and \
                node.type == "compound_statement":
            body = super().rw(node)
            prologue = self.prologue()
            return body[0] + prologue + body[1:] if prologue else body
        return super().rw(node)

    def param_text(self, i: int, p) -> str:
        space = self.sig[i] if i < len(self.sig) else None
        if (p.pointer or p.reference) and space in ("device", "threadgroup", "constant"):
            self.changed(p.node)
            self.memory_type += 1
            try:
                return f"{space} {self.rw(p.node)}"
            finally:
                self.memory_type -= 1
        return self.rw(p.node)

    def prologue(self) -> str:
        out = []
        for name in sorted(self.fn.file_shared_used):
            v = self.facts.file_shared[name]
            if v.extern:
                elem = self.render_type_text(v.type_text) + "".join(v.dims[1:])
                out.append(f" threadgroup {elem}* {name} = (threadgroup {elem}*)mk_smem;")
        for v in self.fn.shared:
            if v.extern:
                elem = self.render_type_text(v.type_text) + "".join(v.dims[1:])
                out.append(f" threadgroup {elem}* {v.name} = (threadgroup {elem}*)mk_smem;")
        return "".join(out)

    def shared_declaration(self, node):
        self.count_ref(T.KEYWORDS["__shared__"], "__shared__")
        self.changed(node)
        return ""  # parameters of this helper, or casts of mk_smem in its prologue


def thread_dependent(src: CudaSource, fn: Function) -> set[str]:
    """Local variables whose value depends on the thread within its
    threadgroup (threadIdx, the lane, a group's thread_rank()), as a fixpoint
    over the kernel's assignments."""
    seeds = ("threadIdx", "mk_lane", "thread_rank", "thread_index")
    out: set[str] = set()
    assigns = []
    for n in walk(fn.body) if fn.body is not None else []:
        if n.type == "init_declarator":
            d = declarator_name(n.child_by_field_name("declarator"))
            if d is not None and n.child_by_field_name("value") is not None:
                assigns.append((src.node_text(d), n.child_by_field_name("value")))
        elif n.type in ("assignment_expression",):
            left = n.child_by_field_name("left")
            if left is not None and left.type == "identifier":
                assigns.append((src.node_text(left), n.child_by_field_name("right")))
        elif n.type == "for_statement":  # a loop variable stepping from a thread-dependent start
            pass
    changed = True
    while changed:
        changed = False
        for name, value in assigns:
            if name in out:
                continue
            words = {src.node_text(x) for x in walk(value) if x.type in ("identifier", "field_identifier")}
            if words & (out | set(seeds)):
                out.add(name)
                changed = True
    return out | set(seeds)


def constant_buffers(src: CudaSource, fn: Function) -> set[str]:
    """Read-only buffers every thread of a group reads at the same index
    (coefficients, scalars passed by pointer): Metal's `constant` address
    space is for them. Anything else (an index that depends on the thread, a
    pointer passed on or copied) stays `device`."""
    varying = thread_dependent(src, fn)
    out = set()
    for p in fn.params:
        if not (p.pointer and p.const_pointee and p.depth == 1):
            continue
        ok, used = True, False
        for n in walk(fn.body) if fn.body is not None else []:
            if n.type != "identifier" or src.node_text(n) != p.name:
                continue
            used = True
            parent = n.parent
            if parent is None or parent.type != "subscript_expression" or parent.child_by_field_name("argument") != n:
                ok = False
                break
            index = parent.child_by_field_name("indices")
            words = {src.node_text(x) for x in walk(index) if x.type in ("identifier", "field_identifier")}
            if words & varying:
                ok = False
                break
        if ok and used:
            out.add(p.name)
    return out


class KernelRenderer(FunctionRenderer):
    def __init__(self, tr: Translation, fn: Function, em: Emitter):
        uniform = constant_buffers(tr.src, fn)
        spaces = {p.name: "constant" if p.name in uniform else "device" for p in fn.params if p.pointer}
        super().__init__(tr, fn, (), em, spaces)
        self.modified = {p.name for p in fn.params if not p.pointer and kernel_param_is_modified(self.src, fn, p)}
        self.read, self.written = buffer_use(self.src, fn.body, self.env)
        self.param_list: list[str] = []
        self.max_threads = 1024
        self.null_tested = null_tests(self.src, fn)
        # A kernel named like a Metal builtin (`atomic_int`) would not compile.
        self.metal_function_name = fn.name + "_kernel" if fn.name in T.METAL_RESERVED else fn.name

    def render(self) -> str:
        fn = self.fn
        params = []
        for i, p in enumerate(fn.params):
            name = p.name or f"mk_unused{i}"
            type_node = p.node.child_by_field_name("type")
            if p.pointer:
                if p.depth > 1:
                    self.diag("MK1032", p.node, f"parameter '{name}' is a pointer to pointers")
                self.memory_type += 1
                elem = self.rw(type_node)
                self.memory_type -= 1
                space = self.kernel_spaces[p.name]
                const = "const " if p.const_pointee and space != "constant" else ""
                params.append(f"{space} {const}{elem}* {name} [[buffer({i})]]")
            else:
                t = self.rw(type_node)
                pname = f"mk_arg_{name}" if name in self.modified else name
                params.append(f"constant {t}& {pname} [[buffer({i})]]")
        n = len(fn.params)
        for k, g in enumerate(self.needs.globals):
            params.append(f"{self.global_param(g)} [[buffer({n + k})]]")
        if self.null_tested:
            params.append(f"constant uint& mk_present [[buffer({n + len(self.needs.globals)})]]")
        if n + len(self.needs.globals) + bool(self.null_tested) > T.MAX_BUFFERS:
            self.diag("MK1008", fn.node, f"kernel '{fn.name}' binds {n + len(self.needs.globals)} buffers "
                                         f"(Metal: at most {T.MAX_BUFFERS})")
        for b in self.needs.builtins:
            t, attr = T.BUILTIN_PARAMS[b]
            params.append(f"{t} {b} [[{attr}]]")
        primary = self.primary_extern()
        if primary is not None:
            v = next((x for x in fn.shared if x.name == primary), None) or self.facts.file_shared[primary]
            elem = self.render_type_text(v.type_text) + "".join(v.dims[1:])
            params.append(f"threadgroup {elem}* {primary} [[threadgroup(0)]]")
        elif self.needs.dynamic:
            params.append("threadgroup uchar* mk_smem [[threadgroup(0)]]")
        self.param_list = params
        self.count_ref(T.KEYWORDS["__global__"], "__global__")
        attr = self.launch_bounds()
        body = self.rw(fn.body)
        body = body[0] + self.prologue() + body[1:]
        head = f"{attr}kernel void {self.metal_function_name}(" + ",\n    ".join(params) + ")"
        self.changed(fn.node)
        comments = "".join(d.comment() + "\n" for d in self.pending.pop(-1, []))
        return comments + head + " " + body

    def launch_bounds(self) -> str:
        for c in self.fn.node.children:
            if c.type == "launch_bounds":
                nums = c.named_children
                self.count_ref(T.KEYWORDS["__launch_bounds__"], "__launch_bounds__")
                if nums:
                    text = self.text(nums[0]).strip()
                    try:
                        self.max_threads = int(text.rstrip("uUlL"), 0)
                        return f"[[max_total_threads_per_threadgroup({self.max_threads})]] "
                    except ValueError:
                        return ""
        return ""

    def prologue(self) -> str:
        fn = self.fn
        out = []
        for p in fn.params:
            if p.name in self.modified:
                t = self.rw(p.node.child_by_field_name("type"))
                out.append(f"\n  {t} {p.name} = mk_arg_{p.name};")
        for v in fn.shared:
            if v.extern or self.in_place(v):
                continue
            t = "atomic_int" if v.name == SYNC_COUNTER else self.render_type_text(v.type_text)
            out.append(f"\n  threadgroup {t} {v.name}{''.join(v.dims)};")
        for key, v in self.needs.shared.items():
            t, dims = self.shared_type(key, v)
            out.append(f"\n  threadgroup {t} {mangle(key)}{dims};")
        primary = self.primary_extern()
        for name in sorted(fn.file_shared_used):
            v = self.facts.file_shared[name]
            if v.extern and name != primary:
                elem = self.render_type_text(v.type_text) + "".join(v.dims[1:])
                out.append(f"\n  threadgroup {elem}* {name} = (threadgroup {elem}*){self.dynamic_name()};")
        return "".join(out)

    def in_place(self, v: SharedVar) -> bool:
        """A __shared__ array declared at the top level of the kernel's body
        stays where it is (its size may use a constant declared before it);
        one in a nested block moves to the top of the body (Metal declares
        threadgroup memory at kernel scope)."""
        return v.node is not None and v.node.parent is not None and v.node.parent == self.fn.body

    def shared_declaration(self, node):
        if "extern" not in keywords(node) and node.parent == self.fn.body:
            self.count_ref(T.KEYWORDS["__shared__"], "__shared__")
            self.changed(node)
            parts = []
            for d in node.children_by_field_name("declarator"):
                name = declarator_name(d)
                v = next((x for x in self.fn.shared if name is not None and x.name == self.text(name)), None)
                if v is not None:
                    dims = "".join(self.rw_text(dim) for dim in v.dims)
                    parts.append(f"threadgroup {self.render_type_text(v.type_text)} {v.name}{dims};")
            return " ".join(parts)
        return super().shared_declaration(node)  # nested: in the prologue; extern: cast from the parameter

    def rw_text(self, dim: str) -> str:
        return dim  # sizes are constant expressions: nothing in them to translate

    # ------------------------------------------------------------ ports --
    def port(self, spelling: str, name: str, targs: str | None) -> KernelPort:
        fn = self.fn
        mapping = dict(zip(fn.template_params, split_template_args(targs))) if targs else {}
        params = []
        for p in fn.params:
            type_node = p.node.child_by_field_name("type")
            text = substitute(self.text(type_node) if type_node is not None else "", mapping)
            ct = canonical_type(text, self.em.typedefs)
            if p.pointer:
                usage = "inout"
                if p.const_pointee or p.name not in self.written:
                    usage = "in"
                elif p.name not in self.read:
                    usage = "out"
                params.append(ParamSpec(p.name, "buffer", ct, SCALAR_DTYPES.get(ct), p.const_pointee, usage,
                                        ELEMENT_BYTES.get(ct)))
            else:
                dtype = SCALAR_DTYPES.get(ct)
                params.append(ParamSpec(p.name, "scalar" if dtype else "struct", ct, dtype, True, "in"))
        globals_ = []
        for g in self.needs.globals:
            gl = self.facts.globals[g]
            globals_.append(GlobalSpec(g, "constant" if gl.kind == "constant" else "device",
                                       canonical_type(gl.type_text, self.em.typedefs), None))
        file, line, _ = self.src.where(fn.node)
        return KernelPort(spelling, name, file, line, params, globals_,
                          self.primary_extern() is not None or self.needs.dynamic, self.max_threads,
                          present_mask=bool(self.null_tested))

    # ------------------------------------------------------- null tests --
    def h_binary_expression(self, node):
        """`p != NULL` / `p == nullptr` on a buffer parameter: Metal binds no
        null buffers, so the launcher passes which ones were given (mk_present)."""
        test = self.null_tested.get(node.start_byte)
        if test is None:
            return None
        name, equal = test
        self.changed(node)
        i = next(i for i, p in enumerate(self.fn.params) if p.name == name)
        bit = f"((mk_present >> {i}u) & 1u)"
        return f"({bit} == 0u)" if equal else f"({bit} != 0u)"

    def instantiation_line(self, name: str, targs: str) -> str:
        args = [a.lstrip("&").strip() + "_fn" if a.lstrip("&").strip() in self.facts.functor_args
                else self.render_type_text(a) for a in split_template_args(targs)]
        mapping = dict(zip(self.fn.template_params, args))
        params = ", ".join(substitute(p, mapping) for p in self.param_list)
        return (f'template [[host_name("{name}")]] [[kernel]] void {self.metal_function_name}<{", ".join(args)}>'
                f"({params});")
