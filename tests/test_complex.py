"""Complex tensors and torch.fft on tpu, against PyTorch on CPU: storage and copies, the parts
as views (writes included), complex scalars, PyTorch's lazy conjugate and negative bits, the
rotary-embedding pattern of Meta's Llama code, and FFTs with every normalization."""

import pytest
import torch

DEV = "tpu"


def same(actual: torch.Tensor, expected: torch.Tensor, tol: float = 1e-5) -> None:
    torch.testing.assert_close(actual.cpu(), expected, atol=tol, rtol=tol)


@pytest.fixture
def z() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randn(3, 4, dtype=torch.complex64, generator=g)


def test_copies_and_arithmetic_match_cpu(z):
    w = z.flip(0)
    zt, wt = z.to(DEV), w.to(DEV)
    assert zt.dtype == torch.complex64 and zt.device.type == DEV
    same(zt, z)
    same(zt * wt + wt / zt - zt.exp(), z * w + w / z - z.exp())
    same(zt @ wt.T, z @ w.T)
    same(zt.sum(0), z.sum(0))
    same(zt.abs(), z.abs())
    same(zt.angle(), z.angle())


def test_parts_are_views_that_write_through(z):
    zt = z.to(DEV)
    zt.real.mul_(2)
    torch.view_as_real(zt)[..., 1].add_(1)
    expected = z.clone()
    expected.real.mul_(2)
    torch.view_as_real(expected)[..., 1].add_(1)
    same(zt, expected)
    same(torch.view_as_complex(torch.view_as_real(zt) * 3), expected * 3)


def test_complex_python_scalars(z):
    same((z.to(DEV) + 1j) * (0.5 - 2j), (z + 1j) * (0.5 - 2j))


def test_conjugate_and_negative_bits_are_applied(z):
    w = z.flip(1)
    zt, wt = z.to(DEV), w.to(DEV)
    assert wt.mH.is_conj()
    same(zt @ wt.mH, z @ w.mH)
    same(zt.conj().imag * 1, z.conj().imag * 1)  # a negative view of the parts
    same(zt.conj().cpu().resolve_conj(), z.conj().resolve_conj())
    same(zt.conj().resolve_conj(), z.conj().resolve_conj())


def test_rotary_embedding_as_in_llama_reference_code():
    g = torch.Generator().manual_seed(1)
    q = torch.randn(2, 5, 4, 8, generator=g)
    freqs = torch.outer(torch.arange(5.0), 1.0 / (10000 ** (torch.arange(0, 8, 2.0) / 8)))

    def rope(x, f):
        cis = torch.polar(torch.ones_like(f), f)
        xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(xc * cis.view(1, 5, 1, 4)).flatten(3)

    same(rope(q.to(DEV), freqs.to(DEV)), rope(q, freqs))


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_fft_family_matches_cpu(norm):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(4, 6, 5, generator=g)
    z = torch.randn(4, 6, 5, dtype=torch.complex64, generator=g)
    cases = [
        (torch.fft.fft, z, {}),
        (torch.fft.ifft, z, {"dim": 1}),
        (torch.fft.fftn, z, {}),
        (torch.fft.rfft, x, {}),
        (torch.fft.rfft2, x, {"s": (4, 8)}),
        (torch.fft.irfft, z, {"n": 7}),
        (torch.fft.irfftn, z, {}),
        (torch.fft.hfft, z, {}),
        (torch.fft.ihfft, x, {}),
    ]
    for fn, inp, kw in cases:
        same(fn(inp.to(DEV), norm=norm, **kw), fn(inp, norm=norm, **kw), tol=1e-4)


def test_fft_gradients_match_cpu():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(6, 8, generator=g, requires_grad=True)
    xt = x.detach().to(DEV).requires_grad_()
    for inp in (x, xt):
        torch.fft.irfft(torch.fft.rfft(inp) * torch.arange(5.0, device=inp.device), n=8).pow(
            2
        ).sum().backward()
    same(xt.grad, x.grad, tol=1e-4)


def test_complex_solves_and_factorizations_match_cpu():
    g = torch.Generator().manual_seed(1)
    a = torch.randn(2, 4, 4, dtype=torch.complex64, generator=g)
    b = torch.randn(2, 4, 3, dtype=torch.complex64, generator=g)
    bt = torch.randn(2, 3, 4, dtype=torch.complex64, generator=g)
    at = a.to(DEV)
    same(torch.linalg.solve(at, b.to(DEV)), torch.linalg.solve(a, b))
    same(torch.linalg.solve(at, bt.to(DEV), left=False), torch.linalg.solve(a, bt, left=False))
    lu, piv = torch.linalg.lu_factor(a)
    lut, pivt = torch.linalg.lu_factor(at)
    same(lut, lu)
    assert torch.equal(pivt.cpu(), piv)  # LAPACK's pivots: largest |re| + |im|
    for left in (True, False):
        for adjoint in (True, False):
            rhs = b if left else bt
            same(torch.linalg.lu_solve(lut, pivt, rhs.to(DEV), left=left, adjoint=adjoint),
                 torch.linalg.lu_solve(lu, piv, rhs, left=left, adjoint=adjoint))
    same(torch.linalg.inv(at), torch.linalg.inv(a))
    h = a @ a.mH + torch.eye(4)
    chol = torch.linalg.cholesky(h)
    same(torch.linalg.cholesky(h.to(DEV)), chol)
    same(torch.cholesky_solve(b.to(DEV), chol.to(DEV)), torch.cholesky_solve(b, chol))


@pytest.mark.parametrize("shape", [(2, 5, 3), (3, 3), (3, 5)])
def test_complex_householder_qr_matches_lapack(shape):
    # zgeqr2/zung2r/zunm2r: the same reflectors (complex tau) and signs as CPU's LAPACK.
    g = torch.Generator().manual_seed(7)
    a = torch.randn(shape, dtype=torch.complex64, generator=g)
    at = a.to(DEV)
    for mode in ("reduced", "complete", "r"):
        for ours, cpus in zip(torch.linalg.qr(at, mode=mode), torch.linalg.qr(a, mode=mode)):
            same(ours, cpus, 1e-4)
    geqrf, tau = torch.geqrf(a)
    geqrft, taut = torch.geqrf(at)
    same(geqrft, geqrf, 1e-4)
    same(taut, tau, 1e-4)
    k = min(shape[-2:])
    geqrf, geqrft = geqrf[..., :k], geqrft[..., :k]  # householder_product needs m >= n
    hp = torch.linalg.householder_product
    same(hp(geqrft, taut), hp(geqrf, tau), 1e-4)
    c = torch.randn(shape[-2], 2, dtype=torch.complex64, generator=g)
    for transpose in (False, True):
        same(torch.ormqr(geqrft, taut, c.to(DEV).expand(*shape[:-2], -1, -1), transpose=transpose),
             torch.ormqr(geqrf, tau, c.expand(*shape[:-2], -1, -1), transpose=transpose), 1e-4)


def test_complex_reductions_products_and_determinants_match_cpu(z):
    # Each of these once took the real part or skipped a conjugate and returned a wrong number.
    w = torch.randn(3, 4, dtype=torch.complex64, generator=torch.Generator().manual_seed(8))
    zt, wt = z.to(DEV), w.to(DEV)
    same(torch.vdot(zt[0], wt[0]), torch.vdot(z[0], w[0]))
    same(torch.linalg.vecdot(zt, wt), torch.linalg.vecdot(z, w))
    for dim in (None, 1):
        same(torch.var(zt, dim), torch.var(z, dim))
        ours, cpus = torch.std_mean(zt, dim, correction=0), torch.std_mean(z, dim, correction=0)
        for a, b in zip(ours, cpus):
            same(a, b)
    same(torch.lerp(zt, wt, 0.3), torch.lerp(z, w, 0.3))
    same(torch.lerp(zt, wt, wt), torch.lerp(z, w, w))
    m = torch.randn(2, 3, 3, dtype=torch.complex64, generator=torch.Generator().manual_seed(9))
    for ours, cpus in zip(torch.linalg.slogdet(m.to(DEV)), torch.linalg.slogdet(m)):
        same(ours, cpus, 1e-4)
    same(torch.logdet(m.to(DEV)), torch.logdet(m), 1e-4)
    same(torch.linalg.det(m.to(DEV)), torch.linalg.det(m), 1e-4)


def test_complex_gradients_and_transposed_solves_match_cpu():
    # tanh/sigmoid backward conjugate the derivative; triangular_solve's transpose is A^T (not
    # A^H); det's backward solves with the LU of A itself when A is complex.
    g = torch.Generator().manual_seed(10)
    x = torch.randn(2, 3, 3, dtype=torch.complex64, generator=g)
    b = torch.randn(2, 3, 2, dtype=torch.complex64, generator=g)
    tri = x.triu() + 3 * torch.eye(3)
    for transpose in (False, True):
        same(torch.triangular_solve(b.to(DEV), tri.to(DEV), transpose=transpose).solution,
             torch.triangular_solve(b, tri, transpose=transpose).solution)
    losses = (
        lambda a: torch.tanh(a).abs().sum(),
        lambda a: torch.sigmoid(a).abs().sum(),
        lambda a: torch.linalg.det(a).abs(),
        lambda a: torch.linalg.slogdet(a).logabsdet.sum() + torch.linalg.slogdet(a).sign.real.sum(),
    )
    for loss in losses:
        grads = []
        for dev in ("cpu", DEV):
            a = x.detach().clone().to(dev).requires_grad_()
            loss(a).sum().backward()
            grads.append(a.grad.cpu())
        same(grads[1], grads[0], 1e-4)


def test_complex_logaddexp_and_logcumsumexp_follow_cpu_branch_and_infinities():
    # CPU combines in sequence, so its imaginary parts (a logarithm's branch) accumulate; a tree
    # scan gave values 2 pi apart.
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([
        [complex(-inf, 0), 1 + 2j, complex(inf, 1), complex(inf, -1), complex(nan, 0)],
        [complex(-inf, 1), complex(-inf, 2), 0.5j, -2 - 7j, 4 + 4j],
    ])
    y = torch.randn(3, 40, dtype=torch.complex64, generator=torch.Generator().manual_seed(11)) * 4
    for t in (x, y):
        torch.testing.assert_close(torch.logcumsumexp(t.to(DEV), 1).cpu(), torch.logcumsumexp(t, 1),
                                   atol=1e-4, rtol=1e-5, equal_nan=True)
    a, b = x[0], x[1]
    torch.testing.assert_close(torch.logaddexp(a.to(DEV), b.to(DEV)).cpu(), torch.logaddexp(a, b),
                               equal_nan=True)


def test_complex_ops_without_a_complex_rule_say_so(z):
    h = z[:, :3] @ z[:, :3].mH
    with pytest.raises(NotImplementedError, match="complex inputs are not supported"):
        torch.linalg.ldl_factor(h.to(DEV))[0].cpu()


def test_complex_lstsq_matrix_exp_and_renorm_match_cpu(z):
    g = torch.Generator().manual_seed(12)
    b = torch.randn(3, 2, dtype=torch.complex64, generator=g)
    for a, rhs in ((z, b), (z.mH, torch.randn(4, 2, dtype=torch.complex64, generator=g))):
        ours = torch.linalg.lstsq(a.to(DEV), rhs.to(DEV), driver="gelsd")
        cpus = torch.linalg.lstsq(a, rhs, driver="gelsd")
        for name in ("solution", "residuals", "rank", "singular_values"):
            same(getattr(ours, name), getattr(cpus, name), 1e-4)
    m = z[:, :3] * 0.7
    same(torch.linalg.matrix_exp(m.to(DEV)), torch.linalg.matrix_exp(m), 1e-4)
    same(torch.renorm(z.to(DEV), 2, 0, 1.0), torch.renorm(z, 2, 0, 1.0))


def test_eig_runs_lapack_on_the_host_and_differentiates_on_tpu():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 4, 4, generator=g)
    values, vectors = torch.linalg.eig(x)
    xt = x.to(DEV).requires_grad_()
    vt, vect = torch.linalg.eig(xt)
    assert vt.device.type == DEV and vt.dtype == torch.complex64
    same(vt, values)
    same(vect, vectors)
    same(torch.linalg.eigvals(x.to(DEV)), torch.linalg.eigvals(x))
    # A loss that does not depend on the eigenvectors' phases, as linalg_eig_backward requires.
    xc = x.clone().requires_grad_()
    for inp, (w, v) in ((xc, torch.linalg.eig(xc)), (xt, (vt, vect))):
        (w.abs().sum() + v.abs().sum()).backward()
    same(xt.grad, xc.grad, 1e-4)


@pytest.mark.parametrize("include_self", [False, True])
def test_complex_scatter_reduce_matches_cpu_and_never_crashes(include_self):
    """mean over complex values once killed the process: its count went through a complex
    remainder, which XLA:CPU's emitter crashes on. amax/amin raise NotImplementedError, as CPU."""
    g = torch.Generator().manual_seed(0)
    src = torch.randn(1, 1, 5, dtype=torch.complex64, generator=g)
    idx = torch.tensor([[[0, 2, 0, 1, 2]]])
    for reduce in ("mean", "sum", "prod"):
        want = torch.ones(3, 4, 5, dtype=torch.complex64).scatter_reduce_(
            0, idx, src, reduce=reduce, include_self=include_self)
        got = torch.ones(3, 4, 5, dtype=torch.complex64, device=DEV).scatter_reduce_(
            0, idx.to(DEV), src.to(DEV), reduce=reduce, include_self=include_self)
        same(got, want)
    for reduce in ("amax", "amin"):
        with pytest.raises(NotImplementedError):
            torch.ones(3, 4, 5, dtype=torch.complex64).scatter_reduce_(0, idx, src, reduce=reduce)
        with pytest.raises(NotImplementedError):
            torch.ones(3, 4, 5, dtype=torch.complex64, device=DEV).scatter_reduce_(
                0, idx.to(DEV), src.to(DEV), reduce=reduce)
            torch.tpu.synchronize()


def test_a_complex_remainder_raises_instead_of_crashing(z):
    with pytest.raises(NotImplementedError):
        torch.fmod(z, z.flip(0))
    with pytest.raises(NotImplementedError):
        torch.fmod(z.to(DEV), z.flip(0).to(DEV))
        torch.tpu.synchronize()
    same(z.to(DEV) * 2, z * 2)  # the process and its tensors are fine
