"""``tacl-train-vocab``: the same corpus gives the same vocab.txt in every process,
with the alphabet Hugging Face's trainer would choose; bad input leaves nothing
half-written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from data_prep.train_vocab import LIMIT_ALPHABET, main, train_wordpiece

ROOT = Path(__file__).resolve().parents[1]
# CJK characters are words of their own (so never ``##`` pieces): 1,200 of them,
# each twice, overflow the 1,000-character alphabet with ties at its edge.
CJK = [chr(0x4E00 + i) for i in range(1200)]


def train_in_a_new_process(args: list[str], output: Path) -> bytes:
    """Each process numbers the upstream trainer's hash maps differently."""
    subprocess.run([sys.executable, "-m", "data_prep.train_vocab", *args, "--output", str(output)],
                   cwd=ROOT, check=True, capture_output=True, text=True)
    return output.read_bytes()


def tokens(vocab: Path) -> list[str]:
    return vocab.read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from data_prep.sample_corpus import write_sample_dump

    return write_sample_dump(tmp_path_factory.mktemp("vocab") / "c.xml.bz2", num_articles=30)


def test_the_same_corpus_gives_the_same_vocabulary_in_every_process(corpus: Path, tmp_path: Path) -> None:
    # Before the alphabet and continuation pieces were fixed up front, three runs on
    # this corpus gave three different files (hundreds of tokens apart).
    args = ["--input", str(corpus), "--vocab-size", "3000"]
    runs = {train_in_a_new_process(args, tmp_path / f"vocab{i}.txt") for i in range(3)}
    assert len(runs) == 1
    vocab = tokens(tmp_path / "vocab0.txt")
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] and len(set(vocab)) == len(vocab)


def test_characters_beyond_the_alphabet_limit_are_dropped_by_count_then_code_point(tmp_path: Path) -> None:
    text = tmp_path / "cjk.txt"
    common = "the river runs past the old mill and the river bends"
    text.write_text("".join(f"{common} {c}{c}\n\n" for c in CJK), encoding="utf-8")
    args = ["--input", str(text), "--format", "text", "--vocab-size", "1500"]
    runs = {train_in_a_new_process(args, tmp_path / f"vocab{i}.txt") for i in range(2)}
    assert len(runs) == 1
    singles = {t for t in tokens(tmp_path / "vocab0.txt") if len(t) == 1}
    latin = set(common.replace(" ", ""))
    # every Latin letter outnumbers each CJK character, whose ties keep the lowest code points
    assert singles == latin | set(CJK[: LIMIT_ALPHABET - len(latin)])


def test_the_alphabet_and_continuation_pieces_are_those_hugging_face_chooses(corpus: Path, tmp_path: Path) -> None:
    from tokenizers import BertWordPieceTokenizer

    from data_prep.train_vocab import iter_sentences

    ours = tokens(train_wordpiece(iter_sentences([str(corpus)], "wiki-xml", "en"), 3000, True, tmp_path / "v.txt"))
    upstream = BertWordPieceTokenizer(lowercase=True, handle_chinese_chars=True)
    upstream.train_from_iterator(iter_sentences([str(corpus)], "wiki-xml", "en"), vocab_size=3000, min_frequency=2,
                                 special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], show_progress=False)

    def pieces(vocab: list[str]) -> set[str]:
        return {t for t in vocab if len(t) == 1 or (t.startswith("##") and len(t) == 3)}

    assert pieces(ours) == pieces(list(upstream.get_vocab())) and any(t.startswith("##") for t in ours)
    # the same budget: only tie-breaks between equally frequent merges differ
    assert abs(len(ours) - upstream.get_vocab_size()) <= 10


def test_a_corpus_without_text_is_an_error_naming_it_and_keeps_the_old_vocabulary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    output = tmp_path / "vocab.txt"
    output.write_text("[PAD]\nkept\n", encoding="utf-8")
    assert main(["--input", str(empty), "--format", "text", "--output", str(output), "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert f"{empty}: no article text" in err
    assert output.read_text(encoding="utf-8") == "[PAD]\nkept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.txt", "vocab.txt"]  # no spool left behind


def test_a_vocabulary_size_below_the_special_tokens_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--input", "x.txt", "--vocab-size", "3", "--output", str(tmp_path / "v.txt")])
    assert "--vocab-size must be more than the 5 special tokens, not 3" in capsys.readouterr().err



def test_a_vocabulary_of_another_size_than_asked_says_why(corpus: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """"wrote vocab.txt (90 tokens)" after --vocab-size 6 read as a bug, and 2,423
    after 100,000 as the size asked."""
    small, large = tmp_path / "small.txt", tmp_path / "large.txt"
    assert main(["--input", str(corpus), "--vocab-size", "6", "--output", str(small)]) == 0
    made = small.read_text(encoding="utf-8").count("\n")
    assert capsys.readouterr().out == (f"wrote {small} ({made} tokens, more than the 6 asked: every character of "
                                       "the alphabet and its ## piece is always kept)\n")
    assert main(["--input", str(corpus), "--vocab-size", "100000", "--output", str(large)]) == 0
    made = large.read_text(encoding="utf-8").count("\n")
    assert capsys.readouterr().out == (f"wrote {large} ({made} tokens, fewer than the 100000 asked: the corpus "
                                       "has no more words and pieces seen twice)\n")


def test_lines_that_are_not_utf8_are_counted_and_said_naming_the_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A Latin-1 corpus trained on its ASCII lines alone, without a word of the others."""
    corpus = tmp_path / "latin1.txt"
    lines = ["the river runs past the old mill", "le café est très bon", "the river bends past the mill",
             "où est la clé", "un garçon là-bas"]
    corpus.write_bytes("".join(f"{line}\n" for line in lines).encode("latin-1"))
    output = tmp_path / "vocab.txt"
    assert main(["--input", str(corpus), "--format", "text", "--vocab-size", "100", "--output", str(output)]) == 0
    captured = capsys.readouterr()
    assert captured.err == f"{corpus}: skipped: invalid_utf8_lines 3\n"
    assert captured.out.startswith(f"wrote {output} (")
    assert "é" not in tokens(output)

    # nothing left: the error says what was skipped, the reason nothing was
    only_latin1 = tmp_path / "accents.txt"
    only_latin1.write_bytes("".join(f"{line}\n" for line in lines if not line.isascii()).encode("latin-1"))
    output.write_text("[PAD]\nkept\n", encoding="utf-8")
    assert main(["--input", str(only_latin1), "--format", "text", "--output", str(output), "--overwrite"]) == 2
    assert capsys.readouterr().err == (
        f"{only_latin1}: skipped: invalid_utf8_lines 3\n"
        f"error: {only_latin1}: no article text to train a vocabulary on; skipped: invalid_utf8_lines 3\n")
    assert output.read_text(encoding="utf-8") == "[PAD]\nkept\n"


def test_malformed_json_lines_are_counted_and_said_naming_the_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "wiki_00"
    good = json.dumps({"id": "1", "title": "River", "text": "River\nThe river runs past the old mill today."})
    corpus.write_text(f"{good}\n{{not json\n", encoding="utf-8")
    output = tmp_path / "vocab.txt"
    assert main(["--input", str(corpus), "--format", "wikiextractor-json", "--vocab-size", "100",
                 "--output", str(output)]) == 0
    assert capsys.readouterr().err == f"{corpus}: skipped: malformed_json_lines 1\n"


def test_utf16_text_is_refused_naming_the_file_and_keeps_the_old_vocabulary(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A UTF-16 corpus trained a vocabulary of its NUL-riddled words, exit 0."""
    corpus = tmp_path / "docs-utf16.txt"
    corpus.write_bytes("the river runs past the old mill\n\nthe river bends past the mill\n".encode("utf-16"))
    output = tmp_path / "vocab.txt"
    output.write_text("[PAD]\nkept\n", encoding="utf-8")
    assert main(["--input", str(corpus), "--format", "text", "--vocab-size", "100", "--output", str(output),
                 "--overwrite"]) == 2
    assert capsys.readouterr().err == f"error: {corpus}: UTF-16 text (byte-order mark FF FE); convert it to UTF-8\n"
    assert output.read_text(encoding="utf-8") == "[PAD]\nkept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs-utf16.txt", "vocab.txt"]  # no spool left behind
