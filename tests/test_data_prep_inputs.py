"""Bad input to the data tools outside the build (``tacl-multistream``,
``tacl-inspect-dataset``): an ``error:`` line naming the file at fault and exit
status 2, not a traceback, a note, or the name of another file; nothing already
written is lost."""

from __future__ import annotations

import bz2
import gzip
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest_sources_helpers import single_xml, synthetic_pages

from tacl_scale import EXIT_ERROR

CORRUPT = "corrupt or truncated compressed data: "


def _truncated_bz2(xml: bytes) -> bytes:
    data = bz2.compress(xml)
    return data[: len(data) // 2]


def _truncated_gz(xml: bytes) -> bytes:
    data = gzip.compress(xml, mtime=0)
    return data[: len(data) // 2]


def _corrupt_gz(xml: bytes) -> bytes:
    damaged = bytearray(gzip.compress(xml, mtime=0))
    damaged[30] ^= 0xFF  # inside the deflate data: zlib's "invalid bit length repeat"
    return bytes(damaged)


# name of the source -> its bytes from the dump's XML; what each raised before
DAMAGED: dict[str, Callable[[bytes], bytes]] = {
    "cut.xml.bz2": _truncated_bz2,  # EOFError traceback
    "cut.xml.gz": _truncated_gz,  # EOFError traceback
    "flipped.xml.gz": _corrupt_gz,  # zlib.error traceback
    "plain.xml.bz2": lambda xml: xml,  # "error: TARGET: Invalid data stream"
    "plain.xml.gz": lambda xml: xml,  # "error: TARGET: Not a gzipped file"
}


@pytest.mark.parametrize("name", list(DAMAGED))
def test_a_multistream_of_a_damaged_source_names_the_source_and_keeps_the_old_output(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from data_prep.multistream import main as multistream

    source = tmp_path / name
    source.write_bytes(DAMAGED[name](single_xml(synthetic_pages(300))))
    target = tmp_path / "out" / "x-multistream.xml.bz2"
    target.parent.mkdir()
    target.write_bytes(b"the old dump")
    target.with_name("x-multistream-index.txt.bz2").write_bytes(b"the old index")
    before = {p: p.read_bytes() for p in target.parent.iterdir()}

    assert multistream([str(source), str(target), "--overwrite"]) == EXIT_ERROR
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"error: {source}: {CORRUPT}") and captured.err.count("\n") == 1, captured.err
    assert str(target) not in captured.err
    assert {p: p.read_bytes() for p in target.parent.iterdir()} == before  # no temporary file left either


def test_a_multistream_of_an_unreadable_source_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """An OS error reading the source is not called corrupt data, and names the source."""
    import errno
    import os

    from data_prep import multistream

    source = tmp_path / "dump.xml.bz2"
    source.write_bytes(bz2.compress(single_xml(synthetic_pages(20))))

    def unreadable(path: str) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO), path)

    monkeypatch.setattr(multistream, "open_decompressed", unreadable)
    target = tmp_path / "x-multistream.xml.bz2"
    assert multistream.main([str(source), str(target)]) == EXIT_ERROR
    assert capsys.readouterr().err == f"error: {source}: cannot read: {os.strerror(errno.EIO)}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [source.name]


def test_inspect_refuses_a_named_tokenizer_that_is_not_there(zh_dataset: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """``--tokenizer /nonexistent`` printed a note, decoded ids and exited 0: a typo
    in the path read as a dataset without a vocabulary."""
    from conftest import ZH_VOCAB

    from data_prep.inspect import main as inspect

    assert inspect([str(zh_dataset), "-n", "1", "--tokenizer", str(ZH_VOCAB)]) == 0  # one that is there decodes
    assert "[CLS]" in capsys.readouterr().out
    missing = tmp_path / "nonexistent" / "vocab.txt"
    for count in ("1", "0"):
        assert inspect([str(zh_dataset), "-n", count, "--tokenizer", str(missing)]) == EXIT_ERROR
        captured = capsys.readouterr()
        assert captured.err == f"error: --tokenizer {missing}: tokenizer not found\n"
        assert captured.out == ""  # refused before the summary
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    assert inspect([str(zh_dataset), "-n", "1", "--tokenizer", str(empty)]) == EXIT_ERROR
    assert capsys.readouterr().err.startswith(f"error: --tokenizer {empty}: ")


def test_inspect_without_its_tokenizer_copy_still_decodes_ids_with_a_note(
        zh_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Not named by the user, the dataset's own copy may be gone: a note, not an error."""
    import shutil

    from data_prep.inspect import main as inspect
    from tacl_scale.data import PretrainDataset

    copy = tmp_path / "ds"
    shutil.copytree(zh_dataset, copy)
    PretrainDataset(copy).manifest.tokenizer.location(copy).unlink()
    assert inspect([str(copy), "-n", "1"]) == 0
    assert "(decoding with ids only: " in capsys.readouterr().out
