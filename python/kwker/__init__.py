"""Kwker: bit-exact, faster CPU kernels for PyTorch.

    import kwker.torch_ops as kto
    kto.install()          # torch's CPU kernels for the covered ops run on Kwker, process-wide
"""

__version__ = "0.1.0"
