"""Kernel signatures: parameters and their Metal attributes, and what
Apple's compiler rejects in a kernel's declaration (features.py holds the
rejected attributes with their reasons)."""

from __future__ import annotations

from .entries import THREAD_ATTRIBUTES, Param
from .features import rejected_attributes
from .lexer import TokenView

ADDRESS_SPACES = {"device", "constant", "thread", "threadgroup", "threadgroup_imageblock", "ray_data",
                  "object_data"}

# Specifiers allowed before a kernel's return type.
_KERNEL_SPECIFIERS = {"kernel", "static", "inline", "extern", "template", "typename"}


class SignatureRules(TokenView):
    """Parameter lists of kernels, checked as Metal checks them."""

    _rejected_attrs = rejected_attributes()

    def parse_params(self, open_i: int, close_i: int, kernel_name: str, check: bool) -> list[Param]:
        """The kernel's parameters; with `check`, Metal's rules for them."""
        params: list[Param] = []
        explicit = set()
        pending = []
        for a, b in self.split_params(open_i, close_i):
            attrs = []
            name = ""
            words = []
            k = a
            while k < b:
                if self.is_attr_open(k):
                    end, got = self.attribute_span(k)
                    attrs.extend(got)
                    k = end
                    continue
                if self.toks[k].kind == "ident":
                    name = self.toks[k].text
                words.append(self.toks[k].text)
                k += 1
            p = Param(name=name, kind="buffer", coherent="coherent" in words)
            for aname, args in attrs:
                if aname == "buffer":
                    p.index = self.attr_int(args)
                    explicit.add(p.index)
                elif aname == "threadgroup":
                    p.kind, p.index = "threadgroup", self.attr_int(args)
                elif aname in THREAD_ATTRIBUTES:
                    p.kind, p.attribute = "attribute", aname
                elif aname in self._rejected_attrs:
                    self.error(a, f"kernel '{kernel_name}': parameter '{name}': "
                               f"[[{aname}]] is not supported: {self._rejected_attrs[aname]}")
                elif aname in ("function_constant",):
                    pass
                else:
                    self.error(a, f"kernel '{kernel_name}': parameter '{name}' has "
                               f"an attribute this runtime does not know: [[{aname}]]")
            if check:
                self.check_param(a, kernel_name, p, words, bool(attrs))
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

    def check_param(self, at: int, kernel: str, p: Param, words: list[str], has_attr: bool):
        """What Metal's compiler rejects in a kernel parameter."""
        indirect = "*" in words or "&" in words or "[" in words  # arrays are pointers
        spaces = [w for w in words if w in ADDRESS_SPACES]
        if indirect and not spaces:
            self.error(at, f"kernel '{kernel}': parameter '{p.name}' is a pointer or reference without an "
                       "address space; write `device` (read-write buffer) or `constant` (read-only), "
                       "e.g. `device float* " + p.name + "`")
        if not indirect and not has_attr:
            if any(w.startswith(("texture", "depth", "sampler")) for w in words):
                self.error(at, f"kernel '{kernel}': parameter '{p.name}': textures and samplers are "
                           "not supported yet")
            self.error(at, f"kernel '{kernel}': parameter '{p.name}' needs an attribute: Metal passes "
                       f"scalars in buffers (`constant {' '.join(words[:-1]) or 'uint'}& {p.name} "
                       "[[buffer(k)]]`) and thread ids with an attribute such as "
                       "[[thread_position_in_grid]]")

    def check_returns_void(self, start: int, name_i: int, name: str):
        words = []
        k = start
        while k < name_i:
            if self.is_attr_open(k):
                k = self.attribute_span(k)[0]
                continue
            t = self.toks[k].text
            if t == "template" and k + 1 < name_i and self.toks[k + 1].text == "<":
                k = self.match_angle(k + 1) + 1
                continue
            if t == "__attribute__" and k + 1 < name_i and self.toks[k + 1].text == "(":
                k = self.match_close(k + 1) + 1
                continue
            if k + 1 < name_i and self.toks[k + 1].text == "::":
                k += 2  # a qualifier of the name
                continue
            if t not in _KERNEL_SPECIFIERS and t != "::":
                words.append(t)
            k += 1
        if words != ["void"]:
            self.error(name_i, f"kernel '{name}' must return void (kernels write their results to "
                       f"buffers); it is declared to return '{' '.join(words)}'")
