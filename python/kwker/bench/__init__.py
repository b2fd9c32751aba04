"""Kwker's benchmark: real-workload inputs timed on torch and on Kwker, results checked bit for bit.

    corpus        BenchInput and the registry of family modules (corpus_sort.py, ...)
    measure       times one input, both sides alternating, and checks its results
    exactness     first_difference / bit_exact: raw-bit comparison of results
    report        the table, the verdict, the JSON and the plot

Run it with `python -m kwker bench` (kwker/cli/bench.py); bench/README.md in the repository says more.
"""
