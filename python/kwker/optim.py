"""torch.optim's Adam, AdamW and SGD stepped by Kwker in one pass, with torch's default results.

On CPU, torch.optim.Adam/AdamW/SGD (foreach and fused unset) step through `_single_tensor_adam` and
`_single_tensor_sgd`, which run one ATen kernel per line for every parameter. While the "adam" and
"sgd" families are registered (install(), accelerated()), those two functions are replaced by the
wrappers below: they hand the parameters Kwker covers to one native call (csrc/torch/optim_ops.cc;
kwker/optim.h has the arithmetic and why it is torch's bit for bit) and call torch's own function
on the rest. uninstall() puts torch's functions back. Optimizer state stays torch's own tensors, so
state dicts move freely between Kwker and plain torch.

Left to torch whole (the call goes to torch's function unchanged): amsgrad, capturable,
differentiable (any step run with grad mode on: its in-place updates must be recorded), gradient scaling (grad_scale/found_inf), Tensor hyper-parameters (lr, betas,
weight_decay), sparse gradients, tensor subclasses, tracing by torch.compile, and any call on a
thread where Kwker is off. foreach=True and fused=True never reach these functions. Left to torch per
parameter (optim_ops.cc): other dtypes (complex, float16, bfloat16), other devices, and layouts
where gradient or state strides differ from the parameter's.
"""

from __future__ import annotations

import importlib

import torch

from . import _native

# The modules by import (torch.optim's namespace drops their names).
_ADAM_MODULE = importlib.import_module("torch.optim.adam")
_SGD_MODULE = importlib.import_module("torch.optim.sgd")
_TORCH_ADAM = _ADAM_MODULE._single_tensor_adam
_TORCH_SGD = _SGD_MODULE._single_tensor_sgd
_PLAIN_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter)


def _numbers(*values) -> bool:
    return all(type(v) in (float, int) for v in values)


def _plain_tensors(*lists) -> bool:
    return all(type(t) in _PLAIN_TENSOR_TYPES for tensors in lists for t in tensors)


def _record_fallback(kernel: str, reason: str, count: int) -> None:
    if count:
        _native.ops().record_fallback(kernel, reason, count)


def _single_tensor_adam(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps,
                        grad_scale, found_inf, *, amsgrad, has_complex, beta1, beta2, lr, weight_decay,
                        eps, maximize, capturable, differentiable, decoupled_weight_decay):
    """torch.optim.adam._single_tensor_adam, on Kwker for the parameters it covers."""
    kwargs = dict(amsgrad=amsgrad, has_complex=has_complex, beta1=beta1, beta2=beta2, lr=lr,
                  weight_decay=weight_decay, eps=eps, maximize=maximize, capturable=capturable,
                  differentiable=differentiable, decoupled_weight_decay=decoupled_weight_decay)
    if torch.compiler.is_compiling():
        return _TORCH_ADAM(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps,
                           grad_scale, found_inf, **kwargs)
    if (amsgrad or capturable or differentiable or torch.is_grad_enabled()
            or grad_scale is not None or found_inf is not None
            or not _numbers(lr, beta1, beta2, weight_decay, eps) or not _plain_tensors(params, grads)):
        _record_fallback("adam", "arguments", len(params))
        return _TORCH_ADAM(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps,
                           grad_scale, found_inf, **kwargs)
    left = _native.ops().adam_step(params, grads, exp_avgs, exp_avg_sqs, state_steps, float(lr),
                                   float(beta1), float(beta2), float(weight_decay), float(eps),
                                   bool(maximize), bool(decoupled_weight_decay))
    if left:
        def pick(tensors):
            return [tensors[i] for i in left]

        params = pick(params)
        kwargs["has_complex"] = any(torch.is_complex(p) for p in params)
        _TORCH_ADAM(params, pick(grads), pick(exp_avgs), pick(exp_avg_sqs), max_exp_avg_sqs,
                    pick(state_steps), grad_scale, found_inf, **kwargs)


def _single_tensor_sgd(params, grads, momentum_buffer_list, grad_scale, found_inf, *, weight_decay,
                       momentum, lr, dampening, nesterov, maximize, has_sparse_grad):
    """torch.optim.sgd._single_tensor_sgd, on Kwker for the parameters it covers."""
    kwargs = dict(weight_decay=weight_decay, momentum=momentum, lr=lr, dampening=dampening,
                  nesterov=nesterov, maximize=maximize, has_sparse_grad=has_sparse_grad)
    if torch.compiler.is_compiling():
        return _TORCH_SGD(params, grads, momentum_buffer_list, grad_scale, found_inf, **kwargs)
    if (has_sparse_grad or torch.is_grad_enabled() or grad_scale is not None or found_inf is not None
            or not _numbers(weight_decay, momentum, lr, dampening) or not _plain_tensors(params, grads)):
        _record_fallback("sgd", "arguments", len(params))
        return _TORCH_SGD(params, grads, momentum_buffer_list, grad_scale, found_inf, **kwargs)
    has_momentum = momentum != 0
    # A missing buffer is created as torch creates it (grad.clone(): the gradient's layout); Kwker
    # fills it with the gradient, which is what torch's clone holds.
    first_step = [b is None for b in momentum_buffer_list] if has_momentum else []
    buffers = ([torch.empty_like(g) if b is None else b for b, g in zip(momentum_buffer_list, grads)]
               if has_momentum else [])
    left = _native.ops().sgd_step(params, grads, buffers, first_step, float(lr), float(momentum),
                                  float(dampening), float(weight_decay), bool(nesterov), bool(maximize))
    if has_momentum:
        served = set(range(len(params))).difference(left)
        for i in served:
            momentum_buffer_list[i] = buffers[i]
    if left:
        own_buffers = [momentum_buffer_list[i] for i in left] if has_momentum else []
        _TORCH_SGD([params[i] for i in left], [grads[i] for i in left], own_buffers, grad_scale,
                   found_inf, **kwargs)
        for i, buffer in zip(left, own_buffers):  # torch's function fills in the buffers it creates
            momentum_buffer_list[i] = buffer


_PATCHES = {
    "adam": (_ADAM_MODULE, "_single_tensor_adam", _TORCH_ADAM, _single_tensor_adam),
    "sgd": (_SGD_MODULE, "_single_tensor_sgd", _TORCH_SGD, _single_tensor_sgd),
}
FAMILIES = tuple(_PATCHES)


def patch(families) -> None:
    """Puts Kwker's step functions in place for the optimizer families in `families` and torch's own
    back for the others (_native.register and deregister call this)."""
    for family, (module, name, original, replacement) in _PATCHES.items():
        setattr(module, name, replacement if family in families else original)


def is_patched(family: str) -> bool:
    module, name, _, replacement = _PATCHES[family]
    return getattr(module, name) is replacement
