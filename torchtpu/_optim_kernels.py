"""The kernels behind torch.optim's `fused=True` (Adam, AdamW, SGD, Adagrad) and behind
torch.amp.GradScaler on tpu.

torch.optim calls one ATen op per step for all parameters of a device and dtype. On CPU and CUDA
that op is a hand-written kernel; here it is the same arithmetic written as tpu ops, in the
order and precision CPU's kernel uses (float32 math for float32, bfloat16 and float16 values,
bias corrections in float64 where the platform has it), so that in fused mode the whole update
is recorded into the step's program. `grad_scale` unscales the gradients (and stores them
unscaled, as CPU does); where `found_inf` is 1 nothing is written, without a host read.
GradScaler's unscale and scale update are written the same way: on device, no host read.
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import _C

_lib: torch.library.Library | None = None


def _opmath(t: Tensor) -> torch.dtype:
    return torch.float64 if t.dtype == torch.float64 else torch.float32


def _wide() -> torch.dtype:
    """The dtype of the step-dependent scalars: CPU computes them in double."""
    return torch.float32 if _C.platform_name() == "tpu" else torch.float64


def _host_lr(lr: float | Tensor) -> float | Tensor:
    return lr.item() if isinstance(lr, Tensor) and lr.device.type == "cpu" else lr


def _write(dst: Tensor, new: Tensor, skip: Tensor | None) -> None:
    new = new.to(dst.dtype)
    dst.copy_(new if skip is None else torch.where(skip, dst, new))


def _grad(grad: Tensor, m: torch.dtype, grad_scale: Tensor | None, skip: Tensor | None) -> Tensor:
    """The gradient in math precision, unscaled; the unscaled value is also stored."""
    g = grad.to(m)
    if grad_scale is not None:
        g = g / grad_scale.to(m)
        _write(grad, g, skip)
    return g


def _start(
    p: Tensor,
    grad: Tensor,
    grad_scale: Tensor | None,
    skip: Tensor | None,
    maximize: bool,
    weight_decay: float,
) -> tuple[torch.dtype, Tensor, Tensor]:
    """Every kernel's first steps for one parameter: the math dtype, the gradient (unscaled,
    negated for maximize, with weight_decay * param added) and the parameter in math dtype."""
    m = _opmath(p)
    g = _grad(grad, m, grad_scale, skip)
    if maximize:
        g = -g
    w = p.to(m)
    if weight_decay != 0:
        g = g + w * weight_decay
    return m, g, w


def _skip(found_inf: Tensor | None) -> Tensor | None:
    return None if found_inf is None else found_inf == 1


def _adam(adamw: bool):
    def step(
        params: list[Tensor],
        grads: list[Tensor],
        exp_avgs: list[Tensor],
        exp_avg_sqs: list[Tensor],
        max_exp_avg_sqs: list[Tensor],
        state_steps: list[Tensor],
        *,
        lr: float | Tensor,
        beta1: float,
        beta2: float,
        weight_decay: float,
        eps: float,
        amsgrad: bool,
        maximize: bool,
        grad_scale: Tensor | None = None,
        found_inf: Tensor | None = None,
    ) -> None:
        lr = _host_lr(lr)
        skip = _skip(found_inf)
        wide = _wide()
        for i, p in enumerate(params):
            # AdamW decays the parameter, Adam the gradient.
            m, g, w = _start(p, grads[i], grad_scale, skip, maximize, 0 if adamw else weight_decay)
            if adamw and weight_decay != 0:
                w = w * (1 - lr * weight_decay)
            exp_avg = exp_avgs[i].to(m).lerp(g, 1 - beta1)
            exp_avg_sq = exp_avg_sqs[i].to(m) * beta2 + g * g * (1 - beta2)
            s = state_steps[i].to(wide)
            step_size = (lr / (1 - torch.pow(beta1, s))).to(m)
            bc2_sqrt = (1 - torch.pow(beta2, s)).sqrt().to(m)
            if amsgrad:
                most = torch.maximum(max_exp_avg_sqs[i].to(m), exp_avg_sq)
                _write(max_exp_avg_sqs[i], most, skip)
                denom = most.sqrt() / bc2_sqrt + eps
            else:
                denom = exp_avg_sq.sqrt() / bc2_sqrt + eps
            _write(exp_avgs[i], exp_avg, skip)
            _write(exp_avg_sqs[i], exp_avg_sq, skip)
            _write(p, w - step_size * exp_avg / denom, skip)

    return step


def _sgd(
    params: list[Tensor],
    grads: list[Tensor],
    momentum_buffer_list: list[Tensor],
    *,
    weight_decay: float,
    momentum: float,
    lr: float | Tensor,
    dampening: float,
    nesterov: bool,
    maximize: bool,
    is_first_step: bool,
    grad_scale: Tensor | None = None,
    found_inf: Tensor | None = None,
) -> None:
    lr = _host_lr(lr)
    skip = _skip(found_inf)
    for i, p in enumerate(params):
        m, g, w = _start(p, grads[i], grad_scale, skip, maximize, weight_decay)
        if momentum != 0:
            buf = (
                g
                if is_first_step
                else momentum_buffer_list[i].to(m) * momentum + g * (1 - dampening)
            )
            _write(momentum_buffer_list[i], buf, skip)
            g = g + buf * momentum if nesterov else buf
        _write(p, w - g * lr, skip)


def _adagrad(
    params: list[Tensor],
    grads: list[Tensor],
    state_sums: list[Tensor],
    state_steps: list[Tensor],
    *,
    lr: float | Tensor,
    lr_decay: float,
    weight_decay: float,
    eps: float,
    maximize: bool,
    grad_scale: Tensor | None = None,
    found_inf: Tensor | None = None,
) -> None:
    lr = _host_lr(lr)
    skip = _skip(found_inf)
    wide = _wide()
    for i, p in enumerate(params):
        m, g, w = _start(p, grads[i], grad_scale, skip, maximize, weight_decay)
        state_sum = state_sums[i].to(m) + g * g
        _write(state_sums[i], state_sum, skip)
        clr = (lr / (1 + (state_steps[i].to(wide) - 1) * lr_decay)).to(m)
        _write(p, w - clr * g / (state_sum.sqrt() + eps), skip)


def _unscale(grads: list[Tensor], found_inf: Tensor, inv_scale: Tensor) -> None:
    """Multiplies each gradient by inv_scale; found_inf becomes 1 if any value is not finite."""
    bad = None
    for t in grads:
        v = t.to(_opmath(t))
        worse = ~torch.isfinite(v).all()
        bad = worse if bad is None else bad | worse
        t.copy_(v * inv_scale.to(v.dtype))  # v * 1 is v: CPU's skip of inv_scale == 1
    if bad is not None:
        found_inf.copy_(torch.where(bad, torch.ones_like(found_inf), found_inf))


def _update_scale(
    scale: Tensor,
    growth_tracker: Tensor,
    found_inf: Tensor,
    scale_growth_factor: float,
    scale_backoff_factor: float,
    growth_interval: int,
) -> Tensor:
    """Backs off after a step with non-finite gradients; grows after growth_interval good ones
    (not past float32's range); as CPU's kernel, whose products are taken in double."""
    wide = scale.to(_wide())
    inf = found_inf != 0
    successful = growth_tracker + 1
    grow = ~inf & (successful == growth_interval)
    grown = (wide * scale_growth_factor).to(scale.dtype)
    backed_off = (wide * scale_backoff_factor).to(scale.dtype)
    new_scale = torch.where(inf, backed_off, torch.where(grow & grown.isfinite(), grown, scale))
    growth_tracker.copy_(torch.where(inf | grow, torch.zeros_like(successful), successful))
    scale.copy_(new_scale)
    return scale


def install() -> None:
    global _lib
    if _lib is not None:
        return
    _lib = torch.library.Library("aten", "IMPL")  # noqa: TOR901 (kernels for existing ops)
    for name, fn in (
        ("_fused_adam_", _adam(adamw=False)),
        ("_fused_adamw_", _adam(adamw=True)),
        ("_fused_sgd_", _sgd),
        ("_fused_adagrad_", _adagrad),
    ):
        _lib.impl(name, fn, "PrivateUse1")
        _lib.impl(name + ".tensor_lr", fn, "PrivateUse1")
    _lib.impl("_amp_foreach_non_finite_check_and_unscale_", _unscale, "PrivateUse1")
    _lib.impl("_amp_update_scale_", _update_scale, "PrivateUse1")
