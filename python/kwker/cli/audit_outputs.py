"""Loading and comparing what an audited script produced: its stdout, or a file it wrote.

    load(path)                          by suffix: .npy (numpy), .pt/.pth (torch.load: tensors, state
                                        dicts, nested containers), .json, .txt; anything else as bytes
    difference(expected, actual, tol)   None when they agree, else where and how they first differ

Exact (the default, Tolerance(0, 0)): tensors and arrays bit for bit (dtype, shape and raw bytes, so
NaN matches NaN in the same place, with the same payload), numbers and text equal. With a tolerance,
floating-point values agree when |actual - expected| <= atol + rtol * |expected| (NaN matching NaN);
integers, booleans and the non-numeric parts of text stay exact.
"""

from __future__ import annotations

import json
import math
import pathlib
import re
import struct
from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class Tolerance:
    rtol: float = 0.0
    atol: float = 0.0

    @property
    def exact(self) -> bool:
        return self.rtol == 0 and self.atol == 0

    def __str__(self) -> str:
        return "exact" if self.exact else f"rtol={self.rtol:g}, atol={self.atol:g}"


def load(path: pathlib.Path):
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return np.load(path, allow_pickle=False)
    if suffix in (".pt", ".pth"):
        return torch.load(path, map_location="cpu", weights_only=True)
    if suffix == ".json":
        return json.loads(path.read_text())
    if suffix == ".txt":
        return path.read_text()
    return path.read_bytes()


def difference(expected, actual, tol: Tolerance, where: str) -> str | None:
    if isinstance(expected, (torch.Tensor, np.ndarray)):
        return _array_difference(expected, actual, tol, where)
    if type(expected) is not type(actual):
        return f"{where}: {type(expected).__name__} vs {type(actual).__name__}"
    if isinstance(expected, dict):
        if set(expected) != set(actual):
            only_first = sorted(map(str, set(expected) - set(actual)))
            only_second = sorted(map(str, set(actual) - set(expected)))
            return f"{where}: keys differ (only in the first: {only_first}, only in the second: {only_second})"
        return _first(difference(expected[k], actual[k], tol, f"{where}[{k!r}]") for k in expected)
    if isinstance(expected, (list, tuple)):
        if len(expected) != len(actual):
            return f"{where}: {len(expected)} items vs {len(actual)}"
        return _first(difference(e, a, tol, f"{where}[{i}]")
                      for i, (e, a) in enumerate(zip(expected, actual)))
    if isinstance(expected, float):
        return None if _floats_agree(expected, actual, tol) else f"{where}: {expected!r} vs {actual!r}"
    if isinstance(expected, str):
        return _text_difference(expected, actual, tol, where)
    return None if expected == actual else f"{where}: {expected!r} vs {actual!r}"


def _first(differences) -> str | None:
    return next((d for d in differences if d is not None), None)


def _floats_agree(expected: float, actual: float, tol: Tolerance) -> bool:
    if tol.exact:  # by bits: -0.0 is not 0.0, NaN is NaN
        return struct.pack("<d", expected) == struct.pack("<d", actual)
    if math.isnan(expected) or math.isnan(actual):
        return math.isnan(expected) and math.isnan(actual)
    return abs(actual - expected) <= tol.atol + tol.rtol * abs(expected)


# --- tensors and arrays -----------------------------------------------------------------------------

def _array_difference(expected, actual, tol: Tolerance, where: str) -> str | None:
    if type(expected) is not type(actual):
        return f"{where}: {type(expected).__name__} vs {type(actual).__name__}"
    if str(expected.dtype) != str(actual.dtype):
        return f"{where}: dtype {expected.dtype} vs {actual.dtype}"
    if tuple(expected.shape) != tuple(actual.shape):
        return f"{where}: shape {tuple(expected.shape)} vs {tuple(actual.shape)}"
    if tol.exact or not _is_inexact(expected):
        differs = (_element_bytes(expected) != _element_bytes(actual)).any(axis=-1)
    else:
        e, a = _as_float64(expected), _as_float64(actual)
        differs = ~np.isclose(a, e, rtol=tol.rtol, atol=tol.atol, equal_nan=True)
    if not differs.any():
        return None
    first = tuple(int(i) for i in np.argwhere(differs)[0])
    return (f"{where}: {int(differs.sum())} of {differs.size} elements differ ({tol}), first at {first}: "
            f"{expected[first].item()!r} vs {actual[first].item()!r}")


def _is_inexact(array) -> bool:
    if isinstance(array, torch.Tensor):
        return array.is_floating_point() or array.is_complex()
    return np.issubdtype(array.dtype, np.inexact)


def _element_bytes(array) -> np.ndarray:
    """[*shape, itemsize] uint8: each element's raw bytes."""
    if isinstance(array, torch.Tensor):
        raw = array.detach().contiguous().reshape(-1).view(torch.uint8).numpy()
        return raw.reshape(*array.shape, array.element_size())
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8).reshape(*array.shape, array.itemsize)


def _as_float64(array) -> np.ndarray:
    if isinstance(array, torch.Tensor):
        wide = torch.complex128 if array.is_complex() else torch.float64
        return array.detach().to(wide).numpy()
    return array.astype(np.complex128 if np.iscomplexobj(array) else np.float64)


# --- text -------------------------------------------------------------------------------------------

_NUMBER = re.compile(r"([-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)\b)", re.IGNORECASE)


def _text_difference(expected: str, actual: str, tol: Tolerance, where: str) -> str | None:
    """Line by line; with a tolerance, numbers in the text compare as floats."""
    expected_lines, actual_lines = expected.splitlines(), actual.splitlines()
    for number, (e, a) in enumerate(zip(expected_lines, actual_lines), 1):
        if not _lines_agree(e, a, tol):
            return f"{where}: line {number} differs ({tol}): {e!r} vs {a!r}"
    if len(expected_lines) != len(actual_lines):
        return f"{where}: {len(expected_lines)} lines vs {len(actual_lines)}"
    if expected != actual and tol.exact:  # same lines, other line ends or final newline
        return f"{where}: line endings differ"
    return None


def _lines_agree(expected: str, actual: str, tol: Tolerance) -> bool:
    if expected == actual:
        return True
    if tol.exact:
        return False
    # re.split with a group: text, number, text, number, ..., text.
    e_parts, a_parts = _NUMBER.split(expected), _NUMBER.split(actual)
    if len(e_parts) != len(a_parts):
        return False
    return all(e == a if i % 2 == 0 else _floats_agree(float(e), float(a), tol)
               for i, (e, a) in enumerate(zip(e_parts, a_parts)))
