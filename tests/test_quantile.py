"""Differential tests of Kwker's quantile and nanquantile against torch's own composite: results bit
for bit (dtype, shape, strides), identical errors and warnings, gradients unchanged.

torch.quantile / torch.nanquantile (Tensor and float q, out= or not) reach Kwker's kernels at the
AutogradCPU and CPU keys; calls needing gradients go to torch's composite. Kwker declines inputs
whose bits depend on torch's algorithm (quantile with a NaN, nanquantile with an all-NaN row, both
zero signs). Every case runs on every ISA (`isa`).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exactness import assert_reaches_kwker, assert_same, num_threads, run_both

pytestmark = pytest.mark.usefixtures("native")

MODES = ("linear", "lower", "higher", "midpoint", "nearest")
OPS = (torch.quantile, torch.nanquantile)
DTYPES = (torch.float32, torch.float64)


def data(shape, dtype, kind, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    if kind == "ints":
        x = torch.randint(-3, 4, shape, generator=g).double().abs()  # ties, +0.0 only
    elif kind == "nan":
        x[x > 1] = float("nan")
    elif kind == "nan_rows":
        x[x > 0.8] = float("nan")
        x.view(-1, shape[-1])[0] = float("nan")
    elif kind == "zeros":
        x[x.abs() < 0.5] = -0.0
    elif kind == "both_zeros":
        x[x.abs() < 0.3] = 0.0
        x[(x.abs() > 0.3) & (x.abs() < 0.6)] = -0.0
    elif kind == "inf":
        x[x > 1.5] = float("inf")
        x[x < -1.5] = float("-inf")
    elif kind == "huge":
        x = x * 1e30
    return x.to(dtype)


def check(call, *, what):
    both = run_both(call)
    assert_same(both, context=what)
    return both


@pytest.mark.parametrize("dtype", DTYPES, ids=("float32", "float64"))
@pytest.mark.parametrize("kind", ("randn", "ints", "nan", "nan_rows", "zeros", "both_zeros", "inf", "huge"))
def test_modes_shapes_and_q(isa, dtype, kind):
    qs = (0.5, 0.0, 1.0, 0.35, torch.tensor([0.0, 0.1, 0.35, 0.5, 0.9, 1.0], dtype=dtype),
          torch.tensor(0.25, dtype=dtype), torch.tensor([0.5], dtype=dtype))
    for shape, dim in (((1000,), None), ((1000,), 0), ((30, 50), 1), ((30, 50), 0), ((4, 5, 60), -2),
                       ((4, 5, 60), None), ((11,), None), ((300, 300), 1)):
        x = data(shape, dtype, kind, seed=len(shape))
        for mode in MODES:
            for q in qs:
                for keepdim in (False, True):
                    for op in OPS:
                        what = f"{op.__name__} {shape} dim={dim} {kind} {mode} q={q} keepdim={keepdim}"
                        both = check(lambda: op(x, q, dim=dim, keepdim=keepdim, interpolation=mode), what=what)
                        declined = kind == "both_zeros" or (kind in ("nan", "nan_rows") and op is torch.quantile) or \
                            (kind == "nan_rows" and op is torch.nanquantile)
                        if x.numel() >= 256 and not declined:
                            assert both.served >= 1, f"{what}: not served ({both.reasons()})"


def test_exact_ranks_where_versions_differ(isa):
    x = torch.arange(11.0).repeat(30)
    for q, mode in ((0.1, "higher"), (0.35, "nearest"), (0.7, "linear"), (0.3, "lower")):
        check(lambda: torch.quantile(x.reshape(30, 11), q, dim=1, interpolation=mode), what=f"{q} {mode}")
        check(lambda: torch.quantile(x, q, interpolation=mode), what=f"flat {q} {mode}")


def test_out_variants(isa):
    x = data((40, 70), torch.float32, "randn")
    q = torch.tensor([0.2, 0.8])
    for kind, make in (("exact", lambda: torch.empty(2, 40)), ("empty", lambda: torch.empty(0)),
                       ("wrong_shape", lambda: torch.empty(3, 3)), ("strided", lambda: torch.empty(2, 80)[:, ::2]),
                       ("wrong_dtype", lambda: torch.empty(2, 40, dtype=torch.float64))):
        for op in OPS:
            def call():
                out = make()
                return op(x, q, dim=1, out=out), out
            check(call, what=f"{op.__name__} out {kind}")

            def call_scalar():
                out = make()[0] if kind == "exact" else make()
                return op(x, 0.3, dim=1, out=out), out
            check(call_scalar, what=f"{op.__name__} float q out {kind}")


def test_errors_are_torchs(isa):
    x = torch.randn(300)
    for what, call in (("q above 1", lambda: torch.quantile(x, 1.5)), ("q tensor above 1", lambda: torch.quantile(x, torch.tensor([0.5, 2.0]))),
                       ("q nan", lambda: torch.quantile(x, float("nan"))), ("bad mode", lambda: torch.quantile(x, 0.5, interpolation="cubic")),
                       ("int input", lambda: torch.quantile(torch.arange(300), 0.5)), ("q dtype", lambda: torch.quantile(x, torch.tensor([0.5], dtype=torch.float64))),
                       ("q 2-d", lambda: torch.quantile(x, torch.rand(2, 2))), ("bad dim", lambda: torch.quantile(x, 0.5, dim=1)),
                       ("empty", lambda: torch.quantile(torch.empty(0), 0.5)), ("half", lambda: torch.quantile(x.half(), 0.5)),
                       ("out dtype", lambda: torch.quantile(x, 0.5, out=torch.empty((), dtype=torch.float64)))):
        both = check(call, what=what)
        assert type(both[0]).__name__ == "Raised", what
        assert both.served == 0


def test_small_and_degenerate_inputs(isa):
    for x in (torch.tensor(3.0), torch.randn(1), torch.randn(5, 1), torch.randn(1, 300)):
        for dim in (None, 0, -1):
            check(lambda: torch.quantile(x, torch.tensor([0.1, 0.9]), dim=dim), what=f"{tuple(x.shape)} dim={dim}")
    check(lambda: torch.quantile(torch.randn(300), torch.tensor([])), what="empty q")


def test_gradients_go_through_torchs_composite():
    for op in OPS:
        x = torch.randn(50, 40, dtype=torch.float64, requires_grad=True)
        q = torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64, requires_grad=True)

        def grads():
            x.grad = q.grad = None
            y = op(x, q, dim=1, interpolation="linear")
            y.sum().backward()
            return y.detach(), x.grad.clone(), q.grad.clone()

        both = check(grads, what=f"{op.__name__} backward")
        assert both.reasons().get("quantile", {}).get("autograd", 0) >= 1
        with torch.no_grad():
            both = check(lambda: op(x, q, dim=1), what="no_grad")
            assert both.served >= 1
        with torch.inference_mode():
            both = check(lambda: op(x, q, dim=1), what="inference_mode")
            assert both.served >= 1
    assert torch.autograd.gradcheck(lambda t: torch.quantile(t, 0.3, dim=1),
                                    (torch.randn(20, 30, dtype=torch.float64, requires_grad=True),))


def test_threads_give_the_same_result():
    x = torch.randn(2000, 700)
    for threads in (1, 2, 3):
        with num_threads(threads):
            check(lambda: torch.quantile(x, torch.tensor([0.1, 0.5, 0.9]), dim=1), what=f"{threads} threads")


def test_scripted_and_compiled():
    @torch.jit.script
    def scripted(x: torch.Tensor) -> torch.Tensor:
        return torch.quantile(x, 0.5, dim=1)

    assert_reaches_kwker(scripted, torch.randn(100, 300), ["quantile"])
    compiled = torch.compile(lambda t: torch.quantile(t * 2, 0.3, dim=1))
    both = run_both(lambda: compiled(torch.randn(100, 300, generator=torch.Generator().manual_seed(3))))
    assert_same(both, context="compiled")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dtype=st.sampled_from(DTYPES), rows=st.integers(1, 20), length=st.integers(1, 700),
       kind=st.sampled_from(("randn", "ints", "nan", "nan_rows", "zeros", "inf")), mode=st.sampled_from(MODES),
       nq=st.integers(0, 8), nan=st.booleans(), dim=st.sampled_from((None, 0, 1)), keepdim=st.booleans(),
       seed=st.integers(0, 2**16))
def test_hypothesis(isa, dtype, rows, length, kind, mode, nq, nan, dim, keepdim, seed):
    x = data((rows, length), dtype, kind, seed)
    g = torch.Generator().manual_seed(seed)
    q = torch.rand(nq, generator=g, dtype=torch.float64).to(dtype) if nq else torch.rand((), generator=g).to(dtype)
    op = torch.nanquantile if nan else torch.quantile
    assert_same(run_both(lambda: op(x, q, dim=dim, keepdim=keepdim, interpolation=mode)),
                context=f"{op.__name__} {rows}x{length} {kind} {mode} nq={nq} dim={dim}")
