"""install / uninstall / accelerated / disabled semantics, and the ways torch reaches Kwker's kernels
(eager, autograd, TorchScript, torch.compile), and how Kwker behaves when it cannot load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import warnings
from typing import Tuple

import pytest
import torch

import sortdata
from exactness import assert_bit_identical, assert_same, run_both, stats_delta

SORT_OPS = ("aten::sort.stable", "aten::sort.values_stable")
SUBPROCESS_TIMEOUT = 300


@pytest.fixture
def kto(native):
    import kwker.torch_ops as kto

    yield kto
    kto.uninstall()


def sort_stats(kto) -> dict:
    return kto.stats()["sort"]


def big(dtype=torch.float32, shape=(50, 200)):
    return sortdata.make(dtype, shape, "ties_special")


def counted(kto, fn):
    """(fn(), the stats() delta of the call for "sort")."""
    before = kto.stats()
    result = fn()
    return result, stats_delta(before, kto.stats())["sort"]


def python(code: str, env_extra=None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("KWKER_DISABLE", None)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env, timeout=SUBPROCESS_TIMEOUT)


@pytest.fixture(scope="module")
def pristine_dumps():
    """torch's dispatch table entries for the sort ops in a process that never loaded Kwker."""
    r = python(f"""
        import json, torch
        print(json.dumps({{op: torch._C._dispatch_dump(op) for op in {SORT_OPS!r}}}))
    """)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def dumps():
    return {op: torch._C._dispatch_dump(op) for op in SORT_OPS}


def kwker_cpu_kernel_registered(dump: str) -> bool:
    """An overriding CPU kernel shows as the active CPU entry, torch's own as 'CPU (inactive)'."""
    return "CPU (inactive):" in dump


# -- the library --------------------------------------------------------------------------------------

def test_native_library_available():
    """Fails (not skips) when the extension cannot load: every differential test needs it."""
    from kwker import _native as native

    assert native.available(), f"kwker native library unavailable: {native.load_error()}"
    assert native.load_error() is None
    assert native.isa() in ("scalar", "avx2", "avx512")
    assert native.detected_isa() in ("scalar", "avx2", "avx512")
    assert native.build_info()["torch"] == torch.__version__
    assert "sort" in native.build_info()["kernels"]


def test_isa_cap(native):
    order = ("scalar", "avx2", "avx512")
    best = native.detected_isa()
    previous = native.isa()
    try:
        for name in order:
            expected = order[min(order.index(name), order.index(best))]
            assert native.set_isa_cap(name) == expected
            assert native.isa() == expected
        with pytest.raises(ValueError):
            native.set_isa_cap("sse9")
    finally:
        native.set_isa_cap(previous)
    assert native.isa() == previous


# -- install / uninstall --------------------------------------------------------------------------------

def test_install_uninstall_restores_torch_exactly(kto, pristine_dumps):
    x = big()
    with kto.disabled():
        expected = torch.sort(x, stable=False, dim=0)
    assert kto.install() is True
    assert kto.is_installed()
    for op, dump in dumps().items():
        assert kwker_cpu_kernel_registered(dump), f"{op}: no Kwker CPU kernel after install():\n{dump}"
        assert dump != pristine_dumps[op]
    got, delta = counted(kto, lambda: torch.sort(x, stable=False, dim=0))
    assert delta["kwker"] == 1, delta  # install() is process-wide: no accelerated() needed
    assert_bit_identical(expected, got)
    v, i = torch.empty_like(x), torch.empty_like(x, dtype=torch.long)
    _, delta = counted(kto, lambda: torch.sort(x, stable=False, dim=0, out=(v, i)))
    assert delta["kwker"] == 1, delta

    kto.uninstall()
    assert not kto.is_installed()
    assert dumps() == pristine_dumps, "torch's dispatch table differs from a Kwker-free process"
    got, delta = counted(kto, lambda: torch.sort(x, stable=False, dim=0))
    assert delta["calls"] == 0, f"a Kwker kernel still ran after uninstall(): {delta}"
    assert_bit_identical(expected, got)
    kto.uninstall()  # idempotent
    assert dumps() == pristine_dumps


def test_accelerated_registers_on_first_use_but_does_not_install(kto, pristine_dumps):
    kto.uninstall()
    assert dumps() == pristine_dumps
    x = big()
    with kto.accelerated():
        assert not kto.is_installed()
        _, delta = counted(kto, lambda: torch.sort(x, stable=True))
        assert delta["kwker"] == 1
    assert all(kwker_cpu_kernel_registered(d) for d in dumps().values())  # stays registered, switched off
    _, delta = counted(kto, lambda: torch.sort(x, stable=True))
    assert delta["kwker"] == 0 and delta["fallback_reasons"] == {"disabled": 1}, delta
    kto.uninstall()
    assert dumps() == pristine_dumps


def test_install_only_and_exclude(kto):
    x = big()
    with pytest.raises(ValueError):
        kto.install(only=["no_such_kernel"])
    with pytest.raises(ValueError):
        kto.install(exclude=["no_such_kernel"])
    assert kto.install(exclude=["sort"]) is True
    _, delta = counted(kto, lambda: torch.sort(x, stable=True))
    assert delta["kwker"] == 0, delta
    kto.uninstall()
    assert kto.install(only=["sort"]) is True
    _, delta = counted(kto, lambda: torch.sort(x, stable=True))
    assert delta["kwker"] == 1, delta


def test_stats_and_reset(kto):
    kto.reset_stats()
    zero = {"calls": 0, "kwker": 0, "torch": 0, "fallback_reasons": {}}
    assert kto.stats() == {name: zero for name in kto.KERNELS}
    with kto.accelerated():
        torch.sort(big(), stable=True)
        torch.sort(torch.randn(10), stable=True)  # small: torch's kernel
        torch.sort(torch.randint(0, 50, (5000,)).to(torch.uint16), stable=True)  # dtype not covered
    with kto.disabled():
        torch.sort(big(), stable=True)
    s = kto.stats()["sort"]
    assert s["calls"] == 4 and s["kwker"] == 1 and s["torch"] == 3, s
    assert s["fallback_reasons"] == {"small": 1, "dtype": 1, "disabled": 1}, s
    kto.reset_stats()
    assert kto.stats()["sort"]["calls"] == 0


# -- threads and nesting --------------------------------------------------------------------------------------

def _in_thread(fn):
    out = {}

    def body():
        try:
            out["result"] = fn()
        except BaseException as exc:  # re-raised in the caller
            out["error"] = exc

    t = threading.Thread(target=body)
    t.start()
    t.join(120)
    assert not t.is_alive()
    if "error" in out:
        raise out["error"]
    return out["result"]


def test_accelerated_is_thread_local(kto):
    x = big()
    with kto.accelerated():  # registers (switched off for other threads)
        pass
    with kto.accelerated():
        _, other = counted(kto, lambda: _in_thread(lambda: torch.sort(x, stable=True)))
        _, here = counted(kto, lambda: torch.sort(x, stable=True))
    assert other["calls"] == 1 and other["kwker"] == 0 and other["fallback_reasons"] == {"disabled": 1}, other
    assert here["kwker"] == 1, here

    # ... and accelerated() in another thread does not switch it on here.
    entered, release = threading.Event(), threading.Event()

    def worker():
        with kto.accelerated():
            entered.set()
            release.wait(60)
        return True

    t = threading.Thread(target=worker)
    t.start()
    try:
        assert entered.wait(60)
        _, here = counted(kto, lambda: torch.sort(x, stable=True))
    finally:
        release.set()
        t.join(60)
    assert here["kwker"] == 0, here


def test_concurrent_sorts_from_threads(kto):
    """Several Python threads sorting at once, each with accelerated(): per-thread workspaces and the
    parallel_for hand-off must not mix their rows."""
    inputs = [sortdata.make(dt, shape, "ties_special", seed=k)
              for k, (dt, shape) in enumerate([(torch.float32, (40, 3000)), (torch.int64, (3000, 40)),
                                                (torch.bfloat16, (120000,)), (torch.int16, (9000, 7)),
                                                (torch.float64, (64, 700)), (torch.uint8, (50000,))])]
    with kto.disabled():
        expected = [[torch.sort(x, stable=s, dim=0) for s in (False, True)] for x in inputs]
    with kto.accelerated():  # register before the threads start
        pass
    results, errors = {}, []

    def worker(t):
        try:
            with kto.accelerated():
                for rep in range(4):
                    for k in range(len(inputs)):
                        j = (k + t) % len(inputs)
                        results[(t, rep, j)] = [torch.sort(inputs[j], stable=s, dim=0) for s in (False, True)]
        except BaseException as exc:
            errors.append(exc)

    before = kto.stats()["sort"]["kwker"]
    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    assert kto.stats()["sort"]["kwker"] - before == 4 * 4 * len(inputs) * 2
    for (t, rep, j), got in results.items():
        assert_bit_identical(expected[j], got, context=f"thread {t} repetition {rep} input {j}")


def test_install_is_process_wide_and_disabled_is_thread_local(kto):
    x = big()
    kto.install()
    _, other = counted(kto, lambda: _in_thread(lambda: torch.sort(x, stable=True)))
    assert other["kwker"] == 1, other
    with kto.disabled():
        _, here = counted(kto, lambda: torch.sort(x, stable=True))
        assert here["kwker"] == 0, here
        _, other = counted(kto, lambda: _in_thread(lambda: torch.sort(x, stable=True)))
        assert other["kwker"] == 1, other  # disabled() here leaves other threads on
    _, here = counted(kto, lambda: torch.sort(x, stable=True))
    assert here["kwker"] == 1, here


def test_nesting(kto):
    x = big()

    def served():
        return counted(kto, lambda: torch.sort(x, stable=True))[1]["kwker"] == 1

    assert not served()
    with kto.accelerated():
        assert served()
        with kto.disabled():
            assert not served()
            with kto.accelerated():
                assert served()
                with kto.accelerated():
                    assert served()
                assert served()
            assert not served()
            with kto.disabled():
                assert not served()
            assert not served()
        assert served()
    assert not served()

    with pytest.raises(RuntimeError, match="boom"):
        with kto.accelerated():
            raise RuntimeError("boom")
    assert not served()

    kto.install()
    assert served()
    with kto.disabled():
        assert not served()
        with kto.accelerated():
            assert served()
        assert not served()
    assert served()
    kto.uninstall()
    assert not served()


# -- autograd, TorchScript, torch.compile ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", (torch.float32, torch.float64, torch.bfloat16), ids=str)
@pytest.mark.parametrize("stable", (False, True))
def test_autograd(native, dtype, stable):
    base = sortdata.make(dtype, (60, 120), "few")  # ties: the gradient's scatter order matters
    weights = sortdata.make(dtype, (60, 120), "random", seed=5)

    def grads():
        out = []
        for dim in (0, -1):
            x = base.clone().requires_grad_()
            v, i = torch.sort(x, dim=dim, stable=stable, descending=dim == 0)
            (g1,) = torch.autograd.grad(v.sum(), x)
            x2 = base.clone().requires_grad_()
            v2, _ = torch.sort(x2, dim=dim, stable=stable)
            (g2,) = torch.autograd.grad((v2 * weights).sum(), x2)
            x3 = base.clone().requires_grad_()
            (g3,) = torch.autograd.grad((torch.msort(x3) * weights).sum(), x3)
            out += [v.detach(), i, g1, v2.detach(), g2, g3]
        return out

    both = run_both(grads)
    assert_same(both, context="gradients through sort")
    assert both.served >= 6, both.delta


def _scripted_sort(x: torch.Tensor, descending: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    v, i = torch.sort(x, dim=-1, descending=descending, stable=True)
    j = torch.argsort(x, dim=0)
    return v, i + j


with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)  # "torch.jit.script is deprecated"
    _scripted_sort = torch.jit.script(_scripted_sort)


def test_torchscript_hits_kwker(native):
    x = big(torch.float32, (64, 300))
    for _ in range(3):  # the profiling executor re-plans on the first calls
        both = run_both(_scripted_sort, x, True)
        assert_same(both, context="TorchScript")
        assert both.served == 2, both.delta


def test_torch_compile_hits_kwker(native):
    import torch._dynamo

    def f(x):
        a = torch.sort(x, stable=True, dim=-1, descending=True)
        b = torch.sort(x.t(), stable=False, dim=0)  # a transposed input: Inductor checks output strides
        return a.values, a.indices, b.values, b.indices

    x = big(torch.float32, (64, 300))
    with torch.no_grad():
        import kwker.torch_ops as kto

        with kto.disabled():
            eager = f(x)
        torch._dynamo.reset()
        try:
            compiled = torch.compile(f, fullgraph=True, dynamic=False)
            with kto.disabled():
                compiled(x)  # compile once up front: compiling may warn, and only the first side would
            for _ in range(2):
                both = run_both(compiled, x)
                assert_same(both, context="torch.compile")
                assert_bit_identical(eager, both.kwker, context="torch.compile vs eager torch")
                assert both.served == 2, both.delta
        finally:
            torch._dynamo.reset()


# -- errors --------------------------------------------------------------------------------------------------

def test_errors_match_torch(kto):
    x = big()
    cases = {
        "bad dim": lambda: torch.sort(x, dim=2),
        "bad negative dim": lambda: torch.sort(x, dim=-3, stable=True),
        "argsort bad dim": lambda: torch.argsort(x, dim=5),
        "0-dim bad dim": lambda: torch.sort(torch.tensor(1.0), dim=1),
        "complex": lambda: torch.sort(torch.randn(5000, dtype=torch.complex64), stable=True),
        "complex argsort": lambda: torch.argsort(torch.randn(50, 100, dtype=torch.complex128), dim=0),
        "out dtype": lambda: torch.sort(x, out=(torch.empty_like(x), torch.empty_like(x))),
        "out values dtype": lambda: torch.sort(x, out=(torch.empty_like(x, dtype=torch.half),
                                                       torch.empty_like(x, dtype=torch.long))),
    }
    for name, fn in cases.items():
        both = run_both(fn)
        assert type(both.torch).__name__ == "Raised", f"{name}: torch did not raise: {both.torch}"
        assert_same(both, context=name)
    bad = run_both(cases["bad dim"]).torch
    assert bad.type is IndexError and bad.message.startswith("Dimension out of range"), bad
    # with install() (global switch) too
    kto.install()
    for name in ("bad dim", "complex"):
        with pytest.raises(Exception) as info:
            cases[name]()
        expected = run_both(cases[name]).torch
        assert (type(info.value), str(info.value)) == (expected.type, expected.message)


# -- when Kwker cannot or must not load -----------------------------------------------------------------------

def test_kwker_disable_env():
    r = python("""
        import warnings
        warnings.simplefilter("error")  # switched off on purpose: no warning either
        import torch
        import kwker.torch_ops as kto, kwker._native as n
        assert kto.install() is False
        assert not kto.is_installed() and not n.available()
        assert "KWKER_DISABLE" in n.load_error(), n.load_error()
        with kto.accelerated():
            v, i = torch.sort(torch.tensor([3.0, 1.0, 2.0, 1.0]), stable=True)
        with kto.disabled():
            a = torch.argsort(torch.arange(5000.0).flip(0))
        assert v.tolist() == [1.0, 1.0, 2.0, 3.0] and i.tolist() == [1, 3, 2, 0]
        assert a[:3].tolist() == [4999, 4998, 4997]
        assert kto.stats() == {}
        kto.uninstall(); kto.reset_stats()
        assert "CPU (inactive)" not in torch._C._dispatch_dump("aten::sort.stable")
        assert "libkwker_torch" not in open("/proc/self/maps").read()
        print("OK")
    """, {"KWKER_DISABLE": "1"})
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), r.stdout + r.stderr


@pytest.mark.parametrize("cap", ("scalar", "avx2", "avx512", "nonsense"))
def test_kwker_isa_env_caps_the_isa(cap):
    """KWKER_ISA caps the ISA at start-up (never above what the CPU has; an unknown name is ignored),
    and the capped kernels still give torch's answer."""
    r = python("""
        import os, torch
        import kwker.torch_ops as kto, kwker._native as n
        order = ["scalar", "avx2", "avx512"]
        cap = os.environ["KWKER_ISA"]
        best = n.detected_isa()
        want = best if cap not in order else order[min(order.index(cap), order.index(best))]
        assert n.isa() == want, (n.isa(), want)
        x = (torch.randn(20000) * 4).round()
        with kto.accelerated():
            a = torch.sort(x)
        with kto.disabled():
            b = torch.sort(x)
        assert torch.equal(a.indices, b.indices) and torch.equal(a.values, b.values)
        assert kto.stats()["sort"]["kwker"] == 1, kto.stats()
        print("OK", n.isa())
    """, {"KWKER_ISA": cap})
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("how", ("missing", "corrupt"))
def test_unloadable_library_warns_once(tmp_path, how):
    path = tmp_path / "libkwker_torch.so"
    if how == "corrupt":
        path.write_bytes(b"\x7fELF this is not a shared library" * 10)
    r = python(f"""
        import pathlib, warnings
        import kwker._native as n
        n.library_path = lambda: pathlib.Path({str(path)!r})  # before the first load
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import torch
            import kwker, kwker.torch_ops as kto
            assert kto.install() is False
            assert not n.available() and not n.available() and not kto.is_installed()
            assert kto.stats() == {{}}
            with kto.accelerated():
                v, i = torch.sort(torch.tensor([2.0, 1.0, 3.0]))
            with kto.disabled():
                pass
            kto.uninstall()
        assert i.tolist() == [1, 0, 2]
        ours = [w for w in caught if "kwker" in str(w.message)]
        assert len(ours) == 1, [str(w.message) for w in caught]
        assert issubclass(ours[0].category, RuntimeWarning)
        print("WARNING:", ours[0].message)
        print("ERROR:", n.load_error())
        print("OK")
    """)
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), r.stdout + r.stderr
    assert "unavailable" in r.stdout
