"""User mistakes raise PyTorch's exception type and message at the user's line; the process and
its other tensors survive."""

import traceback

import pytest
import torch

import torchtpu


def raised_at(excinfo: pytest.ExceptionInfo, marker: str) -> None:
    """The last frame in this file is the line that contains `marker`."""
    frames = [f for f in traceback.extract_tb(excinfo.tb) if f.filename == __file__]
    assert frames, "no frame of the test file in the traceback"
    assert marker in frames[-1].line, f"raised at {frames[-1].line!r}, expected the {marker!r} line"


@pytest.fixture
def survivor(device):
    x = torch.arange(6, dtype=torch.float32, device=device)
    yield x
    assert (x * 2).sum().item() == 30.0  # the next op still works, old tensors intact


def test_shapes_do_not_broadcast(device, survivor):
    a, b = torch.ones(3, device=device), torch.ones(4, device=device)
    with pytest.raises(
        RuntimeError, match=r"The size of tensor a \(3\) must match the size of tensor b \(4\)"
    ) as e:
        a + b  # BAD-LINE
    raised_at(e, "BAD-LINE")


def test_matmul_inner_size_mismatch(device, survivor):
    a, b = torch.ones(2, 3, device=device), torch.ones(4, 5, device=device)
    with pytest.raises(
        RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"
    ) as e:
        torch.mm(a, b)  # BAD-LINE
    raised_at(e, "BAD-LINE")


_F, _D = torch.float32, torch.float64
MIXED_PRODUCTS = {
    "mm": (torch.mm, ((3, 4), _F), ((4, 4), _D)),
    "mm_bf16": (torch.mm, ((3, 4), _F), ((4, 4), torch.bfloat16)),
    "mm_int": (torch.mm, ((3, 4), torch.int64), ((4, 4), _F)),
    "matmul": (torch.matmul, ((2, 3, 4), _F), ((4, 4), _D)),
    "bmm": (torch.bmm, ((2, 3, 4), _F), ((2, 4, 4), _D)),
    "mv": (torch.mv, ((3, 4), _F), ((4,), _D)),
    "dot": (torch.dot, ((4,), _F), ((4,), _D)),
    "vdot": (torch.vdot, ((4,), _F), ((4,), _D)),
    "linear": (torch.nn.functional.linear, ((3, 4), _F), ((5, 4), _D)),
    "einsum": (lambda a, b: torch.einsum("ij,jk->ik", a, b), ((3, 4), _F), ((4, 4), _D)),
    "addmv": (
        lambda a, b: torch.addmv(torch.ones(3, device=a.device), a, b),
        ((3, 4), _F),
        ((4,), _D),
    ),
    "baddbmm": (
        lambda a, b: torch.baddbmm(torch.ones_like(a), a, b),
        ((2, 3, 4), _F),
        ((2, 4, 4), _D),
    ),
    "addbmm": (lambda a, b: torch.addbmm(a[0], a, b), ((2, 3, 4), _F), ((2, 4, 4), _D)),
}


@pytest.mark.parametrize("name", MIXED_PRODUCTS)
def test_mixed_dtype_products_raise_as_on_cpu(device, survivor, name):
    # XLA's dot would convert or promote; CPU's kernels refuse two dtypes, with these messages.
    op, (sa, da), (sb, db) = MIXED_PRODUCTS[name]
    make = lambda shape, dtype, dev: torch.ones(shape, dtype=dtype, device=dev)
    with pytest.raises(RuntimeError) as cpu:
        op(make(sa, da, "cpu"), make(sb, db, "cpu"))
    a, b = make(sa, da, device), make(sb, db, device)
    with pytest.raises(RuntimeError) as e:
        op(a, b)  # BAD-LINE
    assert str(e.value).splitlines()[0] == str(cpu.value).splitlines()[0]
    if op.__name__ != "<lambda>":
        raised_at(e, "BAD-LINE")
    else:  # the user's line is the lambda's
        frames = [f for f in traceback.extract_tb(e.tb) if f.filename == __file__]
        assert frames[-1].name == "<lambda>" and "lambda a, b" in frames[-1].line


def test_float_tensor_as_index(device, survivor):
    x = torch.ones(4, device=device)
    idx = torch.tensor([0.0, 1.0], device=device)
    with pytest.raises(
        IndexError, match="tensors used as indices must be long, int, byte or bool tensors"
    ) as e:
        x[idx]  # BAD-LINE
    raised_at(e, "BAD-LINE")


def test_cpu_and_tpu_tensor_in_one_op(device, survivor):
    a, b = torch.ones(3, device=device), torch.ones(3)
    with pytest.raises(
        RuntimeError,
        match=r"Expected all tensors to be on the same device, but found at least two devices, tpu:0 and cpu!",
    ) as e:
        torch.add(a, b)  # BAD-LINE
    raised_at(e, "BAD-LINE")
    assert (a + torch.tensor(2.0)).tolist() == [3.0] * 3  # a CPU 0-d tensor is a scalar, as on CUDA


def test_dim_out_of_range(device, survivor):
    x = torch.ones(2, 3, device=device)
    with pytest.raises(
        IndexError,
        match=r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 5\)",
    ) as e:
        x.sum(dim=5)  # BAD-LINE
    raised_at(e, "BAD-LINE")


def test_index_out_of_range(device, survivor):
    x = torch.ones(3, 2, device=device)
    with pytest.raises(
        IndexError, match="index 10 is out of bounds for dimension 0 with size 3"
    ) as e:
        x[10]  # BAD-LINE
    raised_at(e, "BAD-LINE")


def test_allocation_larger_than_memory(device, survivor):
    with pytest.raises(torch.OutOfMemoryError, match="tpu out of memory. Tried to allocate") as e:
        torch.empty(1 << 50, dtype=torch.uint8, device=device)  # BAD-LINE
    raised_at(e, "BAD-LINE")


def test_unsupported_op(device, survivor):
    x = torch.ones(3, 1, device=device)  # ATen's dispatch-test op _foobar has no tpu lowering
    with pytest.raises(
        NotImplementedError,
        match=r"'aten::_foobar' is not currently implemented for the tpu device.*TORCHTPU_CPU_FALLBACK=1",
    ) as e:
        torch._foobar(x)  # BAD-LINE
    raised_at(e, "BAD-LINE")


def line_of(marker: str) -> int:
    """Line number of the line of this file that contains `marker`."""
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if marker in line and "line_of" not in line)


def test_compile_failure_names_the_op(device, survivor):
    # torchtpu::_invalid_program is a test op whose lowering emits an op XLA does not know.
    x = torch.ones(2, device=device)
    fused = torchtpu.get_mode() == "fused"
    with pytest.raises(
        RuntimeError, match=r"tpu failed to compile torchtpu::_invalid_program"
    ) as e:
        y = torch.ops.torchtpu._invalid_program(x)  # BAD-LINE: recorded
        if fused:
            y.cpu()  # READ-LINE: fused mode runs the op here
    if fused:
        # The failure surfaces at the read, and names the line that recorded the op.
        raised_at(e, "READ-LINE")
        assert f"recorded at {__file__}:{line_of('# BAD-LINE: recorded')}" in str(e.value)
    else:
        raised_at(e, "BAD-LINE")
    msg = str(e.value)
    assert len(msg) < 600 and msg.count("\n") < 6, msg
    assert "stablehlo.this_op_does_not_exist" in msg


@pytest.mark.parametrize(
    "export",
    [
        lambda t: t.__dlpack_device__(),
        lambda t: t.__dlpack__(),
        lambda t: torch.utils.dlpack.to_dlpack(t),
        lambda t: torch.to_dlpack(t),
        lambda t: torch.from_dlpack(t),
        lambda t: __import__("numpy").from_dlpack(t),
    ],
    ids=[
        "__dlpack_device__",
        "__dlpack__",
        "utils.to_dlpack",
        "torch.to_dlpack",
        "torch.from_dlpack",
        "numpy.from_dlpack",
    ],
)
def test_dlpack_export_is_refused_clearly(device, survivor, export):
    with pytest.raises(
        BufferError, match=r"tpu tensors cannot be exported through DLPack.*\.cpu\(\)"
    ) as e:
        export(survivor)
    raised_at(e, "lambda t:")  # the line that exports
    c = torch.arange(3.0)  # CPU tensors export as before
    assert torch.equal(torch.from_dlpack(torch.utils.dlpack.to_dlpack(c)), c)
    assert c.__dlpack_device__()[0] == 1  # kDLCPU


@pytest.fixture
def as_on_a_tpu():
    torchtpu._C._refuse_float64(True)  # the CPU plugin has float64; a TPU has none
    yield
    torchtpu._C._refuse_float64(False)


@pytest.mark.parametrize(
    "make",
    [
        lambda d: torch.zeros(3, dtype=torch.float64, device=d),  # BAD-LINE
        lambda d: torch.ones(3, dtype=torch.float64).to(d),  # BAD-LINE
        lambda d: torch.ones(3, device=d).double(),  # BAD-LINE
        lambda d: torch.ones(2, dtype=torch.complex128).to(d),  # BAD-LINE
    ],
    ids=["factory", "to", "op_result", "complex128"],
)
def test_float64_on_a_tpu_is_a_type_error_at_the_users_line(device, survivor, as_on_a_tpu, make):
    with pytest.raises(
        TypeError, match=r"TPUs have no float64\. Please use torch\.(float32|complex64)"
    ) as e:
        make(device)
    raised_at(e, "BAD-LINE")
    assert (survivor.float() + 1).sum().item() == 21.0  # float32 still works


def test_float_scalars_are_float32_on_a_tpu(device, as_on_a_tpu):
    # A TPU has no float64 buffers: Python floats enter programs as float32 there (float64
    # scalar buffers are refused in this mode), with float32 ops' results unchanged.
    x = torch.randn(32)
    t = x.to(device)
    got = torch.where(t > 0.3, (t * 2.5 + 1.25).clamp(min=-0.5), 0.25).pow(2.0) / 3.0
    ref = torch.where(x > 0.3, (x * 2.5 + 1.25).clamp(min=-0.5), 0.25).pow(2.0) / 3.0
    torch.testing.assert_close(got.cpu(), ref)
    # The mean of 32 normal values can be near 0: the bound is absolute too (summation order).
    assert t.mean().item() == pytest.approx(x.mean().item(), rel=1e-5, abs=1e-6)


def _long(values: list, device) -> torch.Tensor:
    return torch.tensor(values, device=device)


# Bad arguments that PyTorch's test files (test_indexing.py, test_shape_ops.py) and its
# OpInfo error_inputs pass: tpu raises CPU's exception type with CPU's message.
AS_ON_CPU = {
    "index_fill float index": lambda d: torch.ones(3, 4, device=d).index_fill_(
        0, torch.tensor([0.0], device=d), 1.0
    ),
    "index_fill dim": lambda d: torch.ones(3, 4, device=d).index_fill_(3, _long([0], d), 1.0),
    "index_fill 2-d index": lambda d: torch.ones(3, 4, device=d).index_fill_(
        0, _long([[0]], d), 1.0
    ),
    "index_fill 1-d value": lambda d: torch.ones(3, 4, device=d).index_fill_(
        0, _long([0], d), torch.ones(2, device=d)
    ),
    "index_fill complex value, real self": lambda d: torch.ones(3, 4, device=d).index_fill_(
        1, _long([0], d), 1 + 1j
    ),
    "index_fill complex tensor value": lambda d: torch.ones(3, 4, device=d).index_fill_(
        1, _long([0], d), torch.tensor(1j, device=d)
    ),
    "index_put values do not broadcast": lambda d: torch.zeros(5, 4, device=d).index_put_(
        (_long([0, 1], d),), torch.ones(3, 4, device=d)
    ),
    "setitem values do not broadcast": lambda d: torch.zeros(5, 4, device=d).__setitem__(
        _long([0, 1], d), torch.ones(3, 4, device=d)
    ),
    "setitem indices do not broadcast": lambda d: torch.zeros(5, 5, device=d).__setitem__(
        ([0, 1], [0, 1, 2]), 0.0
    ),
    "getitem out of bounds": lambda d: torch.zeros(5, device=d)[_long([1] * 19 + [10], d)],
    "setitem out of bounds": lambda d: torch.zeros(5, device=d).__setitem__(
        _long([1] * 19 + [10], d), 0.0
    ),
    "unfold_backward step 0": lambda d: torch.ops.aten.unfold_backward(
        torch.ones(3, 2, device=d), [4], 0, 2, 0
    ),
    "bernoulli_ p out of range": lambda d: torch.zeros(4, device=d).bernoulli_(1.5),
    "random_ from >= to": lambda d: torch.zeros(4, device=d).random_(5, 2),
    "div trunc complex": lambda d: torch.div(
        torch.ones(3, dtype=torch.complex64, device=d), 2.0, rounding_mode="trunc"
    ),
    "floor_divide complex": lambda d: torch.floor_divide(
        torch.ones(3, dtype=torch.complex64, device=d), torch.ones(3, device=d)
    ),
}


@pytest.mark.parametrize("name", AS_ON_CPU)
def test_bad_arguments_raise_as_on_cpu(device, survivor, name):
    with pytest.raises(Exception) as cpu:
        AS_ON_CPU[name]("cpu")
    with pytest.raises(Exception) as tpu:
        AS_ON_CPU[name](device)
        torch.tpu.synchronize()  # a check inside a fused program raises at the sync
    assert type(tpu.value) is type(cpu.value), (tpu.value, cpu.value)
    message = str(tpu.value).splitlines()[0].replace("_tpu", "_cpu")  # "div_trunc_tpu"
    assert message.startswith(str(cpu.value).splitlines()[0]), (message, str(cpu.value))


def test_float8_index_select(device):
    x = torch.arange(12.0).view(4, 3).to(torch.float8_e4m3fn)
    got = x.to(device).index_select(0, torch.tensor([3, 0], device=device))
    assert got.dtype == torch.float8_e4m3fn
    assert torch.equal(got.cpu().float(), x.index_select(0, torch.tensor([3, 0])).float())


@pytest.mark.parametrize(
    "make",
    [
        lambda d: torch.quantize_per_tensor(torch.randn(3, device=d), 0.1, 5, torch.quint8),
        lambda d: torch._empty_affine_quantized([3], device=d, dtype=torch.quint8),
        lambda d: torch.quantize_per_tensor(torch.randn(3), 0.1, 5, torch.quint8).to(d),
    ],
)
def test_quantized_tensors_are_refused_clearly(device, survivor, make):
    with pytest.raises(NotImplementedError, match="tpu does not support quantized tensors"):
        make(device)


@pytest.mark.parametrize(
    "call",
    [
        lambda t, v: t.normal_(0.0, v),  # std >= 0
        lambda t, v: t.exponential_(v + 0.5),  # lambda > 0
        lambda t, v: torch.nn.functional.huber_loss(t, t * 2, delta=v + 0.5),  # delta > 0
    ],
    ids=["normal_ std", "exponential_ lambda", "huber_loss delta"],
)
def test_a_bad_float_raises_after_a_good_one_of_the_same_shapes(device, survivor, call):
    """Meta results are cached by their arguments' metadata: a float a Meta kernel checks is part
    of that key, so a valid call does not let the same call with a bad value through."""
    call(torch.zeros(10, device=device), 1.0).cpu()
    with pytest.raises(RuntimeError) as cpu:
        call(torch.zeros(10), -1.0)
    with pytest.raises(RuntimeError) as tpu:
        call(torch.zeros(10, device=device), -1.0).cpu()
    # normal_'s Meta kernel writes std -1.0 where CPU's writes -1
    assert str(tpu.value).startswith(str(cpu.value).splitlines()[0]), (tpu.value, cpu.value)
