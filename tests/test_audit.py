"""`python -m kwker audit`: scripts run with and without Kwker in fresh processes, outputs compared."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
import torch

from kwker.__main__ import main
from kwker.cli.audit_outputs import Tolerance, difference
from trust_fixtures import cache_dir  # noqa: F401

EXACT = Tolerance()


@pytest.fixture
def workdir(tmp_path, cache_dir, monkeypatch):
    """The current directory for the audit and its scripts (outputs are written here)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write_script(workdir, body: str) -> str:
    path = workdir / "script.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


def audit(capsys, *args) -> tuple[int, str, str]:
    code = main(["audit", "-n", "2", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


SORTS = """
    import sys
    import torch
    x = torch.randn(5000, generator=torch.Generator().manual_seed(0))
    values, indices = torch.sort(x)
    print(__name__, sys.argv[1:], int(indices[:10].sum()), float(values[0]))
"""


def test_a_deterministic_script_agrees(workdir, capsys):
    code, out, err = audit(capsys, "--", write_script(workdir, SORTS), "--flag", "value")
    assert code == 0, out + err
    assert "outputs (stdout, exact): identical in all 4 runs" in out
    assert "torch " in out and "kwker " in out and "speed-up" in out
    assert "sort: 2 calls, 2 served by Kwker, 0 fell back to torch" in out
    assert "4/4 done" in err  # the progress bar


def test_the_script_sees_main_and_its_arguments(workdir, capsys, monkeypatch):
    import sys

    from kwker import _audit_runner

    monkeypatch.setattr(sys, "argv", list(sys.argv))  # the runner sets them, as `python script.py` would
    monkeypatch.setattr(sys, "path", list(sys.path))
    script = write_script(workdir, "import sys; print(__name__, sys.argv)\n")
    _audit_runner.main(["--kwker", "off", "--", script, "-n", "1", "--", "x"])
    assert capsys.readouterr().out.strip() == f"__main__ {[script, '-n', '1', '--', 'x']}"


def test_a_script_printing_unseeded_random_numbers_differs(workdir, capsys):
    code, out, err = audit(capsys, "--", write_script(workdir, "import random; print(random.random())\n"))
    assert code == 1, out + err
    assert "outputs (stdout, exact): DIFFER" in out
    assert "the script is not deterministic" in out


def test_a_crashing_script_fails_the_audit_and_shows_its_stderr(workdir, capsys):
    script = write_script(workdir, "print('working')\nraise RuntimeError('boom in the script')\n")
    code, out, err = audit(capsys, "--", script)
    assert code == 3
    assert "torch run 1 failed (exit status 1)" in err
    assert "RuntimeError: boom in the script" in err


def test_a_script_that_does_not_write_the_output_fails_the_audit(workdir, capsys):
    code, out, err = audit(capsys, "--output", "out.npy", "--", write_script(workdir, "print(1)\n"))
    assert code == 3
    assert "torch run 1 did not write out.npy" in err


WRITERS = {
    ".npy": """
        import numpy as np
        np.save("out.npy", np.array([[1.0, np.nan, -0.0], [2.5, np.inf, 3.0]], dtype=np.float32))
    """,
    ".pt": """
        import torch
        torch.save({"weight": torch.tensor([1.0, float("nan"), -0.0]),
                    "nested": [torch.arange(3), {"half": torch.ones(2, dtype=torch.bfloat16)}]}, "out.pt")
    """,
    ".json": """
        import json
        json.dump({"scores": [1, 2.5, -0.0], "name": "run", "extra": {"none": None}}, open("out.json", "w"))
    """,
    ".txt": """
        open("out.txt", "w").write("loss 0.125\\naccuracy 0.875\\n")
    """,
}


@pytest.mark.parametrize("suffix", list(WRITERS))
def test_each_output_format_is_compared(workdir, capsys, suffix):
    (workdir / f"out{suffix}").write_bytes(b"the user's own file")  # set aside, put back after
    code, out, err = audit(capsys, "--output", f"out{suffix}", "--", write_script(workdir, WRITERS[suffix]))
    assert code == 0, out + err
    assert f"outputs (out{suffix}, exact): identical in all 4 runs" in out
    assert (workdir / f"out{suffix}").read_bytes() == b"the user's own file"


NOISY_NPY = """
    import random
    import numpy as np
    np.save("out.npy", np.array([1.0 + random.random() * 1e-9, 2.0]))
"""


def test_a_tolerance_accepts_small_differences_and_only_those(workdir, capsys):
    script = write_script(workdir, NOISY_NPY)
    code, out, _ = audit(capsys, "--output", "out.npy", "--", script)
    assert code == 1 and "DIFFER" in out and "elements differ (exact)" in out
    code, out, _ = audit(capsys, "--output", "out.npy", "--atol", "1e-6", "--", script)
    assert code == 0 and "outputs (out.npy, rtol=0, atol=1e-06): agree within the tolerance" in out


def test_a_tolerance_applies_to_numbers_in_text(workdir, capsys):
    script = write_script(workdir, "import random\nprint(f'loss {1 + random.random() * 1e-9:.12f} ok')\n")
    code, out, _ = audit(capsys, "--rtol", "1e-6", "--", script)
    assert code == 0, out


def test_usage_errors(workdir, capsys):
    assert main(["audit"]) == 2
    assert main(["audit", "-n", "0", "--", write_script(workdir, "print(1)\n")]) == 2
    assert main(["audit", "--", "no-such-script.py"]) == 2
    assert "no such script" in capsys.readouterr().err


# --- the comparison itself, without processes ---------------------------------------------------

def nan_with_payload(payload: int) -> torch.Tensor:
    return torch.tensor([0x7FC00000 | payload], dtype=torch.int32).view(torch.float32)


def test_exact_means_bit_identical():
    assert difference(torch.tensor([float("nan"), 1.0]), torch.tensor([float("nan"), 1.0]), EXACT, "t") is None
    assert "differ" in difference(nan_with_payload(1), nan_with_payload(2), EXACT, "t")
    assert "differ" in difference(torch.tensor([0.0]), torch.tensor([-0.0]), EXACT, "t")
    assert "differ" in difference(np.array([0.0]), np.array([-0.0]), EXACT, "a")
    assert "dtype" in difference(torch.zeros(2), torch.zeros(2, dtype=torch.float64), EXACT, "t")
    assert "shape" in difference(np.zeros(2), np.zeros(3), EXACT, "a")
    ones, zeros = torch.ones(2, dtype=torch.bfloat16), torch.zeros(2, dtype=torch.bfloat16)
    assert "differ" in difference(ones, zeros, EXACT, "t")
    assert difference(float("nan"), float("nan"), EXACT, "x") is None
    assert difference(0.0, -0.0, EXACT, "x") is not None


def test_tolerance_applies_to_floats_only():
    tol = Tolerance(rtol=1e-3)
    assert difference(np.array([1.0, np.nan]), np.array([1.0005, np.nan]), tol, "a") is None
    assert difference(np.array([1.0]), np.array([1.01]), tol, "a") is not None
    assert difference(np.array([1000]), np.array([1001]), tol, "a") is not None  # integers stay exact
    assert difference(torch.tensor([2.0]), torch.tensor([2.001]), tol, "t") is None
    assert difference({"x": [1.0, "a"]}, {"x": [1.0001, "a"]}, tol, "j") is None
    assert difference({"x": [1.0, "a"]}, {"x": [1.0001, "b"]}, tol, "j") is not None
    assert difference("loss 1.0000 (step 3)", "loss 1.0001 (step 3)", tol, "s") is None
    assert difference("loss 1.0000 (step 3)", "loss 1.0001 (step 4)", Tolerance(atol=1e-3), "s") is not None


def test_containers_report_where_they_differ():
    found = difference({"a": [torch.zeros(2), {"b": torch.ones(1)}]},
                       {"a": [torch.zeros(2), {"b": torch.zeros(1)}]}, EXACT, "out.pt")
    assert found.startswith("out.pt['a'][1]['b']: 1 of 1 elements differ")
    assert "keys differ" in difference({"a": 1}, {"b": 1}, EXACT, "j")
    assert "2 items vs 3" in difference([1, 2], [1, 2, 3], EXACT, "j")
    assert difference(json.loads("[1, 2.5]"), json.loads("[1, 2.5]"), EXACT, "j") is None
