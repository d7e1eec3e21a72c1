"""Names the port makes: threadgroup variables moved into kernels, template
arguments substituted into types."""

from __future__ import annotations

import re

from ..analyse import normalise_template_args


def mangle(key: tuple) -> str:
    owner, name, targs = key
    if owner is None:
        return name
    out = f"{owner}_{name}"
    if targs:
        out += "_" + re.sub(r"\W+", "_", targs).strip("_")
    return out


def functor_shared_name(param: str) -> str:
    """The kernel's threadgroup variable holding the __shared__ memory of the
    function its function-pointer template parameter `param` names."""
    return f"mk_{param}_shared"


def substitute(text: str, mapping: dict[str, str]) -> str:
    if not mapping:
        return text
    pattern = re.compile(r"\b(" + "|".join(re.escape(k) for k in mapping) + r")\b")
    return pattern.sub(lambda m: mapping[m.group(1)], text)


def split_template_args(targs: str) -> list[str]:
    return [a.strip() for a in normalise_template_args(targs).split(", ")] if targs else []
