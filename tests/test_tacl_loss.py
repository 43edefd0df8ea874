"""The PyTorch reference of the TaCL loss against a direct, row-by-row reading of
docs/design.md's formula."""

from __future__ import annotations

import math

import pytest
import torch

from tacl_scale.kernels import tacl_loss
from tacl_scale.kernels.tacl_loss import impl_unavailable, triton_available

pytestmark = pytest.mark.framework  # also run on the GPU image's versions (scripts/test.sh --gpu-image)


def naive_tacl(student, teacher, masked, attention_mask, temperature):
    """loss_i = logsumexp_j(ŝ_i·t̂_j/τ) − ŝ_i·t̂_i/τ over the real j of the same
    sequence, averaged over masked i; accuracy = argmax_j == i."""
    losses, correct = [], 0
    for b in range(student.shape[0]):
        real = attention_mask[b].bool()
        for i in range(student.shape[1]):
            if not (masked[b, i] and real[i]):
                continue
            s = student[b, i].double()
            s = s / max(s.norm(), 1e-12)
            sims = []
            for j in range(student.shape[1]):
                if real[j]:
                    t = teacher[b, j].double()
                    sims.append((s @ (t / max(t.norm(), 1e-12))) / temperature)
            sims_t = torch.stack(sims)
            target = int(real[:i].sum())
            losses.append(torch.logsumexp(sims_t, 0) - sims_t[target])
            correct += int(sims_t.argmax() == target)
    return torch.stack(losses).mean(), correct, len(losses)


def make_batch(seed, batch=3, length=11, dim=16, mask_share=0.3, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    student = torch.randn(batch, length, dim, generator=g, dtype=dtype)
    teacher = student + 0.5 * torch.randn(batch, length, dim, generator=g, dtype=dtype)
    attention = torch.ones(batch, length, dtype=torch.long)
    for b in range(1, batch):
        attention[b, length - 2 * b :] = 0  # ragged padding
    masked = (torch.rand(batch, length, generator=g) < mask_share) & attention.bool()
    masked[0, 1] = True
    return student, teacher, masked, attention


@pytest.mark.parametrize("temperature", [0.01, 0.1, 1.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_the_formula(seed: int, temperature: float) -> None:
    s, t, m, a = make_batch(seed)
    loss, correct, count = tacl_loss(s, t, m, a, temperature=temperature, impl="torch")
    ref_loss, ref_correct, ref_count = naive_tacl(s, t, m, a, temperature)
    assert loss.dtype == torch.float32 and loss.dim() == 0
    assert loss.item() == pytest.approx(ref_loss.item(), rel=1e-5, abs=1e-5)
    assert (correct.item(), count.item()) == (ref_correct, ref_count)
    assert correct.dtype == count.dtype == torch.long


def test_padding_never_enters_the_softmax() -> None:
    s, t, m, a = make_batch(3)
    loss, correct, count = tacl_loss(s, t, m, a, 0.01)
    # More padding with garbage in it changes nothing.
    pad = 5
    s2 = torch.cat([s, 100 * torch.randn(3, pad, 16)], dim=1)
    t2 = torch.cat([t, 100 * torch.randn(3, pad, 16)], dim=1)
    m2 = torch.cat([m, torch.ones(3, pad, dtype=torch.bool)], dim=1)  # masked padding is ignored
    a2 = torch.cat([a, torch.zeros(3, pad, dtype=torch.long)], dim=1)
    loss2, correct2, count2 = tacl_loss(s2, t2, m2, a2, 0.01)
    assert loss2.item() == pytest.approx(loss.item(), rel=1e-6)
    assert (correct2.item(), count2.item()) == (correct.item(), count.item())


def test_gradient_matches_gradcheck_in_float64() -> None:
    s, t, m, a = make_batch(4, batch=2, length=6, dim=5, dtype=torch.float64)
    s.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: tacl_loss(x, t, m, a, temperature=0.5)[0], (s,))
    loss, _, _ = tacl_loss(s, t, m, a, 0.01)
    loss.backward()
    unmasked = ~m
    assert torch.all(s.grad[unmasked] == 0) and s.grad[m].abs().sum() > 0


def test_nothing_masked_gives_a_differentiable_zero() -> None:
    s, t, _, a = make_batch(5)
    s.requires_grad_(True)
    loss, correct, count = tacl_loss(s, t, torch.zeros_like(a, dtype=torch.bool), a, 0.01)
    assert loss.item() == 0.0 and correct.item() == 0 and count.item() == 0
    loss.backward()
    assert torch.all(s.grad == 0)
    # The loss keeps the dtype it has when something is masked (float64 for gradcheck).
    loss, _, _ = tacl_loss(s.double(), t.double(), torch.zeros_like(a, dtype=torch.bool), a, 0.01, impl="torch")
    assert loss.dtype == torch.float64


def test_identical_teacher_is_perfectly_accurate_and_stable_at_low_temperature() -> None:
    s, _, m, a = make_batch(6)
    loss, correct, count = tacl_loss(s, s.clone(), m, a, temperature=0.01)
    assert correct.item() == count.item() > 0
    assert torch.isfinite(loss) and loss.item() < 1e-3
    # near-identical vectors at τ = 0.01: large logits, still finite
    near = s + 1e-4 * torch.randn_like(s)
    loss, _, _ = tacl_loss(s, near, m, a, temperature=0.01)
    assert torch.isfinite(loss)


def test_zero_student_row_gives_uniform_softmax() -> None:
    s, t, m, a = make_batch(7)
    m[:] = False
    m[0, 3] = True
    s[0, 3] = 0.0
    loss, _, count = tacl_loss(s, t, m, a, 0.01)
    assert count.item() == 1
    assert loss.item() == pytest.approx(math.log(int(a[0].sum())), rel=1e-6)


def test_half_precision_inputs_compute_in_float32() -> None:
    s, t, m, a = make_batch(8)
    ref, _, _ = tacl_loss(s, t, m, a, temperature=0.1)
    for dtype in (torch.float16, torch.bfloat16):
        loss, _, _ = tacl_loss(s.to(dtype), t.to(dtype), m, a, temperature=0.1)
        assert loss.dtype == torch.float32
        assert loss.item() == pytest.approx(ref.item(), rel=2e-2)


def test_bad_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    s, t, m, a = make_batch(9)
    with pytest.raises(ValueError, match="impl"):
        tacl_loss(s, t, m, a, 0.01, impl="cuda")
    with pytest.raises(ValueError, match="must both be"):
        tacl_loss(s, t[:, :-1], m, a, 0.01)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # the tests' CPU runs set it: a user's do not
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        tacl_loss(s, t, m, a, 0.01, impl="triton")


@pytest.mark.skipif(not triton_available(), reason="needs the triton package")
@pytest.mark.parametrize("setting", ["1", "true", "on"])
def test_the_triton_loss_is_allowed_on_cpu_whenever_triton_interprets(monkeypatch: pytest.MonkeyPatch,
                                                                       setting: str) -> None:
    """Triton reads its interpreter switch itself and takes ``true`` or ``on`` as
    well as ``1``: the refusal asks Triton, so it never refuses a run Triton would
    interpret, nor allows one it would not."""
    monkeypatch.setenv("TRITON_INTERPRET", setting)
    assert impl_unavailable("triton", "cpu") is None
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert "TRITON_INTERPRET" in (impl_unavailable("triton", "cpu") or "")


def pack(student, teacher, masked, attention_mask):
    """The packed layout of a right-padded batch: real rows back to back."""
    real = attention_mask.bool()
    lengths = real.sum(dim=1)
    cu = torch.zeros(len(lengths) + 1, dtype=torch.int32)
    cu[1:] = lengths.cumsum(0)
    return student[real], teacher[real], masked[real], cu


@pytest.mark.parametrize("temperature", [0.01, 0.5])
def test_packed_layout_gives_the_padded_loss_and_gradients(temperature: float) -> None:
    from tacl_scale.kernels import tacl_loss_packed

    s, t, m, a = make_batch(10, batch=4, length=13)
    s.requires_grad_(True)
    loss, correct, count = tacl_loss(s, t, m, a, temperature=temperature, impl="torch")
    loss.backward()
    rows = s.detach()[a.bool()].clone().requires_grad_(True)
    _, packed_t, packed_m, cu = pack(s.detach(), t, m, a)
    p_loss, p_correct, p_count = tacl_loss_packed(rows, packed_t, packed_m, cu, temperature, impl="torch")
    p_loss.backward()
    assert p_loss.item() == pytest.approx(loss.item(), rel=1e-6)
    assert (p_correct.item(), p_count.item()) == (correct.item(), count.item())
    torch.testing.assert_close(rows.grad, s.grad[a.bool()])
    ref_loss, _, _ = naive_tacl(s.detach(), t, m, a, temperature)
    assert p_loss.item() == pytest.approx(ref_loss.item(), rel=1e-5, abs=1e-5)


def test_packed_layout_refuses_bad_shapes() -> None:
    from tacl_scale.kernels import tacl_loss_packed

    s, t, m, a = make_batch(11)
    rows, packed_t, packed_m, cu = pack(s, t, m, a)
    with pytest.raises(ValueError, match=r"\(T, D\)"):
        tacl_loss_packed(s, t, m, cu, 0.01)
    with pytest.raises(ValueError, match=r"\(T,\)"):
        tacl_loss_packed(rows, packed_t, packed_m[:-1], cu, 0.01)
    with pytest.raises(ValueError, match="offsets"):
        tacl_loss_packed(rows, packed_t, packed_m, cu[:1], 0.01)
