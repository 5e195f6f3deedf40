"""Special functions whose rules are loops or asymptotic forms, on tpu against CPU (and against
mpmath where CPU's own value is the less accurate): igamma/igammac over small to very large
arguments with their edge values, erfcx's tail, matrix_exp."""

import mpmath
import torch

DEV = "tpu"


def test_igamma_and_igammac_match_cpu_and_their_edges():
    g = torch.Generator().manual_seed(0)
    a = torch.cat([torch.rand(500, generator=g) * s for s in (10.0, 100.0, 1e3, 1e5)])
    x = torch.cat([torch.rand(500, generator=g) * s for s in (10.0, 100.0, 1e3, 1e5)])
    edges_a = torch.tensor([0.0, 0.0, 1.0, 2.0, float("inf"), float("inf"), -1.0, 1.0, float("nan")])
    edges_x = torch.tensor([1.0, 0.0, 0.0, float("inf"), 1.0, float("inf"), 1.0, -1.0, 1.0])
    a, x = torch.cat([a, edges_a]), torch.cat([x, edges_x])
    for f in (torch.igamma, torch.igammac):
        torch.testing.assert_close(f(a.to(DEV), x.to(DEV)).cpu(), f(a, x), atol=1e-5, rtol=1e-5,
                                   equal_nan=True)


def test_igamma_float64_against_mpmath():
    mpmath.mp.dps = 30
    a = torch.tensor([0.3, 5.5, 20.07, 100.3, 7e4], dtype=torch.float64)
    x = torch.tensor([0.2, 7.2, 19.01, 95.0, 7.01e4], dtype=torch.float64)
    actual = torch.igamma(a.to(DEV), x.to(DEV)).cpu()
    for i in range(len(a)):
        exact = float(mpmath.gammainc(a[i].item(), 0, x[i].item(), regularized=True))
        assert abs(actual[i].item() - exact) < 1e-12, (a[i].item(), x[i].item())


def test_erfcx_and_matrix_exp_match_cpu():
    x = torch.cat([torch.linspace(-9, 50, 5001), torch.tensor([float("inf"), 1e30])])
    torch.testing.assert_close(torch.special.erfcx(x.to(DEV)).cpu(), torch.special.erfcx(x),
                               atol=0, rtol=2e-6)
    g = torch.Generator().manual_seed(1)
    m = torch.randn(3, 6, 6, generator=g, dtype=torch.float64) * 3
    torch.testing.assert_close(torch.linalg.matrix_exp(m.to(DEV)).cpu(), torch.linalg.matrix_exp(m))


def test_bessel_functions_match_cpu_and_mpmath():
    s = torch.special
    x = torch.cat([torch.linspace(-100, 100, 4001), torch.logspace(-8, 3, 400),
                   torch.tensor([0.0, -1.0, 1e-30, float("inf"), float("nan")])])
    for f in (s.bessel_j0, s.bessel_j1, s.bessel_y0, s.bessel_y1):  # abs: they cross zero
        torch.testing.assert_close(f(x.to(DEV)).cpu(), f(x), atol=2e-6, rtol=2e-6, equal_nan=True)
    for f in (s.modified_bessel_k0, s.modified_bessel_k1, s.scaled_modified_bessel_k0,
              s.scaled_modified_bessel_k1):
        expected = f(x)
        actual = f(x.to(DEV)).cpu()
        normal = expected.abs() > 1e-36  # XLA flushes float32 denormals to zero
        torch.testing.assert_close(actual[normal], expected[normal], atol=0, rtol=2e-6,
                                   equal_nan=True)
    mpmath.mp.dps = 30
    points = [1e-6, 0.3, 1.99, 2.01, 5.52, 24.9, 25.1, 59.9, 60.1, 1234.5]
    xd = torch.tensor(points, dtype=torch.float64).to(DEV)
    for f, exact in ((s.bessel_j0, lambda v: mpmath.besselj(0, v)),
                     (s.bessel_j1, lambda v: mpmath.besselj(1, v)),
                     (s.modified_bessel_k0, lambda v: mpmath.besselk(0, v)),
                     (s.modified_bessel_k1, lambda v: mpmath.besselk(1, v)),
                     (s.bessel_y0, lambda v: mpmath.bessely(0, v)),
                     (s.bessel_y1, lambda v: mpmath.bessely(1, v))):
        got = f(xd).cpu()
        for v, g in zip(points, got.tolist()):
            e = float(exact(v))
            # Y's expansion from 25 on is good to 1e-10; the rest to rounding
            tol = 1e-10 if f in (s.bessel_y0, s.bessel_y1) else 1e-13
            assert abs(g - e) <= tol * max(1.0, abs(e)), (f.__name__, v, g, e)


def test_airy_ai_matches_cpu_and_mpmath():
    x = torch.cat([torch.linspace(-20, 20, 4001),
                   torch.tensor([0.0, 1e-30, -1.0, 1.0, float("inf"), -float("inf"), float("nan")])])
    torch.testing.assert_close(torch.special.airy_ai(x.to(DEV)).cpu(), torch.special.airy_ai(x),
                               atol=2e-6, rtol=2e-5, equal_nan=True)
    mpmath.mp.dps = 30
    points = [-1e4, -300.0, -40.0, -11.3, -11.1, -5.0, -2.33, -1.01, -0.5, 0.5, 1.01, 3.0, 20.0]
    actual = torch.special.airy_ai(torch.tensor(points, dtype=torch.float64).to(DEV)).cpu()
    for v, a in zip(points, actual.tolist()):
        e = float(mpmath.airyai(v))
        assert abs(a - e) <= 1e-9 * abs(e), (v, a, e)  # CPU's own: 1.2e-4 relative at -2.33
