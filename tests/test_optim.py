"""Differential tests of the fused optimizer steps: torch.optim Adam, AdamW and SGD trained with
Kwker's step against the same training with torch's own (kto.disabled()), compared bit for bit:
parameters, every optimizer state tensor (values, dtype, strides) and the step counters.

The training loops run 50+ steps of small models whose parameters have every length class the
kernels treat apart: 0-dim, empty, shorter than a vector, odd tails, longer than one 16384-element
chunk; every ISA variant compiled. Then the cases torch must keep (amsgrad, foreach/fused, tensor lr,
complex, half types, sparse gradients, ...), layouts, param groups, state dicts, threads and hooking.
"""

from __future__ import annotations

import copy
import functools
import json
import subprocess
import sys
import threading

import pytest
import torch

import kwker.torch_ops as kto
from kwker import _native, optim

STEPS = 50


class MixedModel(torch.nn.Module):
    """Parameters of lengths 0 (empty), 1 (0-dim), 1, 7, 13, 130, 1677, 16770 and one without a
    gradient: every tail length class, and one tensor over a kernel chunk (16384 elements)."""

    def __init__(self, dtype):
        super().__init__()
        self.lin1 = torch.nn.Linear(13, 129, dtype=dtype)
        self.lin2 = torch.nn.Linear(129, 130, dtype=dtype)
        self.lin3 = torch.nn.Linear(130, 1, dtype=dtype)
        self.gain = torch.nn.Parameter(torch.tensor(1.5, dtype=dtype))
        self.shift = torch.nn.Parameter(torch.randn(7, dtype=dtype))
        self.empty = torch.nn.Parameter(torch.empty(0, dtype=dtype))
        self.unused = torch.nn.Parameter(torch.randn(5, dtype=dtype))  # grad stays None: never stepped

    def forward(self, x):
        h = torch.tanh(self.lin1(x))
        h = torch.relu(self.lin2(h))
        out = self.lin3(h).squeeze(-1) * self.gain
        return out + self.shift.sum() * 0.01 + self.empty.sum()


def train(make_optimizer, dtype, steps=STEPS, seed=0, model_class=MixedModel, batch=16):
    """Trains a fresh model (same seed: same start) for `steps` steps; returns everything the
    optimizer produced: parameters, state tensors and the state dict's scalar entries."""
    torch.manual_seed(seed)
    model = model_class(dtype)
    optimizer = make_optimizer(model.parameters())
    generator = torch.Generator().manual_seed(seed + 1)
    for _ in range(steps):
        x = torch.randn(batch, *model_input_shape(model), generator=generator, dtype=dtype)
        target = torch.randn(batch, generator=generator, dtype=dtype)
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), target).backward()
        optimizer.step()
    return trained_state(model, optimizer)


def model_input_shape(model):
    return getattr(model, "input_shape", (13,))


def trained_state(model, optimizer):
    params = {name: p.detach().clone() for name, p in model.named_parameters()}
    state = {f"{i}.{key}": value.clone() if isinstance(value, torch.Tensor) else value
             for i, per_param in optimizer.state_dict()["state"].items() for key, value in per_param.items()}
    return {"params": params, "state": state}


def stepped_params(model_class=MixedModel) -> int:
    """Parameters of the model that get a gradient."""
    return sum(1 for name, _ in model_class(torch.float32).named_parameters() if name != "unused")


@functools.lru_cache(maxsize=None)
def torch_result(config: str, dtype: torch.dtype):
    """torch's own training (the oracle), once per configuration and dtype."""
    with kto.disabled():
        return train(CONFIGS[config], dtype)


def adam(cls, **options):
    return lambda params: cls(params, **options)


CONFIGS = {
    "Adam": adam(torch.optim.Adam),
    "Adam lr=0.05 betas=(0.5,0.9) eps=1e-6": adam(torch.optim.Adam, lr=0.05, betas=(0.5, 0.9), eps=1e-6),
    "Adam weight_decay=0.1": adam(torch.optim.Adam, lr=1e-2, weight_decay=0.1),
    "Adam maximize": adam(torch.optim.Adam, lr=1e-3, maximize=True),
    "Adam weight_decay maximize foreach=False": adam(torch.optim.Adam, lr=3e-3, weight_decay=0.05,
                                                      maximize=True, foreach=False),
    "Adam betas=(0,0.5) lr=1 (int)": adam(torch.optim.Adam, lr=1, betas=(0.0, 0.5)),
    "Adam eps=1 betas=(0.99,0.999)": adam(torch.optim.Adam, lr=1e-2, eps=1.0, betas=(0.99, 0.999)),
    "Adam decoupled_weight_decay": adam(torch.optim.Adam, lr=1e-2, weight_decay=0.1,
                                        decoupled_weight_decay=True),
    "AdamW": adam(torch.optim.AdamW),
    "AdamW lr=0.1 weight_decay=0": adam(torch.optim.AdamW, lr=0.1, weight_decay=0.0),
    "AdamW weight_decay=0.5 maximize": adam(torch.optim.AdamW, lr=1e-2, weight_decay=0.5, maximize=True),
    "AdamW betas=(0.3,0.5) eps=1e-3 foreach=False": adam(torch.optim.AdamW, lr=0.1, betas=(0.3, 0.5),
                                                         eps=1e-3, weight_decay=0.2, foreach=False),
    "SGD": adam(torch.optim.SGD, lr=0.1),
    "SGD weight_decay maximize": adam(torch.optim.SGD, lr=0.05, weight_decay=0.01, maximize=True),
    "SGD momentum": adam(torch.optim.SGD, lr=0.05, momentum=0.9),
    "SGD momentum weight_decay": adam(torch.optim.SGD, lr=0.05, momentum=0.9, weight_decay=1e-4),
    "SGD momentum dampening": adam(torch.optim.SGD, lr=0.05, momentum=0.5, dampening=0.3),
    "SGD nesterov": adam(torch.optim.SGD, lr=0.05, momentum=0.9, nesterov=True),
    "SGD nesterov weight_decay maximize foreach=False": adam(torch.optim.SGD, lr=0.02, momentum=0.8,
                                                             nesterov=True, weight_decay=0.01,
                                                             maximize=True, foreach=False),
    "SGD momentum=1 dampening=1": adam(torch.optim.SGD, lr=0.01, momentum=1.0, dampening=1.0),
}
DTYPES = [torch.float32, torch.float64]


def family_of(config: str) -> str:
    return "sgd" if config.startswith("SGD") else "adam"


def kwker_train(make_optimizer, dtype, **kwargs):
    """train() under kto.accelerated(), with the stats() delta of the run."""
    before = kto.stats()
    with kto.accelerated():
        result = train(make_optimizer, dtype, **kwargs)
    after = kto.stats()
    delta = {name: {key: after[name][key] - before[name][key] for key in ("calls", "kwker", "torch")}
             for name in after}
    return result, delta


# -- training loops: every option, both dtypes, every ISA -------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_training_loop_is_bit_exact(exact, isa, config, dtype):
    result, delta = kwker_train(CONFIGS[config], dtype)
    exact.assert_bit_identical(torch_result(config, dtype), result, context=f"{config} {dtype} {isa}")
    family = family_of(config)
    assert delta[family]["kwker"] == STEPS * stepped_params(), f"Kwker must serve every step: {delta}"
    assert delta[family]["torch"] == 0


@pytest.mark.parametrize("family", ["adam", "sgd"])
def test_param_groups_with_their_own_settings(exact, native, family):
    def make(params):
        params = list(params)
        if family == "adam":
            return torch.optim.AdamW([{"params": params[:3]},
                                      {"params": params[3:6], "lr": 0.05, "betas": (0.5, 0.8)},
                                      {"params": params[6:], "weight_decay": 0.0, "maximize": True}],
                                     lr=1e-3, weight_decay=0.1)
        return torch.optim.SGD([{"params": params[:3], "momentum": 0.0},
                                {"params": params[3:6], "nesterov": True},
                                {"params": params[6:], "dampening": 0.5, "weight_decay": 0.1}],
                               lr=0.05, momentum=0.9)

    with kto.disabled():
        expected = train(make, torch.float32)
    result, delta = kwker_train(make, torch.float32)
    exact.assert_bit_identical(expected, result)
    assert delta[family]["kwker"] == STEPS * stepped_params() and delta[family]["torch"] == 0


class ConvModel(torch.nn.Module):
    """A conv net in channels_last: parameters, gradients and state are not contiguous but dense."""

    input_shape = (3, 8, 8)

    def __init__(self, dtype):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 17, 3, dtype=dtype)
        self.norm = torch.nn.BatchNorm2d(17, dtype=dtype)
        self.head = torch.nn.Linear(17, 1, dtype=dtype)
        self.to(memory_format=torch.channels_last)

    def forward(self, x):
        x = x.contiguous(memory_format=torch.channels_last)
        h = torch.relu(self.norm(self.conv(x))).mean(dim=(2, 3))
        return self.head(h).squeeze(-1)


@pytest.mark.parametrize("config", ["AdamW weight_decay=0.5 maximize", "SGD nesterov"])
def test_channels_last_parameters_are_served(exact, native, config):
    with kto.disabled():
        expected = train(CONFIGS[config], torch.float32, steps=20, model_class=ConvModel, batch=4)
    result, delta = kwker_train(CONFIGS[config], torch.float32, steps=20, model_class=ConvModel, batch=4)
    exact.assert_bit_identical(expected, result)
    assert not expected["params"]["conv.weight"].is_contiguous()
    family = family_of(config)
    assert delta[family]["kwker"] == 20 * stepped_params(ConvModel) and delta[family]["torch"] == 0


# -- gradients and states set by hand: layouts, special values ----------------------------------------

def manual_steps(make_optimizer, params, grads_per_step, leaf=True):
    """Steps an optimizer over `params` with the given gradients; returns params and state.
    leaf=False steps non-leaf tensors (what differentiable=True optimizers are given)."""
    params = [p.detach().clone().requires_grad_(True) for p in params]
    if not leaf:
        params = [p * 1 for p in params]
    optimizer = make_optimizer(params)
    for grads in grads_per_step:
        for p, g in zip(params, grads):
            p.grad = None if g is None else copy_with_strides(g)
        optimizer.step()
    state = [{k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in optimizer.state[p].items()}
             for p in params]
    return [p.detach().clone() for p in params], state


def copy_with_strides(t):
    """A copy of `t` with its strides, gaps included (clone() makes non-dense tensors contiguous)."""
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype).copy_(t)


def both_manual(exact, make_optimizer, params, grads_per_step, leaf=True):
    """manual_steps with torch's step and with Kwker's: (torch's result, Kwker's, stats delta)."""
    both = exact.run_both(manual_steps, make_optimizer, params, grads_per_step, leaf)
    exact.assert_same(both)
    return both


def strided_grad(shape, generator, dtype=torch.float32):
    """A gradient of `shape` that is a strided view (every other column of a wider tensor)."""
    wide = torch.randn(*shape[:-1], 2 * shape[-1], generator=generator, dtype=dtype)
    return wide[..., ::2]


@pytest.mark.parametrize("config", ["Adam weight_decay=0.1", "SGD momentum weight_decay"])
def test_non_contiguous_gradients_go_to_torch_per_parameter(exact, native, config):
    gen = torch.Generator().manual_seed(3)
    params = [torch.randn(33, 40, generator=gen), torch.randn(100, generator=gen)]
    grads = [[strided_grad((33, 40), gen), torch.randn(100, generator=gen)] for _ in range(5)]
    both = both_manual(exact, CONFIGS[config], params, grads)
    family = family_of(config)
    assert both.delta[family]["kwker"] == 5, "the contiguous parameter is Kwker's"
    assert both.delta[family]["fallback_reasons"] == {"layout": 5}


@pytest.mark.parametrize("config", ["AdamW", "SGD nesterov"])
def test_transposed_parameters_with_matching_gradients_are_served(exact, native, config):
    gen = torch.Generator().manual_seed(4)
    params = [torch.randn(40, 33, generator=gen).t()]
    grads = [[torch.randn(40, 33, generator=gen).t()] for _ in range(5)]
    both = both_manual(exact, CONFIGS[config], params, grads)
    assert both.delta[family_of(config)]["kwker"] == 5


@pytest.mark.parametrize("config", ["Adam", "SGD momentum"])
def test_transposed_parameter_with_contiguous_gradient_goes_to_torch(exact, native, config):
    gen = torch.Generator().manual_seed(5)
    params = [torch.randn(40, 33, generator=gen).t()]
    grads = [[torch.randn(33, 40, generator=gen)] for _ in range(3)]
    both = both_manual(exact, CONFIGS[config], params, grads)
    assert both.delta[family_of(config)]["fallback_reasons"] == {"layout": 3}


def special_values(n, dtype, gen):
    values = torch.randn(n, generator=gen, dtype=dtype)
    specials = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0,
                             torch.finfo(dtype).tiny / 4, torch.finfo(dtype).max, -torch.finfo(dtype).max],
                            dtype=dtype)
    where = torch.randint(0, n, (n // 4,), generator=gen)
    values[where] = specials[torch.randint(0, len(specials), (len(where),), generator=gen)]
    return values


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("config", ["Adam weight_decay maximize foreach=False", "AdamW", "SGD nesterov",
                                    "SGD momentum dampening"])
def test_nan_inf_zero_signs_and_extremes(exact, isa, config, dtype):
    gen = torch.Generator().manual_seed(6)
    lengths = (1, 7, 16, 31, 33, 100, 4097, 16385)
    params = [special_values(n, dtype, gen) for n in lengths]
    grads = [[special_values(n, dtype, gen) for n in lengths] for _ in range(3)]
    both = both_manual(exact, CONFIGS[config], params, grads)
    assert both.delta[family_of(config)]["kwker"] == 3 * len(lengths)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_adam_states_with_negative_nan_and_infinite_second_moments(exact, isa, dtype):
    """States loaded from anywhere (a state dict): sqrt of negative or NaN second moments."""
    def run():
        params = [torch.randn(n, generator=torch.Generator().manual_seed(n), dtype=dtype).requires_grad_()
                  for n in (5, 37, 4100)]
        optimizer = torch.optim.Adam(params, lr=1e-2)
        for p in params:
            p.grad = torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel() + 1), dtype=dtype)
        optimizer.step()
        for p in params:
            state = optimizer.state[p]
            state["exp_avg_sq"].copy_(special_values(p.numel(), dtype, torch.Generator().manual_seed(9)))
            state["exp_avg_sq"][::3] *= -1
        optimizer.step()
        return [p.detach() for p in params], [dict(optimizer.state[p]) for p in params]

    both = exact.run_both(run)
    exact.assert_same(both)
    assert both.delta["adam"]["kwker"] == 6


def first_float_differing_from_torch_sqrt(path):
    """The first bit pattern (as an unsigned int) where Kwker's copy of MKL's float sqrt `path` differs
    from torch.sqrt, over all 2^32 of them in order; None where it gives torch's bits on every one."""
    # Chunks small enough for malloc to reuse their memory: fresh pages would cost more than the sqrt.
    chunk = 1 << 20
    offsets = torch.arange(chunk, dtype=torch.int32)
    bits, roots = torch.empty_like(offsets), torch.empty(chunk)
    for start in range(0, 1 << 32, chunk):
        torch.add(offsets, start - (1 << 32) if start >= 1 << 31 else start, out=bits)  # all patterns
        x = bits.view(torch.float32)
        expected = torch.sqrt(x, out=roots).view(torch.int32)
        actual = torch.ops.kwker.mkl_sqrt_f32(x, path).view(torch.int32)
        if not torch.equal(expected, actual):
            return int(bits[int((expected != actual).nonzero()[0])]) & 0xFFFFFFFF
    return None


def test_sqrt_copy_of_mkl_is_used_only_where_exact_on_every_float(native):
    """Kwker's in-register copies of MKL's float sqrt (what torch's sqrt calls with MKL): MKL's Intel
    AVX-512 path, which AVX-512 builds have, and the SSE path MKL takes on AMD CPUs (with or without
    AVX-512), which AVX2 and AVX-512 builds have. The optimizer steps use the copy the adapter's
    sampled check accepted, and that one gives torch.sqrt's bits on all 2^32 inputs; every copy it did
    not accept differs on some float. Needs AVX2 or AVX-512 and an MKL torch; else no copy."""
    if native.isa() == "scalar" or not torch.backends.mkl.is_available():
        pytest.skip("the copies of MKL's sqrt exist for AVX2 and AVX-512 CPUs with an MKL torch only")
    paths = ["avx512", "sse"] if native.isa() == "avx512" else ["sse"]
    in_use = torch.ops.kwker.mkl_sqrt_copy_in_use()
    assert in_use is None or in_use in paths
    for path in paths:
        first = first_float_differing_from_torch_sqrt(path)
        if path == in_use:
            assert first is None, f"the {path} copy is in use but differs from torch.sqrt at 0x{first:08x}"
        else:
            assert first is not None, f"the {path} copy gives torch's bits on every float, yet is not in use"


def test_sqrt_copy_path_names(native):
    x = torch.tensor([4.0, 2.0])
    with pytest.raises(RuntimeError, match='"avx512" or "sse"'):
        torch.ops.kwker.mkl_sqrt_f32(x, "avx2")
    if native.isa() == "avx2":
        with pytest.raises(RuntimeError, match="no copy of MKL's avx512 path"):
            torch.ops.kwker.mkl_sqrt_f32(x, "avx512")


# -- what torch keeps --------------------------------------------------------------------------------

def fallback_case(name):
    """(make_optimizer, params, grads_per_step, family, reason) for a case torch must step itself."""
    gen = torch.Generator().manual_seed(8)

    def real(n, dtype=torch.float32):
        return torch.randn(n, generator=gen, dtype=dtype)

    dense = [real(37), real(100)]
    dense_grads = [[real(37), real(100)] for _ in range(3)]
    cases = {
        "Adam amsgrad": (adam(torch.optim.Adam, amsgrad=True), "adam", "arguments"),
        "AdamW amsgrad": (adam(torch.optim.AdamW, amsgrad=True), "adam", "arguments"),
        "Adam differentiable": (adam(torch.optim.Adam, differentiable=True), "adam", "arguments"),
        "Adam tensor lr": (adam(torch.optim.Adam, lr=torch.tensor(1e-3)), "adam", "arguments"),
        "Adam tensor betas": (adam(torch.optim.Adam, lr=torch.tensor(1e-3),
                                   betas=(torch.tensor(0.9), torch.tensor(0.99))), "adam", "arguments"),
        "Adam foreach=True": (adam(torch.optim.Adam, foreach=True), "adam", None),
        "Adam fused=True": (adam(torch.optim.Adam, fused=True), "adam", None),
        "AdamW fused=True": (adam(torch.optim.AdamW, fused=True), "adam", None),
        "SGD foreach=True": (adam(torch.optim.SGD, lr=0.1, momentum=0.9, foreach=True), "sgd", None),
        "SGD fused=True": (adam(torch.optim.SGD, lr=0.1, momentum=0.9, fused=True), "sgd", None),
        "SGD tensor lr": (adam(torch.optim.SGD, lr=torch.tensor(0.1), momentum=0.9), "sgd", "arguments"),
        "SGD differentiable": (adam(torch.optim.SGD, lr=0.1, momentum=0.9, differentiable=True), "sgd",
                               "arguments"),
    }
    if name in cases:
        make, family, reason = cases[name]
        return make, dense, dense_grads, family, reason
    dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16, "complex64": torch.complex64}
    kind, family = name.split()
    make = adam(torch.optim.AdamW) if family == "adam" else adam(torch.optim.SGD, lr=0.1, momentum=0.9)
    params = [real(37, dtype[kind]), real(40)]
    grads = [[real(37, dtype[kind]), real(40)] for _ in range(3)]
    return make, params, grads, family, "dtype"


FALLBACK_CASES = ["Adam amsgrad", "AdamW amsgrad", "Adam differentiable", "Adam tensor lr",
                  "Adam tensor betas", "Adam foreach=True", "Adam fused=True", "AdamW fused=True",
                  "SGD foreach=True", "SGD fused=True", "SGD tensor lr", "SGD differentiable",
                  "float16 adam", "bfloat16 adam", "complex64 adam", "float16 sgd", "bfloat16 sgd",
                  "complex64 sgd"]


@pytest.mark.parametrize("case", FALLBACK_CASES)
def test_cases_left_to_torch_are_exact_and_counted(exact, native, case):
    make, params, grads, family, reason = fallback_case(case)
    both = both_manual(exact, make, params, grads, leaf="differentiable" not in case)
    assert not any(isinstance(r, exact.Raised) for r in both[:2]), both[:2]
    delta = both.delta[family]
    if reason == "dtype":  # the float32 parameter beside it is still Kwker's
        assert delta["kwker"] == 3 and delta["fallback_reasons"] == {"dtype": 3}
    elif reason is None:  # never reaches the single-tensor function Kwker replaces
        assert delta["calls"] == 0
    else:
        assert delta["kwker"] == 0 and delta["fallback_reasons"] == {reason: 3 * len(params)}


@pytest.mark.parametrize("make", [adam(torch.optim.AdamW, lr=0.1, differentiable=True),
                                  adam(torch.optim.SGD, lr=0.1, momentum=0.9, differentiable=True)],
                         ids=["AdamW", "SGD"])
def test_differentiable_steps_keep_their_autograd_graph(exact, native, make):
    """A differentiable step is part of the graph: the gradient through two steps is torch's."""
    def run():
        start = torch.linspace(-1, 1, 40, dtype=torch.float64, requires_grad=True)
        params = [start * 1]
        optimizer = make(params)
        for step in range(2):
            params[0].grad = (params[0] * (step + 2)).detach()
            optimizer.step()
        (gradient,) = torch.autograd.grad(params[0].square().sum(), start)
        return params[0].detach(), gradient

    both = exact.run_both(run)
    exact.assert_same(both)


def test_sparse_gradients_go_to_torch(exact, native):
    def run():
        embedding = torch.nn.Embedding(50, 8, sparse=True)
        with torch.no_grad():
            embedding.weight.copy_(torch.arange(400, dtype=torch.float32).reshape(50, 8).sin())
        optimizer = torch.optim.SGD(embedding.parameters(), lr=0.1)
        for step in range(3):
            optimizer.zero_grad()
            embedding(torch.tensor([[1, 2, 4], [4, 3, step]])).sum().backward()
            optimizer.step()
        return embedding.weight.detach()

    both = exact.run_both(run)
    exact.assert_same(both)
    assert both.delta["sgd"]["kwker"] == 0 and both.delta["sgd"]["fallback_reasons"] == {"arguments": 3}


def test_a_parameter_that_aliases_another_goes_to_torch(exact, native):
    """Two parameters over one storage: Kwker's one pass would read what it wrote, so torch steps."""
    def run():
        base = torch.randn(64, generator=torch.Generator().manual_seed(10))
        a, b = base[:40].clone(), None
        params = [torch.nn.Parameter(a)]
        b = torch.nn.Parameter(params[0].data[8:32])  # a view into the first parameter
        optimizer = torch.optim.SGD(params + [b], lr=0.1, momentum=0.9)
        params[0].grad, b.grad = torch.ones(40), torch.full((24,), 2.0)
        optimizer.step()
        return params[0].detach().clone(), b.detach().clone()

    both = exact.run_both(run)
    exact.assert_same(both)
    assert both.delta["sgd"]["kwker"] == 0 and both.delta["sgd"]["fallback_reasons"] == {"layout": 2}


def test_torch_without_fma_kernels_is_left_alone(tmp_path):
    """ATEN_CPU_CAPABILITY=default makes torch's kernels scalar (no FMA contraction): Kwker steps
    nothing and the results are torch's."""
    script = """
import json, torch, kwker.torch_ops as kto
def run():
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(1000))
    opt = torch.optim.AdamW([p], lr=0.1)
    for _ in range(5):
        p.grad = torch.randn(1000)
        opt.step()
    return p.detach().clone()
with kto.disabled():
    expected = run()
with kto.accelerated():
    actual = run()
print(json.dumps({"equal": torch.equal(expected.view(torch.int32), actual.view(torch.int32)),
                  "adam": kto.stats()["adam"]}))
"""
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("KWKER_DISABLE", "KWKER_ISA")}
    env.update(ATEN_CPU_CAPABILITY="default", KWKER_CACHE_DIR=str(tmp_path))
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["equal"]
    assert report["adam"]["kwker"] == 0
    assert report["adam"]["fallback_reasons"].get("torch_capability", 0) >= 5


# -- state, threads, hooking --------------------------------------------------------------------------

@pytest.mark.parametrize("config", ["AdamW weight_decay=0.5 maximize", "SGD nesterov"])
@pytest.mark.parametrize("first", ["kwker", "torch"])
def test_state_dicts_move_between_kwker_and_torch(exact, native, config, first):
    """10 steps by one, state_dict() into a new optimizer, 10 more by the other: torch's 20 steps."""
    make = CONFIGS[config]

    def train_half(model, optimizer, generator):
        for _ in range(10):
            x = torch.randn(8, 13, generator=generator)
            optimizer.zero_grad()
            model(x).square().mean().backward()
            optimizer.step()

    def run(kwker_first):
        torch.manual_seed(1)
        model = MixedModel(torch.float32)
        optimizer = make(model.parameters())
        generator = torch.Generator().manual_seed(2)
        with kto.accelerated() if kwker_first else kto.disabled():
            train_half(model, optimizer, generator)
        saved = copy.deepcopy(optimizer.state_dict())
        resumed = make(model.parameters())
        resumed.load_state_dict(saved)
        with kto.disabled() if kwker_first else kto.accelerated():
            train_half(model, resumed, generator)
        return trained_state(model, resumed)

    exact.assert_bit_identical(run_plain(make), run(first == "kwker"))


def run_plain(make):
    """The 20 steps of test_state_dicts_move_between_kwker_and_torch with torch only, resumed the
    same way."""
    torch.manual_seed(1)
    model = MixedModel(torch.float32)
    optimizer = make(model.parameters())
    generator = torch.Generator().manual_seed(2)
    with kto.disabled():
        for _ in range(10):
            x = torch.randn(8, 13, generator=generator)
            optimizer.zero_grad()
            model(x).square().mean().backward()
            optimizer.step()
        resumed = make(model.parameters())
        resumed.load_state_dict(copy.deepcopy(optimizer.state_dict()))
        for _ in range(10):
            x = torch.randn(8, 13, generator=generator)
            resumed.zero_grad()
            model(x).square().mean().backward()
            resumed.step()
    return trained_state(model, resumed)


@pytest.mark.parametrize("config", ["AdamW", "SGD momentum weight_decay"])
def test_results_do_not_depend_on_the_thread_count(exact, native, config):
    """Long parameters split over 2 threads give the 1-thread (and torch's) bits."""
    gen = torch.Generator().manual_seed(11)
    params = [torch.randn(300_001, generator=gen), torch.randn(70_000, generator=gen)]
    grads = [[torch.randn(300_001, generator=gen), torch.randn(70_000, generator=gen)] for _ in range(3)]
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = both_manual(exact, CONFIGS[config], params, grads)
        torch.set_num_threads(2)
        two = both_manual(exact, CONFIGS[config], params, grads)
    finally:
        torch.set_num_threads(threads)
    exact.assert_bit_identical(one.torch, two.kwker)
    assert two.delta[family_of(config)]["kwker"] == 6


def test_install_patches_torch_optim_and_uninstall_restores_it(native):
    originals = (optim._TORCH_ADAM, optim._TORCH_SGD)
    assert kto.install()
    try:
        assert optim.is_patched("adam") and optim.is_patched("sgd")
        p = torch.nn.Parameter(torch.randn(100))
        p.grad = torch.randn(100)
        before = kto.stats()["adam"]["kwker"]
        torch.optim.Adam([p]).step()
        assert kto.stats()["adam"]["kwker"] == before + 1
    finally:
        kto.uninstall()
    assert (optim._ADAM_MODULE._single_tensor_adam, optim._SGD_MODULE._single_tensor_sgd) == originals


def test_install_exclude_leaves_that_optimizer_to_torch(native):
    assert kto.install(exclude=["adam"])
    try:
        assert not optim.is_patched("adam") and optim.is_patched("sgd")
    finally:
        kto.uninstall()


def test_accelerated_is_per_thread(exact, native):
    """Inside accelerated() on one thread, an optimizer stepped on another thread is torch's."""
    results = {}

    def other_thread():
        before = kto.stats()["sgd"]
        p = torch.nn.Parameter(torch.randn(1000, generator=torch.Generator().manual_seed(12)))
        p.grad = torch.ones(1000)
        torch.optim.SGD([p], lr=0.1, momentum=0.9).step()
        after = kto.stats()["sgd"]
        results["kwker"] = after["kwker"] - before["kwker"]

    with kto.accelerated():
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
    assert results["kwker"] == 0


def test_compiled_step_is_torch_code_and_exact(exact, native):
    """torch.compile traces the step: the wrapper hands tracing to torch's own function."""
    torch._dynamo.reset()

    def run():
        torch.manual_seed(13)
        params = [torch.nn.Parameter(torch.randn(n)) for n in (37, 100)]
        optimizer = torch.optim.AdamW(params, lr=0.01)

        @torch.compile(backend="eager")
        def step():
            optimizer.step()

        for i in range(3):
            for p in params:
                p.grad = torch.randn(p.shape, generator=torch.Generator().manual_seed(i + p.numel()))
            step()
        return [p.detach().clone() for p in params]

    both = exact.run_both(run)
    exact.assert_same(both, warnings_too=False)
    torch._dynamo.reset()


def test_a_faulty_kernel_is_caught_by_the_probe_and_left_off(native, tmp_path, monkeypatch):
    monkeypatch.setenv("KWKER_CACHE_DIR", str(tmp_path))
    native.ops().inject_fault("adam", True)
    try:
        assert kto.install()
        assert not optim.is_patched("adam"), "a family that differed on the probe must not be patched in"
        assert optim.is_patched("sgd")
        state = next(s for s in kto.kernel_states() if s.name == "adam")
        assert not state.on and state.reason == kto.OFF_BY_PROBE
    finally:
        native.ops().inject_fault("adam", False)
        kto.uninstall()
