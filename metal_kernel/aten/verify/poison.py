"""Poison outputs before a kernel runs, and find the elements it never wrote.

Floating outputs are filled with a signalling NaN with a payload no kernel
produces (arithmetic yields quiet NaNs), so an unwritten element is told apart
even where the CPU result is NaN too; complex outputs get it in both parts.
Integer outputs get 0xA5 bytes (an unwritten element then differs from the CPU
result unless that result is the sentinel itself, when nothing is lost); bool
outputs get 0xA5, which is neither false nor true.
"""

from __future__ import annotations

import torch

_PAYLOAD = {torch.float32: (torch.int32, 0x7FA5A5A5), torch.float16: (torch.int16, 0x7D5A),
            torch.bfloat16: (torch.int16, 0x7FA5)}
_BYTE = 0xA5


def _as_bits(t: torch.Tensor):
    if t.is_complex():
        t = torch.view_as_real(t)
    if t.dtype in _PAYLOAD:
        bits, payload = _PAYLOAD[t.dtype]
        return t.view(bits), payload
    if t.dtype == torch.bool:
        return t.view(torch.uint8), _BYTE
    return None, None


def poison(t: torch.Tensor) -> None:
    if t is None or not t.numel():
        return
    bits, payload = _as_bits(t)
    if bits is not None:
        bits.fill_(payload)
    else:
        t.fill_(_sentinel(t.dtype))


def _sentinel(dtype: torch.dtype) -> int:
    """0xA5 in every byte, as a value of the integer `dtype`."""
    width = torch.empty((), dtype=dtype).element_size()
    value = int.from_bytes(bytes([_BYTE]) * width, "little")
    return value - (1 << 8 * width) if dtype.is_signed and value >= 1 << (8 * width - 1) else value


def unwritten(t: torch.Tensor) -> int:
    """How many elements of `t` still hold the poison (0 for integer outputs: see above)."""
    if t is None or not t.numel():
        return 0
    bits, payload = _as_bits(t)
    if bits is None:
        return 0
    hit = bits == payload
    if t.is_complex():
        hit = hit.all(-1)
    return int(hit.sum())
