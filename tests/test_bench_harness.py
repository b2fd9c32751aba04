"""The benchmark harness: its bit-exactness checker, its measurement of one input, and a --quick run
of `python -m kwker bench` on a few small corpus inputs (JSON and plot written, exit status)."""

import contextlib
import copy
import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch

import kwker
import kwker.torch_ops as kto
from kwker.bench import corpus
from kwker.bench.exactness import bit_exact, first_difference
from kwker.bench.measure import RepeatPolicy, Side, measure

# In corpus order, the order a run reports them in.
SMALL_INPUTS = ("sort/length-bucket-10k", "sort/nms-frcnn-1000", "sort/moe-deepseek-experts-top8")


def float32_from_bits(*bits):
    return torch.tensor(bits, dtype=torch.int32).view(torch.float32)


def test_equal_tensors_and_tuples_are_bit_exact():
    x = torch.randn(5, 7, generator=torch.Generator().manual_seed(0))
    assert bit_exact(torch.sort(x), torch.sort(x.clone()))
    assert bit_exact({"a": [x, 3]}, {"a": [x.clone(), 3]})
    assert bit_exact(torch.empty(0, 3), torch.empty(0, 3))


def test_same_nan_bits_are_exact_though_nan_is_not_equal_to_itself():
    nan = float32_from_bits(0x7FC00000, 0x7FC00001)
    assert not torch.equal(nan, nan.clone())  # why value comparison would not do
    assert bit_exact(nan, nan.clone())


def test_nan_payload_difference_is_flagged():
    difference = first_difference(float32_from_bits(0x3F800000, 0x7FC00000),
                                  float32_from_bits(0x3F800000, 0x7FC00001))
    assert difference is not None
    assert "1 of 2 elements differ, first at (1,)" in difference
    assert "0x7fc00000" in difference and "0x7fc00001" in difference


def test_python_floats_are_compared_by_bits():
    assert bit_exact([float("nan")], [float("nan")])
    assert not bit_exact(0.0, -0.0)


def test_signed_zero_difference_is_flagged():
    positive, negative = torch.tensor([0.0, 1.0]), torch.tensor([-0.0, 1.0])
    assert torch.equal(positive, negative)  # why value comparison would not do
    assert "0x80000000" in first_difference(positive, negative)
    assert not bit_exact(positive.bfloat16(), negative.bfloat16())


def test_difference_in_indices_of_a_sort_result_is_located():
    x = torch.tensor([[3.0, 1.0, 2.0]])
    expected = torch.sort(x)
    actual = torch.return_types.sort((expected.values.clone(), expected.indices.flip(-1)))
    assert first_difference(expected, actual).startswith("output[1]: 2 of 3 elements differ, first at (0, 0)")


@pytest.mark.parametrize("actual, what", [
    (torch.zeros(2, 3, dtype=torch.float64), "dtype"),
    (torch.zeros(3, 2), "shape"),
    (torch.zeros(3, 2).t(), "strides"),
    (torch.zeros(3, 3)[1:], "storage offset"),
    ((torch.zeros(2, 3),), "Tensor expected"),
])
def test_dtype_shape_strides_and_type_differences_are_flagged(actual, what):
    assert what in first_difference(torch.zeros(2, 3), actual)


def test_measure_flags_a_call_whose_result_changes():
    # Without a bit-exact pair of kernels at hand, a call that returns different bits on every run
    # stands in for a Kwker kernel that disagrees with torch.
    changing = corpus.BenchInput("test", "changing", "add rand", "no workload: checks the checker",
                                 build=lambda gen: (torch.zeros(8),), call=lambda x: x + torch.rand(8))
    record = measure(changing, RepeatPolicy(min_runs=2, min_time_s=0.0))
    assert record["exact"] is False
    assert "elements differ" in record["difference"]
    assert record["torch"]["runs"] == record["kwker"]["runs"] >= 2


def test_side_counts_what_kwker_served_from_stats_deltas(monkeypatch):
    # kto.stats() as the native library keeps it: cumulative counters that each served or fallen-back
    # call increments. Here each call makes two sort calls, one served, one fallen back.
    counters = {"sort": {"calls": 5, "kwker": 3, "torch": 2, "fallback_reasons": {"too short": 2}}}

    def two_sort_calls():
        sort = counters["sort"]
        sort["calls"] += 2
        sort["kwker"] += 1
        sort["torch"] += 1
        sort["fallback_reasons"]["too short"] += 1

    monkeypatch.setattr(kto, "stats", lambda: copy.deepcopy(counters))
    entry = corpus.BenchInput("test", "counted", "two sorts", "no workload: checks the counting",
                              build=lambda gen: (), call=two_sort_calls)
    side = Side(contextlib.nullcontext)
    for _ in range(3):
        side.run(entry, ())
    assert (side.counts.calls, side.counts.served) == (6, 3)
    assert side.counts.fallback_reasons == {"sort: too short": 3}


def test_corpus_ids_are_unique_and_entries_complete():
    inputs = corpus.all_inputs()
    assert len(corpus.select(inputs, ["sort"])) >= 36
    for entry in inputs:
        assert entry.id.count("/") == 1 and " " not in entry.id
        assert entry.op and entry.origin and "\n" not in entry.origin
    for input_id in SMALL_INPUTS:
        assert input_id in [entry.id for entry in inputs]


def test_small_inputs_build_deterministically():
    for entry in corpus.select(corpus.all_inputs(), id_substrings=SMALL_INPUTS):
        assert bit_exact(entry.make_arguments(), entry.make_arguments())


def run_bench_cli(tmp_path, *options):
    # A subprocess, so that --threads does not change this process's torch; PYTHONPATH makes it
    # import the same kwker package as this test did.
    env = {**os.environ, "PYTHONPATH": str(pathlib.Path(kwker.__file__).parents[1])}
    command = [sys.executable, "-m", "kwker", "bench", *options]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def run_bench(tmp_path, *options):
    return run_bench_cli(tmp_path, "--quick", "--filter", ",".join(SMALL_INPUTS), *options)


def test_quick_bench_writes_json_and_plot(tmp_path):
    json_path, plot_path = tmp_path / "out" / "results.json", tmp_path / "out" / "ratios.png"
    done = run_bench(tmp_path, "--json", str(json_path), "--plot", str(plot_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verdict: all 3 outputs bit-exact" in done.stdout

    results = json.loads(json_path.read_text())
    metadata = results["metadata"]
    for key in ("cpu", "kwker_isa", "torch_version", "kwker_version", "threads", "date", "python_version",
                "build_info", "kwker_available"):
        assert key in metadata
    assert metadata["threads"] == 1 and metadata["torch_version"] == torch.__version__
    assert [r["id"] for r in results["records"]] == list(SMALL_INPUTS)
    for record in results["records"]:
        assert record["exact"] is True and record["difference"] is None and record["error"] is None
        assert record["ratio"] > 0 and record["torch"]["runs"] >= 3 and record["kwker"]["median_ms"] > 0
        assert "served" in record and record["family"] == "sort"
    assert results["summary"]["not_exact"] == [] and results["summary"]["inputs"] == 3
    assert plot_path.read_bytes().startswith(b"\x89PNG")


def test_default_output_paths_and_no_plot(tmp_path):
    done = run_bench(tmp_path, "--no-plot")
    assert done.returncode == 0, done.stdout + done.stderr
    written = list((tmp_path / "bench-results").iterdir())
    assert len(written) == 1 and written[0].name.startswith("bench-") and written[0].suffix == ".json"


def test_unknown_op_family_is_refused(tmp_path):
    done = run_bench(tmp_path, "--ops", "nosuchop", "--no-plot")
    assert done.returncode == 2 and "unknown op families" in done.stdout


def test_optimizer_section_times_three_ways_and_checks_exactness(tmp_path):
    json_path = tmp_path / "optim.json"
    done = run_bench_cli(tmp_path, "--ops", "optim", "--filter", "mlp", "--optim-threads", "1,2",
                         "--quick", "--json", str(json_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "optimizer steps bit-exact with torch's default path: yes" in done.stdout
    rows = json.loads(json_path.read_text())["optimizers"]
    assert [(r["name"], r["threads"]) for r in rows] == [("adamw-mlp-1.3M", 1), ("adamw-mlp-1.3M", 2)]
    for row in rows:
        assert row["exact"] and row["served"] == 1.0 and row["parameters"] == 1333770
        assert min(row["default_ms"], row["fused_ms"], row["kwker_ms"]) > 0 and row["runs"] >= 20


def test_optimizer_workload_shapes_are_the_models():
    from kwker.bench import optimizers

    counts = {w.name: sum(torch.Size(s).numel() for s in w.shapes()) for w in optimizers.WORKLOADS}
    assert counts["sgd-resnet18-11.7M"] == 11689512  # torchvision.models.resnet18()
    assert counts["adamw-mlp-1.3M"] == 784 * 1024 + 1024 + 1024 * 512 + 512 + 512 * 10 + 10
