"""Poison outputs before a kernel runs, and find the elements it never wrote.

Floating outputs are filled with a signalling NaN with a payload arithmetic never
produces (it yields quiet NaNs), so an unwritten element is told apart even where
the CPU result is NaN too; complex outputs get it in both parts. (An op that passes
its NaN input through returns the payload when the input is it -- a dense sweep
feeds every bit pattern -- so a case with elements still holding the poison runs
again under a second payload: an element holding each run's poison was never
written, `unwritten_in_both`.)
Integer outputs get 0xA5 bytes (an unwritten element then differs from the CPU
result unless that result is the sentinel itself, when nothing is lost); bool
outputs get 0xA5, which is neither false nor true.
"""

from __future__ import annotations

import torch

_PAYLOAD = {torch.float32: (torch.int32, 0x7FA5A5A5), torch.float16: (torch.int16, 0x7D5A),
            torch.bfloat16: (torch.int16, 0x7FA5)}
# Signalling NaNs too (quiet bit clear), with other payloads
_SECOND = {torch.float32: 0x7F9A5A5A, torch.float16: 0x7CA5, torch.bfloat16: 0x7F9A}
_BYTE = 0xA5


def _as_bits(t: torch.Tensor, second: bool = False):
    if t.is_complex():
        t = torch.view_as_real(t)
    if t.dtype in _PAYLOAD:
        bits, payload = _PAYLOAD[t.dtype]
        return t.view(bits), (_SECOND[t.dtype] if second else payload)
    if t.dtype == torch.bool:
        return t.view(torch.uint8), _BYTE
    return None, None


def poison(t: torch.Tensor, second: bool = False) -> None:
    """Fill `t` with the poison (`second`: the second payload, floating outputs)."""
    if t is None or not t.numel():
        return
    bits, payload = _as_bits(t, second)
    if bits is not None:
        bits.fill_(payload)
    else:
        t.fill_(_sentinel(t.dtype))


def _sentinel(dtype: torch.dtype) -> int:
    """0xA5 in every byte, as a value of the integer `dtype`."""
    width = torch.empty((), dtype=dtype).element_size()
    value = int.from_bytes(bytes([_BYTE]) * width, "little")
    return value - (1 << 8 * width) if dtype.is_signed and value >= 1 << (8 * width - 1) else value


def _hits(t: torch.Tensor, second: bool = False) -> torch.Tensor | None:
    bits, payload = _as_bits(t, second)
    if bits is None:
        return None
    hit = bits == payload
    return hit.all(-1) if t.is_complex() else hit


def unwritten(t: torch.Tensor) -> int:
    """How many elements of `t` still hold the poison (0 for integer outputs: see above)."""
    if t is None or not t.numel():
        return 0
    hit = _hits(t)
    return 0 if hit is None else int(hit.sum())


def unwritten_in_both(first: torch.Tensor, again: torch.Tensor) -> int:
    """Elements holding the first poison in `first` and the second in `again` (the
    same case run under each): the elements the kernel never wrote."""
    a, b = _hits(first), _hits(again, second=True)
    if a is None or b is None:
        return 0
    return int((a & b).sum())
