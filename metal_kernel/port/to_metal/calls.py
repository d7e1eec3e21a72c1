"""Stage 2 of the port (map), calls: a CUDA call becomes its Metal
construct by the table's rules (warp functions, atomics, barriers, math,
half intrinsics), or a call of the helper instance its arguments' address
spaces select, with what the helper needs passed first. A mixin of
mapper.Renderer (it uses the renderer's environment and diagnostics)."""

from __future__ import annotations

import re

from ..parse import walk
from . import table as T
from .doubles import demote
from .facts import SYNC_COUNTER, SYNC_VOTES, Call, Function, SharedVar, call_keys, resolve
from .spaces import MEMORY_SPACES
from .symbols import functor_shared_name, mangle

# Methods of cooperative groups objects, counted as cooperative-groups references.
_METHOD_NAMES_CG = {"thread_rank", "meta_group_rank", "meta_group_size", "shfl", "shfl_up", "shfl_down",
                    "shfl_xor", "ballot", "num_threads", "thread_index", "group_index", "dim_threads", "group_dim"}


# A fence that orders device memory across thread blocks (MK1040).
DEVICE_FENCE = re.compile(r"\b__threadfence(_system)?\s*\(")

class CallRewriter:
    def flag_prefixed(self, node, name: str) -> bool:
        """A name of a family Metal lacks (T.FLAGGED_PREFIXES: textures,
        surfaces ...): diagnosed and counted unconverted."""
        for prefix, code, what in T.FLAGGED_PREFIXES:
            if name.startswith(prefix):
                self.diag(code, node, f"{what}: '{name}'")
                self.count_ref(T.Rule(name, "", "memory"), name, converted=False)
                return True
        return False

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
        if name in self.fnptr_params:  # the functor takes the builtins its function may need first
            self.changed(node)
            args = [self.rw(a) for a in self.args(node)]
            # A kernel passes the __shared__ memory the function needs (emit.functor);
            # a device function has none to pass (such a function is MK1024).
            shared = [functor_shared_name(name)] if self.facts.functor_shared and self.fn.kernel else []
            return f"{name}{{}}({', '.join(shared + self.facts.functor_builtins + args)})"
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
        if self.flag_prefixed(node, name):
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
        if rule.kind == "flag" and rule.code == "MK1001":  # make_double2, __dadd_rn ... (doubles.py)
            metal = self.double_site(node, name)
            if metal is None:
                return None
            rendered = [self.rw(a) for a in args]
            return metal.format(*rendered, args=", ".join(rendered))
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
        t = demote(t) if self.tr.demote else t
        if t.strip() in ("double", "long long", "unsigned long long", "long", "unsigned long", "int64_t",
                         "uint64_t", "size_t") or "long long" in t:
            self.diag("MK1029", node, f"'{name}' of a {t.strip()}")

    def atomic_call(self, node, name, rule, args):
        expr = self.atomic_expr(node, name, rule, args)
        if expr is not None and self.fences_device() and self.on_device(args[0]):
            # MK1040: the thread that sees another group's release through
            # this atomic must fence to acquire it (Metal's atomics are relaxed).
            self.tr.helpers.add("acquire")
            return f"mk_acquire({expr})"
        return expr

    def fences_device(self) -> bool:
        """Whether this function orders device memory across thread blocks
        with __threadfence() (and atomics): MK1040. Asked at every atomic:
        the body is searched once per function."""
        if self.fn is None or self.fn.body is None:
            return False
        cached = getattr(self, "_fences_device", None)
        if cached is None or cached[0] is not self.fn:
            cached = (self.fn, DEVICE_FENCE.search(self.text(self.fn.body)) is not None)
            self._fences_device = cached
        return cached[1]

    def on_device(self, ptr) -> bool:
        """An atomic's pointer into device memory (what the translator cannot
        place is a kernel buffer: device)."""
        return (self.sp.space_of(ptr) or "device") == "device"

    def atomic_expr(self, node, name, rule, args):
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
