"""Stage 3: the C++ that pass 2 compiles, as edits of the preprocessed text.

- host-only code is blanked (its lines stay, so every compiler message
  keeps pointing at the user's line);
- `__shared__` variables become per-block memory from the runtime (one per
  declaration and template instantiation), `extern __shared__` arrays the
  launch's dynamic shared memory;
- each `__constant__` / `__device__` variable is exported for the host;
- each kernel (and each instantiation of a kernel template) gets a wrapper
  that also takes the dynamic shared memory, and the runtime's entry
  points (runtime/rewriter.py's entry_code: the same shape as Metal
  kernels, so the work-item compiler, the scheduler and the checker treat
  both alike).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from ..runtime.entries import EntrySpec, Param, entry_code
from ..runtime.rewriter import KernelEntry
from .analyse import Kernel, Unit
from .parse import Source, declarator_name, keywords, walk

# The wrapper's parameter after the kernel's own: threadgroup buffer 0, so
# that the runtime allocates the launch's dynamic shared memory (the kernel
# finds it, like blockIdx, in the runtime's group record: mkcuda/builtins.h).
BLOCK_PARAMS = [Param("__mk_smem", "threadgroup", index=0)]


@dataclass
class CudaKernelEntry:
    """A callable kernel: the runtime's entry and what the host must know."""
    entry: KernelEntry
    spelling: str  # as CUDA spells it: `vadd`, `scale<float>`
    param_names: list[str]


@dataclass
class Emitted:
    text: str
    kernels: list[CudaKernelEntry] = field(default_factory=list)
    symbols: list[tuple[str, str]] = field(default_factory=list)  # (name, kind), index = export number


class _Edits:
    def __init__(self, data: bytes):
        self.data = data
        self.items: list[tuple[int, int, bytes]] = []

    def replace(self, start: int, end: int, text: str):
        """`text` for bytes [start, end), keeping the number of lines."""
        lines = self.data.count(b"\n", start, end)
        self.items.append((start, end, text.encode() + b"\n" * lines))

    def insert(self, pos: int, text: str):
        self.items.append((pos, pos, text.encode()))

    def blank(self, start: int, end: int):
        """Spaces for bytes [start, end), keeping newlines and line markers."""
        chunk = self.data[start:end]
        at_line_start = start == 0 or self.data[start - 1:start] == b"\n"
        out = []
        for i, line in enumerate(chunk.split(b"\n")):
            keep = line.startswith(b"#") and (i > 0 or at_line_start)
            out.append(line if keep else b" " * len(line))
        self.items.append((start, end, b"\n".join(out)))

    def apply(self) -> str:
        out, pos = [], 0
        for start, end, repl in sorted(self.items, key=lambda e: (e[0], e[1])):
            if start < pos:  # inside an edit already made (e.g. dropped host code)
                continue
            out.append(self.data[pos:start])
            out.append(repl)
            pos = end
        out.append(self.data[pos:])
        return b"".join(out).decode("utf-8", errors="replace")


def _array_type(src: Source, decl_node, type_text: str) -> tuple[str, str, list[str]]:
    """(name, element type with inner dimensions, dimensions) of a declarator."""
    dims = []
    node = decl_node
    while node is not None and node.type == "array_declarator":
        size = node.child_by_field_name("size")
        dims.insert(0, f"[{src.text(size)}]" if size is not None else "[]")
        node = node.child_by_field_name("declarator")
    name = declarator_name(decl_node)
    return (src.text(name) if name is not None else ""), type_text, dims


def _shared_type_text(src: Source, decl) -> str:
    """The declaration's type without __shared__ / extern / static."""
    parts = []
    for c in decl.children:
        if c in decl.children_by_field_name("declarator"):
            break
        if c.type in ("storage_class_specifier", "attribute_specifier", "attribute_declaration", ";"):
            continue
        if c.type == "type_qualifier" and src.text(c) in ("__shared__", "__device__"):
            continue
        parts.append(src.text(c))
    return " ".join(p for p in parts if p)


class Emitter:
    def __init__(self, src: Source, unit: Unit, workitem: bool):
        self.src = src
        self.unit = unit
        self.workitem = workitem
        self.edits = _Edits(src.data)
        self.out = Emitted("")
        self.shared_index = 0
        self.tail: list[str] = []

    def run(self) -> Emitted:
        for start, end in self.unit.drops:
            self.edits.blank(start, end)
        self.all_shared()
        for i, sym in enumerate(self.unit.symbols):
            self.export_symbol(i, sym)
        for k in self.unit.kernels:
            if not k.template:
                self.kernel_entry(k, k.qualified, k.spelling, at=k.end)
        for inst in self.unit.instantiations:
            k = inst.kernel
            callee = f"{k.qualified}<{inst.template_args}>"
            code = self.entry_text(k, callee, inst.spelling)
            self.tail.append(self.in_scope(k.scope, code))
        text = self.edits.apply()
        self.out.text = text + "\n" + "\n".join(self.tail) + "\n"
        return self.out

    # ---------------------------------------------------------- shared --
    def all_shared(self):
        file_scope = {}
        for s in self.unit.shared:
            if s.file_scope:
                file_scope.update(self.file_scope_shared(s))
            else:
                self.function_shared(s)
        if file_scope:
            self.rewrite_uses(file_scope)

    def shared_expr(self, type_text: str, dims: list[str], extern: bool, key: str) -> str:
        if extern:
            elem = type_text + "".join(dims[1:])
            return f"reinterpret_cast<std::add_pointer_t<{elem}>>(::mk::cuda::dynamic_shared())"
        return f"::mk::cuda::shared<{type_text}{''.join(dims)}, {key}>()"

    def function_shared(self, s):
        type_text = _shared_type_text(self.src, s.node)
        decls = []
        for d in s.node.children_by_field_name("declarator"):
            name, _, dims = _array_type(self.src, d, type_text)
            if s.extern:
                decls.append(f"const auto {name} = {self.shared_expr(type_text, dims, True, '')};")
            else:
                key = f"::mk::cuda::shared_key(__PRETTY_FUNCTION__, {self.shared_index}u)"
                self.shared_index += 1
                decls.append(f"auto& {name} = {self.shared_expr(type_text, dims, False, key)};")
        self.edits.replace(s.node.start_byte, s.node.end_byte, " ".join(decls))

    def file_scope_shared(self, s) -> dict[str, str]:
        type_text = _shared_type_text(self.src, s.node)
        names = {}
        for d in s.node.children_by_field_name("declarator"):
            name, _, dims = _array_type(self.src, d, type_text)
            key = f"{(zlib.crc32(name.encode()) | 0x80000000)}u"
            names[name] = "(" + self.shared_expr(type_text, dims, s.extern, key) + ")"
        self.edits.blank(s.node.start_byte, s.node.end_byte)
        return names

    def rewrite_uses(self, names: dict[str, str]):
        for n in walk(self.src.root):
            if n.type == "identifier" and self.src.data[n.start_byte:n.end_byte].decode() in names:
                parent = n.parent
                if parent is not None and parent.type == "field_expression" and \
                        parent.child_by_field_name("field") == n:
                    continue
                self.edits.replace(n.start_byte, n.end_byte, names[self.src.text(n)])

    # --------------------------------------------------------- symbols --
    def export_symbol(self, i: int, sym):
        self.out.symbols.append((sym.name, sym.kind))
        self.edits.insert(
            sym.end,
            f' extern "C" __attribute__((visibility("default"))) void* const __mk_sym_{i} = (void*)&{sym.name};'
            f' extern "C" __attribute__((visibility("default"))) const unsigned long long __mk_symtype_{i} ='
            f" ::mk::cuda::type_code<decltype({sym.name})>();")

    # --------------------------------------------------------- kernels --
    def in_scope(self, scope: list[str], code: str) -> str:
        for name in reversed(scope):
            code = f"namespace {name} {{ {code} }}"
        return code

    def kernel_entry(self, k: Kernel, callee: str, spelling: str, at: int):
        self.edits.insert(at, self.entry_text(k, callee, spelling))

    def entry_text(self, k: Kernel, callee: str, spelling: str) -> str:
        sym = len(self.out.kernels)
        n = len(k.params)
        ptype = [f"::mk::arg_t<__mk_cu{sym}::F, {i}>" for i in range(n)]
        wrapper_params = [f"{ptype[i]} __mk_a{i}" for i in range(n)] + ["char*"]
        args = ", ".join(f"__mk_a{i}" for i in range(n))
        codes = ", ".join([f"{n}ull"] + [f"::mk::cuda::type_code<{t}>()" for t in ptype])
        wrapper = f"__mk_cw_{sym}"
        code = (
            f" namespace __mk_cu{sym} {{ using F = decltype(&{callee}); }}"
            f" __attribute__((always_inline)) inline void {wrapper}({', '.join(wrapper_params)}) {{"
            f" [[clang::always_inline]] {callee}({args}); }}"
            f' extern "C" __attribute__((visibility("default"))) const unsigned long long'
            f" __mk_cuparams_{sym}[] = {{ {codes} }};"
        )
        params = [Param(name, "buffer", index=i) for i, name in enumerate(k.params)] + BLOCK_PARAMS
        code += entry_code(EntrySpec(sym, wrapper, f"decltype({wrapper})", params, describe=False), self.workitem)
        entry = KernelEntry(spelling, sym, params, k.file, k.line, k.max_threads, memory_model="cuda")
        self.out.kernels.append(CudaKernelEntry(entry, spelling, list(k.params)))
        return code


def emit(src: Source, unit: Unit, workitem: bool) -> Emitted:
    return Emitter(src, unit, workitem).run()


def emit_program(src: Source, unit: Unit) -> str:
    """A whole CUDA program for the CPU (port/program.py): host code kept,
    each `k<<<grid, block, smem, stream>>>(args)` a call of
    ::mk::cuda::host_launch (mkcuda/host.h) with the launch's spelling,
    shared memory as for libraries; each kernel notes its instantiation when
    it runs (MKCUDA_NOTE_KERNEL: the launch capture of port/to_metal)."""
    e = Emitter(src, unit, workitem=False)
    e.all_shared()
    for n in walk(src.root):
        if n.type == "function_definition" and "__global__" in keywords(n):
            body = n.child_by_field_name("body")
            if body is not None:
                e.edits.insert(body.start_byte + 1, " MKCUDA_NOTE_KERNEL();")
    for call in unit.launches:
        fn = call.child_by_field_name("function")
        config = next(c for c in call.children if c.type == "kernel_call_syntax")
        args = call.child_by_field_name("arguments")
        parts = [src.text(c) for c in config.named_children]
        grid, block = parts[0], parts[1]
        smem = parts[2] if len(parts) > 2 else "0"
        name = '"' + " ".join(src.text(fn).split()).replace("\\", "\\\\").replace('"', '\\"') + '"'
        text = (f"::mk::cuda::host_launch({name}, dim3({grid}), dim3({block}), (size_t)({smem}), "
                f"[&](auto&&... __mk_a) {{ {src.text(fn)}(__mk_a...); }}"
                + ("" if not args.named_children else ", " + src.text(args)[1:-1]) + ")")
        e.edits.replace(call.start_byte, call.end_byte, text)
    return e.edits.apply() + '\nextern "C" const ::mk::RuntimeApi* __mk_rt = ::mk::cuda::runtime_api();\n'
