"""A BERT to continue from ``--model``: a Hugging Face directory (``config.json``
and weights, whole or sharded) or a ``BertConfig`` JSON for random weights, loaded
as ``BertForPreTraining`` with each part the checkpoint lacks said by name, and
every way a model folder can be wrong (a config that is not BERT's, sizes that
cannot build, truncated or mismatched weights) refused in one line naming the file
instead of transformers' traceback. The objective that trains it is
:mod:`tacl_scale.model`."""

from __future__ import annotations

import contextlib
import difflib
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from huggingface_hub.errors import StrictDataclassError
from safetensors import SafetensorError
from transformers import BertConfig, BertForPreTraining

from .attention import register as register_attention
from .files import first_line, json_object
from .markers import MODEL_CONFIG
from .resume_checks import STUDENT_SHAPE
from .run_dir import RunDir

log = logging.getLogger(__name__)

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
