"""Fixtures for Kwker's differential tests against torch.

    native       asserts the native library loaded (tests FAIL, never skip, without it)
    isa          parametrized over every ISA this CPU supports ("scalar", "avx2", "avx512"): caps Kwker
                 to it for the test, restores the previous ISA after. KWKER_TEST_ISAS=avx2,scalar
                 narrows the list.
    exact        the exactness helper module (assert_bit_identical, run_both, ...)
"""

from __future__ import annotations

import os
import pathlib
import sys
import tempfile

import pytest

# The probe verdict the tests' install()/accelerated() calls cache goes to a folder of this test
# session, never to the user's ~/.cache/kwker.
os.environ["KWKER_CACHE_DIR"] = tempfile.mkdtemp(prefix="kwker-test-cache-")

ROOT = pathlib.Path(__file__).resolve().parents[1]
TESTS = pathlib.Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))
try:
    import kwker  # noqa: F401  (the installed package, with its native library)
except ImportError:  # not installed: the in-tree sources, so tests run and fail on available()
    sys.path.insert(0, str(ROOT / "python"))

import exactness  # noqa: E402

ALL_ISAS = ("scalar", "avx2", "avx512")


def supported_isas() -> list[str]:
    from kwker import _native

    if not _native.available():
        names = list(ALL_ISAS)  # every test using them fails on the `native` fixture anyway
    else:
        best = _native.detected_isa()
        names = list(ALL_ISAS[: ALL_ISAS.index(best) + 1])
    wanted = os.environ.get("KWKER_TEST_ISAS")
    if wanted:
        names = [n for n in names if n in {w.strip() for w in wanted.split(",")}]
    return names


def pytest_generate_tests(metafunc):
    if "isa" in metafunc.fixturenames:
        names = supported_isas()
        metafunc.parametrize("isa", names, ids=names, indirect=True)


@pytest.fixture
def native():
    exactness.require_native()
    from kwker import _native

    return _native


@pytest.fixture
def isa(request, native):
    name = request.param
    previous = native.isa()
    got = native.set_isa_cap(name)
    assert got == name, f"set_isa_cap({name!r}) gave {got!r}"
    try:
        yield name
    finally:
        native.set_isa_cap(previous)


@pytest.fixture
def exact():
    return exactness


@pytest.fixture(autouse=True)
def _kwker_state_is_restored():
    """Every test leaves Kwker as it found it: not installed process-wide, this thread's switch unset."""
    yield
    from kwker import _native

    if _native.available():
        import kwker.torch_ops as kto

        installed = kto.is_installed()
        state = _native.ops().set_thread_state(-1)
        if installed:
            kto.uninstall()
        assert not installed, "test left kto.install() in effect"
        assert state == -1, f"test left this thread's Kwker switch at {state}"
