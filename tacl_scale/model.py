"""Student, teacher and the TaCL objective (docs/design.md, "The method").

- Student: ``BertForPreTraining`` (trained), on the masked input.
- Teacher: a bare ``BertModel`` encoder (no pooler, no heads) with the student's
  *initial* weights, frozen, eval mode, on the unmasked input; fp16 on CUDA by
  default. It is a plain module, never registered with an optimiser or engine.
- Loss: ``L = L_TaCL + L_MLM + L_NSP (+ L_mirror)``, any subset by ``objectives``. The MLM
  head runs only at masked positions (no full-sequence vocabulary projection).
  ``mirror`` is the sentence-level contrastive objective of Mirror-BERT/SimCSE
  (:mod:`tacl_scale.mirror`); the paper's Table 2 configurations are subsets:
  ``tacl,mlm,nsp`` TaCL, ``mlm,nsp`` BERT+MT, ``mlm,nsp,mirror`` model-1, ``tacl``
  model-2, ``mirror`` Mirror-BERT (or SimCSE with span 0).

Batches come padded (``(B, L)`` tensors with an ``attention_mask``) or packed (the
real tokens of all sequences back to back, ``(T,)`` tensors with ``cu_seqlens`` and
``position_ids``; see :func:`tacl_scale.data.loader.collate`). Both models use the
attention of :mod:`tacl_scale.attention`, which runs a packed batch unpadded and a
padded one through SDPA, so every function here takes either layout. Loading the
student from ``--model`` is :mod:`tacl_scale.pretrained`.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.functional as F
from transformers import BertForPreTraining, BertModel

from .config import TEACHER_DTYPE_NAMES, MirrorConfig, ObjectiveConfig
from .encoder import CompiledEncoder, masked_lm_loss
from .kernels import tacl_loss, tacl_loss_packed
from .mirror import Gather, both_views, info_nce, pool

# Objectives that read the student on the MLM-masked input (mirror reads its own views).
MASKED_INPUT_OBJECTIVES = ("tacl", "mlm", "nsp")
TEACHER_DTYPES = dict(zip(TEACHER_DTYPE_NAMES, (torch.bfloat16, torch.float16, torch.float32), strict=True))


def default_teacher_dtype(device: torch.device) -> str:
    """fp16 on CUDA as in the paper; fp32 on CPU, where half matmuls are slow."""
    return "fp16" if device.type == "cuda" else "fp32"


def make_teacher(student: BertForPreTraining, dtype: str, device: torch.device) -> BertModel:
    """A frozen copy of the student's encoder as it is now (call before training)."""
    if dtype not in TEACHER_DTYPES:
        raise ValueError(f"teacher dtype {dtype!r} not in {sorted(TEACHER_DTYPES)}")
    teacher = BertModel(copy.deepcopy(student.config), add_pooling_layer=False)
    state = {k: v for k, v in student.bert.state_dict().items() if not k.startswith("pooler.")}
    teacher.load_state_dict(state)
    teacher.to(device=device, dtype=TEACHER_DTYPES[dtype]).eval()
    teacher.requires_grad_(False)
    return teacher


def is_packed(batch: dict[str, Any]) -> bool:
    """Whether ``batch`` is in the packed (unpadded) layout."""
    return "cu_seqlens" in batch


def encode(encoder: BertModel, input_ids: torch.Tensor, batch: dict[str, Any], **options: Any) -> Any:
    """``encoder``'s output on ``input_ids`` with the batch's segments and layout: a
    packed batch runs as one row of real tokens, each attending to its own
    sequence (outputs are (1, T, ...)); a padded one with its attention mask."""
    if is_packed(batch):
        cu_seqlens, longest = batch["cu_seqlens"], batch["max_seqlen"]
        return encoder(input_ids=input_ids[None], token_type_ids=batch["token_type_ids"][None],
                       position_ids=batch["position_ids"][None], cu_seq_lens_q=cu_seqlens,
                       cu_seq_lens_k=cu_seqlens, max_length_q=longest, max_length_k=longest, **options)
    return encoder(input_ids=input_ids, attention_mask=batch["attention_mask"],
                   token_type_ids=batch["token_type_ids"], **options)


def last_hidden(encoder: BertModel, input_ids: torch.Tensor, batch: dict[str, Any],
                fast: CompiledEncoder | None = None) -> torch.Tensor:
    """``encoder``'s last hidden states on ``input_ids``: (B, L, D) padded, (T, D)
    packed; through ``fast`` (the same encoder compiled, :mod:`tacl_scale.encoder`)
    when given."""
    if fast is not None:
        return fast(input_ids, batch)
    hidden = encode(encoder, input_ids, batch).last_hidden_state
    return hidden[0] if is_packed(batch) else hidden


def teacher_states(teacher: BertModel, batch: dict[str, Any], dropout_seed: int | None = None,
                   fast: CompiledEncoder | None = None) -> torch.Tensor:
    """The teacher's last hidden states on the unmasked input (no graph): (B, L, D)
    for a padded batch, (T, D) for a packed one; through ``fast``, its compiled
    encoder, when given. With ``dropout_seed`` the teacher
    runs in train mode, dropout on, as in the paper's released code (where the
    teacher is a submodule of the trained model), drawing its masks from a stream
    of its own seeded by ``dropout_seed``: the caller's RNG state is left as it was."""
    if dropout_seed is None:
        with torch.no_grad():  # not inference_mode: the TaCL loss saves them for backward
            return last_hidden(teacher, batch["original_ids"], batch, fast)
    device = batch["original_ids"].device
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(dropout_seed)
        teacher.train()
        try:
            return teacher_states(teacher, batch, fast=fast)
        finally:
            teacher.eval()


def student_states(student: BertForPreTraining, batch: dict[str, Any],
                   fast: CompiledEncoder | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The student's last hidden states on the masked input, (B, L, D) or (T, D)
    like :func:`teacher_states`, and its pooled ``[CLS]`` vectors (B, D); through
    ``fast``, its compiled encoder, when given."""
    encoder = student.bert
    if fast is None and not is_packed(batch):
        out = encode(encoder, batch["input_ids"], batch)
        return out.last_hidden_state, out.pooler_output
    hidden = last_hidden(encoder, batch["input_ids"], batch, fast)
    if not is_packed(batch):
        return hidden, encoder.pooler(hidden)
    # BertModel pools the first token of its one packed row; NSP needs every sequence's [CLS].
    first_tokens = batch["cu_seqlens"][:-1].long()
    return hidden, encoder.pooler(hidden[first_tokens].unsqueeze(1))


def mirror_loss(
    encoder: BertModel, batch: dict[str, Any], config: MirrorConfig, gather: Gather | None = None,
    fast: CompiledEncoder | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss, contrastive accuracy) of the ``mirror`` objective: ``encoder`` on the
    batch's two views (``mirror_ids``, from :class:`~tacl_scale.data.views.MirrorViews`)
    in one forward pass, pooled, through :func:`~tacl_scale.mirror.info_nce`."""
    if "mirror_ids" not in batch:
        raise ValueError("the mirror objective needs the batch's two views (mirror_ids): build the batches "
                         "through TrainingInstances with MirrorViews")
    ids, doubled = both_views(batch)
    hidden = last_hidden(encoder, ids, doubled, fast)
    view1, view2 = pool(hidden, doubled, config.pooling).chunk(2)
    return info_nce(view1, view2, config.temperature, gather)


def pretraining_losses(
    student: BertForPreTraining,
    batch: dict[str, Any],
    config: ObjectiveConfig,
    teacher_hidden: torch.Tensor | None = None,
    gather: Gather | None = None,
    fast: CompiledEncoder | None = None,
) -> dict[str, torch.Tensor]:
    """``loss`` (the sum of the chosen objectives) and each part with its metrics:
    ``tacl``, ``tacl_acc``, ``mlm``, ``mlm_acc``, ``nsp``, ``nsp_acc``, ``mirror``,
    ``mirror_acc``. ``teacher_hidden`` (from :func:`teacher_states`) is needed for
    TaCL; ``gather`` makes the other ranks' sequences ``mirror``'s negatives too;
    ``fast`` is the student's encoder compiled (:mod:`tacl_scale.encoder`)."""
    losses: dict[str, torch.Tensor] = {}
    total = torch.zeros((), dtype=torch.float32, device=batch["original_ids"].device)
    if "mirror" in config.objectives:
        losses["mirror"], losses["mirror_acc"] = mirror_loss(student.bert, batch, config.mirror, gather, fast)
        total = total + losses["mirror"]
    if not set(config.objectives) & set(MASKED_INPUT_OBJECTIVES):
        losses["loss"] = total
        return losses
    hidden, pooled = student_states(student, batch, fast)
    if "mlm" in config.objectives:
        losses["mlm"], accuracy = _mlm_term(student, hidden, batch, fast)
        if accuracy is not None:
            losses["mlm_acc"] = accuracy
        total = total + losses["mlm"]
    if "nsp" in config.objectives:
        losses["nsp"], losses["nsp_acc"] = _nsp_term(student, pooled, batch)
        total = total + losses["nsp"]
    if "tacl" in config.objectives:
        if teacher_hidden is None:
            raise ValueError("the tacl objective needs the teacher's hidden states")
        losses["tacl"], losses["tacl_acc"] = _tacl_term(hidden, teacher_hidden, batch, config)
        total = total + losses["tacl"]
    losses["loss"] = total
    return losses


def _mlm_term(student: BertForPreTraining, hidden: torch.Tensor, batch: dict[str, Any],
              fast: CompiledEncoder | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """MLM's loss and accuracy over the masked positions only (``(M, V)`` logits, no
    full-sequence vocabulary projection); for a micro-batch without masked positions
    a zero loss that still reaches the head's weights, and no accuracy."""
    rows = batch.get("tacl_rows")  # the masked rows as the collate found them on the CPU
    if rows is not None:  # gathered by index: a boolean mask would wait for the GPU (nonzero)
        picked = hidden.reshape(-1, hidden.shape[-1])[rows.index]
        labels = batch["original_ids"].reshape(-1)[rows.index]
    else:
        picked, labels = hidden[batch["masked"]], batch["original_ids"][batch["masked"]]
    if not labels.numel():
        return student.cls.predictions(picked).float().sum() * 0.0, None
    if fast is not None:
        return fast.masked_lm(student.cls.predictions, picked, labels)
    return masked_lm_loss(student.cls.predictions, picked, labels)


def _nsp_term(student: BertForPreTraining, pooled: torch.Tensor,
              batch: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """NSP's loss and accuracy from the pooled ``[CLS]`` states."""
    logits = student.cls.seq_relationship(pooled)
    return (F.cross_entropy(logits.float(), batch["nsp_label"]),
            (logits.argmax(-1) == batch["nsp_label"]).float().mean())


def _tacl_term(hidden: torch.Tensor, teacher_hidden: torch.Tensor, batch: dict[str, Any],
               config: ObjectiveConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """TaCL's loss and accuracy (the share of masked tokens whose own teacher state
    scores highest), packed or padded; ``reference_compat`` padded only."""
    rows = batch.get("tacl_rows")
    if is_packed(batch):
        if config.reference_compat:
            raise ValueError("reference_compat makes padding columns TaCL negatives: it needs padded batches")
        loss, correct, count = tacl_loss_packed(hidden, teacher_hidden, batch["masked"], batch["cu_seqlens"],
                                                config.temperature, config.tacl_impl, rows)
    else:
        loss, correct, count = tacl_loss(hidden, teacher_hidden, batch["masked"], batch["attention_mask"],
                                         config.temperature, config.tacl_impl, rows,
                                         padding_negatives=config.reference_compat)
    return loss, correct.float() / count.clamp(min=1)


class PretrainingModule(torch.nn.Module):
    """The student with its objective, as one module for the DeepSpeed engine (the
    teacher stays outside: it is not trained, checkpointed or partitioned)."""

    def __init__(self, student: BertForPreTraining, config: ObjectiveConfig, gather: Gather | None = None,
                 fast: CompiledEncoder | None = None) -> None:
        super().__init__()
        self.student = student
        self.config = config
        self.gather = gather  # across data-parallel ranks, for mirror's negatives
        self.fast = fast  # the student's encoder compiled (a plain object: its parameters stay the student's)

    def forward(
        self, batch: dict[str, Any], teacher_hidden: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        return pretraining_losses(self.student, batch, self.config, teacher_hidden, self.gather, self.fast)
