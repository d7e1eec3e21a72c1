"""Poisoned outputs: an element the kernel never wrote is found, and an output that is
the poison's own bit pattern (an op passing its NaN input through) is not mistaken for one."""

import pytest
import torch

from metal_kernel.aten.verify.poison import poison, unwritten, unwritten_in_both


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.complex64])
def test_an_unwritten_element_holds_each_runs_poison_and_a_passed_through_one_does_not(dtype):
    def kernel(out, second, skip, passthrough):
        poison(out, second)
        for i in range(out.numel()):
            if i == skip:
                continue
            out[i] = passthrough if i == 1 else i

    first = torch.empty(4, dtype=dtype)
    poison(first)
    payload = first[0].clone()  # what a pass-through of the poison's bit pattern returns
    again = torch.empty(4, dtype=dtype)
    kernel(first, False, 3, payload)
    kernel(again, True, 3, payload)
    assert unwritten(first) == 2  # element 3, and element 1 which only looks unwritten
    assert unwritten_in_both(first, again) == 1
    kernel(again, True, -1, payload)  # the second run writes everything: the first run's 3 was a fluke
    assert unwritten_in_both(first, again) == 0


def test_integer_outputs_are_poisoned_with_a_sentinel():
    t = torch.empty(3, dtype=torch.int16)
    poison(t)
    assert t.tolist() == [-0x5A5B] * 3 and unwritten(t) == 0
