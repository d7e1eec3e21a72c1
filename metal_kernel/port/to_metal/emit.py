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

from ..analyse import Instantiation
from ..parse import declarator_name, file_scope, is_function_declarator, keywords, walk
from . import table as T
from .diagnostics import Diagnostic, make
from .doubles import Layouts, mentions_double
from .facts import Facts, Function
from .globals_init import global_bytes
from .helpers import helper_text
from .mapper import Translation
from .model import Chunk, KernelPort
from .renderers import FileRenderer, HelperRenderer, KernelRenderer
from .source import CudaSource
from .symbols import mangle, split_template_args

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
        self.layouts = Layouts(src, self.typedefs)
        # With double="float": helpers and file-scope names whose port computes a double in float (MK1038).
        self.demoted_functions: set[str] = set()
        self.demoted_names: set[str] = set()
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
        # The template arguments as the port writes them (double="float": a double one may equal another).
        written = {sp: tuple(r.render_type_text(a) for a in split_template_args(ta)) for sp, ta in spellings if ta}
        for spelling, targs in spellings:
            name = self.unique_name(metal_name(spelling) if targs is not None else r.metal_function_name)
            port = r.port(spelling, name, targs)
            ports.append(port)
            if targs is not None:
                lines.append(r.instantiation_line(name, targs) if r.param_list else None)
                if mentions_double(targs):
                    self.double_instantiation(f, port, written)
            else:
                lines.append(None)
        self.kernel_text[f.node.start_byte] = (text, ports, lines, r)
        self.kernels.extend(ports)

    def double_instantiation(self, f: Function, port: KernelPort, written: dict):
        """A kernel template instantiated with double: MK1001, or with
        double="float" computed in float (MK1038) unless the host lays the
        double out (a parameter: KernelRenderer.port) or the float
        instantiation is the file's too (Metal cannot instantiate it twice)."""
        spelling = port.spelling
        if not self.tr.demote:
            port.diagnostics.append(self.tr.diagnose(
                "MK1001", f.node, f"instantiation '{spelling}': 'double' (Apple GPUs have no 64-bit floating point)",
                spelling))
            return
        order = list(written)
        twin = next((o for o in order if o != spelling and written[o] == written[spelling] and
                     (not mentions_double(o) or order.index(o) < order.index(spelling))), None)
        if twin is not None:
            port.diagnostics.append(self.tr.diagnose(
                "MK1001", f.node, f"instantiation '{spelling}' computed in float is '{twin}', which the file "
                                  "instantiates too: Metal cannot instantiate a template twice", spelling))
        elif not port.diagnostics:
            self.tr.diagnose("MK1038", f.node, f"instantiation '{spelling}': its double computed in float "
                                               "(double=\"float\")", spelling)
            port.demoted = True

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
        if r.demotions:
            self.demoted_functions.add(f.name)
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
        return [n for n in file_scope(self.src.pp.root) if n.type != "function_definition" and not self.in_drops(n)]

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
            demoted = r.demotions > 0 or bool(self.demoted_functions & set(reach))
            if self.demoted_names and not demoted:
                demoted = bool(self.demoted_names & self.names_used(f).union(
                    *(self.names_used(g) for name in reach for g in self.facts.by_name.get(name, []))))
            for p in ports:
                own = errs + [d for d in self.functor_errors(p.spelling) if d not in errs]
                p.diagnostics = own + [d for d in p.diagnostics if d not in own]
                p.translated = not p.diagnostics
                p.demoted = p.demoted or demoted

    def functor_errors(self, spelling: str) -> list[Diagnostic]:
        """MK1024 for an instantiation whose template arguments name a device
        function needing threadgroup memory or globals (functor())."""
        out = []
        for name in re.findall(r"\w+", spelling.partition("<")[2]):
            if name not in self.facts.functor_args:
                continue
            for g in self.facts.helpers(name):
                why = self.functor_unsupported(g)
                if why:
                    out.append(self.tr.diagnose("MK1024", g.node, f"'{g.name}' is passed as a template argument "
                                                f"but needs {why}", g.name))
        return out

    def functor_unsupported(self, g: Function) -> str:
        """What a functor cannot give function `g` (see functor()), or ''."""
        needs = self.facts.needs[g.node.start_byte]
        if needs.dynamic or any(v.extern for v in g.shared):
            return "dynamic threadgroup memory"
        if needs.globals:
            return "global buffers"
        if self.facts.functor_static_shared(g):
            if g.template_params:
                return "threadgroup memory and is a template"
            helpers = {f.name for f in self.facts.fnptr_callers if not f.kernel}
            if any(c.callee in helpers and c.targs and g.name in re.findall(r"\w+", c.targs)
                   for f in self.facts.functions for c in f.calls):
                return "threadgroup memory and is passed to a device function's template parameter"
        return ""

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
                    any(is_function_declarator(d) for d in inner.children_by_field_name("declarator")):
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
        if r.demotions:
            self.demoted_names |= self.declared_names(node)
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
        if any(is_function_declarator(d) for d in declarators):
            return []  # prototypes: the definitions follow
        if "__shared__" in kw:  # declared in the kernels that use them (render_type_text): a double is diagnosed here
            r = self.file_renderer()
            r.scan_doubles(node.child_by_field_name("type"))
            names = {self.src.node_text(n) for n in map(declarator_name, declarators) if n is not None}
            for name in names if r.errors else ():
                self.broken_names.setdefault(name, []).extend(r.errors)
            self.demoted_names |= names if r.demotions else set()
            return []
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
                double = self.double_global(g, node)
                if g.buffer:
                    self.tr.diagnose("MK1023", node, f"'{g.name}' is a buffer parameter of the kernels that use it")
                    continue
                r = self.file_renderer()
                type_text = r.render_type_text(g.type_text)
                init = g.init if g.init is not None else "{}"
                text = f"constant {type_text} {g.name}{''.join(g.dims)} = {init};"
                if double is not None:
                    text = self.disable(text, [double]) if double.severity == "error" else double.comment() + "\n" + text
                out.append(Chunk(text))
            return out
        return self.file_chunk(node)

    def double_global(self, g, node) -> Diagnostic | None:
        """A __constant__ / __device__ variable holding a double: MK1001 for the
        kernels that use it when the host writes or reads it (a buffer: its
        bytes are doubles) or double="reject"; else a MK1038 warning."""
        if not self.layouts.holds_double(g.type_text):
            return None
        refused = g.buffer or not self.tr.demote
        (self.tr.unconverted if refused else self.tr.converted)[(T.BY_NAME["double"].category, "double")] += 1
        if refused:
            why = "the host writes and reads it as 8-byte doubles, so the port cannot compute it in float, not even " \
                  "with double=\"float\"" if g.buffer else "Apple GPUs have no 64-bit floating point"
            d = self.tr.diagnose("MK1001", node, f"'{g.name}' ('{' '.join(g.type_text.split())}'): {why}")
            self.broken_names.setdefault(g.name, []).append(d)
            return d
        self.demoted_names.add(g.name)
        return self.tr.diagnose("MK1038", node, f"'{g.name}' ('{' '.join(g.type_text.split())}') computed in float "
                                                "(double=\"float\")")

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
        needs = self.facts.needs[f.node.start_byte]  # shared memory & co.: MK1024 (functor_errors)
        name = T.safe_name(f.name)
        # The builtins (threadIdx & co.) are parameters in Metal: a call through
        # the template parameter passes those any functor needs
        # (facts.functor_builtins); this one forwards its own.
        params = "".join(f"{T.BUILTIN_PARAMS[b][0]} {b}, " for b in self.facts.functor_builtins)
        forward = "".join(f"{b}, " for b in needs.builtins)
        call = "template <typename... A> auto operator()({}A... a) const {{ return {}({}a...); }}"
        taken = [] if self.functor_unsupported(f) else self.facts.functor_static_shared(f)
        plain = "" if taken else call.format(params, name, forward) + " "
        if not self.facts.functor_shared:
            return f"struct {f.name}_fn {{ {plain}}};"
        # Its __shared__ memory (and its callees'): Metal declares threadgroup
        # memory in the kernel, which knows this type only as its template
        # argument, so the functor names it (mk_shared), and a kernel declares
        # one and passes it first (renderers.KernelRenderer.prologue). A device
        # function calling through its template parameter passes none: the
        # overload without it (only for functions that need none).
        types = self.file_renderer()
        fields = "".join(f"{types.render_type_text(v.type_text)} {mangle(k)}{''.join(v.dims)}; " for k, v in taken)
        to_tg = "".join(f"mk_tg.{mangle(k)}, " for k, _ in taken)
        with_tg = call.format("threadgroup mk_shared& mk_tg, " + params, name, to_tg + forward)
        return f"struct {f.name}_fn {{ struct mk_shared {{ {fields}}}; {plain}{with_tg} }};"

    @staticmethod
    def disable(text: str, errors: list[Diagnostic]) -> str:
        why = "; ".join(sorted({f"{d.code} line {d.line}" for d in errors}))
        return f"#if 0  // not translated ({why}): see the diagnostics above the code\n{text}\n#endif"
