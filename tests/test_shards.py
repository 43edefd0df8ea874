"""Shard building without Beam (data_prep.spill, data_prep.shards) and the dataset reader
(tacl_scale.data): spill parts -> build_shard -> manifest -> PretrainDataset."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from data_prep.config import BuildConfig, InputConfig, OutputConfig
from data_prep.documents import TokenizedDocument
from data_prep.instances import InstanceConfig, Segment, assemble, create_pairs_from_document
from data_prep.shards import (
    TokenizerFacts,
    build_shard,
    make_manifest,
    random_b_pool_warnings,
    unknown_token_warnings,
)
from data_prep.spill import ShardDocuments, SpillWriter
from data_prep.tokenization import EncodedSentence, TokenizerConfig
from data_prep.workspace import TMP_DIR_NAME
from tacl_scale.data import DatasetError, PretrainDataset, load_manifest
from tacl_scale.data.indexed import IndexedReader
from tacl_scale.data.manifest import (
    FORMAT_VERSION,
    MANIFEST_NAME,
    Counts,
    FileRecord,
    Manifest,
    ShardRecord,
    SpecialIds,
    TokenizerRecord,
    shard_name,
)
from tacl_scale.data.masking import MaskingConfig, mask_pass, seeded_generators

VOCAB = 30522
SPECIALS = SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4)
CLS, SEP, MASK = SPECIALS.cls, SPECIALS.sep, SPECIALS.mask
REPLACEMENT_IDS = np.arange(5, VOCAB, dtype=np.int32)
FACTS = TokenizerFacts(VOCAB, SPECIALS, REPLACEMENT_IDS)
MAX_SEQ_LEN = 48
SHARD_SUFFIXES = (".bin", ".idx", ".masked_positions.bin", ".masked_positions.idx",
                  ".masked_tokens.bin", ".masked_tokens.idx", ".meta.npy")


def make_documents(seed: int = 0, count: int = 16) -> list[TokenizedDocument]:
    """Synthetic documents whose token ids are unique over the whole corpus (so a
    token locates its document and position), in words of 1-3 tokens."""
    rng = np.random.default_rng(seed)
    pool = iter(rng.permutation(np.arange(5, VOCAB)).tolist())
    names = ["Zebra", "apple", "Mango", "éclair", "10 Downing", "banana", "Kiwi", "cherry", "Date",
             "fig", "Grape", "1 lemon", "lime", "Nectarine", "olive", "Papaya", "quince", "Raisin"]
    documents = []
    for k in range(count):
        sentences = []
        for _ in range(int(rng.integers(1, 10))):
            n = int(rng.integers(2, 16))
            ids = np.array([next(pool) for _ in range(n)], dtype=np.int32)
            starts = rng.random(n) < 0.5
            starts[0] = True
            sentences.append(EncodedSentence(ids, starts))
        documents.append(TokenizedDocument(f"{names[k % len(names)]}-{k}", sentences, 100))
    return documents


DOCUMENTS = make_documents()
SHARD_OF = {d.doc_id: k % 2 for k, d in enumerate(DOCUMENTS)}


def config_for(out: Path, num_shards: int = 2, **overrides) -> BuildConfig:
    base = BuildConfig(
        input=InputConfig(patterns=("synthetic.txt",), format="text"),
        tokenizer=TokenizerConfig(path="vocab.txt"),
        output=OutputConfig(directory=str(out), num_shards=num_shards),
        instances=InstanceConfig(max_seq_len=MAX_SEQ_LEN, short_seq_prob=0.1),
        masking=MaskingConfig(),
        dupe_factor=2,
        seed=7,
    )
    return replace(base, **overrides)


def spill(out: Path, parts: list[list[TokenizedDocument]], shard_of=SHARD_OF) -> list[str]:
    prefixes = []
    for documents in parts:
        writer = SpillWriter(out / TMP_DIR_NAME, FACTS.token_dtype)
        for document in documents:
            writer.add(shard_of[document.doc_id], document)
        prefixes.append(writer.close())
    return prefixes


def build(out: Path, parts: list[list[TokenizedDocument]], config: BuildConfig | None = None,
          shard_of=SHARD_OF) -> Manifest:
    config = config or config_for(out)
    prefixes = spill(out, parts, shard_of)
    entries = [build_shard(k, prefixes, config, FACTS) for k in range(config.output.num_shards)]
    shutil.rmtree(out / TMP_DIR_NAME)
    tokenizer = TokenizerRecord("wordpiece", "vocab.txt", "0" * 64, VOCAB, True, SPECIALS,
                                "vocab.txt")
    manifest = make_manifest(config, tokenizer, entries, {"too_short": 0}, [FileRecord("synthetic.txt", 0)],
                             {"runner": "none"}, FACTS)
    manifest.write(out)
    return manifest


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("built") / "out"
    build(out, [DOCUMENTS[:5], DOCUMENTS[5:]])
    return out


@pytest.fixture
def dataset_copy(built, tmp_path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(built, target)
    return target


def locate(tokens: np.ndarray) -> tuple[str, np.ndarray]:
    """The document and positions (in the concatenation of its sentences) of tokens."""
    where = {}
    for d in DOCUMENTS:
        flat = np.concatenate([s.ids for s in d.sentences])
        for pos, tok in enumerate(flat.tolist()):
            where[tok] = (d.doc_id, pos)
    docs = {where[t][0] for t in tokens.tolist()}
    assert len(docs) == 1, "a segment mixes documents"
    return docs.pop(), np.array([where[t][1] for t in tokens.tolist()])


def word_starts_of(doc_id: str) -> np.ndarray:
    (d,) = [d for d in DOCUMENTS if d.doc_id == doc_id]
    return np.concatenate([s.word_starts for s in d.sentences])


# ---------------------------------------------------------------- round trip


def test_output_directory_layout(built):
    names = sorted(p.name for p in built.iterdir())
    expected = sorted([MANIFEST_NAME] + [f"shard-0000{k}{s}" for k in range(2) for s in SHARD_SUFFIXES])
    assert names == expected


def test_round_trip(built):
    ds = PretrainDataset(built)
    manifest = load_manifest(built)
    assert len(ds) == manifest.train.totals.instances > 20
    max_predictions = MaskingConfig().resolved_max_predictions(MAX_SEQ_LEN)
    seen_labels = set()
    per_doc_instances: dict[str, int] = {}
    counts = {"mask": 0, "random": 0, "kept": 0, "masked": 0, "random_next": 0, "tokens": 0}
    for i in range(len(ds)):
        item = ds[i]
        original, input_ids = item["original_ids"], item["input_ids"]
        types, positions = item["token_type_ids"], item["masked_positions"]
        for key in ("original_ids", "input_ids", "token_type_ids", "masked_positions"):
            assert item[key].dtype == np.int64
        assert len(original) <= MAX_SEQ_LEN
        assert len(input_ids) == len(types) == len(original)
        # [CLS] A [SEP] B [SEP]
        len_a = int((types == 0).sum()) - 2
        assert original[0] == CLS and original[len_a + 1] == SEP and original[-1] == SEP
        assert np.flatnonzero(np.isin(original, [CLS, SEP])).tolist() == [0, len_a + 1, len(original) - 1]
        # token types: 0 up to and including the first [SEP], 1 after
        first_sep = int(np.flatnonzero(original == SEP)[0])
        assert np.all(types[: first_sep + 1] == 0) and np.all(types[first_sep + 1 :] == 1)
        a, b = original[1 : len_a + 1], original[len_a + 2 : -1]
        assert len(a) >= 1 and len(b) >= 1
        doc_a, pos_a = locate(a)
        doc_b, pos_b = locate(b)
        assert np.all(np.diff(pos_a) == 1) and np.all(np.diff(pos_b) == 1), "segments are contiguous"
        label = item["nsp_label"]
        assert label in (0, 1)
        seen_labels.add(label)
        if label == 0:
            assert doc_b == doc_a and pos_b[0] > pos_a[-1], "real next B follows A"
        else:
            assert doc_b != doc_a
            assert SHARD_OF[doc_b] == SHARD_OF[doc_a], "random B comes from the same shard"
        shard, _ = ds.locate(i)
        assert SHARD_OF[doc_a] == shard
        per_doc_instances[doc_a] = per_doc_instances.get(doc_a, 0) + 1
        # masks: only at the masked positions, never at specials, within the budget
        assert np.all(np.diff(positions) > 0)
        assert 1 <= len(positions) <= max_predictions
        assert not np.any(np.isin(original[positions], [CLS, SEP]))
        differs = np.flatnonzero(input_ids != original)
        assert set(differs.tolist()) <= set(positions.tolist())
        placed = input_ids[positions]
        is_mask = placed == MASK
        is_kept = ~is_mask & (placed == original[positions])
        assert np.all(placed[~is_mask] >= 5)
        counts["mask"] += int(is_mask.sum())
        counts["kept"] += int(is_kept.sum())
        counts["random"] += int((~is_mask & ~is_kept).sum())
        counts["masked"] += len(positions)
        counts["random_next"] += label
        counts["tokens"] += len(original)
    assert seen_labels == {0, 1}
    assert set(per_doc_instances) == {d.doc_id for d in DOCUMENTS}
    totals = manifest.train.totals
    assert totals.documents == len(DOCUMENTS)
    for key in counts:
        assert getattr(totals, key + "_token" if key in ("mask", "random", "kept") else key) == counts[key], key
    assert totals.maskable == counts["tokens"] - 3 * len(ds)
    assert sum(totals.length_histogram.values()) == len(ds)
    # negative index and out of range
    assert np.array_equal(ds[-1]["original_ids"], ds[len(ds) - 1]["original_ids"])
    with pytest.raises(IndexError):
        ds[len(ds)]
    with pytest.raises(IndexError):
        ds[-len(ds) - 1]


def test_instances_of_a_document_form_one_mmidx_document_in_id_order(built):
    ds = PretrainDataset(built)
    for shard in range(2):
        reader = IndexedReader(built / f"shard-0000{shard}")
        ids = sorted(d.doc_id for d in DOCUMENTS if SHARD_OF[d.doc_id] == shard)
        assert reader.num_documents == len(ids)
        offset = sum(len(IndexedReader(built / f"shard-0000{k}")) for k in range(shard))
        for number, doc_id in enumerate(ids):
            first, end = reader.document_index[number : number + 2]
            assert end > first
            for local in range(first, end):
                item = ds[offset + local]
                len_a = int((item["token_type_ids"] == 0).sum()) - 2
                assert locate(item["original_ids"][1 : len_a + 1])[0] == doc_id


def test_manifest_contents(built):
    manifest = load_manifest(built)
    assert manifest.format_version == FORMAT_VERSION
    assert manifest.train.num_shards == 2
    assert manifest.max_seq_len == MAX_SEQ_LEN
    assert manifest.dupe_factor == 2 and manifest.seed == 7
    assert manifest.token_dtype == "uint16"
    assert manifest.masking.max_predictions_per_seq == 8
    assert [s.name for s in manifest.train.shards] == ["shard-00000", "shard-00001"]
    for entry in manifest.train.shards:
        assert entry.duplicate_documents == 0
        for key, info in entry.files.items():
            assert (built / info.path).stat().st_size == info.bytes, key
    assert not [p for p in built.iterdir() if p.name.endswith(".tmp")]


def test_whole_word_masking_through_the_spill(tmp_path):
    out = tmp_path / "wwm"
    config = config_for(out, masking=MaskingConfig(masked_lm_prob=0.3, whole_word_masking=True),
                        dupe_factor=3)
    build(out, [DOCUMENTS], config)
    ds = PretrainDataset(out)
    multi = 0
    for i in range(len(ds)):
        item = ds[i]
        original, masked = item["original_ids"], set(item["masked_positions"].tolist())
        len_a = int((item["token_type_ids"] == 0).sum()) - 2
        for lo, hi in ((1, len_a + 1), (len_a + 2, len(original) - 1)):
            doc_id, pos = locate(original[lo:hi])
            starts = word_starts_of(doc_id)[pos]
            starts[0] = True  # a segment cut inside a word starts a new piece
            word_ids = np.cumsum(starts)
            for w in np.unique(word_ids):
                members = {lo + k for k in np.flatnonzero(word_ids == w).tolist()}
                assert members <= masked or not (members & masked), "word partly masked"
                multi += len(members) > 1 and members <= masked
    assert multi > 5


# --------------------------------------------------------------- determinism


def shard_bytes(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.name.startswith("shard-")}


def test_spill_order_and_part_split_do_not_matter(tmp_path, built):
    reference = shard_bytes(built)
    reversed_docs = DOCUMENTS[::-1]
    out = tmp_path / "other"
    manifest = build(out, [reversed_docs[:3], reversed_docs[3:9], reversed_docs[9:]])
    assert shard_bytes(out) == reference
    assert manifest.train.shards == load_manifest(built).train.shards
    out1 = tmp_path / "one-part"
    build(out1, [DOCUMENTS[1::2] + DOCUMENTS[0::2]])
    assert shard_bytes(out1) == reference


def test_seed_changes_the_data(tmp_path, built):
    out = tmp_path / "seed"
    build(out, [DOCUMENTS], config_for(out, seed=8))
    other = shard_bytes(out)
    assert other.keys() == shard_bytes(built).keys()
    assert other != shard_bytes(built)


def _reference_shard(shard: int, prefixes: list[str], config: BuildConfig) -> list[tuple]:
    """The instances of a shard built pair by pair, the plain way (google-research/bert
    order: document, dupe pass, pair): what build_shard's joined arrays must equal."""
    docs = ShardDocuments(shard, prefixes)
    is_special = np.zeros(VOCAB, dtype=bool)
    is_special[list(SPECIALS.all())] = True
    out = []
    for doc_index, doc_id in enumerate(docs.doc_ids):
        for dupe in range(config.dupe_factor):
            pair_rng, mask_rng = seeded_generators(config.seed, doc_id, dupe)
            pairs = create_pairs_from_document(docs.sentence_lengths, doc_index, config.instances, pair_rng)
            tokens = [assemble(docs.tokens.values(pair.a), docs.tokens.values(pair.b), CLS, SEP) for pair in pairs]
            starts = [assemble(docs.word_starts.values(pair.a), docs.word_starts.values(pair.b), 1, 1).astype(bool)
                      for pair in pairs]
            if not pairs:
                continue
            # The masks of the pass, drawn together (format 5; test_masking checks mask_pass itself).
            joined = np.concatenate(tokens)
            masked = mask_pass(joined, ~is_special[joined], np.concatenate(starts), [len(t) for t in tokens],
                               mask_rng, config.masking, config.max_predictions, MASK, REPLACEMENT_IDS)
            ends = np.cumsum(masked.counts)
            for k, pair in enumerate(pairs):
                mine = slice(ends[k] - masked.counts[k], ends[k])
                out.append((tokens[k].tolist(), starts[k].tolist(), masked.positions[mine].tolist(),
                            masked.placed[mine].tolist(), len(pair.a), int(pair.is_random_next)))
    return out


@pytest.mark.parametrize("whole_words", [False, True])
def test_shard_files_equal_the_pair_by_pair_reference(tmp_path, whole_words):
    """build_shard assembles, masks and counts a document's instances as joined
    arrays; every value must equal building them one pair at a time."""
    config = config_for(tmp_path / "out", masking=MaskingConfig(whole_word_masking=whole_words), dupe_factor=3)
    prefixes = spill(tmp_path / "out", [DOCUMENTS[:7], DOCUMENTS[7:]])
    for shard in range(2):
        expected = _reference_shard(shard, prefixes, config)
        entry = build_shard(shard, prefixes, config, FACTS)
        name = entry.name
        directory = tmp_path / "out"
        tokens = IndexedReader(directory / name)
        positions = IndexedReader(directory / f"{name}.masked_positions")
        placed = IndexedReader(directory / f"{name}.masked_tokens")
        meta = np.load(directory / f"{name}.meta.npy")
        starts = IndexedReader(directory / f"{name}.word_starts") if whole_words else None
        assert len(tokens) == len(expected) == entry.counts.instances > 20
        for k, (want_tokens, want_starts, want_positions, want_placed, len_a, nsp) in enumerate(expected):
            assert tokens[k].tolist() == want_tokens
            assert positions[k].tolist() == want_positions
            assert placed[k].tolist() == want_placed
            assert (int(meta["len_a"][k]), int(meta["nsp_label"][k])) == (len_a, nsp)
            if starts is not None:
                assert starts[k].astype(bool).tolist() == want_starts
        placed_all = [t for e in expected for t in e[3]]
        original = [e[0][p] for e in expected for p in e[2]]
        counts = entry.counts
        assert counts.tokens == sum(len(e[0]) for e in expected)
        assert counts.masked == len(placed_all)
        assert counts.random_next == sum(e[5] for e in expected)
        assert counts.mask_token == sum(t == MASK for t in placed_all)
        assert counts.kept_token == sum(t != MASK and t == o for t, o in zip(placed_all, original, strict=True))
        assert counts.maskable == sum(sum(not is_sp for is_sp in np.isin(e[0], list(SPECIALS.all())))
                                            for e in expected)


def test_shard_documents_sorted_by_id(tmp_path):
    prefixes = spill(tmp_path, [DOCUMENTS[::-1][:6], DOCUMENTS[::-1][6:]])
    for shard in range(2):
        docs = ShardDocuments(shard, prefixes)
        expected = sorted(d.doc_id for d in DOCUMENTS if SHARD_OF[d.doc_id] == shard)
        assert docs.doc_ids == expected
        assert docs.duplicates == 0
        by_id = {d.doc_id: d for d in DOCUMENTS}
        for number, doc_id in enumerate(docs.doc_ids):
            sentences = by_id[doc_id].sentences
            assert list(docs.sentence_lengths[number]) == [len(s.ids) for s in sentences]
            whole = Segment(number, 0, len(sentences) - 1, 0, sum(len(s.ids) for s in sentences))
            joined = docs.tokens.values(whole)
            assert np.array_equal(joined, np.concatenate([s.ids for s in sentences]))
            starts = docs.word_starts.values(whole)
            assert np.array_equal(starts.astype(bool), np.concatenate([s.word_starts for s in sentences]))


def test_a_shard_build_holds_its_own_documents_sentences_only(tmp_path):
    """A shard build's memory follows the shard, not the corpus: of every part it
    touches it keeps the sentence lengths of its own documents only (it once kept
    every part's, ~36 bytes per sentence of the whole corpus in each shard build),
    once (4 bytes a sentence: where a sentence starts is added up when it is read;
    8 more bytes a sentence once held that, all sentences of the shard)."""
    others = {d.doc_id: 1 for d in DOCUMENTS}
    others[DOCUMENTS[0].doc_id] = 0  # shard 0 holds one document; shard 1 all the others
    prefixes = spill(tmp_path, [DOCUMENTS[:6], DOCUMENTS[6:]], others)
    docs = ShardDocuments(0, prefixes)
    assert docs.doc_ids == [DOCUMENTS[0].doc_id]
    assert [list(lengths) for lengths in docs.sentence_lengths] == [[len(s.ids) for s in DOCUMENTS[0].sentences]]
    assert docs.tokens._lengths is docs.sentence_lengths  # shared, not copied
    assert docs.word_starts is not None and docs.word_starts._lengths is docs.sentence_lengths
    assert vars(docs.tokens).keys() == {"_file", "_what", "_fd", "_dtype", "_bases", "_lengths", "_document",
                                        "_copy", "_copy_starts"}  # nothing per sentence beside them
    whole = Segment(0, 0, len(DOCUMENTS[0].sentences) - 1, 0, sum(len(s.ids) for s in DOCUMENTS[0].sentences))
    assert np.array_equal(docs.tokens.values(whole), np.concatenate([s.ids for s in DOCUMENTS[0].sentences]))


def _gathered(docs: ShardDocuments) -> list[tuple[str, list[int]]]:
    """Each gathered document's id and tokens, in the shard's order."""
    out = []
    for number, doc_id in enumerate(docs.doc_ids):
        lengths = docs.sentence_lengths[number]
        docs.start_document(number)
        out.append((doc_id, docs.tokens.values(Segment(number, 0, len(lengths) - 1, 0, sum(lengths))).tolist()))
    return out


def _shard_lines(prefix: str) -> dict[int, tuple[int, int]]:
    """Where each shard's lines of a part's document list are, by its shard offsets."""
    offsets = np.fromfile(f"{prefix}.shard-docs.offsets", dtype="<i8")
    return {k: (int(offsets[k]), int(offsets[k + 1])) for k in range(len(offsets) - 1)}


def test_a_shard_build_reads_only_its_own_lines_of_each_parts_document_list(tmp_path):
    """A part's document list is grouped by shard with the offsets of each group:
    a shard build reads its own lines and no other shard's (it read every line of
    every part, work that grew as shards x documents). Checked by damaging the other
    shard's lines: the shard's documents are still gathered, the same as before."""
    shard_of = {d.doc_id: k % 3 for k, d in enumerate(DOCUMENTS)}
    prefixes = spill(tmp_path, [DOCUMENTS[:7], DOCUMENTS[7:]], shard_of)
    before = {shard: _gathered(ShardDocuments(shard, prefixes)) for shard in range(3)}
    for shard in range(3):
        assert [doc_id for doc_id, _ in before[shard]] == sorted(d.doc_id for d in DOCUMENTS if shard_of[d.doc_id] == shard)
    for prefix in prefixes:
        lines = Path(f"{prefix}.shard-docs.jsonl").read_bytes()
        entries = [json.loads(line) for line in lines.splitlines()]
        assert entries == sorted(entries, key=lambda entry: (entry[1], entry[2]))  # by shard, then document
        start, stop = _shard_lines(prefix)[1]
        damaged = bytes(byte if byte == ord("\n") else ord("x") for byte in lines[start:stop])
        Path(f"{prefix}.shard-docs.jsonl").write_bytes(lines[:start] + damaged + lines[stop:])
    for shard in (0, 2):
        assert _gathered(ShardDocuments(shard, prefixes)) == before[shard]
    with pytest.raises(OSError, match=rf"{min(prefixes)}.shard-docs.jsonl: 'x+' in shard 1's lines is not "
                                      r"\[doc_id, shard, doc_no\] \(a damaged spill part"):
        ShardDocuments(1, prefixes)


def to_earlier_format(prefix: str) -> None:
    """Rewrite a part as versions before the grouped list wrote it: ``[doc_id, shard]``
    lines in document order in ``.docs.jsonl``, no offsets."""
    entries = [json.loads(line) for line in Path(f"{prefix}.shard-docs.jsonl").read_bytes().split(b"\n")[:-1]]
    earlier = sorted(entries, key=lambda entry: entry[2])
    assert [doc_no for _, _, doc_no in earlier] == list(range(len(earlier)))
    Path(f"{prefix}.docs.jsonl").write_text("".join(json.dumps([doc_id, shard]) + "\n" for doc_id, shard, _ in earlier))
    Path(f"{prefix}.shard-docs.jsonl").unlink()
    Path(f"{prefix}.shard-docs.offsets").unlink()


def test_parts_of_the_earlier_format_are_read_whole(tmp_path):
    """A part of an interrupted build of an earlier version, resumed by this one,
    gives the same documents as the part this version writes."""
    prefixes = spill(tmp_path, [DOCUMENTS[:9], DOCUMENTS[9:]])
    ours = {shard: _gathered(ShardDocuments(shard, prefixes)) for shard in range(2)}
    for prefix in prefixes:
        to_earlier_format(prefix)
    assert {shard: _gathered(ShardDocuments(shard, prefixes)) for shard in range(2)} == ours


def test_grouped_parts_under_the_earlier_names_are_read_by_their_offsets(tmp_path):
    """For a day main wrote the grouped list and its offsets as ``.docs.jsonl`` and
    ``.docs.shards``: such a part, resumed, is read by its offsets (read whole, its
    ``[doc_id, shard, doc_no]`` lines were taken for documents of shard ``doc_no``)."""
    shard_of = {d.doc_id: k % 3 for k, d in enumerate(DOCUMENTS)}
    prefixes = spill(tmp_path, [DOCUMENTS[:9], DOCUMENTS[9:]], shard_of)
    ours = {shard: _gathered(ShardDocuments(shard, prefixes)) for shard in range(3)}
    for prefix in prefixes:
        os.rename(f"{prefix}.shard-docs.jsonl", f"{prefix}.docs.jsonl")
        os.rename(f"{prefix}.shard-docs.offsets", f"{prefix}.docs.shards")
    assert {shard: _gathered(ShardDocuments(shard, prefixes)) for shard in range(3)} == ours


def test_a_negative_shard_key_is_refused(tmp_path):
    writer = SpillWriter(tmp_path, FACTS.token_dtype, tmp_path / "part-u")
    with pytest.raises(ValueError, match=rf"{tmp_path}/part-u: shard -1 of '{DOCUMENTS[0].doc_id}': shard keys start at 0"):
        writer.add(-1, DOCUMENTS[0])


def test_an_earlier_version_cannot_misread_a_part_of_this_one(tmp_path):
    """The grouped list has names of its own: the earlier reader, which took the last
    number of a line for its shard and the line's place for its document number,
    finds no list (it read ``[doc_id, shard, doc_no]`` lines as documents of shard
    ``doc_no``, without a word)."""
    prefix = spill(tmp_path, [DOCUMENTS])[0]
    assert not Path(f"{prefix}.docs.jsonl").exists()
    assert {p.name[len(Path(prefix).name):] for p in Path(prefix).parent.iterdir()} == {
        ".bin", ".idx", ".wstart.bin", ".wstart.idx", ".shard-docs.jsonl", ".shard-docs.offsets"}


def test_document_ids_with_any_line_separator_are_read_back(tmp_path):
    """json.dumps leaves U+0085, U+2028 and U+2029 unescaped; a part's list is split
    at "\\n" alone, so an id holding them (a line of a text corpus may) is one line."""
    odd = ["a\u2028b", "c\x85d", "e\u2029f"]
    documents = [TokenizedDocument(doc_id, DOCUMENTS[k].sentences, 10) for k, doc_id in enumerate(odd)]
    prefixes = spill(tmp_path, [documents], {doc_id: 0 for doc_id in odd})
    assert ShardDocuments(0, prefixes).doc_ids == sorted(odd)


def test_shards_a_part_does_not_hold_are_empty(tmp_path):
    """A part's offsets run to its highest shard: a shard below it that the part
    does not hold, and any shard above it, have no documents there."""
    shard_of = {d.doc_id: 2 if k % 2 else 4 for k, d in enumerate(DOCUMENTS)}
    prefixes = spill(tmp_path, [DOCUMENTS], shard_of)
    assert len(np.fromfile(f"{prefixes[0]}.shard-docs.offsets", dtype="<i8")) == 6
    counts = {shard: len(ShardDocuments(shard, prefixes)) for shard in range(8)}
    assert counts == {0: 0, 1: 0, 2: 8, 3: 0, 4: 8, 5: 0, 6: 0, 7: 0}
    empty = spill(tmp_path / "empty", [[]])
    assert np.fromfile(f"{empty[0]}.shard-docs.offsets", dtype="<i8").tolist() == [0]
    assert len(ShardDocuments(0, empty)) == 0


@pytest.mark.parametrize("damage", ["cut", "outside the list", "reversed", "another shard's line", "mid-line"])
def test_damaged_shard_offsets_are_an_error_naming_the_part(tmp_path, damage):
    prefix = spill(tmp_path, [DOCUMENTS], {d.doc_id: k % 3 for k, d in enumerate(DOCUMENTS)})[0]
    docs, offsets_file = f"{prefix}.shard-docs.jsonl", f"{prefix}.shard-docs.offsets"
    offsets = np.fromfile(offsets_file, dtype="<i8")
    if damage == "cut":  # shard 2's end lost: its documents would be lost without a word
        offsets = offsets[:3]
        match = rf"{offsets_file}: 24 bytes, not offsets ending at the size of {docs} \(\d+ bytes\) \(a damaged"
    elif damage == "outside the list":
        offsets[2] = offsets[3] + 10
        match = rf"{docs}: shard 1's lines are bytes \d+:\d+ by {offsets_file}, outside the list \(a damaged"
    elif damage == "reversed":
        offsets[1], offsets[2] = offsets[2], offsets[1]
        match = r"shard 1's lines are bytes \d+:\d+ by .*, reversed"
    elif damage == "mid-line":
        offsets[2] -= 1
        match = r"shard 1's lines are bytes \d+:\d+ by .*, not ending where a line does"
    else:
        start, stop = _shard_lines(prefix)[0]
        last = Path(docs).read_bytes()[start:stop].splitlines(True)[-1]
        offsets[1] = stop - len(last)  # shard 1's lines begin with shard 0's last
        match = rf"{docs}: a document of shard 0 among shard 1's lines"
    offsets.astype("<i8").tofile(offsets_file)
    with pytest.raises(OSError, match=match):
        ShardDocuments(1, [prefix])


def test_a_shard_build_keeps_its_sentence_lengths_on_disk(tmp_path):
    """Sentence lengths are read from the shard's scratch files, not held: a document
    of 50,000 sentences leaves a few kilobytes in memory (4 bytes a sentence were
    held for the whole build, 10 MB of a 4 GB corpus's shard with 8 shards)."""
    import tracemalloc

    rng = np.random.default_rng(3)
    lengths = rng.integers(1, 4, size=50_000)
    long = TokenizedDocument("long", [EncodedSentence(np.full(n, 7, dtype=np.int32), np.ones(n, dtype=bool))
                                      for n in lengths], 100)
    prefixes = spill(tmp_path, [[long, *DOCUMENTS[:3]]], {"long": 0, **{d.doc_id: 0 for d in DOCUMENTS[:3]}})
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        docs = ShardDocuments(0, prefixes, tmp_path)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 20_000, f"{held} bytes held for 50,000 sentences"
    number = docs.doc_ids.index("long")
    assert list(docs.sentence_lengths[number]) == lengths.tolist()
    for k, document in enumerate(DOCUMENTS[:3]):  # the others after it, read back from the file
        assert list(docs.sentence_lengths[docs.doc_ids.index(document.doc_id)]) == [len(s.ids) for s in
                                                                                    document.sentences], k
    with pytest.raises(IndexError):
        docs.sentence_lengths[len(docs)]


def test_sentence_lengths_read_last_are_kept_within_a_budget(tmp_path, monkeypatch):
    """The table keeps the documents it read last (a random B is read twice: for its
    sentences, then for its tokens' offset) up to a budget of bytes, the oldest
    dropped first, the lengths the same whether kept or read again."""
    from data_prep.spill import _SentenceLengthTable

    monkeypatch.setattr(_SentenceLengthTable, "RECENT_BYTES", 600)
    prefixes = spill(tmp_path / "spill", [DOCUMENTS[:8], DOCUMENTS[8:]], {d.doc_id: 0 for d in DOCUMENTS})
    docs = ShardDocuments(0, prefixes, tmp_path)
    table = docs.sentence_lengths
    by_id = {d.doc_id: d for d in DOCUMENTS}
    order = np.random.default_rng(5).integers(0, len(docs), size=200).tolist()
    for document in order:
        assert list(table[document]) == [len(s.ids) for s in by_id[docs.doc_ids[document]].sentences]
        assert table._recent_bytes <= 600 and table._recent_bytes == sum(
            table.ENTRY_BYTES + 4 * len(kept) for kept in table._recent.values())
        assert document in table._recent  # the last read is kept
    assert 1 < len(table._recent) < len(docs)


def test_truncated_sentence_lengths_are_an_error_naming_the_scratch_directory(tmp_path):
    prefixes = spill(tmp_path / "spill", [DOCUMENTS[:4]])
    docs = ShardDocuments(0, prefixes, tmp_path)
    os.ftruncate(docs.sentence_lengths._fd, 0)
    with pytest.raises(OSError, match=f"{tmp_path}: shard 0's sentence lengths .unlinked.: short read of document 0"):
        docs.sentence_lengths[0]


def _held_spill_files(prefixes: list[str]) -> tuple[set[str], set[str]]:
    """The spill part files this process maps, and those it holds open (Linux /proc)."""
    names = {Path(p).name for p in prefixes}

    def is_spill(path: str) -> bool:
        return any(Path(path).name.startswith(name) for name in names)

    maps = {line.split(maxsplit=5)[5].strip() for line in Path("/proc/self/maps").read_text().splitlines()
            if len(line.split(maxsplit=5)) == 6}
    fds = {os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
           if os.path.exists(f"/proc/self/fd/{fd}")}
    return {m for m in maps if is_spill(m)}, {f for f in fds if is_spill(f)}


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads the process's maps from Linux's /proc")
@pytest.mark.parametrize("word_starts", [False, True])
def test_shard_documents_hold_no_spill_part_open_or_mapped(tmp_path, word_starts):
    """A shard build reads every part once, copying its own documents into scratch
    files, and then holds no part open or mapped: it once kept four maps (each with
    its file open) per part, 11,000 open files for the English dump's 2,750 parts,
    and every spill page it read (with the kernel's window around it, much of it
    other shards' data) counted in its RSS until released."""
    chunks = [DOCUMENTS[:4], DOCUMENTS[4:8], DOCUMENTS[8:]]
    prefixes = spill(tmp_path / "spill", chunks)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    before = len(os.listdir("/proc/self/fd"))
    docs = ShardDocuments(0, prefixes, scratch, word_starts=word_starts)
    assert _held_spill_files(prefixes) == (set(), set())
    # the scratch files: tokens, sentence lengths and (whole-word masking) word starts
    assert len(os.listdir("/proc/self/fd")) - before == (3 if word_starts else 2)
    assert list(scratch.iterdir()) == []  # unlinked: nothing is left behind, whatever happens
    assert (docs.word_starts is not None) == word_starts
    by_id = {d.doc_id: d for d in DOCUMENTS}
    crossed = 0
    for number, doc_id in enumerate(docs.doc_ids):  # other documents' reads (random Bs) around the current one
        docs.start_document(number)
        sentences = by_id[doc_id].sentences
        whole = Segment(number, 0, len(sentences) - 1, 0, sum(len(s.ids) for s in sentences))
        other = (number + 1) % len(docs)
        other_sentences = by_id[docs.doc_ids[other]].sentences
        last = Segment(other, len(other_sentences) - 1, len(other_sentences) - 1, 1, len(other_sentences[-1].ids))
        assert np.array_equal(docs.tokens.values(whole), np.concatenate([s.ids for s in sentences]))
        assert np.array_equal(docs.tokens.values(last), other_sentences[-1].ids[1:])
        if len(sentences) > 1:  # across a sentence boundary, from inside the first to inside the second
            across = Segment(number, 0, 1, 1, len(sentences[0].ids) + 1)
            assert len(across) == len(sentences[0].ids)
            joined = np.concatenate([sentences[0].ids, sentences[1].ids])
            assert np.array_equal(docs.tokens.values(across), joined[1 : len(sentences[0].ids) + 1])
            crossed += 1
        if word_starts:
            assert np.array_equal(docs.word_starts.values(last).astype(bool), other_sentences[-1].word_starts[1:])
    assert crossed > 0
    assert _held_spill_files(prefixes) == (set(), set())


def test_a_truncated_scratch_copy_is_an_error_naming_it(tmp_path):
    """A short read of the scratch copy (its disk filled, or someone truncated it) is
    an error naming the directory and the shard, never tokens made up of zeros."""
    prefixes = spill(tmp_path / "spill", [DOCUMENTS[:6], DOCUMENTS[6:]])
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    docs = ShardDocuments(1, prefixes, scratch, word_starts=False)
    os.ftruncate(docs.tokens._fd, 0)
    docs.start_document(0)
    with pytest.raises(OSError, match=rf"{scratch}: shard 1's copy of its tokens .*short read"):
        docs.tokens.values(Segment(0, 0, 0, 0, 1))


def test_duplicate_document_across_parts_is_dropped_and_counted(tmp_path, built):
    out = tmp_path / "dupes"
    duplicated = DOCUMENTS[3]
    manifest = build(out, [DOCUMENTS[:8], DOCUMENTS[8:] + [duplicated]])
    shard = SHARD_OF[duplicated.doc_id]
    assert manifest.train.shards[shard].duplicate_documents == 1
    assert manifest.train.shards[1 - shard].duplicate_documents == 0
    assert manifest.train.shards[shard].counts.documents == load_manifest(built).train.shards[shard].counts.documents
    assert shard_bytes(out) == shard_bytes(built)


def rename_part(prefix: str, new_prefix: Path) -> str:
    for suffix in (".bin", ".idx", ".wstart.bin", ".wstart.idx", ".shard-docs.jsonl", ".shard-docs.offsets"):
        os.replace(prefix + suffix, f"{new_prefix}{suffix}")
    return str(new_prefix)


def test_same_id_with_different_content_resolves_the_same_whatever_the_part_order(tmp_path):
    variant = TokenizedDocument(DOCUMENTS[0].doc_id, DOCUMENTS[1].sentences, 100)
    outputs = []
    for order in ("ab", "ba"):
        out = tmp_path / order
        tmp = out / TMP_DIR_NAME
        first, second = spill(out, [[DOCUMENTS[0]], [variant]])
        prefixes = [rename_part(first, tmp / f"part-{order[0]}"), rename_part(second, tmp / f"part-{order[1]}")]
        config = config_for(out, num_shards=1)
        entry = build_shard(0, prefixes, config, FACTS)
        # Same id, other content: both kept (only exact duplicates are dropped).
        assert entry.counts.documents == 2 and entry.duplicate_documents == 0
        outputs.append({p.name: p.read_bytes() for p in out.iterdir() if p.name.startswith("shard-")})
    assert outputs[0] == outputs[1]


def test_empty_shard_in_the_middle(tmp_path):
    """A shard without documents (the pipeline builds one for every shard that got
    none) holds no instance; global indices skip it."""
    out = tmp_path / "empty-shard"
    config = config_for(out, num_shards=3)
    shard_of = {doc_id: 2 * shard for doc_id, shard in SHARD_OF.items()}  # shards 0 and 2
    manifest = build(out, [DOCUMENTS], config, shard_of)
    assert manifest.train.shards[1].counts.instances == 0
    assert manifest.train.shards[1].counts.documents == 0
    assert IndexedReader(out / "shard-00001").num_documents == 0
    ds = PretrainDataset(out)
    assert len(ds) == manifest.train.totals.instances > 0
    shards_seen = set()
    for i in range(len(ds)):
        shard, _ = ds.locate(i)
        shards_seen.add(shard)
        doc_id, _ = locate(ds[i]["original_ids"][1:2])
        assert shard_of[doc_id] == shard
    assert shards_seen == {0, 2}


def test_megatron_core_reads_the_shard_files(built):
    import logging
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets.indexed_dataset import IndexedDataset
    logging.getLogger("megatron").setLevel(logging.ERROR)
    for prefix in ("shard-00000", "shard-00001.masked_positions", "shard-00001.masked_tokens"):
        ours = IndexedReader(built / prefix)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = IndexedDataset(str(built / prefix))
        assert np.array_equal(theirs.sequence_lengths, ours.sequence_lengths)
        assert np.array_equal(theirs.document_indices, ours.document_index)
        for i in range(len(ours)):
            assert np.array_equal(theirs[i], ours[i])


def test_spill_writer_abort_removes_its_files(tmp_path):
    writer = SpillWriter(tmp_path / "spill", FACTS.token_dtype)
    writer.add(0, DOCUMENTS[0])
    writer.abort()
    assert list((tmp_path / "spill").iterdir()) == []


def _part_bytes(prefix: Path) -> dict[str, bytes]:
    """Each file of the part ``prefix`` by its suffix (an attempt's own files left out)."""
    return {p.name[len(prefix.name):]: p.read_bytes() for p in prefix.parent.iterdir()
            if p.name.startswith(prefix.name + ".") and ".attempt-" not in p.name}


def test_two_live_attempts_of_a_unit_leave_one_whole_part(tmp_path):
    """Two attempts of one work unit (speculative execution, or a task run again while
    a worker thought lost still runs it) each write files of their own and rename
    them into place when they close: while the later one writes, the part the earlier
    one finished stays whole (writing the part's own files truncated it under the
    shard builds reading it), and the part is the same bytes after either close."""
    alone = tmp_path / "alone" / "part-u"
    writer = SpillWriter(alone.parent, FACTS.token_dtype, alone)
    for document in DOCUMENTS:
        writer.add(SHARD_OF[document.doc_id], document)
    writer.close()
    expected = _part_bytes(alone)
    assert sorted(expected) == sorted(p.name[len("part-u"):] for p in writer.files)
    both = tmp_path / "both" / "part-u"
    first = SpillWriter(both.parent, FACTS.token_dtype, both)
    for document in DOCUMENTS:
        first.add(SHARD_OF[document.doc_id], document)
    first.close()
    assert _part_bytes(both) == expected
    second = SpillWriter(both.parent, FACTS.token_dtype, both)
    for document in DOCUMENTS[:5]:
        second.add(SHARD_OF[document.doc_id], document)
    assert _part_bytes(both) == expected  # while the second writes
    for document in DOCUMENTS[5:]:
        second.add(SHARD_OF[document.doc_id], document)
    finished = {p.name: p.stat().st_ino for p in both.parent.iterdir() if ".attempt-" not in p.name}
    second.close()
    assert _part_bytes(both) == expected
    # The finished part's very files stay (a rename over them pulled them from under
    # a shard build reading them: ESTALE on NFS); the later attempt's are dropped.
    assert {p.name: p.stat().st_ino for p in both.parent.iterdir()} == finished
    assert sorted(finished) == sorted(f"part-u{suffix}" for suffix in expected)


def test_without_hard_links_a_finished_part_is_renamed_into_place_once(tmp_path, monkeypatch):
    """On a filesystem without hard links the attempt's files are renamed to the
    part's names, unless another attempt's are there."""
    import data_prep.spill as spill_module

    def no_links(source, target):
        raise PermissionError(1, "Operation not permitted", str(source))

    monkeypatch.setattr(spill_module.os, "link", no_links)
    prefix = tmp_path / "part-u"
    first, second = (SpillWriter(tmp_path, FACTS.token_dtype, prefix) for _ in range(2))
    for writer in (first, second):
        for document in DOCUMENTS[:4]:
            writer.add(0, document)
    first.close()
    finished = {p.name: p.stat().st_ino for p in tmp_path.iterdir() if ".attempt-" not in p.name}
    assert sorted(finished) == sorted(p.name for p in first.files)
    second.close()
    assert {p.name: p.stat().st_ino for p in tmp_path.iterdir()} == finished
    assert ShardDocuments(0, [str(prefix)]).doc_ids == sorted(d.doc_id for d in DOCUMENTS[:4])


def test_a_failure_while_closing_removes_the_attempts_files(tmp_path, monkeypatch):
    """A full disk or an I/O error as the part closes leaves none of the attempt's
    files (each retry, under fresh names, would otherwise leave a whole part behind)."""
    import errno

    import data_prep.spill as spill_module

    writer = SpillWriter(tmp_path, FACTS.token_dtype, tmp_path / "part-u")
    for document in DOCUMENTS:
        writer.add(SHARD_OF[document.doc_id], document)

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(spill_module.os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        writer.close()
    assert list(tmp_path.iterdir()) == []


def test_a_units_document_list_is_not_held_in_memory(tmp_path, monkeypatch):
    """The list is written as documents come and regrouped on disk a buffer at a time
    (a ``lines`` unit is a whole file, a document per line): closing a part of 30,000
    documents with a 64 KiB buffer takes well under the 2.7 MB their lines take as
    Python objects (holding the list took 10 MB here), and every shard's lines keep
    their document order across the buffer's many writes."""
    import tracemalloc

    monkeypatch.setattr(SpillWriter, "REGROUP_BUFFER_BYTES", 1 << 16)
    sentence = [EncodedSentence(np.arange(3, dtype=np.int32), np.ones(3, dtype=bool))]
    prefix = tmp_path / "part-u"
    tracemalloc.start()
    try:
        writer = SpillWriter(tmp_path, FACTS.token_dtype, prefix)
        for k in range(30_000):
            writer.add(k % 7, TokenizedDocument(f"line-{k:08d}", sentence, 10))
        adding_peak = tracemalloc.get_traced_memory()[1]
        held = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        writer.close()
        closing = tracemalloc.get_traced_memory()[1] - held
    finally:
        tracemalloc.stop()
    assert adding_peak < 2 * 2**20, f"{adding_peak} bytes at the peak of adding"  # the MMIDIDX writers' blocks
    assert closing < 2**20, f"{closing} bytes more at the peak of closing"
    entries = [json.loads(line) for line in Path(f"{prefix}.shard-docs.jsonl").read_bytes().splitlines()]
    assert [(shard, doc_no) for _, shard, doc_no in entries] == sorted((k % 7, k) for k in range(30_000))
    assert [doc_id for doc_id, _, doc_no in entries] == [f"line-{doc_no:08d}" for _, _, doc_no in entries]


def test_a_failed_attempt_leaves_the_part_another_attempt_finished(tmp_path):
    """An attempt that fails removes its own files, never the part that another
    attempt of the unit finished (and marked done): the shard build still reads it.
    A killed attempt's files are left for a resumed build to remove."""
    from data_prep.workspace import Workspace

    workspace = Workspace(tmp_path)
    workspace.start_run("digest", [], inputs={}, tokenizer_sha256="0" * 64)
    prefix = workspace.root / "part-u"
    done, failed, killed = (SpillWriter(workspace.root, FACTS.token_dtype, prefix) for _ in range(3))
    for writer in (done, failed, killed):
        writer.add(0, DOCUMENTS[0])
    done.close()
    workspace.mark_done(prefix, done.files, {"bytes": 1, "shards": [0], "skips": {}, "documents": 1})
    failed.abort()
    assert ShardDocuments(0, [str(prefix)]).doc_ids == [DOCUMENTS[0].doc_id]
    assert any(".attempt-" in p.name for p in workspace.root.iterdir())  # the killed one's
    assert workspace.discard_incomplete() == (1, 3)  # its .bin, .wstart.bin and list of arrivals
    assert sorted(p.name for p in workspace.root.iterdir()) == sorted(
        [*(p.name for p in done.files), "part-u.done.json", "build.json"])


# ---------------------------------------------------------- reader validation


def expect_dataset_error(directory: Path, file_name: str, match: str | None = None) -> None:
    with pytest.raises(DatasetError, match=match) as info:
        PretrainDataset(directory)
    assert file_name in str(info.value)


@pytest.mark.parametrize("suffix", SHARD_SUFFIXES)
def test_missing_shard_file(dataset_copy, suffix):
    (dataset_copy / f"shard-00001{suffix}").unlink()
    expect_dataset_error(dataset_copy, str(dataset_copy / f"shard-00001{suffix}"), "missing")


@pytest.mark.parametrize("suffix", [".bin", ".masked_positions.bin", ".masked_tokens.idx", ".meta.npy"])
def test_truncated_shard_file(dataset_copy, suffix):
    path = dataset_copy / f"shard-00000{suffix}"
    path.write_bytes(path.read_bytes()[:-2])
    expect_dataset_error(dataset_copy, str(path))


def test_truncated_bin_without_recorded_sizes(dataset_copy):
    """Without the byte counts in the manifest, the MMIDIDX check still catches it."""
    manifest_path = dataset_copy / MANIFEST_NAME
    manifest = json.loads(manifest_path.read_text())
    for entry in manifest["shards"]:
        entry.pop("files")
    manifest_path.write_text(json.dumps(manifest))
    path = dataset_copy / "shard-00001.bin"
    path.write_bytes(path.read_bytes()[:-2])
    expect_dataset_error(dataset_copy, str(path))


def test_size_differs_from_the_recorded_bytes(dataset_copy):
    """A file whose size differs from the manifest's record (e.g. replaced by the
    file of another build) is refused even when it is itself well-formed."""
    edit_manifest(dataset_copy, lambda m: m["shards"][0]["files"]["masked_tokens_bin"].update(bytes=7))
    expect_dataset_error(dataset_copy, str(dataset_copy / "shard-00000.masked_tokens.bin"), "records 7")


def test_corrupt_meta(dataset_copy):
    path = dataset_copy / "shard-00000.meta.npy"
    path.write_bytes(b"\x00" * path.stat().st_size)
    expect_dataset_error(dataset_copy, str(path))


def edit_manifest(directory: Path, edit) -> None:
    path = directory / MANIFEST_NAME
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))


def test_edited_shard_instance_count(dataset_copy):
    edit_manifest(dataset_copy, lambda m: m["shards"][1].update(num_instances=m["shards"][1]["num_instances"] + 1))
    expect_dataset_error(dataset_copy, "shard-00001", "instances")


def test_edited_total_instance_count(dataset_copy):
    edit_manifest(dataset_copy, lambda m: m["totals"].update(instances=m["totals"]["instances"] - 1))
    expect_dataset_error(dataset_copy, str(dataset_copy / MANIFEST_NAME), "instances")


def test_missing_manifest(dataset_copy):
    (dataset_copy / MANIFEST_NAME).unlink()
    expect_dataset_error(dataset_copy, str(dataset_copy / MANIFEST_NAME), "missing")


def test_not_a_directory(tmp_path):
    expect_dataset_error(tmp_path / "nowhere", str(tmp_path / "nowhere"))


def test_other_format_version(dataset_copy):
    edit_manifest(dataset_copy, lambda m: m.update(format_version=FORMAT_VERSION + 1))
    expect_dataset_error(dataset_copy, str(dataset_copy / MANIFEST_NAME), "version")


def test_other_format_name(dataset_copy):
    edit_manifest(dataset_copy, lambda m: m.update(format="something-else"))
    expect_dataset_error(dataset_copy, str(dataset_copy / MANIFEST_NAME))


def test_unparsable_manifest(dataset_copy):
    (dataset_copy / MANIFEST_NAME).write_text("{not json")
    expect_dataset_error(dataset_copy, str(dataset_copy / MANIFEST_NAME), "unreadable")


@pytest.mark.parametrize("key", ["tokenizer", "max_seq_len", "shards", "totals"])
def test_manifest_missing_key(dataset_copy, key):
    edit_manifest(dataset_copy, lambda m: m.pop(key))
    expect_dataset_error(dataset_copy, str(dataset_copy / MANIFEST_NAME), key)


def test_shards_without_manifest_are_not_a_dataset(tmp_path):
    out = tmp_path / "unfinished"
    config = config_for(out)
    prefixes = spill(out, [DOCUMENTS])
    for k in range(2):
        build_shard(k, prefixes, config, FACTS)
    expect_dataset_error(out, str(out / MANIFEST_NAME), "missing")


def test_a_failing_shard_build_leaves_no_partial_files(tmp_path, monkeypatch):
    """Every writer of a shard (word starts included) removes its partial files when
    the build fails half-way."""
    import data_prep.shards as shards

    config = config_for(tmp_path / "out", masking=MaskingConfig(whole_word_masking=True))
    prefixes = spill(tmp_path / "out", [DOCUMENTS])
    calls = []

    def failing_mask_pass(*args, **kwargs):
        calls.append(1)
        if len(calls) > config.dupe_factor:  # the second document: the first one's instances are written
            raise RuntimeError("disk full")
        return mask_pass(*args, **kwargs)

    monkeypatch.setattr(shards, "mask_pass", failing_mask_pass)
    with pytest.raises(RuntimeError, match="disk full"):
        build_shard(0, prefixes, config, FACTS)
    shard_dirs = list((tmp_path / "out" / TMP_DIR_NAME).glob("shard-*"))
    assert len(shard_dirs) == 1 and list(shard_dirs[0].iterdir()) == []
    assert not list((tmp_path / "out").glob("shard-*"))


def test_the_build_command_line_takes_its_defaults_from_the_config_dataclasses(tmp_path):
    from data_prep.build import parse_args

    config = parse_args(["--input", "x.xml", "--tokenizer", "vocab.txt", "--output", str(tmp_path / "o")]).config
    # Without --num-shards the build chooses the count from the input's size (auto_shards);
    # the tokenizer's path is absolute, as every worker loads it again.
    assert config == BuildConfig(InputConfig(("x.xml",)), TokenizerConfig(os.path.abspath("vocab.txt")),
                                 OutputConfig(str(tmp_path / "o"), auto_shards=True))
    lines = parse_args(["--input", "s.txt", "--format", "lines", "--tokenizer", "v", "--output", "o"]).config
    assert lines.cleaning.min_doc_chars == 1  # a line is a whole document


def test_a_units_marker_names_every_file_its_part_wrote_and_resume_keeps_exactly_those(tmp_path):
    """One list: the files a spill part writes are the files synced before its
    marker, named by the marker, and kept by a resume (an incomplete part, a shard
    being built and stray files go)."""
    from data_prep.workspace import Workspace, is_build_file

    workspace = Workspace(tmp_path)
    workspace.start_run("digest", [], inputs={}, tokenizer_sha256="0" * 64)
    prefix = workspace.root / "part-done"
    writer = SpillWriter(workspace.root, FACTS.token_dtype, prefix)
    writer.add(0, DOCUMENTS[0])
    writer.close()
    written = sorted(p.name for p in workspace.root.iterdir() if p.name.startswith("part-done"))
    assert len(written) == 6 and sorted(p.name for p in writer.files) == written
    workspace.mark_done(prefix, writer.files, {"bytes": 1, "shards": [0], "skips": {}, "documents": 1})
    assert workspace.marker(prefix)["files"] == written
    unfinished = SpillWriter(workspace.root, FACTS.token_dtype, workspace.root / "part-killed")
    unfinished.add(0, DOCUMENTS[1])
    unfinished.close()  # closed, but killed before its marker
    workspace.shard_scratch()
    assert workspace.discard_incomplete() == (1, 7)
    assert sorted(p.name for p in workspace.root.iterdir()) == sorted([*written, "part-done.done.json", "build.json"])
    for name, ours in (("shard-00003.bin", True), ("validation-00000.meta.npy", True), ("_tmp", True),
                       ("tokenizer", True), (".manifest.json.1a2b.tmp", True), ("notes.txt", False),
                       ("shard-3.bin", False), ("manifest.json", False)):
        assert is_build_file(tmp_path / name) == ours, name


@pytest.mark.parametrize("block", [1, 3])
def test_shard_files_are_the_same_whatever_the_spill_block(built, tmp_path, monkeypatch, block):
    """The writers' lengths, document index and instance metadata are spilled a
    block at a time and assembled at close: every file of the dataset is the same
    with blocks of one or three values as with the default block."""
    import tacl_scale.data.spilled as spilled

    monkeypatch.setattr(spilled, "SPILL_BLOCK", block)
    out = tmp_path / "out"
    build(out, [DOCUMENTS[:5], DOCUMENTS[5:]])
    names = sorted(p.name for p in built.iterdir())
    assert sorted(p.name for p in out.iterdir()) == names
    assert any(name.endswith(".meta.npy") for name in names)
    for name in names:
        if name != "manifest.json":  # it names the output directory (its checksums are of these files)
            assert (out / name).read_bytes() == (built / name).read_bytes(), name


def shard_records(train: list[int], validation: list[int]) -> list[ShardRecord]:
    """Shard records holding these numbers of documents, training shards first."""
    counts = [("train", k, n) for k, n in enumerate(train)] + [("validation", k, n) for k, n in enumerate(validation)]
    return [ShardRecord(shard_name(index, split), index, key, split, {}, Counts(documents=n))
            for key, (split, index, n) in enumerate(counts)]


POOL = "random B segments come from these only"  # the part the quickstart and other tests count


def test_a_small_random_b_pool_is_warned_about_with_a_fix_that_is_possible() -> None:
    """With --num-shards 1 the warning said "use fewer shards", and with one validation
    shard the same: fewer than one is impossible; the input is too small."""
    assert random_b_pool_warnings(shard_records([86], [7])) == [
        f"shard-00000: 86 documents; its {POOL} (the only shard: the input is too small for a random-B pool of "
        "100 documents)",
        f"validation-00000: 7 documents; its {POOL} (the only validation shard: too few documents are held out "
        "for a random-B pool of 100; a larger --validation-fraction holds out more)",
    ]
    # Several shards: fewer is the fix (an empty one is not warned about: it has no pool).
    assert random_b_pool_warnings(shard_records([150, 40, 0], [30, 20])) == [
        f"shard-00001: 40 documents; its {POOL} (use fewer shards: about documents / 100 at most)",
        f"validation-00000: 30 documents; its {POOL} (use fewer shards: about documents / 100 at most)",
        f"validation-00001: 20 documents; its {POOL} (use fewer shards: about documents / 100 at most)",
    ]
    assert random_b_pool_warnings(shard_records([100], [])) == []
    assert random_b_pool_warnings(shard_records([86], []), single_segment=True) == []


def test_a_high_share_of_unknown_tokens_is_warned_about_naming_the_case_setting() -> None:
    """An uncased vocabulary under --no-lowercase made 12% of the real English sample's
    tokens [UNK], without a word."""
    assert unknown_token_warnings(10_000, 100, False) == []  # 1%: not above
    assert unknown_token_warnings(0, 0, None) == []
    assert unknown_token_warnings(506_411, 66_030, False) == [
        "13.0% of the tokens are [UNK] (66,030 of 506,411): is --no-lowercase right for this vocabulary (an "
        "uncased one has no capital letters), and is it one for the text's language?"]
    (lowercased,) = unknown_token_warnings(1000, 20, True)
    assert lowercased.startswith("2.0% of the tokens are [UNK] (20 of 1,000): is --lowercase right")
    assert unknown_token_warnings(1000, 20, None) == [
        "2.0% of the tokens are [UNK] (20 of 1,000): is the vocabulary one for the text's language?"]
