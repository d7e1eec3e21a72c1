"""Stage 3 of the port (emit), renderers: the text of a kernel (signature
with [[buffer]] / builtin / threadgroup parameters, threadgroup arrays,
instantiations), of a helper instance (address spaces, leading parameters
for what it needs), and of file-scope code (types, constants)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..analyse import Analyser
from ..parse import declarator_name, keywords, walk
from . import table as T
from .doubles import accumulations, interface_message, mentions_double
from .facts import SYNC_COUNTER, Function, Needs, SharedVar
from .mapper import Renderer, Translation, kernel_param_is_modified
from .model import ELEMENT_BYTES, SCALAR_DTYPES, GlobalSpec, KernelPort, ParamSpec, canonical_type
from .source import CudaSource
from .spaces import buffer_use
from .symbols import functor_shared_name, mangle, split_template_args, substitute

if TYPE_CHECKING:
    from .emit import Emitter

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

    def handed_over(self) -> set[str]:
        """MK1040: the writable buffers the kernel reads after its first device
        atomic (from the start of the outermost loop around it), where data
        other threadgroups handed over with a fence and that atomic is."""
        first = None
        for n in walk(self.fn.body):
            if n.type == "call_expression" and self.text(n.child_by_field_name("function")).startswith("atomic"):
                args = n.child_by_field_name("arguments")
                ptr = args.named_children[0] if args is not None and args.named_children else None
                if ptr is not None and self.on_device(ptr):
                    first = n
                    break
        if first is None:
            return set()
        since, up = first.end_byte, first.parent  # the atomic's own pointer is no hand-off
        while up is not None and up is not self.fn.body:
            if up.type in ("for_statement", "while_statement", "do_statement"):
                since = up.start_byte
            up = up.parent
        read, _ = buffer_use(self.src, self.fn.body, self.env, since)
        return read & self.written

    def render(self) -> str:
        fn = self.fn
        params = []
        fences = self.fences_device()
        handoff = self.handed_over() if fences else set()
        if fences:
            names = ", ".join(sorted(handoff)) or "none"
            self.diag("MK1040", fn.node, f"kernel '{fn.name}': buffers read after its first device atomic are "
                                         f"coherent(device) ({names}) and each device atomic is followed by a fence "
                                         "(mk_acquire)")
        for i, p in enumerate(fn.params):
            name = p.name or f"mk_unused{i}"
            type_node = p.node.child_by_field_name("type")
            # The host lays the parameters out: a double there stays MK1001 (doubles.py).
            self.interface = (name, self.text(p.node))
            if p.pointer:
                if p.depth > 1:
                    self.diag("MK1032", p.node, f"parameter '{name}' is a pointer to pointers")
                self.memory_type += 1
                elem = self.rw(type_node)
                self.memory_type -= 1
                space = self.kernel_spaces[p.name]
                const = "const " if p.const_pointee and space != "constant" else ""
                # MK1040: what other threadgroups wrote, read after a fence and an atomic.
                coherent = "coherent(device) " if p.name in handoff and space == "device" and not const else ""
                params.append(f"{coherent}{space} {const}{elem}* {name} [[buffer({i})]]")
            else:
                t = self.rw(type_node)
                pname = f"mk_arg_{name}" if name in self.modified else name
                params.append(f"constant {t}& {pname} [[buffer({i})]]")
            self.interface = None
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
        if self.facts.functor_shared and fn in self.facts.fnptr_callers:
            for p in sorted(self.fnptr_params):  # what the function it names declares __shared__ (emit.functor)
                out.append(f"\n  threadgroup typename {p}::mk_shared {functor_shared_name(p)};")
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
        params, errors = [], []
        for p in fn.params:
            type_node = p.node.child_by_field_name("type")
            text = substitute(self.text(type_node) if type_node is not None else "", mapping)
            ct = canonical_type(text, self.em.typedefs)
            if not mentions_double(self.text(p.node)) and self.em.layouts.holds_double(text):
                # through a typedef, a struct's fields or a template argument (spelled: render())
                where = f" of '{spelling}'" if targs else ""
                decl = substitute(self.text(p.node), mapping)
                errors.append(self.tr.diagnose("MK1001", p.node, interface_message(p.name, decl, where), spelling))
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
        sums = accumulations(self.src, fn, lambda t: self.em.layouts.holds_double(substitute(t, mapping))) \
            if self.tr.demote else []
        return KernelPort(spelling, name, file, line, params, globals_,
                          self.primary_extern() is not None or self.needs.dynamic, self.max_threads, errors,
                          present_mask=bool(self.null_tested), accumulations=sums)

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
