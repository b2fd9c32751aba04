"""The benchmark corpus: inputs taken from real ML workloads, collected from one module per op family.

A family module (corpus_<family>.py, e.g. corpus_sort.py) defines FAMILY, its name in `--ops`, and
INPUTS, a list of BenchInput. A new op family is a new module named in FAMILY_MODULES.
"""

from __future__ import annotations

import dataclasses
import importlib
import zlib
from typing import Any, Callable

import torch

# The family modules, in the order their inputs are run and reported.
FAMILY_MODULES = ("corpus_sort", "corpus_topk", "corpus_median", "corpus_kthvalue", "corpus_searchsorted", "corpus_unique", "corpus_quantile", "corpus_embedding", "corpus_embedding_bag", "corpus_coalesce")


@dataclasses.dataclass(frozen=True)
class BenchInput:
    family: str  # op family, as named in --ops ("sort")
    name: str  # unique within its family; the input's id is "family/name"
    op: str  # the timed call in a few words, for the table ("argsort stable", "sort out=")
    origin: str  # the real workload the input comes from, one line
    build: Callable[[torch.Generator], tuple]  # the call's positional arguments, drawn from the generator
    call: Callable[..., Any]  # what is timed: call(*arguments)

    @property
    def id(self) -> str:
        return f"{self.family}/{self.name}"

    @property
    def seed(self) -> int:
        # Derived from the id (crc32, unlike hash(), is the same in every process), so an input's data
        # never changes when other entries are added, removed or reordered.
        return zlib.crc32(self.id.encode())

    def make_arguments(self) -> tuple:
        """Builds the call's arguments afresh; the same id always gives the same bits."""
        return self.build(torch.Generator().manual_seed(self.seed))


def all_inputs() -> list[BenchInput]:
    """Every input of every family module, checked for duplicate ids and mislabelled families."""
    inputs: list[BenchInput] = []
    for module_name in FAMILY_MODULES:
        module = importlib.import_module(f"{__package__}.{module_name}")
        wrong = [entry.id for entry in module.INPUTS if entry.family != module.FAMILY]
        if wrong:
            raise ValueError(f"{module_name}: entries not in family {module.FAMILY!r}: {wrong}")
        inputs.extend(module.INPUTS)
    ids = [entry.id for entry in inputs]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"duplicate corpus ids: {duplicates}")
    return inputs


def families(inputs: list[BenchInput]) -> list[str]:
    return list(dict.fromkeys(entry.family for entry in inputs))


def select(inputs: list[BenchInput], families_wanted=None, id_substrings=None) -> list[BenchInput]:
    """The inputs of the wanted families (all if None) whose id contains any of the substrings
    (all if None)."""
    return [entry for entry in inputs
            if (families_wanted is None or entry.family in families_wanted)
            and (id_substrings is None or any(s in entry.id for s in id_substrings))]
