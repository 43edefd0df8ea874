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
padded one through SDPA, so every function here takes either layout.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from huggingface_hub.errors import StrictDataclassError
from safetensors import SafetensorError
from transformers import BertConfig, BertForPreTraining, BertModel

from .attention import register as register_attention
from .config import TEACHER_DTYPE_NAMES, MirrorConfig, ObjectiveConfig
from .encoder import CompiledEncoder, masked_lm_loss
from .files import first_line, json_object
from .kernels import tacl_loss, tacl_loss_packed
from .markers import MODEL_CONFIG
from .mirror import Gather, both_views, info_nce, pool
from .run_dir import STUDENT_SHAPE, RunDir

log = logging.getLogger(__name__)

# Objectives that read the student on the MLM-masked input (mirror reads its own views).
MASKED_INPUT_OBJECTIVES = ("tacl", "mlm", "nsp")
TEACHER_DTYPES = dict(zip(TEACHER_DTYPE_NAMES, (torch.bfloat16, torch.float16, torch.float32), strict=True))
# What from_pretrained loads a model directory's weights from (whole or sharded).
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
# What from_pretrained raises for a directory it cannot load: an unreadable
# config.json, a truncated weights file, weights that do not fit the config, a
# config.json value of the wrong type (transformers' strict config check).
LOAD_ERRORS = (OSError, ValueError, RuntimeError, SafetensorError, StrictDataclassError)
# The parts of BertForPreTraining a checkpoint may lack (an encoder's has neither head,
# some no pooler), each said by name when initialised at random (new_weights_line).
NEW_PARTS = (("cls.predictions.", "the MLM head"), ("cls.seq_relationship.", "the NSP head"),
             ("bert.pooler.", "the pooler"))
HEAD_PREFIXES = tuple(prefix for prefix, _ in NEW_PARTS if prefix.startswith("cls."))
# transformers' warning when both weights of a tie are missing (modeling_utils.tie_weights).
_CORRUPTED_TIE = re.compile(r"seem corrupted\. The tied weights mapping .* to tie (\S+) to (\S+), but both are absent")
# What building the modules of a BertConfig raised for settings no check foresaw
# (torch's own asserts and arithmetic on a size): one line naming the file, not a traceback.
BUILD_ERRORS = (RuntimeError, IndexError, ZeroDivisionError, AssertionError, TypeError, OverflowError)


@contextlib.contextmanager
def own_load_report() -> Iterator[None]:
    """Hold back Hugging Face's load report (a table of every weight the checkpoint
    lacks or has beyond the model, e.g. the MLM/NSP heads a ``BertModel`` ignores),
    and its "This checkpoint seem corrupted" about the MLM head's tied biases that
    a checkpoint without that head lacks, while the caller loads and says in one
    line what matters (:func:`new_weights_line`). Its other messages still show.
    A filter, not a level: at WARNING or above that logger makes from_pretrained
    log a tensor-parallel plan check of its own."""
    report = logging.getLogger("transformers.modeling_utils")

    def not_the_report(record: logging.LogRecord) -> bool:
        message = str(record.msg)
        if "LOAD REPORT" in message:
            return False
        # A checkpoint without the MLM head (a sentence encoder's) lacks both of the tied
        # cls.predictions biases: transformers calls that "corrupted", from every rank and
        # at every start; the caller names the heads it initialises instead.
        tied = _CORRUPTED_TIE.search(message)
        return tied is None or not all(name.startswith(HEAD_PREFIXES) for name in tied.groups())

    report.addFilter(not_the_report)
    try:
        yield
    finally:
        report.removeFilter(not_the_report)


def cannot_load(path: str | Path, err: BaseException) -> ValueError:
    """One of :data:`LOAD_ERRORS` as one line naming the model directory (the
    library's messages name none, or run to a table of every weight)."""
    return ValueError(f"{path}: cannot load the model: {_one_line(err)}")


def mismatch_problem(path: str | Path, info: dict[str, Any]) -> str | None:
    """Why a model loaded with ``ignore_mismatched_sizes=True`` cannot be used: a
    weight whose shape differs from its config.json's (named with both shapes; the
    library's own error says only "look at the above report", which
    :func:`own_load_report` holds back), or None."""
    mismatched = sorted(info.get("mismatched_keys", ()), key=lambda entry: str(entry[0]))
    if not mismatched:
        return None
    name, saved, wanted = mismatched[0]
    return (f"{path}: cannot load the model: its weights do not have the shapes its config.json gives ({len(mismatched)} "
            f"of them, e.g. {name}: {list(saved)} in the checkpoint, {list(wanted)} by the config): a config.json "
            "of another model beside these weights?")


def _one_line(err: BaseException) -> str:
    """An error's message in one line: its first, or for transformers' config check
    ("Validation error for field 'X':" then the cause) all of it."""
    if isinstance(err, StrictDataclassError):
        return " ".join(str(err).split())
    return first_line(err)


def load_student(path: str | Path) -> BertForPreTraining:
    """:func:`load_student_and_new_weights`'s student, the weights it initialised
    said in the log here (a training run says them itself, once, on rank 0, and not
    when a checkpoint then replaces them)."""
    student, new = load_student_and_new_weights(path)
    if line := new_weights_line(path, new):
        log.warning("%s", line)
    return student


def config_beside_weights_problem(path: str | Path) -> str | None:
    """Why a new run may not start from the BertConfig JSON ``path``, or None: it is
    a model folder's own ``config.json``, beside the weights it describes. Given
    alone it quietly trained from random weights what was meant to continue from
    those. Asked of a new run only: a run started so before this check resumes and
    exports as it began."""
    path = Path(path)
    if path.is_file() and path.name == MODEL_CONFIG and (weights := _weights_in(path.parent)):
        return (f"{path}: a model's config beside its weights ({weights}): pass the folder {path.parent} to continue "
                "from its weights (a config file alone starts from random weights: copy it elsewhere to mean that)")
    return None


def load_student_and_new_weights(path: str | Path) -> tuple[BertForPreTraining, list[str]]:
    """A ``BertForPreTraining`` from a HF model directory, with the names of the
    weights the checkpoint lacked and from_pretrained initialised at random (a
    sentence encoder's MLM and NSP heads; :func:`new_weights_line` says them), or
    from a ``BertConfig`` JSON file (random initialisation, no names: every weight
    is new). Attention: :data:`tacl_scale.attention.ATTENTION` (unpadded for packed
    batches, SDPA for padded ones)."""
    attention = register_attention()
    path = Path(path)
    if path.is_file():
        try:
            settings = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(settings, dict):
                raise ValueError("not a JSON object")
            if problem := bert_settings_problem(settings):
                raise ValueError(problem)
            config = BertConfig(**settings)
        except (OSError, ValueError, TypeError, StrictDataclassError) as err:
            raise ValueError(f"{path}: not a BertConfig JSON: {_one_line(err)}") from err
        if problem := bert_values_problem(config.to_dict()):
            raise ValueError(f"{path}: {problem}")
        config._attn_implementation = attention
        log.info("student: random init from %s", path)
        try:
            return BertForPreTraining(config), []
        except KeyError as err:  # an unknown hidden_act
            raise ValueError(f"{path}: unknown hidden_act {err}") from err
        except ValueError as err:  # settings that do not fit together (heads that do not divide the width)
            raise ValueError(f"{path}: {err}") from err
        except BUILD_ERRORS as err:  # what the checks above did not foresee: one line, not a traceback
            raise ValueError(f"{path}: cannot build the model of these settings: {type(err).__name__}: "
                             f"{first_line(err)}") from err
    if not path.is_dir():
        raise ValueError(f"{path}: neither a model directory nor a BertConfig JSON")
    if (run := RunDir(path)).has_record():
        raise ValueError(f"{path}: a training run directory, not a model directory: its student is exported to "
                         f"{run.export} (tacl-export writes one from any checkpoint)")
    # Without config.json, from_pretrained would build a default BertConfig (BERT-base)
    # and re-initialise every weight that does not fit it.
    missing = []
    if not (path / MODEL_CONFIG).is_file():
        missing.append("no config.json")
    if _weights_in(path) is None:
        missing.append("no weights (model.safetensors or pytorch_model.bin)")
    if missing:
        raise ValueError(f"{path}: not a Hugging Face model directory: {' and '.join(missing)}")
    settings = json_object(path / MODEL_CONFIG)  # None: none, or unreadable, which from_pretrained reports
    model_type = settings.get("model_type") if settings is not None else None
    if model_type not in (None, "bert"):
        raise ValueError(f"{path}: a {model_type} model (config.json's model_type), not BERT: tacl-scale continues "
                         "BERT checkpoints (BertForPreTraining)")
    if settings is not None and (problem := bert_values_problem({**BertConfig().to_dict(), **settings})):
        raise ValueError(f"{path / 'config.json'}: {problem}")
    try:
        with own_load_report():
            model, info = BertForPreTraining.from_pretrained(
                str(path), attn_implementation=attention, local_files_only=True, output_loading_info=True,
                ignore_mismatched_sizes=True,  # refused below, naming a weight and both shapes
            )
    except LOAD_ERRORS as err:  # not BUILD_ERRORS: with settings checked above, those are a defect (the traceback)
        raise cannot_load(path, err) from err
    if problem := mismatch_problem(path, info):
        raise ValueError(problem)
    # from_pretrained initialises what the checkpoint lacks and only warns: a RoBERTa or
    # DistilBERT directory would be continued as a randomly initialised BERT.
    encoder_missing = sorted(k for k in info.get("missing_keys", ()) if k.startswith(("bert.embeddings.",
                                                                                      "bert.encoder.")))
    if encoder_missing:
        raise ValueError(f"{path}: not a BERT checkpoint: {len(encoder_missing)} weights of BERT's encoder are not "
                         f"in it (e.g. {', '.join(encoder_missing[:2])}), so training would start from random ones")
    log.info("student: loaded from %s", path)
    return model, sorted(info.get("missing_keys", ()))


def new_weights_line(path: str | Path, names: list[str]) -> str | None:
    """The weights a checkpoint lacked (``names``, initialised at random) in one line,
    grouped by part: "student: the MLM head (cls.predictions.*: 6 weights) and the
    NSP head (cls.seq_relationship.*: 2 weights) are new: initialised at random (not
    in PATH)"; None without any."""
    if not names:
        return None
    parts = []
    for prefix, part in NEW_PARTS:
        count = sum(name.startswith(prefix) for name in names)
        if count:
            parts.append(f"{part} ({prefix}*: {count} weight{'s' if count > 1 else ''})")
    others = [name for name in names if not name.startswith(tuple(prefix for prefix, _ in NEW_PARTS))]
    parts += others
    listed = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
    return f"student: {listed} {'is' if len(parts) == 1 else 'are'} new: initialised at random (not in {path})"


def _weights_in(directory: Path) -> str | None:
    """The name of the first of :data:`WEIGHT_FILES` in ``directory``, or None."""
    return next((name for name in WEIGHT_FILES if (directory / name).is_file()), None)


def bert_settings_problem(settings: dict[str, Any]) -> str | None:
    """Why a BertConfig JSON's object does not describe the BERT meant, in words, or
    None. BertConfig keeps unknown keys as attributes and builds the default for
    every setting not given: a JSON of something else (a dataset's manifest.json, a
    DeepSpeed config) made BERT-base, and a key that nearly spells a setting
    (``"hidden_sizee": 64``) made that setting BERT-base's. Other unknown keys (a
    checkpoint's ``gradient_checkpointing``) pass."""
    known = BertConfig().to_dict()
    if (model_type := settings.get("model_type", "bert")) != "bert":
        return f"a {model_type} config (its model_type), not BERT's"
    for key in settings:
        if key not in known and (near := difflib.get_close_matches(key, list(known), n=1, cutoff=0.85)):
            return (f"{key!r} is not a BertConfig setting; did you mean {near[0]!r}? (as written, it is ignored and "
                    f"{near[0]} is {known[near[0]]!r})")
    if not _ARCHITECTURE.intersection(settings):
        return (f"none of its keys is a setting of BERT's shape ({', '.join(sorted(_ARCHITECTURE))}): it would be "
                "BERT-base, every setting the default")
    return None


# The settings of a BertConfig that decide the network's shape.
_ARCHITECTURE = frozenset(STUDENT_SHAPE)


def bert_values_problem(settings: dict[str, Any]) -> str | None:
    """Why a BertConfig's settings (all of them, defaults included) cannot make a
    model that trains, naming the key, or None: a size (:data:`_ARCHITECTURE`) that
    is not a whole number of at least 1 (``intermediate_size -5`` failed in a
    traceback, ``hidden_size 0`` in a ZeroDivisionError, ``num_hidden_layers -1``
    trained and exported a model of no layers), or a ``pad_token_id`` that is no id of
    the vocabulary (an AssertionError in the embedding). A value of another type is
    left to BertConfig's own check, which names its type."""
    for key in STUDENT_SHAPE:
        value = settings.get(key)
        if value is None or isinstance(value, bool) or (isinstance(value, int) and value < 1):
            return f"{key} {json.dumps(value)}: each size of the model must be a whole number of at least 1"
    pad, vocab_size = settings.get("pad_token_id"), settings.get("vocab_size")
    if (isinstance(pad, int) and not isinstance(pad, bool) and isinstance(vocab_size, int)
            and not 0 <= pad < vocab_size):
        return (f"pad_token_id {pad}: not an id of the vocabulary of {vocab_size} tokens (vocab_size): give the "
                "id of the tokenizer's [PAD] (0 in BERT's)")
    return None


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
    masked = batch["masked"]
    rows = batch.get("tacl_rows")  # the masked rows as the collate found them on the CPU
    if "mlm" in config.objectives:
        if rows is not None:  # gathered by index: a boolean mask would wait for the GPU (nonzero)
            picked = hidden.reshape(-1, hidden.shape[-1])[rows.index]
            labels = batch["original_ids"].reshape(-1)[rows.index]
        else:
            picked, labels = hidden[masked], batch["original_ids"][masked]
        if not labels.numel():
            losses["mlm"] = student.cls.predictions(picked).float().sum() * 0.0
        elif fast is not None:
            losses["mlm"], losses["mlm_acc"] = fast.masked_lm(student.cls.predictions, picked, labels)
        else:  # (M, V) logits: masked rows only
            losses["mlm"], losses["mlm_acc"] = masked_lm_loss(student.cls.predictions, picked, labels)
        total = total + losses["mlm"]
    if "nsp" in config.objectives:
        nsp_logits = student.cls.seq_relationship(pooled)
        losses["nsp"] = F.cross_entropy(nsp_logits.float(), batch["nsp_label"])
        losses["nsp_acc"] = (nsp_logits.argmax(-1) == batch["nsp_label"]).float().mean()
        total = total + losses["nsp"]
    if "tacl" in config.objectives:
        if teacher_hidden is None:
            raise ValueError("the tacl objective needs the teacher's hidden states")
        if is_packed(batch):
            if config.reference_compat:
                raise ValueError("reference_compat makes padding columns TaCL negatives: it needs padded batches")
            loss, correct, count = tacl_loss_packed(hidden, teacher_hidden, masked, batch["cu_seqlens"],
                                                    config.temperature, config.tacl_impl, rows)
        else:
            loss, correct, count = tacl_loss(hidden, teacher_hidden, masked, batch["attention_mask"],
                                             config.temperature, config.tacl_impl, rows,
                                             padding_negatives=config.reference_compat)
        losses["tacl"] = loss
        losses["tacl_acc"] = correct.float() / count.clamp(min=1)
        total = total + loss
    losses["loss"] = total
    return losses


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
