"""The fused Triton TaCL kernel against the PyTorch reference: on CPU tensors under
TRITON_INTERPRET=1 (set by conftest when there is no GPU), on CUDA when a GPU is
there."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from tacl_scale.kernels import tacl_loss
from tacl_scale.kernels.tacl_loss import tacl_loss_reference

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
pytestmark = [pytest.mark.framework, pytest.mark.skipif(
    DEVICE == "cpu" and os.environ.get("TRITON_INTERPRET") != "1", reason="needs a GPU or TRITON_INTERPRET=1")]


def batch(seed, b=3, length=37, dim=96, share=0.3, dtype=torch.float32, padding=(0, 7, 27), noise=0.5):
    g = torch.Generator().manual_seed(seed)
    student = torch.randn(b, length, dim, generator=g)
    teacher = student + noise * torch.randn(b, length, dim, generator=g)
    attention = torch.ones(b, length, dtype=torch.long)
    for row, pad in enumerate(padding[:b]):
        if pad:
            attention[row, length - pad :] = 0
    masked = (torch.rand(b, length, generator=g) < share) & attention.bool()
    return (student.to(DEVICE, dtype).requires_grad_(True), teacher.to(DEVICE, dtype), masked.to(DEVICE),
            attention.to(DEVICE))


def compare(s, t, m, a, tau, loss_tol, grad_tol):
    ref_s = s.detach().float().requires_grad_(True)
    ref = tacl_loss_reference(ref_s, t.float(), m, a, tau)
    ref[0].backward()
    got = tacl_loss(s, t, m, a, temperature=tau, impl="triton")
    got[0].backward()
    assert got[0].dtype == torch.float32
    assert got[0].item() == pytest.approx(ref[0].item(), rel=loss_tol, abs=loss_tol)
    assert got[2].item() == ref[2].item()
    assert abs(got[1].item() - ref[1].item()) <= (0 if loss_tol < 1e-4 else max(1, ref[2].item() // 50))
    torch.testing.assert_close(s.grad.float(), ref_s.grad, rtol=grad_tol, atol=grad_tol)


@pytest.mark.parametrize("tau", [0.01, 0.1, 1.0])
@pytest.mark.parametrize("dim", [64, 96, 768])
def test_fp32_matches_reference(dim: int, tau: float) -> None:
    s, t, m, a = batch(dim, dim=dim, noise=2.0)
    compare(s, t, m, a, tau, 1e-5, 1e-5)


# Half-precision tolerances by (dtype, τ): ŝ and t̂ enter the tensor cores rounded to
# 2^-11 (fp16) or 2^-8 (bf16) relative, and the logits carry that error times 1/τ.
HALF_TOLERANCES = {(torch.float16, 0.1): (2e-2, 2e-2), (torch.float16, 0.01): (5e-2, 5e-2),
                   (torch.bfloat16, 0.1): (5e-2, 5e-2), (torch.bfloat16, 0.01): (1e-1, 1.5e-1)}
# Teacher noise that keeps the loss O(1) at each τ (an easy batch at τ = 0.01 has a
# loss and gradients of exactly 0 in fp32, which would test nothing).
NOISE = {0.1: 2.0, 0.01: 10.0}


@pytest.mark.parametrize(("dtype", "tau"), list(HALF_TOLERANCES))
def test_half_precision_matches_reference(dtype: torch.dtype, tau: float) -> None:
    """Loss, accuracy and gradients of fp16/bf16 inputs against the fp32 reference
    on the same (rounded) inputs; gradients compared by relative norm. (In Triton's
    CPU interpreter bf16 inputs run the kernel in fp32, as it computes bfloat16
    wrongly: the bf16 kernel itself is checked on a GPU, by scripts/gpu_check.sh.)"""
    loss_tol, grad_tol = HALF_TOLERANCES[(dtype, tau)]
    s, t, m, a = batch(1, b=4, length=131, dim=128, dtype=dtype, noise=NOISE[tau])
    ref_s = s.detach().float().requires_grad_(True)
    ref = tacl_loss_reference(ref_s, t.float(), m, a, tau)
    ref[0].backward()
    got = tacl_loss(s, t, m, a, temperature=tau, impl="triton")
    got[0].backward()
    assert got[0].dtype == torch.float32 and got[2].item() == ref[2].item()
    assert got[0].item() == pytest.approx(ref[0].item(), rel=loss_tol, abs=loss_tol)
    assert abs(got[1].item() - ref[1].item()) <= max(1, ref[2].item() // 20)
    assert ref[0].item() > 0.5 and ref_s.grad.norm() > 1e-3  # a batch with something to learn
    error = (s.grad.float() - ref_s.grad).norm() / ref_s.grad.norm()
    assert error < grad_tol, float(error)


def test_length_not_a_power_of_two_and_heavy_padding() -> None:
    s, t, m, a = batch(2, b=4, length=131, dim=64, padding=(0, 100, 120, 128), noise=1.0)
    compare(s, t, m, a, 0.05, 1e-5, 1e-5)


def test_all_positions_masked_and_none_masked() -> None:
    s, t, _, a = batch(3, noise=1.0)
    compare(s, t, a.bool(), a, 0.1, 1e-5, 1e-5)
    s2, t2, _, a2 = batch(3)
    loss, correct, count = tacl_loss(s2, t2, torch.zeros_like(a2, dtype=torch.bool), a2, 0.01, impl="triton")
    assert loss.item() == 0.0 and correct.item() == 0 and count.item() == 0
    loss.backward()
    assert torch.all(s2.grad == 0)


def test_stable_at_low_temperature_with_near_identical_vectors() -> None:
    s, t, m, a = batch(4, noise=1e-4)
    loss, correct, count = tacl_loss(s, t, m, a, temperature=0.01, impl="triton")
    assert torch.isfinite(loss) and correct.item() == count.item()
    loss.backward()
    assert torch.isfinite(s.grad).all()
    s2, t2, m2, a2 = batch(4, noise=0.05)
    compare(s2, t2, m2, a2, 0.01, 1e-4, 1e-4)


def test_zero_student_row() -> None:
    s, t, m, a = batch(5, noise=1.0)
    with torch.no_grad():
        s[0, 3] = 0.0
    m[0, 3] = True
    compare(s, t, m, a, 0.5, 1e-5, 1e-5)


def test_tiles_are_hopper_shaped_and_bounded() -> None:
    """64-row tiles (what sm_90's wgmma takes), 64 columns, the hidden size in
    power-of-two chunks: the register tiles stay the same size whatever D is (L
    does not enter them: the kernels walk a sequence's columns 64 at a time)."""
    from tacl_scale.kernels.rows import BLOCK_M
    from tacl_scale.kernels.tacl_triton import block_sizes

    assert BLOCK_M == 64
    for dim in (32, 64, 96, 768, 1024):
        bm, bn, bd, bdo = block_sizes(dim, BLOCK_M)
        assert bm == 64 and bn == 64 and 16 <= bd <= 64 and bd <= bdo <= 128
        assert all(size & (size - 1) == 0 for size in (bd, bdo)), (dim, bd, bdo)  # tl.arange needs powers of two


def test_the_backward_reads_the_forwards_logits_instead_of_recomputing_them() -> None:
    """The backward kernel has no access to the student rows: the similarities are
    computed once, by the forward, whatever the hidden size."""
    import inspect

    from tacl_scale.kernels.tacl_triton import _tacl_backward, _tacl_forward

    forward = inspect.signature(_tacl_forward.fn).parameters
    backward = inspect.signature(_tacl_backward.fn).parameters
    assert "s_ptr" in forward and "logits_ptr" in forward
    assert "s_ptr" not in backward and "logits_ptr" in backward


@pytest.mark.parametrize("layout", ["padded", "packed"])
def test_rows_from_the_collate_give_the_same_loss(layout: str) -> None:
    """The MaskedRows built by the collate on the CPU (what training passes) and
    the ones the loss would read from the masks give identical results."""
    from tacl_scale.data.loader import CollateConfig, collate
    from tacl_scale.kernels import tacl_loss_packed

    rng = np.random.default_rng(0)
    items = []
    for n in (9, 30, 17, 70):
        ids = rng.integers(5, 100, n)
        positions = np.sort(rng.choice(np.arange(1, n), size=max(1, n // 5), replace=False))
        items.append({"original_ids": ids, "input_ids": ids, "token_type_ids": np.zeros(n, dtype=np.int64),
                      "masked_positions": positions, "nsp_label": 0})
    batch = collate(items, CollateConfig(unpad=layout == "packed"))
    rows = batch["tacl_rows"]
    assert rows.num_masked == sum(len(i["masked_positions"]) for i in items)
    g = torch.Generator().manual_seed(1)
    shape = (*batch["input_ids"].shape, 64)
    student = torch.randn(shape, generator=g).to(DEVICE).requires_grad_(True)
    teacher = (student.detach().cpu() + torch.randn(shape, generator=g)).to(DEVICE)
    masked, rows = batch["masked"].to(DEVICE), rows.to(DEVICE)
    results = []
    for given in (rows, None):
        student.grad = None
        if layout == "packed":
            got = tacl_loss_packed(student, teacher, masked, batch["cu_seqlens"].to(DEVICE), 0.1, "triton", given)
        else:
            got = tacl_loss(student, teacher, masked, batch["attention_mask"].to(DEVICE), 0.1, "triton", given)
        got[0].backward()
        results.append((got[0].item(), got[1].item(), got[2].item(), student.grad.clone()))
    assert results[0][:3] == results[1][:3] and results[0][2] == rows.num_masked
    assert torch.equal(results[0][3], results[1][3])


def test_no_host_synchronisation_with_rows_from_the_collate(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forward and backward on ``meta`` tensors, where any read back to the host
    (``.item()``, ``int()``, ``nonzero``, a data-dependent shape) raises: with the
    collate's MaskedRows the loss reads nothing. The kernels are stubbed (they
    cannot run on meta); everything around them is the code that runs on CUDA."""
    from tacl_scale.kernels import tacl_triton
    from tacl_scale.kernels.rows import masked_rows

    class Launch:
        def __getitem__(self, grid):
            assert all(isinstance(g, int) for g in grid)  # a grid made of host integers
            return lambda *args, **kwargs: None

    monkeypatch.setattr(tacl_triton, "_tacl_forward", Launch())
    monkeypatch.setattr(tacl_triton, "_tacl_backward", Launch())
    rows = masked_rows(np.array([1, 4, 12, 13]), np.array([0, 10]), np.array([10, 6])).to("meta")
    student = torch.randn(16, 32, device="meta", dtype=torch.bfloat16, requires_grad=True)
    teacher = torch.randn(16, 32, device="meta", dtype=torch.float16)
    with pytest.raises(RuntimeError):  # the guard works: reading a meta tensor fails
        int(rows.count)
    loss, correct, count = tacl_triton.TaclTriton.apply(student, teacher, None, rows, 0.01, 1e-12)
    loss.backward()
    assert loss.device.type == count.device.type == correct.device.type == "meta"
    assert student.grad is not None and student.grad.shape == student.shape


@pytest.mark.parametrize(("dtype", "tau", "loss_tol", "grad_tol"),
                         [(torch.float32, 0.01, 1e-4, 1e-4), (torch.float16, 0.1, 2e-2, 5e-2)])
def test_packed_layout_matches_the_packed_reference(dtype: torch.dtype, tau: float, loss_tol: float,
                                                    grad_tol: float) -> None:
    from tacl_scale.kernels import tacl_loss_packed, tacl_loss_packed_reference

    s, t, m, a = batch(6, b=4, length=70, dim=64, padding=(0, 9, 50, 66), noise=1.0)
    real = a.bool()
    lengths = real.sum(dim=1)
    cu = torch.zeros(len(lengths) + 1, dtype=torch.int32, device=DEVICE)
    cu[1:] = lengths.cumsum(0)
    rows = s.detach()[real].to(dtype).requires_grad_(True)
    ref_rows = rows.detach().float().requires_grad_(True)
    ref = tacl_loss_packed_reference(ref_rows, t[real].float(), m[real], cu, tau)
    ref[0].backward()
    got = tacl_loss_packed(rows, t[real].to(dtype), m[real], cu, tau, impl="triton")
    got[0].backward()
    assert got[0].item() == pytest.approx(ref[0].item(), rel=loss_tol, abs=loss_tol)
    assert got[2].item() == ref[2].item()
    torch.testing.assert_close(rows.grad.float(), ref_rows.grad, rtol=grad_tol, atol=grad_tol)
    padded = tacl_loss(s.detach().to(dtype), t.to(dtype), m, a, temperature=tau, impl="triton")
    assert got[0].item() == pytest.approx(padded[0].item(), rel=1e-5, abs=1e-5)
