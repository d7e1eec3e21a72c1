"""Stage 2: what the CUDA file holds, read from its syntax tree.

- kernels (`__global__` definitions) and their parameters;
- the instantiations of kernel templates that exist: those the host code
  launches (`k<float><<<g, b>>>(...)`) or explicitly instantiates;
- `__constant__` / `__device__` variables, `__shared__` declarations;
- host-only code, which is dropped (never run: only its launches matter);
- constructs this runtime cannot run, each an error naming it and its line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .parse import Source, declarator_name, is_function_declarator, keywords, walk

DEVICE_WORDS = {"__global__", "__device__"}

# Identifiers whose presence in device code is an error: (pattern, what it is).
UNSUPPORTED_IDENTIFIERS = [
    (re.compile(r"^(tex[123]D\w*|tex1Dfetch|texCubemap\w*|tex2Dgather|texture)$"), "texture fetch"),
    (re.compile(r"^(cudaTextureObject_t|cudaSurfaceObject_t)$"), "texture / surface object"),
    (re.compile(r"^surf[123]D\w*$"), "surface access"),
    (re.compile(r"^(this_grid|grid_group|this_multi_grid|multi_grid_group)$"),
     "grid-wide synchronisation (cooperative_groups::this_grid / grid.sync())"),
    (re.compile(r"^(__shfl|__shfl_up|__shfl_down|__shfl_xor|__ballot|__any|__all)$"),
     "pre-Volta warp function without a mask (use the _sync form)"),
    (re.compile(r"^curand_\w+$"), "the cuRAND device API"),
    (re.compile(r"^(cuda_fp8|__nv_fp8_\w+)$"), "8-bit floating point (cuda_fp8.h)"),
]


@dataclass
class Kernel:
    name: str
    scope: list[str]  # enclosing namespaces
    template: bool
    params: list[str]
    end: int  # byte offset just past the body
    file: str
    line: int
    max_threads: int = 1024

    @property
    def qualified(self) -> str:
        return "::" + self.spelling

    @property
    def spelling(self) -> str:
        """As CUDA names it: `k`, `ns::k` (anonymous namespaces left out)."""
        return "::".join([*(s for s in self.scope if s), self.name])


@dataclass
class Instantiation:
    kernel: Kernel
    template_args: str  # normalised, without the angle brackets
    file: str
    line: int

    @property
    def spelling(self) -> str:
        return f"{self.kernel.spelling}<{self.template_args}>"


@dataclass
class Symbol:
    """A __constant__ or __device__ variable at namespace scope."""
    name: str
    kind: str  # "constant" or "device"
    scope: list[str]
    end: int  # byte offset just past the declaration


@dataclass
class SharedDecl:
    node: object  # the declaration
    extern: bool
    file_scope: bool


@dataclass
class Unit:
    kernels: list[Kernel] = field(default_factory=list)
    instantiations: list[Instantiation] = field(default_factory=list)
    symbols: list[Symbol] = field(default_factory=list)
    shared: list[SharedDecl] = field(default_factory=list)
    drops: list[tuple[int, int]] = field(default_factory=list)  # host code
    errors: list[tuple[str, str, int]] = field(default_factory=list)  # (what, file, line)
    notes: list[str] = field(default_factory=list)  # instantiations that could not be known
    device_bodies: list[object] = field(default_factory=list)  # kept function definitions
    launches: list[object] = field(default_factory=list)  # `k<<<...>>>(...)` calls in host code


def split_top_level(text: str) -> list[str]:
    """`a, b<c, d>, e` -> ['a', ' b<c, d>', ' e']: the commas outside brackets."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        cur += ch
    parts.append(cur)
    return parts


def normalise_spelling(name: str) -> str:
    """`k< __half ,4 >` -> `k<__half, 4>`: how kernels are looked up by name."""
    if "<" not in name:
        return name.strip()
    base, _, rest = name.partition("<")
    return f"{base.strip()}<{normalise_template_args(rest.rsplit('>', 1)[0])}>"


def normalise_template_args(text: str) -> str:
    """`< __half ,4 >` -> `__half, 4`: top-level commas get one space, other
    runs of spaces collapse (CUDA's spelling in names like `k<__half, 4>`)."""
    text = text.strip()
    if text.startswith("<") and text.endswith(">"):
        text = text[1:-1]
    out = []
    for p in split_top_level(text):
        p = re.sub(r"\s+", " ", p.strip())
        p = re.sub(r"\s*([<>(),*&\[\]])\s*", r"\1", p)
        p = re.sub(r",", ", ", p)
        out.append(p)
    return ", ".join(out)


class Analyser:
    def __init__(self, src: Source, host_program: bool = False):
        self.src = src
        self.host_program = host_program  # keep host code (port/program.py runs it)
        self.unit = Unit()
        self.kernels_by_name: dict[str, list[Kernel]] = {}
        self.launches = []  # (call node, name, targs node or None)
        self.explicit = []  # (name, targs text, node)

    def run(self) -> Unit:
        self.scope_list(self.src.root, [])
        self.resolve_instantiations()
        self.unit.launches = list(self.launches)
        for body in self.unit.device_bodies:
            self.check_device_code(body)
        return self.unit

    # ---------------------------------------------------------- scopes --
    def scope_list(self, node, scope: list[str]):
        for child in node.children:
            self.top_level(child, scope)

    def top_level(self, node, scope: list[str], template=None):
        t = node.type
        if t == "namespace_definition":
            name = node.child_by_field_name("name")
            body = node.child_by_field_name("body")
            inner = scope + ([self.src.text(name)] if name is not None else [""])
            if body is not None:
                self.scope_list(body, inner)
        elif t == "linkage_specification":
            body = node.child_by_field_name("body")
            if body is not None:
                if body.type == "declaration_list":
                    self.scope_list(body, scope)
                else:
                    self.top_level(body, scope)
        elif t == "template_declaration":
            for c in node.children:
                if c.type in ("function_definition", "declaration", "class_specifier", "struct_specifier",
                              "template_declaration", "alias_declaration"):
                    self.top_level(c, scope, template=node)
        elif t == "function_definition":
            self.function(node, scope, template)
        elif t == "declaration":
            self.declaration(node, scope, template)
        elif t in ("class_specifier", "struct_specifier", "union_specifier"):
            self.record(node)
        elif t == "template_instantiation":
            self.instantiation(node)
        # Types, typedefs, using-declarations, static_asserts, enums stay as
        # they are.

    def record(self, node):
        body = node.child_by_field_name("body")
        if body is None:
            return
        for c in body.children:
            target = c
            if c.type == "template_declaration":
                target = next((x for x in c.children if x.type == "function_definition"), None)
                if target is None:
                    continue
            if target.type == "function_definition":
                if self.device_function(target):
                    self.unit.device_bodies.append(target)
                elif not self.keep_host_function(target):
                    self.drop(c)
            elif target.type in ("class_specifier", "struct_specifier", "union_specifier"):
                self.record(target)
            elif target.type == "field_declaration":
                for n in target.children:
                    if n.type in ("class_specifier", "struct_specifier", "union_specifier"):
                        self.record(n)

    def device_function(self, node) -> bool:
        return bool(keywords(node) & DEVICE_WORDS)

    def keep_host_function(self, node) -> bool:
        """Host functions device code may still call: constexpr ones, and
        defaulted / deleted special members."""
        if "constexpr" in keywords(node):
            return True
        return any(c.type in ("default_method_clause", "delete_method_clause") for c in node.children)

    def drop(self, node):
        if self.host_program:
            return
        # A template's header goes with it.
        if node.parent is not None and node.parent.type == "template_declaration":
            node = node.parent
        self.unit.drops.append((node.start_byte, node.end_byte))

    # ------------------------------------------------------- functions --
    def function(self, node, scope, template):
        kw = keywords(node)
        if "__global__" in kw:
            self.kernel(node, scope, template)
            self.unit.device_bodies.append(node)
        elif "__device__" in kw:
            self.unit.device_bodies.append(node)
        else:
            # Host code: read its launches, then drop it.
            for n in walk(node):
                if n.type == "kernel_call_syntax":
                    self.launches.append(n.parent)
            if not self.keep_host_function(node):
                self.drop(node)

    @staticmethod
    def function_declarator(node):
        """The function_declarator inside a definition or declaration."""
        decl = node.child_by_field_name("declarator")
        while decl is not None and decl.type != "function_declarator":
            decl = decl.child_by_field_name("declarator")
        return decl

    def kernel(self, node, scope, template):
        decl = self.function_declarator(node)
        if decl is None:
            return
        name_node = decl.child_by_field_name("declarator")
        params = decl.child_by_field_name("parameters")
        names = []
        for p in params.named_children if params is not None else []:
            if p.type in ("parameter_declaration", "optional_parameter_declaration"):
                d = declarator_name(p.child_by_field_name("declarator"))
                names.append(self.src.text(d) if d is not None else f"arg{len(names)}")
            elif p.type == "variadic_parameter_declaration":
                self.error(p, "variadic kernel parameters")
        body = node.child_by_field_name("body")
        file, line = self.src.where(name_node)
        max_threads = 1024
        for c in node.children:
            if c.type == "launch_bounds":
                nums = [x for x in c.named_children]
                if nums:
                    try:
                        max_threads = int(self.src.text(nums[0]).rstrip("uUlL"), 0)
                    except ValueError:
                        pass
        name = self.src.text(name_node)
        if name_node.type == "template_function":  # an explicit specialisation
            self.error(node, "explicit specialisation of a kernel template")
            return
        k = Kernel(name, list(scope), template is not None, names, body.end_byte if body else node.end_byte,
                   file, line, max_threads)
        self.unit.kernels.append(k)
        self.kernels_by_name.setdefault(name, []).append(k)

    # ---------------------------------------------------- declarations --
    def declaration(self, node, scope, template):
        kw = keywords(node)
        declarators = [c for c in node.children_by_field_name("declarator")]
        is_function = any(is_function_declarator(d) for d in declarators)
        if "__shared__" in kw:
            self.unit.shared.append(SharedDecl(node, "extern" in kw, True))
            return
        if is_function:
            if not (kw & DEVICE_WORDS) and "constexpr" not in kw:
                self.drop(node)
            return
        if "__constant__" in kw or "__device__" in kw or "__managed__" in kw:
            if template is None and "extern" not in kw:
                for d in declarators:
                    name = declarator_name(d)
                    if name is not None:
                        self.unit.symbols.append(Symbol(self.src.text(name),
                                                        "constant" if "__constant__" in kw else "device",
                                                        list(scope), node.end_byte))
            return
        if template is not None or "const" in kw or "constexpr" in kw:
            return
        # A host variable: device code cannot use it.
        if declarators:
            self.drop(node)

    def instantiation(self, node):
        decl = self.function_declarator(node)
        if decl is None:
            return
        target = decl.child_by_field_name("declarator")
        if target is None:
            return
        if target.type == "template_function":
            name = self.src.text(target.child_by_field_name("name"))
            args = target.child_by_field_name("arguments")
            self.explicit.append((name, self.src.text(args), node))
        else:
            self.explicit.append((self.src.text(target).split("::")[-1], None, node))

    # --------------------------------------------------- instantiations --
    def resolve_instantiations(self):
        seen = set()

        def add(name, targs_text, node, how):
            candidates = [k for k in self.kernels_by_name.get(name.split("::")[-1], []) if k.template]
            if not candidates:
                return
            file, line = self.src.where(node)
            if targs_text is None:
                self.unit.notes.append(
                    f"{file}:{line}: {how} of kernel template '{name}' without explicit template arguments: "
                    f"write {name}<...> so that the instantiation can be named")
                return
            args = normalise_template_args(targs_text)
            key = (candidates[-1].name, args)
            if key in seen:
                return
            seen.add(key)
            self.unit.instantiations.append(Instantiation(candidates[-1], args, file, line))

        for name, targs, node in self.explicit:
            add(name, targs, node, "explicit instantiation")
        for call in self.launches:
            fn = call.child_by_field_name("function")
            while fn is not None and fn.type == "qualified_identifier":
                fn = fn.child_by_field_name("name")
            if fn is None:
                continue
            if fn.type == "template_function":
                name = self.src.text(fn.child_by_field_name("name"))
                targs = fn.child_by_field_name("arguments")
                if self.dependent(call, targs):
                    file, line = self.src.where(call)
                    self.unit.notes.append(
                        f"{file}:{line}: launch of '{self.src.text(fn)}' depends on names local to "
                        "the host code around it; add an explicit instantiation to name it")
                    continue
                add(name, self.src.text(targs), call, "launch")
            else:
                add(self.src.text(fn), None, call, "launch")

    def dependent(self, node, targs) -> bool:
        """Whether the template arguments name something local to the host
        code around the launch (a template parameter of a host template, a
        parameter or variable of the function or lambda it is in): the
        instantiation cannot be named at namespace scope then."""
        used = {self.src.text(n) for n in walk(targs) if n.type in ("type_identifier", "identifier")}
        p = node.parent
        while p is not None:
            if p.type in ("template_declaration", "function_definition", "lambda_expression"):
                for n in walk(p):
                    if n.type in ("parameter_declaration", "optional_parameter_declaration",
                                  "type_parameter_declaration", "optional_type_parameter_declaration",
                                  "init_declarator", "declaration"):
                        d = declarator_name(n.child_by_field_name("declarator")) if n.type != \
                            "type_parameter_declaration" else next(
                                (c for c in n.children if c.type == "type_identifier"), None)
                        if d is not None and self.src.text(d) in used:
                            return True
            p = p.parent
        return False

    # ------------------------------------------------------ device code --
    def check_device_code(self, body):
        for n in walk(body):
            t = n.type
            if t == "gnu_asm_expression":
                self.error(n, "inline PTX assembly (asm)")
            elif t == "kernel_call_syntax":
                self.error(n, "dynamic parallelism (a kernel launch from device code)")
            elif t in ("identifier", "type_identifier", "namespace_identifier", "field_identifier"):
                text = self.src.text(n)
                for pattern, what in UNSUPPORTED_IDENTIFIERS:
                    if pattern.match(text):
                        if t == "field_identifier" and not text.startswith("this_"):
                            continue
                        self.error(n, f"{what}: '{text}'")
                        break
            elif t == "declaration" and "__shared__" in keywords(n):
                self.unit.shared.append(SharedDecl(n, "extern" in keywords(n), False))

    def error(self, node, what: str):
        file, line = self.src.where(node)
        self.unit.errors.append((what, file, line))


def analyse(src: Source, host_program: bool = False) -> Unit:
    return Analyser(src, host_program).run()
