"""Differential tests of Kwker's EmbeddingBag max mode (family "embedding_bag": aten::_embedding_bag,
aten::_embedding_bag_forward_only and aten::_embedding_bag_dense_backward with mode=2, what
F.embedding_bag / nn.EmbeddingBag(mode='max') and their backward run) against torch's own CPU
kernels: (output, offset2bag, bag_size, max_indices) and the weight gradient bit for bit (dtype,
shape, strides), identical errors and warnings.

The weights are drawn with many equal maxima (torch keeps the earliest index of a bag), NaNs (a NaN
sticks only as a bag's first element), -0.0 against +0.0, infinities and subnormals; bags are empty,
single, long, all padding. The backward's sums over bags sharing a max row are exact only in torch's
order (bags ascending). Backward results with a NaN may go to torch (nan_result / declined). Every
case runs on every ISA (`isa`).
"""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import exactness
from exactness import Raised, assert_bit_identical, assert_reaches_kwker, assert_same, num_threads, run_both

pytestmark = pytest.mark.usefixtures("native")

FAMILY = "embedding_bag"
MAX = 2  # torch's number for mode='max'
WEIGHT_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
INDEX_DTYPES = (torch.int64, torch.int32)
NAMES = {d: str(d).removeprefix("torch.") for d in WEIGHT_DTYPES + INDEX_DTYPES}
MIN_ELEMENTS = 64  # Kwker serves calls of at least this many indices x dim
WEIGHT_KINDS = ("random", "ties", "signed_zero", "nan", "specials")
weight_dtype_params = pytest.mark.parametrize("dtype", WEIGHT_DTYPES, ids=[NAMES[d] for d in WEIGHT_DTYPES])
index_dtype_params = pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=[NAMES[d] for d in INDEX_DTYPES])
NAN_FALLBACKS = ("nan_result", "declined")  # the backward leaves NaN sums to torch


# --- inputs -------------------------------------------------------------------------------------------

def weights(num_weights, dim, dtype, kind="random", seed=0) -> torch.Tensor:
    """"random" normals; "ties" a few small integers (equal maxima everywhere); "signed_zero" -0.0, +0.0
    and negatives (the maxima are zeros of either sign); "nan" random with an eighth NaN (some of them
    negative NaNs); "specials" ±inf, subnormals, huge values, ±0 among random ones."""
    g = torch.Generator().manual_seed(seed)
    n = num_weights * dim
    if kind == "ties":
        x = torch.randint(-2, 3, (n,), generator=g).double()
    elif kind == "signed_zero":
        pool = torch.tensor([0.0, -0.0, -1.0, -0.0, 0.0, -2.5], dtype=torch.float64)
        x = pool[torch.randint(0, pool.numel(), (n,), generator=g)]
    else:
        x = torch.randn(n, generator=g, dtype=torch.float64)
        if kind in ("nan", "specials"):
            finfo = torch.finfo(dtype)
            pool = ([float("nan"), -float("nan")] if kind == "nan"
                    else [float("inf"), -float("inf"), finfo.tiny / 4, -finfo.tiny / 4, finfo.max, -finfo.max,
                          0.0, -0.0])
            where = torch.randperm(n, generator=g)[: n // 8 + 1] if n else torch.zeros(0, dtype=torch.long)
            x[where] = torch.tensor(pool, dtype=torch.float64)[torch.randint(0, len(pool), (where.numel(),),
                                                                             generator=g)]
    return x.to(dtype).reshape(num_weights, dim)


def bag_inputs(num_indices, num_bags, num_weights, index_dtype=torch.int64, *, include_last_offset=False,
               empty=0.2, seed=1, last_offset=None):
    """(indices, offsets): num_indices indices in [0, num_weights) (repeats within bags) cut into num_bags
    bags, about a fraction `empty` of them empty (the first and last ones included sometimes). With
    include_last_offset a final offset (num_indices, or last_offset) follows."""
    g = torch.Generator().manual_seed(seed)
    indices = torch.randint(0, num_weights, (num_indices,), generator=g)
    if num_indices >= 4:  # repeats inside bags: an index tying with itself
        indices[1::4] = indices[0::4][: indices[1::4].numel()]
    cuts = torch.randint(0, num_indices + 1, (num_bags - 1,), generator=g)
    if num_bags > 1 and empty:
        dup = torch.rand(num_bags - 1, generator=g) < empty
        cuts = torch.where(dup, cuts.roll(1), cuts)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), cuts.sort().values])
    if include_last_offset:
        offsets = torch.cat([offsets, torch.tensor([num_indices if last_offset is None else last_offset])])
    return indices.to(index_dtype), offsets.to(index_dtype)


# --- checks -------------------------------------------------------------------------------------------

family_delta = functools.partial(exactness.family_delta, family=FAMILY)
assert_served = functools.partial(exactness.assert_served, family=FAMILY)
assert_torchs = functools.partial(exactness.assert_torchs, family=FAMILY)


def has_nan(result) -> bool:
    if isinstance(result, (tuple, list)):
        return any(has_nan(r) for r in result)
    return isinstance(result, torch.Tensor) and result.is_floating_point() and bool(torch.isnan(result).any())


def bag_call(forward_only, weight, indices, offsets, include_last_offset=False, padding_idx=-1):
    op = torch.ops.aten._embedding_bag_forward_only if forward_only else torch.ops.aten._embedding_bag
    return lambda: op(weight, indices, offsets, False, MAX, False, None, include_last_offset, padding_idx)


def check_bags(weight, indices, offsets, include_last_offset=False, padding_idx=-1, *, what="", served=None,
               ops=(False, True)):
    """Both aten ops (forward_only and not) with Kwker off and on: the same four results. served=None:
    expected served when Kwker covers the call; True/False: must (not) be served; "any": either."""
    what = (f"{what} weight {NAMES.get(weight.dtype)}{list(weight.shape)} stride {weight.stride()} indices "
            f"{NAMES.get(indices.dtype)}{list(indices.shape)} offsets {offsets.tolist()[:12]} "
            f"include_last_offset={include_last_offset} padding_idx={padding_idx}")
    results = []
    for forward_only in ops:
        both = run_both(bag_call(forward_only, weight, indices, offsets, include_last_offset, padding_idx))
        name = f"{what} {'_embedding_bag_forward_only' if forward_only else '_embedding_bag'}"
        assert_same(both, context=name)
        expect = served
        if expect is None:
            expect = indices.numel() * weight.size(1) >= MIN_ELEMENTS and not isinstance(both.torch, Raised)
        if expect is True:
            assert_served(both, name)
        elif expect is False:
            assert_torchs(both, name)
        results.append(both)
    return results


def check_backward(grad, indices, offset2bag, bag_size, max_indices, num_weights, padding_idx=-1, *, what=""):
    both = run_both(lambda: torch.ops.aten._embedding_bag_dense_backward(
        grad, indices, offset2bag, bag_size, max_indices, num_weights, False, MAX, None, padding_idx))
    what = f"{what} backward grad {NAMES.get(grad.dtype)}{list(grad.shape)} num_weights={num_weights}"
    assert_same(both, context=what)
    if grad.numel() >= MIN_ELEMENTS:
        assert_served(both, what, NAN_FALLBACKS if has_nan(both.torch) else ())
    return both


def forward_and_backward(weight, indices, offsets, include_last_offset=False, padding_idx=-1, *, what="", seed=5):
    """check_bags, then the dense backward of torch's forward with a random gradient."""
    both = check_bags(weight, indices, offsets, include_last_offset, padding_idx, what=what)[0]
    if isinstance(both.torch, Raised):
        return
    output, offset2bag, bag_size, max_indices = both.torch
    grad = weights(output.size(0), output.size(1), weight.dtype, "random", seed=seed) * 10.0
    check_backward(grad, indices, offset2bag, bag_size, max_indices, weight.size(0), padding_idx, what=what)


# --- tests --------------------------------------------------------------------------------------------

@weight_dtype_params
@index_dtype_params
@pytest.mark.parametrize("kind", WEIGHT_KINDS)
def test_bags_of_every_kind(isa, dtype, index_dtype, kind):
    for num_weights, dim, num_indices, num_bags in ((20, 1, 200, 30), (7, 16, 64, 9), (50, 33, 300, 40),
                                                    (5, 64, 40, 6), (1000, 8, 500, 1)):
        weight = weights(num_weights, dim, dtype, kind, seed=dim)
        for include_last_offset in (False, True):
            indices, offsets = bag_inputs(num_indices, num_bags, num_weights, index_dtype,
                                          include_last_offset=include_last_offset, seed=num_indices)
            padding_idx = int(indices[3]) if dim % 2 else -1
            forward_and_backward(weight, indices, offsets, include_last_offset, padding_idx,
                                 what=f"{kind} dim={dim}", seed=num_bags)


@weight_dtype_params
def test_ties_keep_the_earliest_index_and_nan_sticks_only_first(isa, dtype):
    dim = 16
    w = torch.zeros(8, dim, dtype=dtype)
    w[1], w[2], w[3] = 1.0, 1.0, float("nan")
    w[4] = -0.0
    w[5] = 0.0
    w[6, ::2] = float("nan")
    w[7] = -float("nan")
    bags = [[2, 1, 2], [1, 2, 1, 1], [3, 1, 2], [1, 3, 2], [4, 5], [5, 4], [4, 4, 4], [0, 4, 5], [6, 1, 5],
            [1, 6], [7, 3], [3, 7], [7, 1], [5, 5, 0, 4], [2, 2, 2, 2, 2]]
    indices = torch.tensor([i for b in bags for i in b])
    offsets = torch.tensor([0] + [len(b) for b in bags]).cumsum(0)[:-1]
    for index_dtype in INDEX_DTYPES:
        forward_and_backward(w, indices.to(index_dtype), offsets.to(index_dtype), what="ties and NaN")
        forward_and_backward(w, indices.to(index_dtype), offsets.to(index_dtype), padding_idx=2, what="padded ties")
        forward_and_backward(w, indices.to(index_dtype), offsets.to(index_dtype), padding_idx=4, what="padded zeros")


@index_dtype_params
def test_empty_and_padding_only_bags(isa, index_dtype):
    w = weights(10, 8, torch.float32, "random", seed=3)
    cases = [
        ([3, 3, 1, 3, 3, 3, 4, 5, 3, 3], [0, 2, 2, 5, 5], 3, "padding-only bags"),
        ([3] * 12, [0, 4, 8], 3, "all padding"),
        ([1, 2, 3, 4, 5, 6, 7, 8, 9, 0], [0, 0, 0, 5, 10, 10], -1, "empty first and last bags"),
        ([1, 2, 3, 4, 5, 6, 7, 8, 9, 0], [0, 10], -1, "last bag empty"),
        ([9] * 10, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 0, "single-index bags"),
        (list(range(10)) * 3, [0], 9, "one bag"),
    ]
    for idx, off, padding_idx, what in cases:
        indices, offsets = torch.tensor(idx, dtype=index_dtype), torch.tensor(off, dtype=index_dtype)
        forward_and_backward(w, indices, offsets, False, padding_idx, what=what)
        last = torch.cat([offsets, torch.tensor([len(idx)], dtype=index_dtype)])
        forward_and_backward(w, indices, last, True, padding_idx, what=f"{what} include_last_offset")
    # include_last_offset whose last offset stops short of the indices: torch's last bag runs to the end.
    indices, offsets = bag_inputs(80, 6, 10, index_dtype, include_last_offset=True, last_offset=50, seed=8)
    forward_and_backward(w, indices, offsets, True, -1, what="short last offset")
    indices, offsets = bag_inputs(80, 6, 10, index_dtype, include_last_offset=True, last_offset=int(offsets[-2]),
                                  seed=8)
    forward_and_backward(w, indices, offsets, True, -1, what="repeated last offset")


def test_no_indices_stays_torchs(isa):
    w = weights(10, 8, torch.float32)
    for off in ([0], [0, 0, 0]):
        check_bags(w, torch.zeros(0, dtype=torch.long), torch.tensor(off), what="no indices", served=False)


@weight_dtype_params
def test_weights_with_non_contiguous_rows(isa, dtype):
    base = weights(60, 40, dtype, "ties", seed=4)
    indices, offsets = bag_inputs(300, 25, 30, seed=4)
    forward_and_backward(base[:30, :16], indices, offsets, what="row stride 40")
    forward_and_backward(base[::2, 3:19], indices, offsets, what="every other row, at an offset")
    forward_and_backward(base[:30, 5:6], indices, offsets, what="one column")
    # Elements of a row not contiguous: Kwker may leave these to torch.
    check_bags(base[:30].t().contiguous().t()[:, :16], indices, offsets, what="column-major", served="any")
    check_bags(base[:30, :16:2], indices, offsets, what="strided columns", served="any")
    forward_and_backward(base[:1].expand(30, 40), indices, offsets, what="expanded rows")


@weight_dtype_params
def test_tables_over_2_31_rows(isa, dtype):
    """A table of 2^31 + 1 rows (one row expanded: no memory): Kwker keeps a column's winning row as an
    integer as wide as the compared value, so it serves such tables in float64 only."""
    rows = 2**31 + 1
    w = weights(1, 24, dtype, seed=9).expand(rows, 24)
    indices = torch.tensor([0, rows - 1, 5, 2**31, 7, rows - 2] * 20)
    offsets = torch.arange(0, indices.numel(), 6)
    check_bags(w, indices, offsets, what="2^31 + 1 rows", served=dtype == torch.float64)


@weight_dtype_params
def test_functional_and_module_forms(isa, dtype):
    w = weights(40, 12, dtype, "ties", seed=6)
    idx2d = torch.randint(0, 40, (30, 7), generator=torch.Generator().manual_seed(6))
    indices, offsets = bag_inputs(210, 30, 40, seed=6)
    for requires_grad in (False, True):
        weight = w.clone().requires_grad_(requires_grad)
        calls = {
            "2-d input": lambda: F.embedding_bag(idx2d, weight, mode="max").detach(),
            "2-d int32 input, padding": lambda: F.embedding_bag(idx2d.int(), weight, mode="max",
                                                                padding_idx=int(idx2d[0, 0])).detach(),
            "offsets": lambda: F.embedding_bag(indices, weight, offsets, mode="max").detach(),
            "negative padding_idx": lambda: F.embedding_bag(indices, weight, offsets, mode="max",
                                                            padding_idx=-3).detach(),
            "include_last_offset": lambda: F.embedding_bag(indices, weight, torch.cat([offsets, torch.tensor([210])]),
                                                           mode="max", include_last_offset=True).detach(),
            "transposed 2-d input": lambda: F.embedding_bag(idx2d.t(), weight, mode="max").detach(),
            "sliced indices": lambda: F.embedding_bag(indices.repeat_interleave(2)[::2], weight, offsets,
                                                      mode="max").detach(),
            "torch.embedding_bag": lambda: tuple(t.detach() for t in torch.embedding_bag(
                weight, indices, offsets, False, MAX, False, None, False, 5)),
        }
        for what, call in calls.items():
            both = run_both(call)
            assert_same(both, context=f"{what} requires_grad={requires_grad}")
            assert_served(both, f"{what} requires_grad={requires_grad}")
        module = torch.nn.EmbeddingBag.from_pretrained(w, freeze=not requires_grad, mode="max")
        both = run_both(lambda: module(indices, offsets).detach())
        assert_same(both, context="nn.EmbeddingBag")
        assert_served(both, "nn.EmbeddingBag")


def test_sum_and_mean_modes_stay_torchs(isa):
    w = weights(40, 12, torch.float32, seed=7)
    indices, offsets = bag_inputs(300, 30, 40, seed=7)
    for mode in ("sum", "mean"):
        both = run_both(lambda: F.embedding_bag(indices, w, offsets, mode=mode))
        assert_same(both, context=mode)
        assert_torchs(both, mode)

        def backward():
            weight = w.clone().requires_grad_()
            F.embedding_bag(indices, weight, offsets, mode=mode).sum().backward()
            return weight.grad

        both = run_both(backward)
        assert_same(both, context=f"{mode} backward")
        assert_torchs(both, f"{mode} backward")
    psw = torch.rand(300, generator=torch.Generator().manual_seed(7))
    both = run_both(lambda: F.embedding_bag(indices, w, offsets, mode="sum", per_sample_weights=psw))
    assert_same(both, context="sum with per_sample_weights")
    assert_torchs(both, "sum with per_sample_weights")


def test_mixed_index_and_offset_dtypes(isa):
    w = weights(40, 12, torch.float32, "ties", seed=8)
    indices, offsets = bag_inputs(300, 30, 40, seed=8)
    for idx, off in ((indices.int(), offsets), (indices, offsets.int())):
        check_bags(w, idx, off, what="mixed", served=None if idx.dtype == off.dtype else "any")
        both = run_both(lambda: F.embedding_bag(idx, w, off, mode="max"))
        assert_same(both, context="F mixed")


def test_bad_arguments_raise_torchs_errors(isa):
    w = weights(10, 8, torch.float32, seed=9)
    idx = torch.randint(0, 10, (40,), generator=torch.Generator().manual_seed(9))
    off = torch.tensor([0, 10, 20, 30])
    aten = torch.ops.aten._embedding_bag
    calls = {
        "per_sample_weights (F)": lambda: F.embedding_bag(idx, w, off, mode="max", per_sample_weights=torch.rand(40)),
        "per_sample_weights (aten)": lambda: aten(w, idx, off, False, MAX, False, torch.rand(40), False, -1),
        "per_sample_weights (forward_only)": lambda: torch.ops.aten._embedding_bag_forward_only(
            w, idx, off, False, MAX, False, torch.rand(40), False, -1),
        "per_sample_weights (module)": lambda: torch.nn.EmbeddingBag.from_pretrained(w, mode="max")(
            idx, off, per_sample_weights=torch.rand(40)),
        "offsets[0] != 0": lambda: F.embedding_bag(idx, w, torch.tensor([1, 10, 20]), mode="max"),
        "offsets[0] != 0 (aten)": lambda: aten(w, idx, torch.tensor([3, 10, 20]), False, MAX, False, None, False, -1),
        "offsets[0] < 0": lambda: F.embedding_bag(idx, w, torch.tensor([-1, 10, 20]), mode="max"),
        "offset past the end": lambda: F.embedding_bag(idx, w, torch.tensor([0, 10, 41]), mode="max"),
        "last offset past the end": lambda: F.embedding_bag(idx, w, torch.tensor([0, 10, 41]), mode="max",
                                                            include_last_offset=True),
        "last offset past the end (aten)": lambda: aten(w, idx, torch.tensor([0, 10, 50]), False, MAX, False, None,
                                                        True, -1),
        "int32 offset past the end": lambda: F.embedding_bag(idx.int(), w, torch.tensor([0, 10, 45]).int(),
                                                             mode="max"),
        "index too large": lambda: F.embedding_bag(torch.cat([idx, torch.tensor([10])]), w, off, mode="max"),
        "negative index": lambda: F.embedding_bag(torch.cat([torch.tensor([-1]), idx]), w, off, mode="max"),
        "int32 index too large": lambda: F.embedding_bag(torch.cat([idx, torch.tensor([1 << 20])]).int(), w,
                                                         off.int(), mode="max"),
        "padding_idx too large": lambda: F.embedding_bag(idx, w, off, mode="max", padding_idx=10),
        "padding_idx too small": lambda: F.embedding_bag(idx, w, off, mode="max", padding_idx=-11),
        "float indices": lambda: F.embedding_bag(idx.float(), w, off, mode="max"),
        "float offsets": lambda: F.embedding_bag(idx, w, off.float(), mode="max"),
        "2-d input with offsets": lambda: F.embedding_bag(idx.reshape(4, 10), w, off, mode="max"),
        "1-d input without offsets": lambda: F.embedding_bag(idx, w, mode="max"),
        "2-d offsets": lambda: F.embedding_bag(idx, w, off.reshape(2, 2), mode="max"),
        "1-d weight": lambda: F.embedding_bag(idx, w[0], off, mode="max"),
        "3-d input": lambda: F.embedding_bag(idx.reshape(2, 2, 10), w, mode="max"),
        "bad mode": lambda: F.embedding_bag(idx, w, off, mode="min"),
        "int weight": lambda: aten(w.int(), idx, off, False, MAX, False, None, False, -1),
    }
    for what, call in calls.items():
        both = run_both(call)
        assert_same(both, context=what)
        assert isinstance(both.torch, Raised), f"{what}: torch did not raise ({both.torch!r})"
        assert_torchs(both, what)
    # Decreasing offsets: torch does not raise (its result is whatever its loops make of them).
    both = run_both(lambda: F.embedding_bag(idx, w, torch.tensor([0, 30, 10, 20]), mode="max"))
    assert_same(both, context="decreasing offsets")


def _bag_model(num_weights, dim, dtype, padding_idx, seed, include_last_offset=False):
    torch.manual_seed(seed)
    bag = torch.nn.EmbeddingBag(num_weights, dim, mode="max", padding_idx=padding_idx, dtype=dtype,
                                include_last_offset=include_last_offset)
    lin = torch.nn.Linear(dim, 3, dtype=dtype)
    with torch.no_grad():
        bag.weight.copy_(weights(num_weights, dim, dtype, "ties", seed=seed) + 0.25 * weights(
            num_weights, dim, dtype, "random", seed=seed + 1))
    return torch.nn.ModuleDict({"bag": bag, "lin": lin})


def _train(state, dtype, padding_idx, indices, offsets, target, include_last_offset, steps=2):
    """The model of `state` trained for `steps` SGD steps: its parameters and gradients after each step."""
    model = _bag_model(state["bag.weight"].size(0), state["bag.weight"].size(1), dtype, padding_idx, 0,
                       include_last_offset)
    model.load_state_dict(state)
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    history = []
    for _ in range(steps):
        opt.zero_grad()
        pooled = model["bag"](indices, offsets) if offsets is not None else model["bag"](indices)
        loss = ((model["lin"](pooled) - target) ** 2).mean()
        loss.backward()
        history.append(tuple(p.grad.clone() for p in model.parameters()))
        opt.step()
    return tuple(p.detach().clone() for p in model.parameters()), history


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64, torch.bfloat16),
                         ids=("float32", "float64", "bfloat16"))
def test_nn_embedding_bag_training_step(isa, dtype):
    num_weights, dim = 60, 20
    state = {k: v.clone() for k, v in _bag_model(num_weights, dim, dtype, None, 21).state_dict().items()}
    padded_state = {k: v.clone() for k, v in _bag_model(num_weights, dim, dtype, 4, 21).state_dict().items()}
    indices, offsets = bag_inputs(400, 32, num_weights, seed=22)
    idx2d = torch.randint(0, num_weights, (32, 9), generator=torch.Generator().manual_seed(23)).int()
    target = weights(32, 3, dtype, "random", seed=24)
    last = torch.cat([offsets, torch.tensor([400])])
    for what, st_, padding_idx, idx, off, ilo in (
            ("offsets", state, None, indices, offsets, False),
            ("padded", padded_state, 4, indices, offsets, False),
            ("2-d int32", state, None, idx2d, None, False),
            ("include_last_offset", padded_state, 4, indices, last, True)):
        both = run_both(lambda: _train(st_, dtype, padding_idx, idx, off, target, ilo))
        assert_same(both, context=f"{NAMES[dtype]} {what}")
        assert_served(both, f"{NAMES[dtype]} {what}")
        assert family_delta(both)["kwker"] >= 4, f"{what}: forward and backward of each step: {family_delta(both)}"


class _BagClassifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = torch.nn.EmbeddingBag(200, 32, mode="max")
        self.head = torch.nn.Linear(32, 5)

    def forward(self, indices, offsets):
        return self.head(torch.relu(self.bag(indices, offsets)))


def test_compiled_model_reaches_kwker():
    torch.manual_seed(31)
    model = _BagClassifier()
    indices, offsets = bag_inputs(600, 40, 200, seed=32)
    compiled = torch.compile(model, backend="inductor")

    def infer(x):
        with torch.no_grad():
            return compiled(x, offsets)

    assert_reaches_kwker(infer, indices, [FAMILY])

    initial = {k: v.clone() for k, v in model.state_dict().items()}

    def train_step():
        model.load_state_dict(initial)
        model.zero_grad(set_to_none=True)
        loss = compiled(indices, offsets).logsumexp(-1).sum()
        loss.backward()
        return loss.detach(), tuple(p.grad.clone() for p in model.parameters())

    both = run_both(train_step)
    assert_same(both, context="compiled training step")
    assert family_delta(both)["kwker"] >= 2, f"compiled forward and backward: {family_delta(both)}"


@pytest.mark.parametrize("num_weights,dim,num_indices,num_bags", [
    (20_000, 64, 600, 100),         # 5 MiB gradient, few rows written: small pages
    (160_000, 64, 400, 60),         # 39 MiB, few rows: small pages
    (160_000, 64, 300_000, 30_000),  # most pages written: huge pages where THP is on, else zeroed
], ids=("5MiB-sparse", "39MiB-sparse", "39MiB-dense"))
def test_backward_into_large_tables_after_freed_garbage(num_weights, dim, num_indices, num_bags):
    # grad_weight's fresh pages are handed back, resident ones zeroed (see test_embedding.py): a freed
    # block of its size full of NaN, which glibc may reuse, must not show through.
    weight = weights(num_weights, dim, torch.float32, "random", seed=num_bags)
    indices, offsets = bag_inputs(num_indices, num_bags, num_weights, seed=num_indices)
    for _ in range(2):
        junk = torch.full((num_weights, dim), float("nan"))
        del junk
    forward_and_backward(weight, indices, offsets, padding_idx=5, what="large table")


def test_threads_give_the_same_answer():
    cases = [(weights(5000, 64, torch.float32, "ties", seed=1), *bag_inputs(200_000, 4000, 5000, seed=2)),
             (weights(3000, 40, torch.bfloat16, "random", seed=3),
              *bag_inputs(60_000, 3000, 3000, torch.int32, seed=4))]
    for weight, indices, offsets in cases:
        results = []
        for threads in (1, 2):
            with num_threads(threads):
                fwd = check_bags(weight, indices, offsets, what=f"{threads} threads", ops=(False,))[0]
                out, o2b, bag_size, max_idx = fwd.torch
                grad = weights(out.size(0), out.size(1), weight.dtype, "random", seed=9)
                bwd = check_backward(grad, indices, o2b, bag_size, max_idx, weight.size(0), what=f"{threads} threads")
                results.append((fwd.kwker, bwd.kwker))
        assert_bit_identical(results[0], results[1], context="1 vs 2 threads")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dtype=st.sampled_from(WEIGHT_DTYPES), index_dtype=st.sampled_from(INDEX_DTYPES),
       kind=st.sampled_from(WEIGHT_KINDS), num_weights=st.integers(1, 50), dim=st.integers(1, 70),
       num_indices=st.integers(1, 300), num_bags=st.integers(1, 40), empty=st.sampled_from((0.0, 0.3, 0.9)),
       include_last_offset=st.booleans(), padding=st.booleans(), row_stride_pad=st.integers(0, 3),
       seed=st.integers(0, 2**16))
def test_hypothesis(isa, dtype, index_dtype, kind, num_weights, dim, num_indices, num_bags, empty,
                    include_last_offset, padding, row_stride_pad, seed):
    weight = weights(num_weights, dim + row_stride_pad, dtype, kind, seed)[:, :dim]
    indices, offsets = bag_inputs(num_indices, num_bags, num_weights, index_dtype,
                                  include_last_offset=include_last_offset, empty=empty, seed=seed + 1)
    padding_idx = int(indices[0]) if padding else -1
    forward_and_backward(weight, indices, offsets, include_last_offset, padding_idx, what="hypothesis", seed=seed)
