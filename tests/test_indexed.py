"""MMIDIDX indexed files (tacl_scale.data.indexed): round trip, exact byte layout,
compatibility with megatron-core's IndexedDataset, and validation of bad files."""

from __future__ import annotations

import logging
import struct
import warnings

import numpy as np
import pytest

from tacl_scale.data.indexed import (
    INDEX_MAGIC,
    IndexedFormatError,
    IndexedReader,
    IndexedWriter,
    bin_path,
    idx_path,
    smallest_token_dtype,
)

DTYPES = [np.uint8, np.uint16, np.int32]
CODES = {np.uint8: 1, np.uint16: 8, np.int32: 4}


def random_documents(dtype, seed: int = 0) -> list[list[np.ndarray]]:
    """Documents of sequences (including empty sequences) spanning the dtype's range."""
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    low, high = max(int(info.min), -(1 << 31)), min(int(info.max), (1 << 31) - 1)
    documents = []
    for _ in range(7):
        doc = []
        for _ in range(int(rng.integers(1, 6))):
            n = int(rng.integers(0, 50))
            doc.append(rng.integers(low, high, size=n, endpoint=True).astype(np.int64))
        documents.append(doc)
    documents[2][0] = np.array([low, high, 0], dtype=np.int64)  # the extremes fit
    return documents


def write(prefix, dtype, documents) -> None:
    with IndexedWriter(prefix, dtype) as writer:
        for doc in documents:
            for seq in doc:
                writer.add(seq)
            writer.end_document()
        assert writer.num_sequences == sum(len(d) for d in documents)


# ------------------------------------------------------------------ round trip


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip(tmp_path, dtype):
    documents = random_documents(dtype)
    prefix = tmp_path / "data"
    write(prefix, dtype, documents)
    reader = IndexedReader(prefix)
    flat = [seq for doc in documents for seq in doc]
    assert reader.dtype == np.dtype(dtype)
    assert len(reader) == len(flat)
    assert reader.num_documents == len(documents)
    assert reader.num_tokens == sum(len(s) for s in flat)
    assert reader.sequence_lengths.tolist() == [len(s) for s in flat]
    assert reader.document_index.tolist() == np.cumsum([0] + [len(d) for d in documents]).tolist()
    for i, seq in enumerate(flat):
        got = reader[i]
        assert got.dtype == np.dtype(dtype)
        assert np.array_equal(got.astype(np.int64), seq)
        assert not got.flags.writeable
    assert np.array_equal(reader[-1].astype(np.int64), flat[-1])
    # span: consecutive sequences as one view
    joined = np.concatenate(flat[2:6])
    assert np.array_equal(reader.span(2, 5).astype(np.int64), joined)
    assert np.array_equal(reader.span(3, 3).astype(np.int64), flat[3])
    for bad in (len(flat), -len(flat) - 1):
        with pytest.raises(IndexError):
            reader[bad]


def test_empty_dataset(tmp_path):
    prefix = tmp_path / "empty"
    with IndexedWriter(prefix, np.uint16):
        pass
    assert bin_path(prefix).stat().st_size == 0
    reader = IndexedReader(prefix)
    assert len(reader) == 0
    assert reader.num_documents == 0
    assert reader.num_tokens == 0
    assert reader.document_index.tolist() == [0]
    with pytest.raises(IndexError):
        reader[0]


def test_empty_documents_and_sequences(tmp_path):
    prefix = tmp_path / "sparse"
    with IndexedWriter(prefix, np.uint8) as writer:
        writer.end_document()  # a document without sequences
        writer.add(np.array([], dtype=np.int64))
        writer.add(np.array([5]))
        writer.end_document()
    reader = IndexedReader(prefix)
    assert reader.document_index.tolist() == [0, 0, 2]
    assert reader.num_documents == 2
    assert reader[0].tolist() == [] and reader[1].tolist() == [5]


def test_paths_and_close_idempotent(tmp_path):
    prefix = tmp_path / "a.b"
    assert idx_path(prefix).name == "a.b.idx"
    assert bin_path(str(prefix)).name == "a.b.bin"
    writer = IndexedWriter(prefix, np.int32)
    writer.add(np.array([1, 2, 3]))
    writer.end_document()
    writer.close()
    before = idx_path(prefix).read_bytes()
    writer.close()
    assert idx_path(prefix).read_bytes() == before
    assert IndexedReader(prefix)[0].tolist() == [1, 2, 3]


# ----------------------------------------------------------------- byte layout


def test_idx_bytes_match_the_spec_exactly(tmp_path):
    prefix = tmp_path / "spec"
    with IndexedWriter(prefix, np.uint16) as writer:
        writer.add(np.array([1, 2, 3]))
        writer.add(np.array([258]))
        writer.end_document()
        writer.add(np.array([7, 8]))
        writer.end_document()
    expected_idx = (
        b"MMIDIDX\x00\x00"  # magic
        + b"\x01\x00\x00\x00\x00\x00\x00\x00"  # version 1, <Q
        + b"\x08"  # dtype code 8 = uint16, <B
        + b"\x03\x00\x00\x00\x00\x00\x00\x00"  # 3 sequences, <Q
        + b"\x03\x00\x00\x00\x00\x00\x00\x00"  # 3 document-index entries, <Q
        + b"\x03\x00\x00\x00" + b"\x01\x00\x00\x00" + b"\x02\x00\x00\x00"  # lengths, int32
        + struct.pack("<3q", 0, 6, 8)  # byte offsets, int64
        + struct.pack("<3q", 0, 2, 3)  # document index, int64
    )
    assert idx_path(prefix).read_bytes() == expected_idx
    assert len(expected_idx) == 34 + 3 * 4 + 3 * 8 + 3 * 8
    assert bin_path(prefix).read_bytes() == b"\x01\x00\x02\x00\x03\x00\x02\x01\x07\x00\x08\x00"


@pytest.mark.parametrize("dtype", DTYPES)
def test_idx_layout_per_dtype(tmp_path, dtype):
    documents = random_documents(dtype, seed=4)
    flat = [seq for doc in documents for seq in doc]
    prefix = tmp_path / "layout"
    write(prefix, dtype, documents)
    itemsize = np.dtype(dtype).itemsize
    lengths = np.array([len(s) for s in flat], dtype="<i4")
    pointers = np.concatenate([[0], np.cumsum(lengths[:-1].astype(np.int64) * itemsize)]).astype("<i8")
    doc_index = np.cumsum([0] + [len(d) for d in documents]).astype("<i8")
    expected = (
        INDEX_MAGIC
        + struct.pack("<QBQQ", 1, CODES[dtype], len(flat), len(doc_index))
        + lengths.tobytes()
        + pointers.tobytes()
        + doc_index.tobytes()
    )
    assert idx_path(prefix).read_bytes() == expected
    le = np.dtype(dtype).newbyteorder("<")
    assert bin_path(prefix).read_bytes() == b"".join(s.astype(le).tobytes() for s in flat)


# ------------------------------------------------------- megatron-core compat


@pytest.mark.parametrize("dtype", DTYPES)
def test_megatron_core_reads_our_files(tmp_path, dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets.indexed_dataset import IndexedDataset

    documents = random_documents(dtype, seed=9)
    # megatron-core reads a sequence with numpy.frombuffer on the mapped .bin
    documents[0].insert(0, np.array([1, 2], dtype=np.int64))
    prefix = tmp_path / "mega"
    write(prefix, dtype, documents)
    ours = IndexedReader(prefix)
    logging.getLogger("megatron").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = IndexedDataset(str(prefix))
    assert len(theirs) == len(ours)
    assert np.array_equal(theirs.sequence_lengths, ours.sequence_lengths)
    assert np.array_equal(theirs.document_indices, ours.document_index)
    for i in range(len(ours)):
        got = theirs[i]
        assert got.dtype == np.dtype(dtype)
        assert np.array_equal(got, ours[i])


# ------------------------------------------------------------------------ dtype


def test_smallest_token_dtype():
    assert smallest_token_dtype(2) == np.uint8
    assert smallest_token_dtype(256) == np.uint8  # ids 0..255
    assert smallest_token_dtype(257) == np.uint16
    assert smallest_token_dtype(30522) == np.uint16  # bert-base-uncased
    assert smallest_token_dtype(21128) == np.uint16  # bert-base-chinese
    assert smallest_token_dtype(65536) == np.uint16
    assert smallest_token_dtype(65537) == np.int32
    assert smallest_token_dtype(250_002) == np.int32  # xlm-roberta
    for vocab in (256, 65536, 65537):
        assert np.iinfo(smallest_token_dtype(vocab)).max >= vocab - 1


@pytest.mark.parametrize(
    ("dtype", "bad"),
    [(np.uint8, 256), (np.uint8, -1), (np.uint16, 65536), (np.uint16, -1), (np.int32, 1 << 31),
     (np.int32, -(1 << 31) - 1)],
)
def test_value_out_of_range_raises(tmp_path, dtype, bad):
    prefix = tmp_path / "range"
    writer = IndexedWriter(prefix, dtype)
    with pytest.raises(ValueError, match="outside the range"):
        writer.add(np.array([0, bad, 1], dtype=np.int64))
    assert writer.num_sequences == 0
    writer.add(np.array([1]))
    writer.end_document()
    writer.close()
    assert IndexedReader(prefix)[0].tolist() == [1]  # nothing of the bad sequence was written


def test_unsupported_dtype(tmp_path):
    with pytest.raises(ValueError, match="MMIDIDX"):
        IndexedWriter(tmp_path / "x", np.uint32)
    assert not bin_path(tmp_path / "x").exists()


def test_exception_in_context_removes_partial_files(tmp_path):
    prefix = tmp_path / "partial"
    with pytest.raises(RuntimeError), IndexedWriter(prefix, np.uint16) as writer:
        writer.add(np.arange(100))
        writer.end_document()
        raise RuntimeError("boom")
    assert not bin_path(prefix).exists()
    assert not idx_path(prefix).exists()
    assert list(tmp_path.iterdir()) == []


def test_out_of_range_in_context_removes_partial_files(tmp_path):
    prefix = tmp_path / "partial"
    with pytest.raises(ValueError, match=f"{prefix}: value outside the range of uint8"), \
            IndexedWriter(prefix, np.uint8) as writer:
        writer.add(np.arange(10))
        writer.add(np.array([300]))
    assert list(tmp_path.iterdir()) == []


# -------------------------------------------------------------- bad files


@pytest.fixture
def good(tmp_path):
    prefix = tmp_path / "good"
    write(prefix, np.uint16, random_documents(np.uint16, seed=2))
    IndexedReader(prefix)
    return prefix


def patch_idx(prefix, offset: int, data: bytes) -> None:
    raw = bytearray(idx_path(prefix).read_bytes())
    raw[offset : offset + len(data)] = data
    idx_path(prefix).write_bytes(bytes(raw))


def expect_error(prefix, file, match: str) -> None:
    with pytest.raises(IndexedFormatError, match=match) as info:
        IndexedReader(prefix)
    assert str(file) in str(info.value)


def test_bad_magic(good):
    patch_idx(good, 0, b"XXIDIDX")
    expect_error(good, idx_path(good), "magic")


def test_bad_version(good):
    patch_idx(good, 9, struct.pack("<Q", 2))
    expect_error(good, idx_path(good), "version")


def test_bad_dtype_code(good):
    patch_idx(good, 17, b"\x09")
    expect_error(good, idx_path(good), "dtype")


def test_truncated_header(good):
    idx_path(good).write_bytes(idx_path(good).read_bytes()[:20])
    expect_error(good, idx_path(good), "truncated")


def test_empty_idx(good):
    idx_path(good).write_bytes(b"")
    expect_error(good, idx_path(good), "truncated")


@pytest.mark.parametrize(("which", "delta"), [(idx_path, -1), (idx_path, -8), (idx_path, 1),
                                             (bin_path, -1), (bin_path, -2), (bin_path, 2)])
def test_file_size_disagrees_with_the_index(good, which, delta):
    """A truncated or padded .idx (its header) or .bin (its index) is refused, naming it."""
    raw = which(good).read_bytes()
    which(good).write_bytes(raw[:delta] if delta < 0 else raw + b"\x00" * delta)
    expect_error(good, which(good), "size")


@pytest.mark.parametrize("entry", ["first", "last"])
def test_document_index_disagrees_with_sequence_count(good, entry):
    raw = idx_path(good).read_bytes()
    (count, entries) = struct.unpack_from("<QQ", raw, 18)
    offset = 34 + count * 12 + (0 if entry == "first" else (entries - 1) * 8)
    patch_idx(good, offset, struct.pack("<q", count + 5))
    expect_error(good, idx_path(good), "document")


def test_sequence_count_disagrees_with_file(good):
    (count,) = struct.unpack_from("<Q", idx_path(good).read_bytes(), 18)
    patch_idx(good, 18, struct.pack("<Q", count + 1))
    expect_error(good, idx_path(good), "size")


def test_empty_bin(good):
    bin_path(good).write_bytes(b"")
    expect_error(good, bin_path(good), "size")


@pytest.mark.parametrize("which", [idx_path, bin_path])
def test_missing_file(good, which):
    which(good).unlink()
    expect_error(good, which(good), "missing")


@pytest.mark.parametrize(("field", "value"), [("pointer", 10**9), ("pointer", -4), ("pointer", 3), ("length", -1),
                                             ("length", 10**6)])
def test_a_damaged_entry_is_refused_when_its_sequence_is_read(good, field, value):
    """An entry of the .idx (not the last, whose end the file size checks) that
    points outside the .bin, into the middle of a value, or is negative in length,
    is refused naming the .idx and the sequence when that sequence is read: the
    slice came out silently short or empty, or from the end of the file (a
    negative offset), and the other sequences still read."""
    raw = idx_path(good).read_bytes()
    (count,) = struct.unpack_from("<Q", raw, 18)
    expected = [IndexedReader(good)[k].copy() for k in range(count)]
    k = 3
    if field == "pointer":
        patch_idx(good, 34 + count * 4 + k * 8, struct.pack("<q", value))
    else:
        patch_idx(good, 34 + k * 4, struct.pack("<i", value))
    reader = IndexedReader(good)  # opening reads only the header and the sizes
    with pytest.raises(IndexedFormatError) as info:
        reader[k]
    assert str(info.value).startswith(f"{idx_path(good)}: sequence {k}: ")
    assert f"do not lie within {bin_path(good)}" in str(info.value)
    for other in (0, k + 1, count - 1):
        assert np.array_equal(reader[other], expected[other])


def test_format_error_is_a_value_error():
    assert issubclass(IndexedFormatError, ValueError)


def test_add_joined_document_writes_the_bytes_of_add_document(tmp_path):
    pieces = [np.array([3, 4, 5]), np.array([], dtype=np.int64), np.array([9])]
    with IndexedWriter(tmp_path / "a", np.uint16) as a, IndexedWriter(tmp_path / "b", np.uint16) as b:
        a.add_document(pieces)
        a.add_document([])
        b.add_joined_document(np.concatenate(pieces), [3, 0, 1])
        b.add_joined_document(np.zeros(0, dtype=np.int64), [])
        with pytest.raises(ValueError, match="lengths add up to 5, not 4 values"):
            b.add_joined_document(np.arange(4), [2, 3])
    for suffix in (".bin", ".idx"):
        assert (tmp_path / f"a{suffix}").read_bytes() == (tmp_path / f"b{suffix}").read_bytes()
    assert [x.tolist() for x in IndexedReader(tmp_path / "b")] == [[3, 4, 5], [], [9]]


@pytest.mark.parametrize("block", [1, 2, 3, 7, 1 << 16])
def test_idx_written_a_block_at_a_time(tmp_path, monkeypatch, block):
    """The writer spills its lengths and document index a block at a time and
    writes the ``.idx`` from the blocks (a shard's writers hold over a million
    sequences): the bytes of the format's spec whatever the block, across block
    edges, empty sequences and documents and a multi-byte dtype included, and
    nothing left beside the ``.bin`` and ``.idx``."""
    import tacl_scale.data.spilled as spilled

    monkeypatch.setattr(spilled, "SPILL_BLOCK", block)
    rng = np.random.default_rng(block)
    lengths = [int(n) for n in rng.integers(0, 6, size=20)]
    ends = sorted({0, len(lengths), *(int(e) for e in rng.integers(0, len(lengths), size=8))})
    prefix = tmp_path / "blocks"
    with IndexedWriter(prefix, np.int32) as writer:
        for first, end in zip(ends, ends[1:], strict=False):
            writer.add_joined_document(np.arange(sum(lengths[first:end])), lengths[first:end])
        writer.end_document()  # an empty document at the end
    document_index = [*ends, len(lengths)]
    expected = (INDEX_MAGIC + struct.pack("<QBQQ", 1, 4, len(lengths), len(document_index))
                + np.array(lengths, dtype=np.int32).tobytes()
                + np.array([4 * sum(lengths[:k]) for k in range(len(lengths))], dtype=np.int64).tobytes()
                + np.array(document_index, dtype=np.int64).tobytes())
    assert idx_path(prefix).read_bytes() == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocks.bin", "blocks.idx"]
    reader = IndexedReader(prefix)
    assert [len(reader[k]) for k in range(len(lengths))] == lengths


def test_writer_memory_holds_a_block_not_a_length_per_sequence(tmp_path, monkeypatch):
    """A shard's writers see over a million sequences: their lengths and document
    index are spilled a block at a time (they were 4 and 8 bytes a sequence and a
    document in memory), and the ``.idx`` is still the whole one."""
    import tracemalloc

    import tacl_scale.data.spilled as spilled

    monkeypatch.setattr(spilled, "SPILL_BLOCK", 1024)
    lengths = [1, 2, 0, 3] * 250  # 1,000 sequences, 1,500 values, per document
    tracemalloc.start()
    try:
        with IndexedWriter(tmp_path / "big", np.uint16) as writer:
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(200):
                writer.add_joined_document(np.ones(1500, dtype=np.int64), lengths)
            held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 2 * (4 + 8) * 1024 + 8192, f"{held} bytes held for 200,000 sequences"
    reader = IndexedReader(tmp_path / "big")
    assert len(reader) == 200_000
    assert reader.document_index[-1] == 200_000 and len(reader.document_index) == 201
    assert reader.sequence_lengths.tolist() == lengths * 200
    assert reader[199_999].tolist() == [1, 1, 1]
