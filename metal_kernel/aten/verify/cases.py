"""What a TensorIterator op is asked during verification, per dtype.

Every case is a list of arguments (tensors, or Python numbers for the operands a
Scalar overload takes) plus how its output is given and which kernel flavor the
host is made to pick. Sources, in order:

1. OpInfo `sample_inputs`, each as given, with the ILP flavor forced,
   non-contiguous, column-major, into a strided out=, into an out= of another
   dtype (castout, unary), and for binary ops with Scalar overloads with either
   operand as a Python number;
2. OpInfo `reference_inputs` where the op has them (they repeat the samples, add
   large, small, extremal and non-contiguous ones); the few of ~1M elements are cut
   along their first dimension to REFERENCE_LIMIT (65,536, the size of the dense
   sweep), which keeps their values' spread and layout at a sixteenth of the cost
   (the ILP kernel those sizes would reach is forced on every sample instead);
3. the dtype's edge values (values.py), pairwise for binary ops;
4. a dense sweep of the dtype (unary ops);
5. layouts built from the edge values: broadcast, 0-d in either position, empty,
   transposed, expanded (stride 0), channels-last and offset views;
6. binary ops: 0-d tensors and Python numbers in either argument position, and
   type-promotion pairs whose result type is the dtype under test.

A sample the op cannot take here (keyword arguments) is a `Skip` with its reason;
the report counts them.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import torch
from torch.testing import make_tensor

from ..model import dtypes as dt
from . import values as vals

REFERENCE_LIMIT = 1 << 16  # elements of one reference input, at most


@dataclass
class Case:
    label: str
    args: list
    out: str | None = None  # None, "strided", "castout"
    force: str | None = None  # "ilp" / "scalar": the kernel flavor the host must pick
    castout: torch.dtype | None = None


@dataclass(frozen=True)
class Skip:
    reason: str


@dataclass
class OpView:
    """What case generation needs to know of the op."""

    infos: list
    arity: str
    scalar_overloads: bool
    domain: tuple = (None, None)
    large_limit: float | None = None  # OpInfo skips large arguments: stay within this
    promotion_dtypes: list = field(default_factory=list)  # dtypes instantiated (for promotion pairs)

    @property
    def n_inputs(self) -> int:
        return 1 if self.arity == "unary" else 2


def _column_major(t):
    return t.mT.contiguous().mT if isinstance(t, torch.Tensor) and t.dim() >= 2 else t


def _number(t: torch.Tensor):
    return t.reshape(-1)[0].item()


def _sample_args(sample, n: int) -> list | None:
    args = [sample.input, *sample.args][:n]
    return args if len(args) == n else None


def sample_cases(op: OpView, dtype):
    n = op.n_inputs
    for info in op.infos:
        for k, sample in enumerate(info.sample_inputs("cpu", dtype)):
            if sample.kwargs:
                yield Skip(f"OpInfo sample with keyword arguments ({', '.join(sample.kwargs)})")
                continue
            args = _sample_args(sample, n)
            if args is None:
                yield Skip("OpInfo sample with fewer operands than the kernel takes")
                continue
            label = f"OpInfo sample {k} {[tuple(a.shape) if isinstance(a, torch.Tensor) else a for a in args]}"
            yield Case(label, args)
            yield Case(f"{label}, ILP kernel", args, force="ilp")
            nc = sample.noncontiguous()
            yield Case(f"{label}, non-contiguous", _sample_args(nc, n) or args)
            yield Case(f"{label}, column-major", [_column_major(a) for a in args])
            yield Case(f"{label}, strided out=", args, out="strided")
            if op.arity == "unary" and dtype.is_floating_point:
                other = torch.float32 if dtype != torch.float32 else torch.float16
                yield Case(f"{label}, out= {dt.short_name(other)} (castout)", args, out="castout", castout=other)
            if op.scalar_overloads and n == 2:
                a, b = args
                if isinstance(b, torch.Tensor) and b.numel():
                    yield Case(f"{label}, Python number rhs", [a, _number(b)])
                if isinstance(a, torch.Tensor) and a.numel():
                    yield Case(f"{label}, Python number lhs", [_number(a), b])


def _cut(args: list) -> tuple[list, str]:
    """Arguments of more than REFERENCE_LIMIT elements cut along their first dimension
    (strides kept: a non-contiguous input stays one), with a note for the label."""
    big = [a for a in args if isinstance(a, torch.Tensor) and a.numel() > REFERENCE_LIMIT]
    if not big:
        return args, ""
    lead = big[0].shape[0]
    rows = max(1, REFERENCE_LIMIT // max(big[0].numel() // lead, 1))
    if any(isinstance(a, torch.Tensor) and a.dim() and a.shape[0] not in (1, lead) for a in args):
        return args, ""
    cut = [a[:rows] if isinstance(a, torch.Tensor) and a.dim() and a.shape[0] == lead else a for a in args]
    return cut, f", first {rows} of {lead} rows"


def reference_cases(op: OpView, dtype):
    for info in op.infos:
        if info.reference_inputs_func is None:
            continue
        for k, sample in enumerate(info.reference_inputs("cpu", dtype)):
            if sample.kwargs:
                yield Skip(f"OpInfo reference input with keyword arguments ({', '.join(sample.kwargs)})")
                continue
            args = _sample_args(sample, op.n_inputs)
            if args is None:
                yield Skip("OpInfo reference input with fewer operands than the kernel takes")
                continue
            shapes = [tuple(a.shape) if isinstance(a, torch.Tensor) else a for a in args]
            args, note = _cut(args)
            yield Case(f"OpInfo reference input {k} {shapes}{note}", args)


def _edge(op: OpView, dtype) -> torch.Tensor:
    limit = op.large_limit if op.n_inputs == 1 else min(op.large_limit or vals.BINARY_LIMIT, vals.BINARY_LIMIT)
    return vals.edge_values(dtype, op.domain, limit)


def _pairs(values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    n = values.numel()
    return values.repeat_interleave(n), values.repeat(n)


def value_cases(op: OpView, dtype):
    edge = _edge(op, dtype)
    if op.n_inputs == 1:
        yield Case("edge values", [edge])
        yield Case("edge values, strided out=", [edge], out="strided")
        yield Case("dense sweep", [vals.dense_sweep(dtype, op.domain, op.large_limit)])
    else:
        a, b = _pairs(edge)
        yield Case("edge value pairs", [a, b])
        yield Case("edge value pairs, ILP kernel", [a, b], force="ilp")


def _pool(op: OpView, dtype, n: int) -> torch.Tensor:
    """`n` values: the edge values, then random ones within the domain."""
    edge = _edge(op, dtype)
    lo, hi = op.domain if dtype != torch.bool else (None, None)
    extra = make_tensor((max(n - edge.numel(), 0),), dtype=dtype, device="cpu", low=lo, high=hi)
    return torch.cat([edge, extra])[:n]


def layout_cases(op: OpView, dtype):
    """Broadcast, 0-d, empty, transposed, expanded, channels-last and offset views."""
    n = op.n_inputs
    pool = _pool(op, dtype, 2 * 3 * 4 * 5 * 2)
    grid = pool[:120].reshape(2, 3, 4, 5)
    base = pool[:64]
    empty = [torch.empty(0, dtype=dtype), torch.empty(2, 0, 3, dtype=dtype)]
    if n == 1:
        yield Case("0-d", [pool[0].clone().reshape(())])
        for e in empty:
            yield Case(f"empty {tuple(e.shape)}", [e])
        yield Case("transposed (4, 5)", [grid[0, 0].t()])
        yield Case("expanded (stride 0)", [pool[:5].reshape(1, 5).expand(4, 5)])
        yield Case("channels-last (2, 3, 4, 5)", [grid.contiguous(memory_format=torch.channels_last)])
        yield Case("offset view base[3:-2]", [base[3:-2]])
        yield Case("offset strided view base[1::3]", [base[1::3]])
        return
    other = pool.flip(0)
    ogrid = other[:120].reshape(2, 3, 4, 5)
    yield Case("broadcast (3, 1) x (1, 4)", [pool[:3].reshape(3, 1), other[:4].reshape(1, 4)])
    yield Case("broadcast (2, 3, 4, 5) x (5,)", [grid, other[:5]])
    yield Case("broadcast (5,) x (2, 3, 4, 5)", [other[:5], grid])
    yield Case("0-d x 0-d", [pool[0].clone().reshape(()), other[0].clone().reshape(())])
    yield Case("0-d lhs", [pool[1].clone().reshape(()), base])
    yield Case("0-d rhs", [base, other[1].clone().reshape(())])
    for e in empty:
        yield Case(f"empty {tuple(e.shape)}", [e, e.clone()])
    yield Case("empty x broadcast (1,)", [empty[1], other[:1]])
    yield Case("transposed x contiguous (4, 5)", [grid[0, 0].t(), ogrid[0, 0].t().contiguous()])
    yield Case("expanded (stride 0) x strided", [pool[:5].reshape(1, 5).expand(4, 5), ogrid[0, :, :, :].reshape(12, 5)[::3]])
    yield Case("channels-last x channels-last", [grid.contiguous(memory_format=torch.channels_last),
                                                  ogrid.contiguous(memory_format=torch.channels_last)])
    yield Case("channels-last x contiguous", [grid.contiguous(memory_format=torch.channels_last), ogrid])
    yield Case("offset views base[3:-2]", [base[3:-2], other[:64][2:-3]])
    yield Case("offset strided views base[1::3]", [base[1::3], other[:64][2::3]])


_SCALARS = {"float": [0.0, -0.0, 1.0, -1.0, 0.5, 2.5, math.inf, -math.inf, math.nan],
            "int": [0, 1, -1, 3], "bool": [False, True]}


def scalar_cases(op: OpView, dtype):
    """Binary ops: Python numbers and 0-d tensors in either argument position."""
    if op.n_inputs != 2:
        return
    base = _pool(op, dtype, 16)
    kind = "bool" if dtype == torch.bool else "float" if dtype.is_floating_point or dtype.is_complex else "int"
    numbers = [v for v in _SCALARS[kind] if kind != "int" or dtype.is_signed or v >= 0]
    for v in numbers:
        if op.scalar_overloads:
            yield Case(f"Python number rhs {v!r}", [base, v])
            yield Case(f"Python number lhs {v!r}", [v, base])
        zero_d = torch.tensor(v, dtype=dtype)
        yield Case(f"0-d tensor rhs {v!r}", [base, zero_d])
        yield Case(f"0-d tensor lhs {v!r}", [zero_d, base])


def promotion_cases(op: OpView, dtype):
    """Binary ops: operand pairs of different dtypes whose result type is `dtype`."""
    if op.n_inputs != 2:
        return
    instantiated = set(op.promotion_dtypes)
    for left, right in itertools.permutations(sorted(instantiated, key=str), 2):
        if torch.promote_types(left, right) != dtype:
            continue
        a, b = _pool(op, left, 24), _pool(op, right, 24).flip(0)
        yield Case(f"type promotion {dt.short_name(left)} x {dt.short_name(right)}", [a, b])


def all_cases(op: OpView, dtype):
    for source in (sample_cases, reference_cases, value_cases, layout_cases, scalar_cases, promotion_cases):
        yield from source(op, dtype)
