from types import SimpleNamespace

import pytest

from tacl_scale.flops import encoder_forward_flops, peak_flops, step_flops

pytestmark = pytest.mark.framework  # also run on the GPU image's versions (scripts/test.sh --gpu-image)

BASE = SimpleNamespace(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, vocab_size=30522)


def test_encoder_flops_match_the_parameter_rule_of_thumb() -> None:
    # ~2 FLOPs per weight per token for the layer matmuls (85M weights in BERT-base
    # layers), plus attention scores and weighted sums.
    flops = encoder_forward_flops(BASE, [128])
    weights = 12 * (4 * 768 * 768 + 2 * 768 * 3072)
    assert flops == pytest.approx(2 * weights * 128 + 12 * 4 * 128 * 128 * 768)


def test_only_real_tokens_count_and_attention_stays_within_a_sequence() -> None:
    ragged = encoder_forward_flops(BASE, [100, 200])
    weights = 12 * (4 * 768 * 768 + 2 * 768 * 3072)
    assert ragged == pytest.approx(2 * weights * 300 + 12 * 4 * (100**2 + 200**2) * 768)
    assert ragged < encoder_forward_flops(BASE, [200, 200])


def test_step_flops_count_teacher_and_heads() -> None:
    lengths = [256] * 32
    mlm_nsp = step_flops(BASE, lengths, 1200, ("mlm", "nsp"))
    tacl = step_flops(BASE, lengths, 1200, ("tacl", "mlm", "nsp"))
    encoder = encoder_forward_flops(BASE, lengths)
    assert mlm_nsp["teacher"] == 0 and tacl["teacher"] == pytest.approx(encoder)
    assert tacl["student"] - mlm_nsp["student"] == pytest.approx(3 * 2 * 1200 * 256 * 768)
    assert tacl["total"] == pytest.approx(tacl["student"] + tacl["teacher"])
    assert peak_flops("NVIDIA H200") == 989e12 and peak_flops("cpu") is None


def test_mirror_counts_two_more_student_passes() -> None:
    lengths = [64] * 8
    encoder = encoder_forward_flops(BASE, lengths)
    alone = step_flops(BASE, lengths, 0, ("mirror",))
    assert alone["student"] == pytest.approx(3 * 2 * encoder) and alone["teacher"] == 0
    model_1 = step_flops(BASE, lengths, 80, ("mlm", "nsp", "mirror"))
    assert model_1["student"] == pytest.approx(step_flops(BASE, lengths, 80, ("mlm", "nsp"))["student"] + 6 * encoder)


def test_one_mfu_definition_against_the_datasheet_peak() -> None:
    from tacl_scale.flops import mfu

    assert peak_flops("NVIDIA H100 80GB HBM3") == 989e12 and peak_flops("NVIDIA H100 PCIe") == 756e12
    assert peak_flops("NVIDIA GH200 480GB") == 989e12 and peak_flops("Tesla V100-SXM2-32GB") == 125e12
    # 494.5 TFLOP in one second on an H200: half its datasheet peak, whatever a matmul measured
    assert mfu(494.5e12, 1.0, peak_flops("NVIDIA H200")) == pytest.approx(0.5)
    assert mfu(494.5e12, 2.0, 989e12) == pytest.approx(0.25)
