"""Stage 1 of the port (analyse): the device code's functions and what each
needs from its callers once it is Metal.

Metal passes what CUDA code reads from globals as parameters: the index
builtins (threadIdx ... are kernel parameters), threadgroup memory (declared
in the kernel, never in a helper), __constant__ / __device__ variables the
host writes (buffers). So for every function this module finds:

- its parameters (pointer, reference, const-ness) and template parameters;
- the calls it makes to the file's other device functions;
- the __shared__ variables it declares (static and extern);
- `needs`: the builtins, threadgroup variables, dynamic threadgroup memory
  and global buffers it uses itself or through its callees (a fixpoint over
  the call graph), which become its leading parameters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..analyse import DEVICE_WORDS, Analyser, normalise_template_args
from ..parse import declarator_name, is_function_declarator, keywords, walk
from .source import CudaSource
from .table import BUILTIN_PARAMS

SYNC_VOTES = ("__syncthreads_count", "__syncthreads_and", "__syncthreads_or")
SYNC_COUNTER = "mk_sync_counter"
WIDTH_SHUFFLES = ("__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync")
LANE_USERS = ("__match_any_sync", "__match_all_sync")


@dataclass
class Param:
    name: str
    node: object  # parameter_declaration
    pointer: bool = False  # T* p (also T p[] )
    reference: bool = False  # T& r
    const_pointee: bool = False
    depth: int = 0  # pointer levels
    elem: str = ""  # the pointee / referenced / value type text


@dataclass
class SharedVar:
    name: str
    node: object  # its declaration
    declarator: object
    type_text: str  # element type, without __shared__ / extern
    dims: list[str]  # "[32]", "[N]"; extern arrays: "[]"
    extern: bool
    owner: str | None  # the function declaring it; None: file scope

    @property
    def scalar(self) -> bool:
        return not self.dims


@dataclass
class Call:
    node: object  # call_expression
    callee: str  # unqualified name
    targs: str | None  # explicit template arguments, normalised
    args: list


@dataclass
class Global:
    """A __constant__ / __device__ / __managed__ variable at namespace scope."""
    name: str
    kind: str  # "constant" or "device"
    node: object
    type_text: str
    dims: list[str]
    init: str | None
    host_written: bool

    @property
    def buffer(self) -> bool:
        """Whether it becomes a buffer parameter; else a program-scope Metal
        constant (a __constant__ with an initializer the host never writes)."""
        return self.kind == "device" or self.host_written or self.init is None


@dataclass
class Function:
    node: object  # function_definition
    name: str
    kernel: bool
    template: object | None  # the template_declaration around it
    template_params: list[str]
    params: list[Param]
    body: object | None
    scope: list[str]
    method: bool  # a member function of a struct or class
    shared: list[SharedVar] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    builtins: set[str] = field(default_factory=set)  # used directly
    globals_used: set[str] = field(default_factory=set)
    file_shared_used: set[str] = field(default_factory=set)

    @property
    def line_key(self) -> int:
        return self.node.start_byte


@dataclass
class Needs:
    """What a function needs from its caller, in a stable order."""
    builtins: list[str] = field(default_factory=list)
    # Threadgroup variables of callees: (owner, name, template args at the call) -> the variable.
    shared: dict[tuple, SharedVar] = field(default_factory=dict)
    dynamic: bool = False  # the launch's dynamic threadgroup memory
    globals: list[str] = field(default_factory=list)


@dataclass
class Facts:
    functions: list[Function]
    by_name: dict[str, list[Function]]
    globals: dict[str, Global]
    file_shared: dict[str, SharedVar]
    fnptr_aliases: set[str]  # type aliases of function pointer types
    functor_args: set[str]  # device functions passed as template arguments
    needs: dict[int, Needs]  # by the function's node start (overloads differ)
    # The builtins a call through a function-pointer template parameter
    # passes first: those any device function used as a template argument
    # needs (each functor forwards its own; emit.py).
    functor_builtins: list[str] = field(default_factory=list)
    # Whether a device function passed as a template argument has __shared__
    # memory (its own or its callees'): then each functor type declares it
    # as a struct (mk_shared), and a kernel calling through a function-pointer
    # template parameter declares one of those and passes it first (emit.py).
    functor_shared: bool = False
    fnptr_callers: list[Function] = field(default_factory=list)  # functions calling through such a parameter

    def helpers(self, name: str) -> list[Function]:
        return [f for f in self.by_name.get(name, []) if not f.kernel]

    def functor_static_shared(self, g: Function) -> list[tuple[tuple, SharedVar]]:
        """The static threadgroup variables a device function passed as a
        template argument takes (call_keys: its own, then its callees'),
        as (the name its caller passes, the variable)."""
        return [(key, v) for _, key, v in call_keys(g, None, self.needs[g.node.start_byte])]


def _type_text(src: CudaSource, decl, skip=("__shared__", "__device__", "__constant__", "__managed__", "extern",
                                             "static", "__restrict__")) -> str:
    """A declaration's type (qualifiers and specifiers before the declarators)."""
    declarators = decl.children_by_field_name("declarator")
    parts = []
    for c in decl.children:
        if c in declarators or c.type in (";", "=", ","):
            break
        if src.node_text(c).strip() in skip:
            continue
        parts.append(src.node_text(c))
    return " ".join(p for p in parts if p.strip())


def array_dims(src: CudaSource, declarator) -> list[str]:
    dims, node = [], declarator
    while node is not None and node.type in ("array_declarator", "init_declarator"):
        if node.type == "array_declarator":
            size = node.child_by_field_name("size")
            dims.insert(0, f"[{src.node_text(size)}]" if size is not None else "[]")
        node = node.child_by_field_name("declarator")
    return dims


def describe_param(src: CudaSource, p) -> Param:
    d = p.child_by_field_name("declarator")
    name_node = declarator_name(d)
    name = src.node_text(name_node) if name_node is not None else ""
    out = Param(name, p)
    node = d
    while node is not None:
        if node.type in ("pointer_declarator", "abstract_pointer_declarator"):
            out.pointer = True
            out.depth += 1
        elif node.type in ("reference_declarator", "abstract_reference_declarator"):
            out.reference = True
        elif node.type == "array_declarator":
            out.pointer = True
            out.depth += 1
        node = node.child_by_field_name("declarator") if node.type != "reference_declarator" else \
            next((c for c in node.named_children), None)
    type_node = p.child_by_field_name("type")
    quals = [src.node_text(c) for c in p.children if c.type == "type_qualifier"]
    out.const_pointee = "const" in quals
    out.elem = src.node_text(type_node) if type_node is not None else ""
    return out


def _callee(src: CudaSource, call) -> tuple[str | None, str | None]:
    fn = call.child_by_field_name("function")
    targs = None
    while fn is not None and fn.type == "qualified_identifier":
        fn = fn.child_by_field_name("name")
    if fn is None:
        return None, None
    if fn.type == "template_function":
        a = fn.child_by_field_name("arguments")
        targs = normalise_template_args(src.node_text(a)) if a is not None else None
        fn = fn.child_by_field_name("name")
    if fn is not None and fn.type == "identifier":
        return src.node_text(fn), targs
    return None, None


class _Collector:
    def __init__(self, src: CudaSource):
        self.src = src
        self.functions: list[Function] = []
        self.globals: dict[str, Global] = {}
        self.file_shared: dict[str, SharedVar] = {}
        self.fnptr_aliases: set[str] = set()
        self.host_text = b" ".join(src.text[s:e] for s, e in src.unit.drops)

    def run(self):
        self.scope_list(self.src.pp.root, [])

    def scope_list(self, node, scope):
        for c in node.children:
            self.item(c, scope, None)

    def item(self, node, scope, template, method=False):
        t = node.type
        if t == "namespace_definition":
            name = node.child_by_field_name("name")
            body = node.child_by_field_name("body")
            if body is not None:
                self.scope_list(body, scope + [self.src.node_text(name) if name is not None else ""])
        elif t == "linkage_specification":
            body = node.child_by_field_name("body")
            if body is not None:
                self.scope_list(body, scope) if body.type == "declaration_list" else self.item(body, scope, None)
        elif t == "template_declaration":
            for c in node.children:
                if c.type in ("function_definition", "declaration", "class_specifier", "struct_specifier",
                              "template_declaration", "alias_declaration"):
                    self.item(c, scope, node, method)
        elif t == "function_definition":
            self.function(node, scope, template, method)
        elif t in ("class_specifier", "struct_specifier", "union_specifier"):
            body = node.child_by_field_name("body")
            for c in body.children if body is not None else []:
                if c.type in ("function_definition", "template_declaration"):
                    self.item(c, scope, None, True)
                elif c.type == "field_declaration":
                    for n in c.children:
                        if n.type in ("class_specifier", "struct_specifier", "union_specifier"):
                            self.item(n, scope, None, True)
        elif t == "declaration":
            self.declaration(node, scope, template)
        elif t in ("alias_declaration", "type_definition"):
            self.alias(node)

    def alias(self, node):
        """`using f_t = float (*)(float);` / `typedef float (*f_t)(float);`"""
        text = self.src.node_text(node)
        if re.search(r"\(\s*\*\s*\w*\s*\)\s*\(", text):
            if node.type == "alias_declaration":
                name = node.child_by_field_name("name")
            else:
                name = declarator_name(node.child_by_field_name("declarator"))
            if name is not None:
                self.fnptr_aliases.add(self.src.node_text(name))

    def declaration(self, node, scope, template):
        kw = keywords(node)
        declarators = node.children_by_field_name("declarator")
        if "__shared__" in kw:
            for d in declarators:
                v = self.shared_var(node, d, None)
                self.file_shared[v.name] = v
            return
        if ("__constant__" in kw or "__device__" in kw or "__managed__" in kw) and template is None and \
                not any(is_function_declarator(d) for d in declarators):
            for d in declarators:
                name_node = declarator_name(d)
                if name_node is None:
                    continue
                name = self.src.node_text(name_node)
                init = d.child_by_field_name("value") if d.type == "init_declarator" else None
                written = re.search(rb"cudaMemcpyToSymbol(?:Async)?\s*\(\s*(?:\w+::)*" + re.escape(name.encode()) +
                                    rb"\b", self.host_text) is not None
                self.globals[name] = Global(name, "constant" if "__constant__" in kw else "device", node,
                                            _type_text(self.src, node), array_dims(self.src, d),
                                            self.src.node_text(init) if init is not None else None,
                                            written or "extern" in kw)

    def shared_var(self, decl, d, owner) -> SharedVar:
        name_node = declarator_name(d)
        return SharedVar(self.src.node_text(name_node) if name_node is not None else "", decl, d,
                         _type_text(self.src, decl), array_dims(self.src, d), "extern" in keywords(decl), owner)

    def function(self, node, scope, template, method):
        kw = keywords(node)
        is_kernel = "__global__" in kw
        is_device = bool(kw & DEVICE_WORDS) or (method and "constexpr" not in kw and
                                                not any(c.type in ("default_method_clause", "delete_method_clause")
                                                        for c in node.children))
        if not (is_kernel or is_device):
            return
        decl = Analyser.function_declarator(node)
        if decl is None:
            return
        name_node = decl.child_by_field_name("declarator")
        while name_node is not None and name_node.type == "qualified_identifier":
            name_node = name_node.child_by_field_name("name")
        name = self.src.node_text(name_node) if name_node is not None else ""
        params_node = decl.child_by_field_name("parameters")
        params = [describe_param(self.src, p) for p in (params_node.named_children if params_node else [])
                  if p.type in ("parameter_declaration", "optional_parameter_declaration")]
        tparams = []
        if template is not None:
            plist = template.child_by_field_name("parameters")
            for p in plist.named_children if plist is not None else []:
                n = next((c for c in p.children if c.type in ("type_identifier", "identifier")), None) \
                    if p.type in ("type_parameter_declaration", "optional_type_parameter_declaration", "variadic_type_parameter_declaration") \
                    else declarator_name(p.child_by_field_name("declarator"))
                if n is not None:
                    tparams.append(self.src.node_text(n))
        f = Function(node, name, is_kernel, template, tparams, params, node.child_by_field_name("body"), scope,
                     method)
        self.scan_body(f)
        self.functions.append(f)

    def scan_body(self, f: Function):
        if f.body is None:
            return
        for n in walk(f.body):
            t = n.type
            if t == "declaration" and "__shared__" in keywords(n):
                for d in n.children_by_field_name("declarator"):
                    f.shared.append(self.shared_var(n, d, f.name))
            elif t == "call_expression":
                name, targs = _callee(self.src, n)
                if name is None:
                    continue
                args = n.child_by_field_name("arguments")
                f.calls.append(Call(n, name, targs, list(args.named_children) if args is not None else []))
                if name == "this_thread_block":
                    f.builtins.update(("threadIdx", "blockIdx", "blockDim"))
                elif name in SYNC_VOTES:
                    f.builtins.add("threadIdx")
                elif name in LANE_USERS or (name in WIDTH_SHUFFLES and args is not None and
                                            len(args.named_children) > 3):
                    f.builtins.add("mk_lane")
            elif t == "identifier":
                text = self.src.node_text(n)
                if text in BUILTIN_PARAMS:
                    f.builtins.add(text)
                elif text in self.globals:
                    f.globals_used.add(text)
                elif text in self.file_shared:
                    f.file_shared_used.add(text)
        if any(c.callee in SYNC_VOTES for c in f.calls):
            f.shared.append(SharedVar(SYNC_COUNTER, None, None, "atomic_int", [], False, f.name))


def collect(src: CudaSource) -> Facts:
    c = _Collector(src)
    c.run()
    by_name: dict[str, list[Function]] = {}
    for f in c.functions:
        by_name.setdefault(f.name, []).append(f)
    functor_args = set()
    for f in c.functions:
        for call in f.calls:
            fn = call.node.child_by_field_name("function")
            for n in walk(fn):
                if n.type == "template_argument_list":
                    for a in n.named_children:
                        text = src.node_text(a).strip()
                        if text in by_name and any(not g.kernel for g in by_name[text]):
                            functor_args.add(text)
    for inst in src.unit.instantiations:  # kernel templates instantiated with a device function
        for a in normalise_template_args(inst.template_args).split(", "):
            a = a.lstrip("&").strip()
            if a in by_name and any(not g.kernel for g in by_name[a]):
                functor_args.add(a)
    facts = Facts(c.functions, by_name, c.globals, c.file_shared, c.fnptr_aliases, functor_args, {})
    fnptr_callers = []
    for f in c.functions:
        params = set()
        plist = f.template.child_by_field_name("parameters") if f.template is not None else None
        for p in plist.named_children if plist is not None else []:
            t = p.child_by_field_name("type")
            if p.type == "parameter_declaration" and t is not None and src.node_text(t) in c.fnptr_aliases:
                n = declarator_name(p.child_by_field_name("declarator"))
                if n is not None:
                    params.add(src.node_text(n))
        if any(call.callee in params for call in f.calls):
            fnptr_callers.append(f)
    facts.needs = _needs(facts, fnptr_callers)
    facts.fnptr_callers = fnptr_callers
    facts.functor_shared = any(facts.functor_static_shared(g) for name in functor_args for g in facts.helpers(name))
    return facts


def resolve(facts: "Facts", call: Call) -> Function | None:
    """The helper a call reaches: by name, then by the number of arguments
    (parameters with defaults may be left out)."""
    candidates = facts.helpers(call.callee)
    n = len(call.args)
    for f in candidates:
        required = sum(1 for p in f.params if p.node.type != "optional_parameter_declaration")
        if required <= n <= len(f.params):
            return f
    return candidates[0] if candidates else None


def substitute_key(key: tuple, mapping: dict[str, str]) -> tuple:
    owner, name, targs = key
    if not targs or not mapping:
        return key
    words = re.compile(r"\b(" + "|".join(re.escape(k) for k in mapping) + r")\b")
    return owner, name, normalise_template_args(words.sub(lambda m: mapping[m.group(1)], targs))


def call_keys(g: Function, targs: str | None, needs: Needs) -> list[tuple[tuple, tuple, SharedVar]]:
    """For a call of `g` with these template arguments: (g's key, the caller's
    key, the variable) of every threadgroup variable g takes: its own static
    ones (one per instantiation, as CUDA has them), then those it needs."""
    from .symbols import split_template_args

    mapping = dict(zip(g.template_params, split_template_args(targs))) if targs else {}
    out = [((g.name, v.name, None), (g.name, v.name, targs), v) for v in g.shared if not v.extern]
    out += [(k, substitute_key(k, mapping), v) for k, v in needs.shared.items()]
    return out


def _needs(facts: Facts, fnptr_callers=()) -> dict[int, Needs]:
    """The fixpoint over the call graph, per function (overloads differ):
    a function needs what it uses and what its callees need. A function that
    calls through a function-pointer template parameter needs the builtins
    of every device function passed as a template argument (the union:
    facts.functor_builtins)."""
    needs: dict[int, Needs] = {}
    for f in facts.functions:
        n = needs.setdefault(f.node.start_byte, Needs())
        for b in sorted(f.builtins, key=list(BUILTIN_PARAMS).index):
            if b not in n.builtins:
                n.builtins.append(b)
        for g in sorted(f.globals_used):
            if facts.globals[g].buffer and g not in n.globals:
                n.globals.append(g)
        for name in sorted(f.file_shared_used):
            v = facts.file_shared[name]
            if v.extern:
                n.dynamic = True
            else:
                n.shared[(None, name, None)] = v
        if any(v.extern for v in f.shared):
            n.dynamic = True
    _propagate(facts, needs)
    union: list[str] = []
    for name in facts.functor_args:
        for g in facts.helpers(name):
            union += [b for b in needs[g.node.start_byte].builtins if b not in union]
    facts.functor_builtins = sorted(union, key=list(BUILTIN_PARAMS).index)
    if facts.functor_builtins and fnptr_callers:
        for f in fnptr_callers:
            n = needs[f.node.start_byte]
            n.builtins += [b for b in facts.functor_builtins if b not in n.builtins]
        _propagate(facts, needs)
    for n in needs.values():
        n.builtins.sort(key=list(BUILTIN_PARAMS).index)
    return needs


def _propagate(facts: Facts, needs: dict[int, Needs]) -> None:
    changed = True
    while changed:
        changed = False
        for f in facts.functions:
            n = needs[f.node.start_byte]
            for call in f.calls:
                g = resolve(facts, call)
                if g is None or g is f:
                    continue
                m = needs[g.node.start_byte]
                for b in m.builtins:
                    if b not in n.builtins:
                        n.builtins.append(b)
                        changed = True
                for gl in m.globals:
                    if gl not in n.globals:
                        n.globals.append(gl)
                        changed = True
                if m.dynamic and not n.dynamic:
                    n.dynamic = changed = True
                for _, key, v in call_keys(g, call.targs, m):
                    if key not in n.shared:
                        n.shared[key] = v
                        changed = True
