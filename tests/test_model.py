"""Student/teacher construction and the combined TaCL + MLM + NSP objective on a
tiny random BERT (CPU)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from transformers import BertConfig

from tacl_scale.attention import ATTENTION
from tacl_scale.data.loader import CollateConfig, collate
from tacl_scale.model import ObjectiveConfig, make_teacher, pretraining_losses, teacher_states
from tacl_scale.pretrained import load_student

pytestmark = pytest.mark.framework  # also run on the GPU image's versions (scripts/test.sh --gpu-image)

TINY = dict(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=64)


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "bert.json"
    path.write_text(json.dumps(TINY))
    return path


def make_batch(seed: int = 0, batch: int = 4, length: int = 16) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    original = torch.randint(5, 120, (batch, length), generator=g)
    attention = torch.ones(batch, length, dtype=torch.long)
    attention[1, 12:] = 0
    original[attention == 0] = 0
    masked = (torch.rand(batch, length, generator=g) < 0.2) & attention.bool()
    masked[:, 1] = True
    inputs = original.clone()
    inputs[masked] = 3
    types = torch.zeros(batch, length, dtype=torch.long)
    types[:, length // 2 :] = 1
    return {"input_ids": inputs, "original_ids": original, "attention_mask": attention,
            "token_type_ids": types, "masked": masked,
            "nsp_label": torch.tensor([0, 1, 0, 1][:batch])}


def _spoil(model: Path, how: str) -> Path:
    """``model`` (a saved model directory) made into one kind of bad ``--model``."""
    if how == "an empty directory":
        for file in model.iterdir():
            file.unlink()
    elif how == "no config.json":
        (model / "config.json").unlink()
    elif how == "truncated weights":
        with open(model / "model.safetensors", "r+b") as weights:
            weights.truncate(1000)
    elif how == "weights of another shape":
        config = json.loads((model / "config.json").read_text())
        (model / "config.json").write_text(json.dumps({**config, "hidden_size": 64}))
    elif how == "another model type":
        config = json.loads((model / "config.json").read_text())
        (model / "config.json").write_text(json.dumps({**config, "model_type": "roberta"}))
    elif how == "no encoder weights":  # e.g. a RoBERTa checkpoint whose config says bert
        from safetensors.torch import load_file, save_file

        heads = {k: v for k, v in load_file(model / "model.safetensors").items() if k.startswith("cls.")}
        save_file(heads, model / "model.safetensors", metadata={"format": "pt"})
    elif how == "a run directory":
        (model / "run.json").write_text("{}")
    elif how == "a config the heads do not divide":
        model = model.parent / "odd.json"
        model.write_text(json.dumps({**TINY, "hidden_size": 33}))
    elif how == "a config.json value of the wrong type":
        config = json.loads((model / "config.json").read_text())
        (model / "config.json").write_text(json.dumps({**config, "hidden_size": "32"}))
    elif how == "a config file value of the wrong type":
        model = model.parent / "typed.json"
        model.write_text(json.dumps({**TINY, "hidden_size": "32"}))
    elif how == "a misspelt config setting":  # built BERT-base (hidden 768) from a tiny config
        model = model.parent / "typo.json"
        model.write_text(json.dumps({**{k: v for k, v in TINY.items() if k != "hidden_size"}, "hidden_sizee": 32}))
    elif how == "an unknown activation":
        model = model.parent / "act.json"
        model.write_text(json.dumps({**TINY, "hidden_act": "swish2"}))
    elif how == "a config that is a list":
        model = model.parent / "list.json"
        model.write_text("[1]")
    elif how == "a JSON of something else":  # a DeepSpeed config: trained BERT-base from random weights
        model = model.parent / "zero2.json"
        model.write_text(json.dumps({"train_batch_size": 256, "bf16": {"enabled": True}}))
    elif how == "a config of another model type":
        model = model.parent / "gpt2.json"
        model.write_text(json.dumps({**TINY, "model_type": "gpt2"}))
    return model


@pytest.mark.parametrize(("how", "said"), [
    ("an empty directory", "not a Hugging Face model directory: no config.json and no weights (model.safetensors"),
    ("no config.json", "not a Hugging Face model directory: no config.json"),
    ("truncated weights", "cannot load the model: Error while deserializing header"),
    ("weights of another shape", "cannot load the model: its weights do not have the shapes its config.json gives ("),
    ("weights of another shape", "e.g. bert.embeddings.LayerNorm.bias: [32] in the checkpoint, [64] by the config)"),
    ("another model type", "a roberta model (config.json's model_type), not BERT"),
    ("no encoder weights", "not a BERT checkpoint: 37 weights of BERT's encoder are not in it (e.g. bert.embeddings."),
    ("a run directory", "a training run directory, not a model directory: its student is exported to"),
    ("a config the heads do not divide", "The hidden size (33) is not a multiple of the number of attention heads"),
    # tracebacks before (transformers' strict config check; a KeyError)
    ("a config.json value of the wrong type", "cannot load the model: Validation error for field 'hidden_size': "
                                              "TypeError: Field 'hidden_size' expected int, got str (value: '32')"),
    ("a config file value of the wrong type", "not a BertConfig JSON: Validation error for field 'hidden_size': "
                                              "TypeError: Field 'hidden_size' expected int, got str (value: '32')"),
    ("a misspelt config setting", "not a BertConfig JSON: 'hidden_sizee' is not a BertConfig setting; did you mean "
                                  "'hidden_size'? (as written, it is ignored and hidden_size is 768)"),
    ("an unknown activation", "unknown hidden_act 'swish2'"),
    ("a config that is a list", "not a BertConfig JSON: not a JSON object"),
    ("a JSON of something else", "not a BertConfig JSON: none of its keys is a setting of BERT's shape (hidden_size, "),
    ("a config of another model type", "not a BertConfig JSON: a gpt2 config (its model_type), not BERT's"),
])
def test_a_bad_model_is_one_error_naming_it(how: str, said: str, config_file: Path, tmp_path: Path) -> None:
    """Without config.json, from_pretrained built BERT-base and re-initialised every
    weight; the others ended in tracebacks that named no path (or the run's)."""
    model = tmp_path / "model"
    load_student(config_file).save_pretrained(model)
    assert load_student(model).config.hidden_size == TINY["hidden_size"]
    bad = _spoil(model, how)
    with pytest.raises(ValueError) as refused:
        load_student(bad)
    assert str(refused.value).startswith(f"{bad}: ") and said in str(refused.value), refused.value


SIZE = "each size of the model must be a whole number of at least 1"


@pytest.mark.parametrize(("change", "said"), [
    # a traceback each: RuntimeError (negative dimension), ZeroDivisionError, AssertionError (the embedding's
    # padding_idx); num_hidden_layers -1 trained and exported a model of no layers that said -1
    ({"intermediate_size": -5}, f"intermediate_size -5: {SIZE}"),
    ({"hidden_size": 0}, f"hidden_size 0: {SIZE}"),
    ({"num_hidden_layers": -1}, f"num_hidden_layers -1: {SIZE}"),
    ({"type_vocab_size": 0}, f"type_vocab_size 0: {SIZE}"),
    ({"pad_token_id": 99999}, "pad_token_id 99999: not an id of the vocabulary of 120 tokens (vocab_size): give the id "
                              "of the tokenizer's [PAD] (0 in BERT's)"),
    ({"pad_token_id": -1}, "pad_token_id -1: not an id of the vocabulary of 120 tokens"),
])
@pytest.mark.parametrize("given_as", ["a BertConfig JSON", "a model directory's config.json"])
def test_a_config_of_sizes_no_model_has_is_refused_naming_the_file_and_key(change: dict, said: str, given_as: str,
                                                                           config_file: Path, tmp_path: Path) -> None:
    if given_as == "a BertConfig JSON":
        bad = settings_file = tmp_path / "bad.json"
        settings_file.write_text(json.dumps({**TINY, **change}))
    else:
        bad = tmp_path / "model"
        load_student(config_file).save_pretrained(bad)
        settings_file = bad / "config.json"
        settings_file.write_text(json.dumps({**json.loads(settings_file.read_text()), **change}))
    with pytest.raises(ValueError) as refused:
        load_student(bad)
    assert str(refused.value).startswith(f"{settings_file}: {said}"), refused.value


def test_an_encoder_without_heads_or_pooler_loads_with_them_initialised(config_file: Path, tmp_path: Path) -> None:
    """A sentence encoder (BertModel, no MLM/NSP heads, no pooler) is a BERT checkpoint:
    only the encoder's own weights must be there."""
    from transformers import BertModel

    encoder = BertModel(BertConfig(**TINY), add_pooling_layer=False)
    encoder.save_pretrained(tmp_path / "encoder")
    student = load_student(tmp_path / "encoder")
    for name, value in encoder.state_dict().items():
        assert torch.equal(student.bert.state_dict()[name], value), name
    # The heads and the pooler it lacked: BERT's initialisation (normal, std 0.02), not zeros or garbage.
    for name in ("cls.predictions.transform.dense.weight", "cls.seq_relationship.weight", "bert.pooler.dense.weight"):
        weight = student.state_dict()[name]
        assert torch.isfinite(weight).all() and 0.01 < float(weight.std()) < 0.03, (name, float(weight.std()))


def test_teacher_is_a_frozen_copy_of_the_initial_encoder(config_file: Path) -> None:
    student = load_student(config_file)
    assert student.config._attn_implementation == ATTENTION
    teacher = make_teacher(student, "fp32", torch.device("cpu"))
    assert teacher.pooler is None and not teacher.training
    assert all(not p.requires_grad for p in teacher.parameters())
    for name, value in teacher.state_dict().items():
        assert torch.equal(value, student.bert.state_dict()[name])
    # training the student leaves the teacher untouched
    with torch.no_grad():
        student.bert.embeddings.word_embeddings.weight.add_(1.0)
    assert not torch.equal(teacher.embeddings.word_embeddings.weight,
                           student.bert.embeddings.word_embeddings.weight)
    half = make_teacher(load_student(config_file), "bf16", torch.device("cpu"))
    assert next(half.parameters()).dtype == torch.bfloat16
    with pytest.raises(ValueError, match="teacher dtype"):
        make_teacher(student, "int8", torch.device("cpu"))


def test_losses_match_their_definitions(config_file: Path) -> None:
    torch.manual_seed(0)
    student = load_student(config_file).eval()  # no dropout: deterministic comparison
    teacher = make_teacher(student, "fp32", torch.device("cpu"))
    batch = make_batch()
    parts = pretraining_losses(student, batch, ObjectiveConfig(), teacher_states(teacher, batch))
    # Full-sequence HF forward, then pick the masked positions: same MLM loss.
    full = student(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                   token_type_ids=batch["token_type_ids"])
    mlm = F.cross_entropy(full.prediction_logits[batch["masked"]], batch["original_ids"][batch["masked"]])
    nsp = F.cross_entropy(full.seq_relationship_logits, batch["nsp_label"])
    hidden = student.bert(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                          token_type_ids=batch["token_type_ids"]).last_hidden_state
    target = teacher(input_ids=batch["original_ids"], attention_mask=batch["attention_mask"],
                     token_type_ids=batch["token_type_ids"]).last_hidden_state
    # TaCL (Eq. 1), written out: each masked token's student vector against every real
    # token of its sentence's teacher, cosine / τ, cross-entropy to its own position.
    temperature = ObjectiveConfig().temperature
    s, t = F.normalize(hidden, dim=-1), F.normalize(target, dim=-1)
    losses, correct = [], 0
    for row, position in batch["masked"].nonzero().tolist():
        real = batch["attention_mask"][row].bool()
        logits = s[row, position] @ t[row, real].T / temperature
        own = real[:position].sum()  # the position among the real tokens
        losses.append(F.cross_entropy(logits[None], own[None]))
        correct += int(logits.argmax() == own)
    tacl = torch.stack(losses).mean()
    assert parts["mlm"].item() == pytest.approx(mlm.item(), rel=1e-5)
    assert parts["nsp"].item() == pytest.approx(nsp.item(), rel=1e-5)
    assert parts["tacl"].item() == pytest.approx(tacl.item(), rel=1e-4)
    assert parts["loss"].item() == pytest.approx((mlm + nsp + tacl).item(), rel=1e-4)
    assert parts["tacl_acc"].item() == pytest.approx(correct / len(losses))


@pytest.mark.parametrize("objectives", [("mlm", "nsp"), ("tacl",), ("tacl", "mlm", "nsp")])
def test_objective_switches_and_gradients(config_file: Path, objectives: tuple[str, ...]) -> None:
    torch.manual_seed(1)
    student = load_student(config_file)
    teacher = make_teacher(student, "fp32", torch.device("cpu"))
    batch = make_batch(1)
    parts = pretraining_losses(student, batch, ObjectiveConfig(objectives=objectives), teacher_states(teacher, batch))
    unselected = {"tacl", "mlm", "nsp"} - set(objectives)
    assert set(objectives) <= set(parts) and not unselected & set(parts)
    parts["loss"].backward()
    assert all(p.grad is None for p in teacher.parameters())
    assert student.bert.encoder.layer[0].attention.self.query.weight.grad.abs().sum() > 0
    nsp_grad = student.cls.seq_relationship.weight.grad
    assert (nsp_grad is not None and nsp_grad.abs().sum() > 0) == ("nsp" in objectives)


def test_bad_configs(config_file: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="objectives"):
        ObjectiveConfig(objectives=("tacl", "sop"))
    with pytest.raises(ValueError, match="temperature"):
        ObjectiveConfig(temperature=0)
    with pytest.raises(ValueError, match="neither"):
        load_student(tmp_path / "missing")
    student = load_student(config_file)
    with pytest.raises(ValueError, match="needs the teacher"):
        pretraining_losses(student, make_batch(), ObjectiveConfig(objectives=("tacl",)))


def test_hf_directory_with_missing_heads_is_initialised(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from transformers import BertModel

    encoder_only = BertModel(BertConfig(**TINY))
    encoder_only.save_pretrained(tmp_path / "enc")
    with caplog.at_level("WARNING"):
        student = load_student(tmp_path / "enc")
    assert "are new: initialised at random" in caplog.text
    assert torch.equal(student.bert.embeddings.word_embeddings.weight, encoder_only.embeddings.word_embeddings.weight)


class _Records(logging.Handler):
    """The records a logger passes on (after its filters)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.mark.parametrize(("pooler", "said"), [
    (True, "the MLM head (cls.predictions.*: 6 weights) and the NSP head (cls.seq_relationship.*: 2 weights) are new"),
    (False, "the MLM head (cls.predictions.*: 6 weights), the NSP head (cls.seq_relationship.*: 2 weights) and the "
            "pooler (bert.pooler.*: 2 weights) are new"),
])
def test_an_encoders_new_heads_are_named_by_head_and_not_called_a_corrupted_checkpoint(
        pooler: bool, said: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A sentence encoder's checkpoint (all-MiniLM-L6-v2: no MLM/NSP heads) is healthy,
    but transformers said "This checkpoint seem corrupted" of the MLM head's tied
    biases, from every rank at every start; and the list of new weights stopped at 6
    names, the NSP head's never among them."""
    from transformers import BertModel

    BertModel(BertConfig(**TINY), add_pooling_layer=pooler).save_pretrained(tmp_path / "encoder")
    transformers_says = _Records()
    library = logging.getLogger("transformers.modeling_utils")
    library.addHandler(transformers_says)
    try:
        with caplog.at_level("INFO", logger="tacl_scale"):
            student = load_student(tmp_path / "encoder")
    finally:
        library.removeHandler(transformers_says)
    assert not [m for m in transformers_says.messages if "corrupted" in m], transformers_says.messages
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        f"student: {said}: initialised at random (not in {tmp_path / 'encoder'})"]
    assert student.cls.predictions.decoder.weight is student.bert.embeddings.word_embeddings.weight  # tied, not new
    from tacl_scale.pretrained import load_student_and_new_weights, new_weights_line

    _, new = load_student_and_new_weights(tmp_path / "encoder")
    assert {name.split(".")[0] + "." + name.split(".")[1] for name in new} == (
        {"cls.predictions", "cls.seq_relationship"} | (set() if pooler else {"bert.pooler"}))
    assert new_weights_line("M", []) is None
    assert new_weights_line("M", ["cls.seq_relationship.bias"]) == (
        "student: the NSP head (cls.seq_relationship.*: 1 weight) is new: initialised at random (not in M)")


@pytest.mark.parametrize("weights", ["model.safetensors", "pytorch_model.bin", "model.safetensors.index.json"])
def test_a_models_config_json_beside_its_weights_is_refused_naming_the_folder(weights: str, config_file: Path,
                                                                             tmp_path: Path) -> None:
    """--model M/config.json of a pretrained M started from random weights, said only in
    an INFO line ("random init from M/config.json"): the run trained and exported a
    model that had never seen M's weights."""
    model = tmp_path / "model"
    load_student(config_file).save_pretrained(model)
    if weights != "model.safetensors":
        (model / "model.safetensors").rename(model / weights)
    from tacl_scale.pretrained import config_beside_weights_problem

    assert config_beside_weights_problem(model / "config.json") == (
        f"{model / 'config.json'}: a model's config beside its weights ({weights}): pass the folder {model} to continue "
        "from its weights (a config file alone starts from random weights: copy it elsewhere to mean that)")
    elsewhere = tmp_path / "config.json"
    elsewhere.write_bytes((model / "config.json").read_bytes())
    assert config_beside_weights_problem(elsewhere) is None
    assert load_student(elsewhere).config.hidden_size == TINY["hidden_size"]  # a config alone: a random init
    # A run that began so (before the check) still loads it: its resume and its export (tacl-export of the run).
    assert load_student(model / "config.json").config.hidden_size == TINY["hidden_size"]


def test_teacher_never_changes_while_the_student_trains(config_file: Path) -> None:
    from tacl_scale.model import PretrainingModule

    torch.manual_seed(2)
    student = load_student(config_file)
    teacher = make_teacher(student, "fp32", torch.device("cpu"))
    before = {k: v.clone() for k, v in teacher.state_dict().items()}
    module = PretrainingModule(student, ObjectiveConfig())
    assert not {id(p) for p in teacher.parameters()} & {id(p) for p in module.parameters()}
    optimizer = torch.optim.AdamW(module.parameters(), lr=1e-2)
    for step in range(3):
        batch = make_batch(step)
        module(batch, teacher_states(teacher, batch))["loss"].backward()
        optimizer.step()
        optimizer.zero_grad()
    assert all(torch.equal(v, before[k]) for k, v in teacher.state_dict().items())
    assert not torch.equal(student.bert.embeddings.word_embeddings.weight,
                           before["embeddings.word_embeddings.weight"])


def ragged_items(seed: int = 0, lengths: tuple[int, ...] = (16, 9, 13, 5, 12)) -> list[dict]:
    rng = np.random.default_rng(seed)
    items = []
    for n in lengths:
        ids = rng.integers(5, 120, n)
        ids[0] = 2
        positions = np.sort(rng.choice(np.arange(1, n), size=max(1, n // 4), replace=False))
        inputs = ids.copy()
        inputs[positions] = 3
        types = np.zeros(n, dtype=np.int64)
        types[n // 2 :] = 1
        items.append({"original_ids": ids, "input_ids": inputs, "token_type_ids": types,
                      "masked_positions": positions, "nsp_label": n % 2})
    return items


@pytest.mark.parametrize("objectives", [("tacl", "mlm", "nsp"), ("mlm", "nsp")])
def test_unpadded_batches_give_the_padded_losses_and_gradients(config_file: Path,
                                                               objectives: tuple[str, ...]) -> None:
    """The packed layout runs the same model over the real tokens only: same
    losses, same gradients (no dropout, so the comparison is exact up to float
    reassociation)."""
    torch.manual_seed(3)
    student = load_student(config_file).eval()
    teacher = make_teacher(student, "fp32", torch.device("cpu"))
    assert teacher.config._attn_implementation == ATTENTION
    items = ragged_items()
    grads, losses = [], []
    for config in (CollateConfig(), CollateConfig(unpad=True)):
        batch = collate(items, config)
        student.zero_grad()
        parts = pretraining_losses(student, batch, ObjectiveConfig(objectives), teacher_states(teacher, batch))
        parts["loss"].backward()
        losses.append({k: v.item() for k, v in parts.items()})
        grads.append({n: p.grad.clone() for n, p in student.named_parameters() if p.grad is not None})
    padded, packed = losses
    assert packed.keys() == padded.keys()
    for key, value in padded.items():
        assert packed[key] == pytest.approx(value, rel=1e-5, abs=1e-6), key
    assert grads[0].keys() == grads[1].keys()
    for name, grad in grads[0].items():
        torch.testing.assert_close(grads[1][name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_unpadded_attention_keeps_sequences_apart(config_file: Path) -> None:
    """A token of one packed sequence never sees another sequence: changing one
    instance leaves the others' teacher states unchanged."""
    student = load_student(config_file)
    teacher = make_teacher(student, "fp32", torch.device("cpu"))
    items = ragged_items(1)
    before = teacher_states(teacher, collate(items, CollateConfig(unpad=True)))
    items[2] = {**items[2], "original_ids": items[2]["original_ids"][::-1].copy()}
    after_batch = collate(items, CollateConfig(unpad=True))
    after = teacher_states(teacher, after_batch)
    cu = after_batch["cu_seqlens"].tolist()
    unchanged = torch.ones(len(after), dtype=torch.bool)
    unchanged[cu[2]:cu[3]] = False
    torch.testing.assert_close(after[unchanged], before[unchanged])
    assert not torch.allclose(after[~unchanged], before[~unchanged])
    # and a padded batch through the same attention still respects its mask
    padded = teacher_states(teacher, collate(items, CollateConfig()))
    torch.testing.assert_close(padded[collate(items, CollateConfig())["attention_mask"].bool()], after,
                               rtol=1e-4, atol=1e-5)


def test_unpadded_training_uses_attention_dropout(config_file: Path) -> None:
    """In training mode the packed path applies attention dropout (two forwards
    differ), in eval mode it is deterministic."""
    student = load_student(config_file)
    student.config.hidden_dropout_prob = 0.0
    for layer in student.bert.encoder.layer:
        layer.attention.output.dropout.p = 0.0
        layer.output.dropout.p = 0.0
    student.bert.embeddings.dropout.p = 0.0
    batch = collate(ragged_items(2), CollateConfig(unpad=True))
    from tacl_scale.model import student_states

    student.train()
    a, b = student_states(student, batch)[0], student_states(student, batch)[0]
    assert not torch.allclose(a, b)
    student.eval()
    torch.testing.assert_close(student_states(student, batch)[0], student_states(student, batch)[0])


def test_exported_config_names_a_standard_attention(config_file: Path, tmp_path: Path) -> None:
    """The run's own attention (registered by tacl_scale) never reaches the config
    an export writes: run.json keeps the student's config without it, and the model
    written from that loads and runs in a Python that never imports tacl_scale."""
    import subprocess
    import sys

    from transformers import BertForPreTraining

    from tacl_scale.run_dir import student_config_dict

    student = load_student(config_file)
    assert student.config._attn_implementation == ATTENTION  # what training runs
    recorded = student_config_dict(student)  # what run.json keeps, and an export builds from
    assert not any("attn" in key for key in recorded)
    BertForPreTraining(BertConfig.from_dict(recorded)).save_pretrained(tmp_path / "out")
    assert ATTENTION not in (tmp_path / "out" / "config.json").read_text()
    code = ("import sys, torch; from transformers import BertForPreTraining; "
            f"m = BertForPreTraining.from_pretrained({str(tmp_path / 'out')!r}); "
            "m(torch.tensor([[2, 5, 3]])); assert 'tacl_scale' not in sys.modules; print('ran')")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert loaded.stdout.strip() == "ran", loaded.stderr[-3000:]
