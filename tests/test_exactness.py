"""The comparison helpers themselves: they must see every difference a drop-in replacement must not have."""

from __future__ import annotations

import pytest
import torch

from exactness import Raised, assert_bit_identical, difference, run_both


def f32(bits):
    return torch.tensor(bits, dtype=torch.int32).view(torch.float32)


def test_signed_zero_and_nan_payloads_differ():
    assert difference(f32([0]), f32([0]) * 1) is None
    assert difference(torch.tensor([0.0]), torch.tensor([-0.0])) is not None
    assert difference(f32([0x7FC00000]), f32([0x7FC00001])) is not None
    assert difference(f32([0x7FC00000]), f32([-0x00400000])) is not None  # 0xFFC00000: negative NaN
    for dt in (torch.float16, torch.bfloat16):
        a = torch.tensor([0x7E00], dtype=torch.int16).view(dt)
        b = torch.tensor([0x7E01], dtype=torch.int16).view(dt)
        assert difference(a, b) is not None
        assert difference(a, a.clone()) is None


def test_dtype_shape_strides_offset():
    a = torch.arange(12.0).reshape(3, 4)
    assert difference(a, a.double()) is not None
    assert difference(a, a.reshape(4, 3)) is not None
    t = a.t().contiguous().t()
    assert difference(a, t) is not None
    assert difference(a, t, strides=False) is None
    assert difference(a[1:], a[1:].clone()) is not None  # storage offset
    assert difference(torch.tensor([True]), torch.tensor([False])) is not None
    assert difference(torch.tensor(3), torch.tensor(3)) is None  # 0-dim


def test_structures_and_errors():
    v = torch.sort(torch.tensor([2, 1]))
    assert difference(v, torch.sort(torch.tensor([2, 1]))) is None
    assert difference(v, tuple(v)) is not None  # torch.return_types.sort vs tuple
    assert difference(Raised(IndexError, "x"), Raised(IndexError, "x")) is None
    assert difference(Raised(IndexError, "x"), Raised(RuntimeError, "x")) is not None
    assert difference(Raised(IndexError, "x"), torch.tensor(1)) is not None
    with pytest.raises(AssertionError, match="elements differ"):
        assert_bit_identical(torch.tensor([1, 2, 3]), torch.tensor([1, 5, 3]))


def test_run_both_counts_and_compares(native):
    x = torch.randn(5000)
    both = run_both(lambda: torch.sort(x, stable=True))
    torch_result, kwker_result, served = both
    assert served == 1 and both.delta["sort"]["kwker"] == 1 and both.torch_delta["sort"]["kwker"] == 0
    assert_bit_identical(torch_result, kwker_result)
    small = run_both(lambda: torch.sort(x[:10], stable=True))
    assert small.served == 0 and small.reasons() == {"sort": {"small": 1}}
    err = run_both(lambda: torch.sort(x, dim=3))
    assert isinstance(err.torch, Raised) and err.torch == err.kwker
