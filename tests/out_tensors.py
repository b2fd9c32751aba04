"""out= tensors of every kind the differential tests pass to ops returning (values, indices)."""

from __future__ import annotations

import torch

# Kinds Kwker writes directly: exact (right shape, contiguous), empty and wrong_shape (resized as torch
# resizes them, the latter with its warning), transposed and strided (right shape, strides of their
# own, kept). Kinds torch must handle: wrong_dtype, int32_indices, aliased (values and indices one
# tensor).
OUT_KINDS = ("exact", "empty", "wrong_shape", "transposed", "strided", "wrong_dtype", "int32_indices", "aliased")
SERVED_KINDS = ("exact", "empty", "wrong_shape", "transposed", "strided")


def out_tensors(kind: str, shape: list[int], dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, indices) of `kind` for a result of `shape` and values dtype `dtype`."""
    if kind == "exact":
        return torch.empty(shape, dtype=dtype), torch.empty(shape, dtype=torch.long)
    if kind == "empty":
        return torch.empty(0, dtype=dtype), torch.empty(0, dtype=torch.long)
    if kind == "wrong_shape":
        return torch.empty(7, 3, dtype=dtype), torch.empty(7, 3, dtype=torch.long)
    if kind == "transposed":
        reversed_dims = list(range(len(shape)))[::-1]
        return (torch.empty(shape[::-1], dtype=dtype).permute(reversed_dims),
                torch.empty(shape[::-1], dtype=torch.long).permute(reversed_dims))
    if kind == "strided":  # every other element of a twice larger tensor
        every_other = tuple(slice(None, None, 2) for _ in shape)
        return (torch.empty([2 * s for s in shape], dtype=dtype)[every_other],
                torch.empty([2 * s for s in shape], dtype=torch.long)[every_other])
    if kind == "wrong_dtype":
        return torch.empty(shape, dtype=torch.float64), torch.empty(shape, dtype=torch.long)
    if kind == "int32_indices":
        return torch.empty(shape, dtype=dtype), torch.empty(shape, dtype=torch.int32)
    if kind == "aliased":
        values = torch.empty(shape, dtype=torch.long)
        return values, values
    raise AssertionError(kind)
