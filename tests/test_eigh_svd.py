"""torch.linalg.eigh and torch.linalg.svd on tpu against CPU, real and complex. Eigenvectors and
singular vectors are unique only up to sign (real) or phase (complex), so each column is compared
after aligning it with CPU's, and the factorization itself is checked: orthonormal (unitary)
factors that give back A."""

import pytest
import torch

DEV = "tpu"


def phases(ours: torch.Tensor, cpus: torch.Tensor) -> torch.Tensor:
    """Per column, the phase that takes our column onto CPU's: <c, o> / |<c, o>|."""
    dots = (cpus.conj() * ours).sum(-2, keepdim=True)
    return dots.abs() / dots


def same_up_to_phase(ours: torch.Tensor, cpus: torch.Tensor, tol: float) -> None:
    torch.testing.assert_close(ours * phases(ours, cpus), cpus, atol=tol, rtol=tol)


def unitary(q: torch.Tensor, tol: float) -> None:
    eye = torch.eye(q.shape[-1], dtype=q.dtype).expand(*q.shape[:-2], -1, -1)
    torch.testing.assert_close(q.mH @ q, eye, atol=tol, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_matches_cpu_up_to_each_vectors_phase(dtype, uplo):
    g = torch.Generator().manual_seed(3)
    a = torch.randn(3, 6, 6, dtype=dtype, generator=g)
    a = a + a.mH
    w, v = torch.linalg.eigh(a, UPLO=uplo)
    wt, vt = torch.linalg.eigh(a.to(DEV), UPLO=uplo)
    tol = 1e-4 if dtype != torch.float64 else 1e-10
    torch.testing.assert_close(wt.cpu(), w, atol=tol, rtol=tol)
    vt = vt.cpu()
    same_up_to_phase(vt, v, tol * 10)
    unitary(vt, tol * 10)
    torch.testing.assert_close(a @ vt, vt * wt.cpu().unsqueeze(-2).to(dtype), atol=tol * 10,
                               rtol=0)


def test_eigh_gradient_of_a_phase_free_loss_matches_cpu():
    g = torch.Generator().manual_seed(4)
    a = torch.randn(5, 5, generator=g)
    a = (a + a.T).requires_grad_()
    at = a.detach().to(DEV).requires_grad_()
    for x in (a, at):
        w, v = torch.linalg.eigh(x)
        (w.square().sum() + v.abs().sum()).backward()
    torch.testing.assert_close(at.grad.cpu(), a.grad, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64, torch.complex128])
@pytest.mark.parametrize("shape", [(2, 7, 4), (2, 4, 7), (5, 5)])
@pytest.mark.parametrize("full", [False, True])
def test_svd_matches_cpu_up_to_each_vectors_phase(dtype, shape, full):
    g = torch.Generator().manual_seed(5)
    a = torch.randn(shape, dtype=dtype, generator=g)
    u, s, vh = torch.linalg.svd(a, full_matrices=full)
    ut, st, vht = (x.cpu() for x in torch.linalg.svd(a.to(DEV), full_matrices=full))
    tol = 1e-4 if dtype != torch.complex128 else 1e-10
    torch.testing.assert_close(st, s, atol=tol, rtol=tol)
    torch.testing.assert_close(torch.linalg.svdvals(a.to(DEV)).cpu(), s, atol=tol, rtol=tol)
    k = s.shape[-1]
    # The singular vectors of a singular value: u and v turn by the same phase.
    ph = phases(ut[..., :k], u[..., :k])
    torch.testing.assert_close(ut[..., :k] * ph, u[..., :k], atol=tol * 10, rtol=tol * 10)
    torch.testing.assert_close(vht[..., :k, :] * ph.mT.conj(), vh[..., :k, :], atol=tol * 10,
                               rtol=tol * 10)
    unitary(ut, tol * 10)
    unitary(vht.mH, tol * 10)
    rebuilt = (ut[..., :k] * st.unsqueeze(-2).to(dtype)) @ vht[..., :k, :]
    torch.testing.assert_close(rebuilt, a, atol=tol * 10, rtol=tol * 10)


def test_complex_pinv_and_nuclear_norm_match_cpu():
    g = torch.Generator().manual_seed(6)
    a = torch.randn(4, 3, dtype=torch.complex64, generator=g)
    for f in (torch.linalg.pinv, lambda x: torch.linalg.matrix_norm(x, "nuc"),
              torch.linalg.matrix_rank, lambda x: torch.linalg.eigvalsh(x @ x.mH)):
        torch.testing.assert_close(f(a.to(DEV)).cpu(), f(a), atol=1e-4, rtol=1e-4)
