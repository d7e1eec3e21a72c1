"""Stage 2 of the port (map), warp functions: which masks Metal can express
(the full mask, __activemask(), the ballot of the branch's own condition),
and which warp functions run where the lanes of a warp may have diverged
(CUDA's independent thread scheduling makes such lanes exchange values;
Metal's simd functions combine only the active lanes). A mixin of
mapper.Renderer."""

from __future__ import annotations

import re

from ..parse import declarator_name, walk
from . import table as T


class WarpChecks:
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
