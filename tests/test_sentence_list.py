"""``data_prep.sentence_list``: sentence samples that agree with a build's
validation split, for Mirror-BERT jobs and held-out analysis."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from conftest import EN_DUMP

from data_prep.config import CleaningConfig
from data_prep.documents import is_validation
from data_prep.sentence_list import corpus_sentences, main, sample
from data_prep.sentences import SentenceConfig


def run(tmp_path: Path, name: str, *args: str) -> list[str]:
    out = tmp_path / name
    assert main(["--input", str(EN_DUMP), "--output", str(out), *args]) == 0
    return out.read_text(encoding="utf-8").splitlines()


def test_held_out_and_training_lists_come_from_disjoint_documents(tmp_path: Path) -> None:
    held = run(tmp_path, "held.txt", "--count", "300", "--validation-fraction", "0.2", "--split", "validation")
    train = run(tmp_path, "train.txt", "--count", "300", "--validation-fraction", "0.2", "--split", "train")
    assert len(held) == len(train) == 300
    assert all(5 <= len(s.split()) <= 40 for s in held + train)
    assert run(tmp_path, "again.txt", "--count", "300", "--validation-fraction", "0.2", "--split", "validation") == held

    documents: dict[str, set[str]] = {}  # sentence -> the documents that contain it
    for doc, sentence in corpus_sentences([str(EN_DUMP)], "wiki-xml", SentenceConfig("en"),
                                          CleaningConfig.for_format("wiki-xml"), 0.2, "all"):
        documents.setdefault(sentence, set()).add(doc)
    assert all(any(is_validation(d, 0.2) for d in documents[s]) for s in held)
    assert all(any(not is_validation(d, 0.2) for d in documents[s]) for s in train)
    # A sentence on both lists is one that several documents contain (generated
    # text, like Wikipedia, repeats some sentences verbatim), never one document's.
    assert all(len(documents[sentence]) > 1 for sentence in set(held) & set(train))


def test_the_builds_cleaning_flags_are_taken_alike(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--min-doc-chars and --traditional-to-simplified clean and split as a build
    given them does: a short document is skipped by default and kept with
    --min-doc-chars 1; Traditional characters are converted only when asked."""
    corpus = tmp_path / "zh.txt"
    corpus.write_text("這是一個關於電腦網絡的句子。\n", encoding="utf-8")
    common = ["--input", str(corpus), "--format", "text", "--language", "zh"]
    assert main([*common, "--output", str(tmp_path / "none.txt")]) == 2  # 14 characters < the default 200
    assert "no sentence of 5-40 words in the documents" in capsys.readouterr().err
    assert main([*common, "--min-doc-chars", "1", "--output", str(tmp_path / "kept.txt")]) == 0
    assert (tmp_path / "kept.txt").read_text(encoding="utf-8") == "這是一個關於電腦網絡的句子。\n"
    assert main([*common, "--min-doc-chars", "1", "--traditional-to-simplified",
                 "--output", str(tmp_path / "simplified.txt")]) == 0
    assert (tmp_path / "simplified.txt").read_text(encoding="utf-8") == "这是一个关于电脑网络的句子。\n"
    with pytest.raises(SystemExit):
        main([*common, "--min-doc-chars", "-1", "--output", str(tmp_path / "x.txt")])
    assert "--min-doc-chars must be >= 0, got -1" in capsys.readouterr().err


def test_sample_is_the_smallest_hashes_in_corpus_order() -> None:
    sentences = [(str(k), f"sentence number {k} has five words") for k in range(50)]
    chosen = sample(iter(sentences), 10, 3, 1, 40, "en")
    assert len(chosen) == 10 and len(set(chosen)) == 10
    order = [s for _, s in sentences]
    assert chosen == sorted(chosen, key=order.index)
    assert sample(iter(sentences), 10, 4, 1, 40, "en") != chosen  # the seed matters
    # The smallest seeded hashes: a larger sample holds the smaller one, and both are
    # the prefix of the corpus sorted by that hash.
    assert set(chosen) <= set(sample(iter(sentences), 20, 3, 1, 40, "en"))

    def key(sentence: str) -> int:
        return int.from_bytes(hashlib.blake2b(f"3\x00{sentence}".encode(), digest_size=8).digest(), "little")

    assert set(chosen) == set(sorted(order, key=key)[:10])
    assert sample(iter(sentences + sentences), 60, 3, 1, 40, "en") == order  # duplicates once


def test_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--input", str(EN_DUMP), "--output", str(tmp_path / "x"), "--split", "validation"])
    assert "needs the --validation-fraction" in capsys.readouterr().err
    assert main(["--input", str(tmp_path / "missing.xml"), "--output", str(tmp_path / "x")]) == 2
    assert not (tmp_path / "x").exists()
    with pytest.raises(SystemExit):
        main(["--input", str(EN_DUMP), "--output", str(tmp_path / "x"), "--min-words", "10", "--max-words", "3"])
    assert "1 <= min <= max, not 10 and 3" in capsys.readouterr().err
    for fraction in ("1.5", "-0.5"):  # 1.5 searched no training document; -0.5 was "needs the fraction"
        with pytest.raises(SystemExit):
            main(["--input", str(EN_DUMP), "--output", str(tmp_path / "x"), "--validation-fraction", fraction,
                  "--split", "train"])
        assert f"--validation-fraction must be in [0, 1), got {float(fraction)}" in capsys.readouterr().err
    # a length no sentence has: the error says which documents were searched, in words
    assert main(["--input", str(EN_DUMP), "--output", str(tmp_path / "x"), "--min-words", "900",
                 "--max-words", "999", "--validation-fraction", "0.2", "--split", "train"]) == 2
    assert "no sentence of 900-999 words in the training documents" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


# Five sentences, three with letters Latin-1 writes in a byte that UTF-8 never starts
# a character with.
LATIN1 = ["Le café est très bon ce matin.", "The river runs past the old mill today.",
          "Un garçon mange une pomme là-bas.", "The cat sleeps on the warm red mat.",
          "Où est la clé de la maison verte ce soir?"]


def test_lines_that_are_not_utf8_are_counted_and_said_naming_the_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A Latin-1 file of 5 sentences gave "2 sentences", exit 0, and not a word of
    the 3 lines dropped."""
    corpus = tmp_path / "latin1.txt"
    corpus.write_bytes("".join(f"{line}\n" for line in LATIN1).encode("latin-1"))
    out = tmp_path / "sentences.txt"
    assert main(["--input", str(corpus), "--format", "lines", "--output", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.err == f"{corpus}: skipped: invalid_utf8_lines 3\n"
    assert captured.out == f"{out}: 2 sentences (of the 10000 asked) from the documents\n"

    # nothing left: the error says what was skipped, the reason nothing was
    only_latin1 = tmp_path / "accents.txt"
    only_latin1.write_bytes("".join(f"{line}\n" for line in LATIN1 if not line.isascii()).encode("latin-1"))
    assert main(["--input", str(only_latin1), "--format", "lines", "--output", str(tmp_path / "none.txt")]) == 2
    assert capsys.readouterr().err == (
        f"{only_latin1}: skipped: invalid_utf8_lines 3\n"
        f"error: {only_latin1}: no sentence of 5-40 words in the documents; skipped: invalid_utf8_lines 3\n")
    assert not (tmp_path / "none.txt").exists()


def test_malformed_json_lines_and_short_documents_are_counted_by_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = json.dumps({"id": "1", "title": "River", "text": "River\nThe river runs past the old mill today."})
    short = json.dumps({"id": "2", "title": "Mat", "text": "Mat\nA cat."})
    first, second = tmp_path / "wiki_00", tmp_path / "wiki_01"
    first.write_text(f"{good}\n{{not json\n{json.dumps({'id': '3'})}\n", encoding="utf-8")
    second.write_text(f"{short}\n", encoding="utf-8")
    out = tmp_path / "sentences.txt"
    assert main(["--input", str(tmp_path / "wiki_*"), "--format", "wikiextractor-json", "--min-doc-chars", "20",
                 "--output", str(out)]) == 0
    assert capsys.readouterr().err == (f"{first}: skipped: malformed_json_lines 2\n"
                                       f"{second}: skipped: too_short 1\n")
    assert out.read_text(encoding="utf-8") == "The river runs past the old mill today.\n"


def test_a_validation_fraction_without_a_split_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--validation-fraction 0.2`` alone did nothing: a list meant to agree with the
    dataset's split took its training documents and held-out ones alike."""
    for split in ([], ["--split", "all"]):
        with pytest.raises(SystemExit) as refused:
            main(["--input", str(EN_DUMP), "--output", str(tmp_path / "x"), "--validation-fraction", "0.2", *split])
        assert refused.value.code == 2
        assert ("--validation-fraction 0.2 picks documents only with --split train or --split validation"
                in capsys.readouterr().err)
        assert not (tmp_path / "x").exists()


def test_utf16_text_is_refused_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``iconv -t utf-16``'s output gave a list of sentences full of NUL characters, exit 0."""
    corpus = tmp_path / "docs-utf16.txt"
    corpus.write_bytes("".join(f"{line}\n\n" for line in LATIN1).encode("utf-16"))
    out = tmp_path / "s16.txt"
    assert main(["--input", str(corpus), "--format", "text", "--count", "3", "--min-words", "3",
                 "--output", str(out)]) == 2
    assert capsys.readouterr().err == f"error: {corpus}: UTF-16 text (byte-order mark FF FE); convert it to UTF-8\n"
    assert not out.exists()
