"""From a :class:`~tacl_scale.data.PretrainDataset` to training batches: this
rank's micro-batches of the global order (:mod:`tacl_scale.data.shuffle`) from a
resumable global position, and the collate function that pads or packs instances
into tensors.

Tensors are made in :func:`collate` only (torch is imported there); everything
before it works on numpy arrays, in the DataLoader's worker processes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .masking import MaskingConfig, mask_tokens
from .shuffle import BatchLayout, GlobalOrder, micro_batch_positions
from .views import MirrorViews

PAD_TO_MULTIPLE_OF = 8  # padded batches' lengths: tensor-core friendly


@dataclass(frozen=True)
class CollateConfig:
    """How instances become a padded batch."""

    pad_id: int = 0
    pad_to_multiple_of: int = PAD_TO_MULTIPLE_OF
    pad_to_length: int | None = None  # pad every batch to this length instead
    unpad: bool = False  # pack the real tokens instead of padding (see collate)


def collate(items: Sequence[dict[str, Any]], config: CollateConfig) -> dict[str, Any]:
    """Instances as tensors, padded or (``config.unpad``) packed.

    Padded, every tensor ``(B, L)``:

    - ``input_ids`` (masked), ``original_ids`` (unmasked, the teacher's input),
      ``token_type_ids``, ``attention_mask`` (1 on real tokens): long
    - ``masked``: bool, True at the positions to predict (their labels are
      ``original_ids`` there)

    Packed, the ``T`` real tokens of the B instances back to back (no padding):
    ``input_ids``, ``original_ids``, ``token_type_ids``, ``position_ids`` (0 at each
    instance's ``[CLS]``), ``masked``, all ``(T,)``; ``cu_seqlens``
    ``(B + 1,)`` int32 offsets (instance ``b`` is ``cu_seqlens[b]:cu_seqlens[b+1]``) and
    ``max_seqlen`` (a Python int, so no device sync is needed to read it).

    Both: ``tacl_rows``, the masked tokens as the TaCL kernels read them
    (:class:`~tacl_scale.kernels.rows.MaskedRows`: flat row indices, sequence
    offsets and row blocks, sizes as host integers), so that no step reads a mask
    back from the GPU; ``nsp_label`` ``(B,)`` long; from :class:`TrainingInstances`, also
    ``sample_keys`` ``(B,)`` long and ``micro_batch`` (the global micro-batch index);
    for the ``mirror`` objective, ``mirror_ids``: the two views
    (:class:`~tacl_scale.data.views.MirrorViews`), ``(2, B, L)`` padded or ``(2, T)``
    packed, laid out like ``original_ids``.
    """
    import torch

    if not items:
        raise ValueError("cannot collate an empty batch")
    shared: dict[str, Any] = {"nsp_label": torch.tensor([int(item["nsp_label"]) for item in items], dtype=torch.long)}
    if "sample_key" in items[0]:
        shared["sample_keys"] = torch.tensor([int(item["sample_key"]) for item in items], dtype=torch.long)
    if "micro_batch" in items[0]:
        shared["micro_batch"] = int(items[0]["micro_batch"])
    return {**(_packed(items) if config.unpad else _padded(items, config)), **shared}


def _padded(items: Sequence[dict[str, Any]], config: CollateConfig) -> dict[str, Any]:
    import torch

    from ..kernels.rows import masked_rows

    longest = max(len(item["original_ids"]) for item in items)
    if config.pad_to_length is not None:
        if longest > config.pad_to_length:
            raise ValueError(f"instance of {longest} tokens exceeds pad_to_length {config.pad_to_length}")
        length = config.pad_to_length
    else:
        step = max(config.pad_to_multiple_of, 1)
        length = -(-longest // step) * step
    batch = len(items)
    input_ids = np.full((batch, length), config.pad_id, dtype=np.int64)
    original_ids = np.full((batch, length), config.pad_id, dtype=np.int64)
    token_type_ids = np.zeros((batch, length), dtype=np.int64)
    attention_mask = np.zeros((batch, length), dtype=np.int64)
    masked = np.zeros((batch, length), dtype=bool)
    views = np.full((2, batch, length), config.pad_id, dtype=np.int64) if "mirror_ids" in items[0] else None
    for row, item in enumerate(items):
        n = len(item["original_ids"])
        input_ids[row, :n] = item["input_ids"]
        original_ids[row, :n] = item["original_ids"]
        token_type_ids[row, :n] = item["token_type_ids"]
        attention_mask[row, :n] = 1
        masked[row, item["masked_positions"]] = True
        if views is not None:
            views[:, row, :n] = item["mirror_ids"]
    padded = {
        "input_ids": torch.from_numpy(input_ids),
        "original_ids": torch.from_numpy(original_ids),
        "token_type_ids": torch.from_numpy(token_type_ids),
        "attention_mask": torch.from_numpy(attention_mask),
        "masked": torch.from_numpy(masked),
        "tacl_rows": masked_rows(np.flatnonzero(masked), np.arange(batch) * length, attention_mask.sum(axis=1)),
    }
    if views is not None:
        padded["mirror_ids"] = torch.from_numpy(views)
    return padded


def _packed(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    import torch

    from ..kernels.rows import masked_rows

    lengths = np.array([len(item["original_ids"]) for item in items], dtype=np.int64)
    cu_seqlens = np.zeros(len(items) + 1, dtype=np.int32)
    cu_seqlens[1:] = np.cumsum(lengths)
    starts = cu_seqlens[:-1].astype(np.int64)
    masked = np.zeros(int(cu_seqlens[-1]), dtype=bool)
    masked[np.concatenate([start + np.asarray(item["masked_positions"], dtype=np.int64)
                           for start, item in zip(starts, items, strict=True)])] = True
    original_ids = np.concatenate([np.asarray(item["original_ids"], dtype=np.int64) for item in items])
    packed = {
        "input_ids": torch.from_numpy(np.concatenate([np.asarray(i["input_ids"], dtype=np.int64) for i in items])),
        "original_ids": torch.from_numpy(original_ids),
        "token_type_ids": torch.from_numpy(
            np.concatenate([np.asarray(i["token_type_ids"], dtype=np.int64) for i in items])),
        "position_ids": torch.from_numpy(np.arange(int(cu_seqlens[-1])) - np.repeat(starts, lengths)),
        "masked": torch.from_numpy(masked),
        "cu_seqlens": torch.from_numpy(cu_seqlens),
        "max_seqlen": int(lengths.max()),
        "tacl_rows": masked_rows(np.flatnonzero(masked), starts, lengths),
    }
    if "mirror_ids" in items[0]:
        packed["mirror_ids"] = torch.from_numpy(np.concatenate([np.asarray(i["mirror_ids"], dtype=np.int64)
                                                                for i in items], axis=1))
    return packed


def to_device(batch: dict[str, Any], device: Any, non_blocking: bool = False) -> dict[str, Any]:
    """A collated batch with its tensors (and its ``tacl_rows``) on ``device``;
    host values (``max_seqlen``, ``micro_batch``) unchanged."""
    return {k: v.to(device, non_blocking=non_blocking) if hasattr(v, "to") else v for k, v in batch.items()}


def sequence_lengths(batch: dict[str, Any]) -> Any:
    """Real tokens of each instance of a collated batch (a CPU tensor)."""
    if "cu_seqlens" in batch:
        return (batch["cu_seqlens"][1:] - batch["cu_seqlens"][:-1]).long()
    return batch["attention_mask"].sum(dim=1)


def check_token_ids(batch: dict[str, Any], vocab_size: int, data: Any) -> None:
    """Refuse a collated batch holding a token id outside the vocabulary (a
    corrupt shard, or a manifest whose ``vocab_size`` was edited), before it
    reaches an embedding as an ``IndexError``: a
    :class:`~tacl_scale.data.DatasetError` naming the shard file, the instance
    and the position. ``data`` maps the batch's instances to their files
    (``describe``); one vectorised maximum per tensor when all is well."""
    from .manifest import DatasetError

    rows = batch["sample_keys"] % len(data)
    for key, stored_in in (("original_ids", "its tokens"), ("input_ids", "its masked tokens (.masked_tokens.bin)")):
        ids = batch[key]
        if int(ids.max()) < vocab_size:
            continue
        flat = int((ids.reshape(-1) >= vocab_size).nonzero()[0, 0])
        if "cu_seqlens" in batch:  # packed: find the instance the token belongs to
            starts = batch["cu_seqlens"].tolist()
            row = int(np.searchsorted(starts, flat, side="right")) - 1
            position = flat - starts[row]
        else:
            row, position = divmod(flat, ids.shape[-1])
        raise DatasetError(f"{data.describe(int(rows[row]))}, position {position}: token id "
                           f"{int(ids.reshape(-1)[flat])} in {stored_in}, but the vocabulary has {vocab_size} ids: "
                           "the shard is corrupt or its manifest was edited (python -m data_prep.inspect DIR "
                           "--verify checks it; rebuild the dataset)")


def checked_batches(batches: Iterator[dict[str, Any]], vocab_size: int, data: Any) -> Iterator[dict[str, Any]]:
    """``batches`` with :func:`check_token_ids` applied to each as it is read. A
    :class:`~tacl_scale.data.DatasetError` a DataLoader worker raised (a corrupt
    instance, :meth:`PretrainDataset.__getitem__`) comes out as the worker said it,
    one line naming the file and the instance, not as torch re-raises it (a
    traceback in the message, and a reference cycle that keeps the loader's workers
    alive past the error: they ignore SIGTERM, so the process hung at exit)."""
    from .manifest import DatasetError

    while True:
        said = None
        try:
            batch = next(batches)
        except StopIteration:
            return
        except DatasetError as err:
            said = worker_message(err)
            err.__traceback__ = None  # its frames hold the loader's iterator
        if said is not None:  # raised outside the handler: nothing chained to the worker's copy
            raise DatasetError(said)
        check_token_ids(batch, vocab_size, data)
        yield batch


def worker_message(err: BaseException) -> str:
    """The message of an exception as raised in a DataLoader worker: torch
    re-raises it in the main process with ``Caught NAME in DataLoader worker
    process N.`` and the worker's traceback as its message, whose last line is
    ``module.NAME: message``; any other exception's own message."""
    text = str(err)
    if not text.startswith("Caught "):
        return text
    name = f"{type(err).__module__}.{type(err).__qualname__}: "
    at = text.rfind(f"\n{name}")
    return text[at + 1 + len(name):].strip() if at >= 0 else text


class MicroBatchSampler:
    """The DataLoader's ``batch_sampler``: this rank's micro-batches of the global
    order (:mod:`tacl_scale.data.shuffle`) from ``consumed`` samples on, each a list
    of ``(epoch, instance, micro-batch index)`` keys. The index is the micro-batch's
    global position (``first position // micro``); it travels with the data so the
    trainer can key the micro-batch's randomness by it."""

    def __init__(self, order: GlobalOrder, layout: BatchLayout, consumed: int = 0) -> None:
        self.order = order
        self.layout = layout
        self.consumed = consumed

    def __iter__(self) -> Iterator[list[tuple[int, int, int]]]:
        for index, positions in micro_batch_positions(self.layout, self.consumed):
            epochs, instances = self.order.instances(positions)
            yield [(int(e), int(i), index) for e, i in zip(epochs, instances, strict=True)]


@dataclass(frozen=True)
class DynamicMasking:
    """Re-mask from the unmasked ids on the fly (RoBERTa style) with the rules the
    dataset's static masks followed (its manifest's ``masking``): the same share,
    cap and 80/10/10 split, the same replacement ids (no specials or placeholders
    such as ``[unusedN]``) and, for a whole-word dataset, the same word boundaries
    (stored per instance). Seeded by (seed, epoch, instance)."""

    seed: int
    config: MaskingConfig
    max_predictions: int
    mask_id: int
    special_ids: tuple[int, ...]
    replacement_ids: np.ndarray = field(repr=False)

    @classmethod
    def for_dataset(cls, dataset: Any, seed: int) -> DynamicMasking:
        """The masking of ``dataset`` (a :class:`~tacl_scale.data.PretrainDataset`);
        a :class:`~tacl_scale.data.DatasetError` for a dataset that does not record
        its rules (built before format 2)."""
        from .manifest import DatasetError

        manifest = dataset.manifest
        masking, tokenizer = manifest.masking, manifest.tokenizer
        if masking.replacement_excluded_ids is None:
            raise DatasetError(f"{dataset.path}: built before datasets recorded their masking rules in full; "
                               "rebuild it with this version to use --dynamic-masking")
        return cls(seed, masking.config(), masking.max_predictions_per_seq, tokenizer.special_ids.mask,
                   tokenizer.special_ids.all(), masking.replacement_ids(tokenizer.vocab_size))

    def apply(self, item: dict[str, Any], epoch: int, instance: int) -> dict[str, Any]:
        """``item`` masked anew, from a generator of (seed, epoch, instance): the same
        masks on any number of ranks and after a resume."""
        rng = np.random.default_rng([self.seed, epoch, instance])
        original = item["original_ids"]
        maskable = ~np.isin(original, self.special_ids)
        word_starts = item.get("word_starts") if self.config.whole_word_masking else None
        if self.config.whole_word_masking and word_starts is None:
            raise ValueError("a whole-word dataset's instance carries no word_starts")
        masked = mask_tokens(original, maskable, word_starts, self.config, self.max_predictions,
                             self.mask_id, self.replacement_ids, rng)
        input_ids = original.copy()
        input_ids[masked.positions] = masked.placed
        return {**item, "input_ids": input_ids, "masked_positions": masked.positions}


class TrainingInstances:
    """Map-style dataset over ``(epoch, instance[, micro-batch])`` keys for a torch
    DataLoader. Items carry ``sample_key`` (``epoch · N + instance``: which sample
    was trained on, for the per-step sample digest) and, when the key has one,
    ``micro_batch``. ``dynamic_masking`` holds one masker per blended dataset (each
    dataset keeps its own rules), or is None for the static masks; ``views`` adds the
    ``mirror`` objective's two views."""

    def __init__(self, dataset: Any, dynamic_masking: Sequence[DynamicMasking] | None = None,
                 views: MirrorViews | None = None) -> None:
        self.dataset = dataset
        self.dynamic_masking = list(dynamic_masking) if dynamic_masking is not None else None
        self.views = views

    def __getitem__(self, key: tuple[int, ...]) -> dict[str, Any]:
        epoch, instance = key[0], key[1]
        item = self.dataset[instance]
        if self.dynamic_masking is not None:
            source = self.dataset.locate(instance)[0] if len(self.dynamic_masking) > 1 else 0
            item = self.dynamic_masking[source].apply(item, epoch, instance)
        if self.views is not None:
            item = self.views.apply(item, epoch, instance)
        item = {**item, "sample_key": epoch * len(self.dataset) + instance}
        if len(key) > 2:
            item["micro_batch"] = key[2]
        return item

    def __len__(self) -> int:
        return len(self.dataset)
