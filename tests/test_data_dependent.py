"""Ops whose output size depends on values (torch.unique, repeat_interleave) and the value checks
of the ops added with them: results as on CPU, CPU's errors at the user's line, and the process
and other tensors fine afterwards."""

import pytest
import torch

DEV = "tpu"


def test_unique_flat_and_along_a_dim_match_cpu():
    x = torch.tensor([[3.0, 1.0, 5.0], [3.0, 1.0, 2.0], [0.0, 1.0, 2.0], [3.0, 1.0, 2.0]])
    flat_nan = x.clone()
    flat_nan[0, 2] = float("nan")  # NaNs are distinct, sorted last (rows with NaN: CPU's order is
    # its sort's, so they are left out of the dim cases)
    for inp, kw in (
        (flat_nan, {}),
        (flat_nan, {"return_inverse": True, "return_counts": True}),
        (x, {"dim": 0, "return_inverse": True}),
        (x, {"dim": 1, "return_counts": True}),
    ):
        expected = torch.unique(inp, **kw)
        actual = torch.unique(inp.to(DEV), **kw)
        for a, e in zip(
            actual if isinstance(actual, tuple) else (actual,),
            expected if isinstance(expected, tuple) else (expected,),
        ):
            torch.testing.assert_close(a.cpu(), e, equal_nan=True)
    y = torch.tensor([1, 1, 2, 2, 2, 1, 3, 3])
    for a, e in zip(
        torch.unique_consecutive(y.to(DEV), return_inverse=True, return_counts=True),
        torch.unique_consecutive(y, return_inverse=True, return_counts=True),
    ):
        assert torch.equal(a.cpu(), e)


def test_repeat_interleave_with_a_tensor_of_repeats():
    x = torch.arange(12.0).view(3, 4)
    r = torch.tensor([2, 0, 3])
    assert torch.equal(
        x.to(DEV).repeat_interleave(r.to(DEV), dim=0).cpu(), x.repeat_interleave(r, dim=0)
    )
    assert torch.equal(x.to(DEV).repeat_interleave(2, dim=1).cpu(), x.repeat_interleave(2, dim=1))
    assert torch.equal(torch.repeat_interleave(r.to(DEV)).cpu(), torch.repeat_interleave(r))


def test_negative_repeats_raise_cpus_error_and_the_device_survives():
    keep = torch.ones(3, device=DEV)
    with pytest.raises(RuntimeError, match="repeats can not be negative"):
        torch.repeat_interleave(torch.tensor([1, -1], device=DEV))
    assert keep.sum().item() == 3


def test_multilabel_margin_target_out_of_range_raises_at_the_users_line():
    x = torch.randn(2, 4, device=DEV)
    bad = torch.tensor([[0, -1, 7, 0], [1, -1, 0, 0]], device=DEV)
    with pytest.raises(RuntimeError, match="argument #2 'target' is out of range") as info:
        torch.nn.functional.multilabel_margin_loss(x, bad).item()
    assert "test_data_dependent.py" in str(info.value) or info.traceback[-1].path.name
    good = torch.tensor([[3, 0, -1, 1], [1, -1, 0, 0]])
    torch.testing.assert_close(
        torch.nn.functional.multilabel_margin_loss(x, good.to(DEV)).cpu(),
        torch.nn.functional.multilabel_margin_loss(x.cpu(), good),
    )


def test_put_index_out_of_range_is_an_index_error():
    x, keep = torch.zeros(5, device=DEV), torch.ones(2, device=DEV)
    with pytest.raises(IndexError, match="out of range: tried to access index 9 on a tensor of 5"):
        x.put_(torch.tensor([1, 9], device=DEV), torch.ones(2, device=DEV)).cpu()
    # CPU has written the valid entry when it raises; fused mode has too (the op ran, its check
    # raises at the read), strict mode raises before writing.
    assert x.cpu().tolist() in ([0.0, 1.0, 0.0, 0.0, 0.0], [0.0] * 5)
    assert keep.sum().item() == 2


@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
def test_lstsq_outputs_per_driver_match_cpu(driver):
    torch.manual_seed(0)
    cases = [((5, 3), (5,)), ((2, 5, 3), (2, 5, 2)), ((3, 5), (3, 2)), ((1, 5, 3), (4, 5, 2))]
    deficient = torch.randn(5, 3)
    deficient[:, 2] = deficient[:, 1]  # rank 2: gelsd and gelss then return no residuals
    cases.append((deficient, (5, 2)))
    for a, b in cases:
        a = a if isinstance(a, torch.Tensor) else torch.randn(a)
        b = torch.randn(b)
        expected = torch.linalg.lstsq(a, b, driver=driver)
        actual = torch.linalg.lstsq(a.to(DEV), b.to(DEV), driver=driver)
        for name in ("solution", "residuals", "rank", "singular_values"):
            e, t = getattr(expected, name), getattr(actual, name)
            if driver == "gels" and a is deficient and name != "rank":
                assert t.shape == e.shape  # gels assumes full rank: its values are undefined
                continue
            torch.testing.assert_close(t.cpu(), e, atol=1e-4, rtol=1e-4, msg=f"{name}")


def test_ldl_factor_matches_lapack_pivots_and_factors():
    g = torch.Generator().manual_seed(3)
    for n in (1, 2, 5, 8):
        a = torch.randn(4, n, n, generator=g)
        a = a + a.mT
        a[0, 0, 0] = 0  # a zero leading entry: a 2x2 pivot
        a[1] = 0  # a zero matrix: info > 0
        expected = torch.linalg.ldl_factor_ex(a)
        actual = torch.linalg.ldl_factor_ex(a.to(DEV))
        assert torch.equal(actual.pivots.cpu(), expected.pivots)  # LAPACK's Bunch-Kaufman choices
        assert torch.equal(actual.info.cpu(), expected.info)
        torch.testing.assert_close(actual.LD.cpu(), expected.LD, atol=1e-5, rtol=1e-5)


def test_ldl_solve_follows_lapack_through_1x1_and_2x2_pivots():
    g = torch.Generator().manual_seed(4)
    for n in (1, 2, 5, 8):
        a = torch.randn(3, n, n, generator=g, dtype=torch.float64)
        a = a + a.mT
        if n > 1:
            a[0, 0, 0] = 0  # forces a 2x2 pivot first
        ld, piv = torch.linalg.ldl_factor(a)
        b = torch.randn(3, n, 2, generator=g, dtype=torch.float64)
        ldt, pivt, bt = ld.to(DEV), piv.to(DEV), b.to(DEV)
        x = torch.linalg.ldl_solve(ldt, pivt, bt).cpu()
        torch.testing.assert_close(x, torch.linalg.ldl_solve(ld, piv, b), atol=1e-10, rtol=1e-10)
        torch.testing.assert_close(a @ x, b, atol=1e-8, rtol=1e-8)
        # One factorization for a batch of right-hand sides.
        torch.testing.assert_close(torch.linalg.ldl_solve(ldt[0], pivt[0], bt).cpu(),
                                   torch.linalg.ldl_solve(ld[0], piv[0], b), atol=1e-10, rtol=1e-10)
    assert (piv < 0).any()  # the 2x2 path ran


def test_nonzero_into_an_out_tensor_as_on_cpu():
    x = torch.tensor([[0, 1, 3], [2, 0, 0]])
    out = torch.empty(5, 5, dtype=torch.long, device=DEV)  # resized, as CPU resizes it
    torch.nonzero(x.to(DEV), out=out)
    assert torch.equal(out.cpu(), torch.nonzero(x))
    with pytest.raises(RuntimeError, match="Expected out tensor to have scalar type Long"):
        torch.nonzero(x.to(DEV), out=torch.empty(0, device=DEV))
    with pytest.raises(RuntimeError, match="on the same device"):  # as CUDA: no silent copy
        torch.nonzero(x.to(DEV), out=torch.empty(0, dtype=torch.long))
