"""Bit-exact comparison of two ops' results: tensors, and tuples, lists and dicts of them.

Values are compared as raw bytes, not with ==: NaN == NaN is False and -0.0 == +0.0 is True, but a
drop-in replacement must give the very same bits (NaN payloads and the sign of zero included).
"""

from __future__ import annotations

import struct
import sys

import torch


def first_difference(expected, actual, where: str = "output") -> str | None:
    """None when `actual` is bit for bit `expected`; otherwise where and how the first difference is."""
    if isinstance(expected, torch.Tensor):
        return _tensor_difference(expected, actual, where)
    if type(expected) is not type(actual):
        return f"{where}: {type(expected).__name__} expected, got {type(actual).__name__}"
    if isinstance(expected, (tuple, list)):
        if len(expected) != len(actual):
            return f"{where}: {len(expected)} items expected, got {len(actual)}"
        return _first_of(first_difference(e, a, f"{where}[{i}]")
                         for i, (e, a) in enumerate(zip(expected, actual)))
    if isinstance(expected, dict):
        if list(expected) != list(actual):
            return f"{where}: keys {list(expected)} expected, got {list(actual)}"
        return _first_of(first_difference(expected[k], actual[k], f"{where}[{k!r}]") for k in expected)
    if isinstance(expected, float):  # by bits too: nan != nan, and -0.0 == 0.0
        same = struct.pack("<d", expected) == struct.pack("<d", actual)
    else:
        same = expected == actual
    return None if same else f"{where}: {expected!r} expected, got {actual!r}"


def bit_exact(expected, actual) -> bool:
    return first_difference(expected, actual) is None


def _first_of(differences) -> str | None:
    return next((d for d in differences if d is not None), None)


def _tensor_difference(expected: torch.Tensor, actual, where: str) -> str | None:
    if not isinstance(actual, torch.Tensor):
        return f"{where}: Tensor expected, got {type(actual).__name__}"
    # Layout counts too: callers can observe strides and offsets (is_contiguous, views, data_ptr).
    for what, e, a in (("dtype", expected.dtype, actual.dtype), ("device", expected.device, actual.device),
                       ("layout", expected.layout, actual.layout),
                       ("shape", tuple(expected.shape), tuple(actual.shape)),
                       ("strides", expected.stride(), actual.stride()),
                       ("storage offset", expected.storage_offset(), actual.storage_offset())):
        if e != a:
            return f"{where}: {what} {e} expected, got {a}"
    if expected.numel() == 0:
        return None
    expected_bytes, actual_bytes = _element_bytes(expected), _element_bytes(actual)
    differs = (expected_bytes != actual_bytes).any(dim=1)
    if not differs.any():
        return None
    first = int(differs.nonzero()[0])
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(first), expected.shape))
    return (f"{where}: {int(differs.sum())} of {expected.numel()} elements differ, first at {index}: "
            f"{_describe(expected, expected_bytes, first)} expected, "
            f"got {_describe(actual, actual_bytes, first)}")


def _element_bytes(t: torch.Tensor) -> torch.Tensor:
    """[numel, itemsize] uint8: each element's bytes, elements in logical (row-major) order."""
    return t.detach().contiguous().view(-1).view(torch.uint8).view(t.numel(), t.element_size())


def _describe(t: torch.Tensor, element_bytes: torch.Tensor, flat_index: int) -> str:
    """An element as its value and its bits, e.g. "-0.0 (0x80000000)": NaNs differ only in bits."""
    raw = bytes(element_bytes[flat_index].tolist())
    bits = (raw[::-1] if sys.byteorder == "little" else raw).hex()
    return f"{t.detach().reshape(-1)[flat_index].item()!r} (0x{bits})"
