"""A model directory's tokenizer files as training reads them (tacl_scale.vocab): one
that does not parse is one line naming it, not the library's traceback; and what
training asks of the model against its datasets (input_checks.check_data_and_model)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from transformers import BertConfig

from tacl_scale.errors import TrainError
from tacl_scale.input_checks import check_data_and_model
from tacl_scale.vocab import VocabularyError, tokenizer_files_problem, vocabulary

TINY = dict(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
            max_position_embeddings=64)
VOCAB = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nword\n"


def model_dir(tmp_path: Path) -> Path:
    """A model directory's tokenizer files (a vocab.txt, a tokenizer.json of the
    same ids, its settings): what an export holds beside its weights."""
    from tokenizers import Tokenizer, models

    directory = tmp_path / "model"
    directory.mkdir()
    (directory / "vocab.txt").write_text(VOCAB, encoding="utf-8")
    ids = {token: index for index, token in enumerate(VOCAB.split())}
    Tokenizer(models.WordLevel(ids, unk_token="[UNK]")).save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    (directory / "special_tokens_map.json").write_text(json.dumps({"pad_token": "[PAD]"}))
    return directory


def _spoil(directory: Path, how: str) -> Path:
    """The file of ``directory`` that ``how`` spoils, spoilt."""
    if how == "an HTML page as tokenizer.json":  # a failed download saved under the file's name
        (directory / "tokenizer.json").write_text("<!DOCTYPE html><html>Not Found</html>\n")
        return directory / "tokenizer.json"
    if how == "a Latin-1 line in vocab.txt":
        (directory / "tokenizer.json").unlink()
        with open(directory / "vocab.txt", "ab") as vocab:
            vocab.write("café\n".encode("latin-1"))
        return directory / "vocab.txt"
    if how == "a Latin-1 vocab.txt beside a good tokenizer.json":  # copied into the run, shipped in its export
        with open(directory / "vocab.txt", "ab") as vocab:
            vocab.write("café\n".encode("latin-1"))
        return directory / "vocab.txt"
    if how == "an HTML page as tokenizer_config.json":
        (directory / "tokenizer_config.json").write_text("<html>\n")
        return directory / "tokenizer_config.json"
    if how == "a list as special_tokens_map.json":
        (directory / "special_tokens_map.json").write_text("[1]")
        return directory / "special_tokens_map.json"
    if how == "a SentencePiece model that is none":
        for name in ("tokenizer.json", "vocab.txt"):
            (directory / name).unlink()
        (directory / "spm.model").write_text("<html>\n")
        return directory / "spm.model"
    raise AssertionError(how)


SPOILT = {
    "an HTML page as tokenizer.json": "not a tokenizer file (expected value at line 1 column 1)",
    "a Latin-1 line in vocab.txt": "not a tokenizer file (line 7 is not UTF-8 text: byte 0xe9)",
    "a Latin-1 vocab.txt beside a good tokenizer.json": "not a tokenizer file (line 7 is not UTF-8 text: byte 0xe9)",
    "an HTML page as tokenizer_config.json": "not a tokenizer file (Expecting value: line 1 column 1 (char 0))",
    "a list as special_tokens_map.json": "not a tokenizer file (a JSON list, not an object)",
    "a SentencePiece model that is none": "not a SentencePiece model (",
}


def test_good_tokenizer_files_read_as_their_ids(tmp_path: Path) -> None:
    directory = model_dir(tmp_path)
    assert tokenizer_files_problem(directory) is None
    assert vocabulary(directory) == vocabulary(directory / "vocab.txt") == {t: i for i, t in enumerate(VOCAB.split())}
    assert tokenizer_files_problem(tmp_path / "empty") is None  # none to read: a model given without its tokenizer


@pytest.mark.parametrize("how", list(SPOILT))
def test_a_tokenizer_file_that_does_not_parse_is_one_line_naming_it(tmp_path: Path, how: str) -> None:
    """Training on such a --model ended in ``Exception: expected value at line 1
    column 1`` or a UnicodeDecodeError, naming no file."""
    directory = model_dir(tmp_path)
    spoilt = _spoil(directory, how)
    assert (tokenizer_files_problem(directory) or "").startswith(f"{spoilt}: {SPOILT[how]}"), how
    if spoilt.name in ("tokenizer.json", "spm.model") or how == "a Latin-1 line in vocab.txt":  # what vocabulary reads
        with pytest.raises(VocabularyError) as refused:
            vocabulary(directory)
        assert str(refused.value).startswith(f"{spoilt}: {SPOILT[how]}")


def _dataset(path: Path, kind: str) -> SimpleNamespace:
    """What check_data_and_model reads of a PretrainDataset."""
    tokenizer = SimpleNamespace(vocab_size=6, sha256="0" * 64, file="vocab.txt", lowercase=True,
                                location=lambda root: root / "tokenizer" / "vocab.txt")
    (path / "tokenizer").mkdir(parents=True, exist_ok=True)
    (path / "tokenizer" / "vocab.txt").write_text(VOCAB, encoding="utf-8")
    return SimpleNamespace(path=path, manifest=SimpleNamespace(tokenizer=tokenizer, max_seq_len=64,
                                                               instance_kind=kind))


def test_training_reads_each_tokenizer_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The model's tokenizer files were parsed to find a bad one, then its vocabulary
    parsed again to compare it with the dataset's (tokenizer.json twice)."""
    import tacl_scale.input_checks
    import tacl_scale.vocab

    read: list[Path] = []
    parse = tacl_scale.vocab.vocabulary

    def counted(location: str | Path) -> dict[str, int] | None:
        if Path(location).is_file():
            read.append(Path(location))
        return parse(location)

    for module in (tacl_scale.vocab, tacl_scale.input_checks):
        monkeypatch.setattr(module, "vocabulary", counted)
    directory = model_dir(tmp_path)
    dataset = _dataset(tmp_path / "ds", "pairs")
    check_data_and_model([dataset], SimpleNamespace(config=BertConfig(**TINY)), str(directory))  # type: ignore[list-item]
    assert sorted(read) == sorted([directory / "tokenizer.json", directory / "vocab.txt",
                                   tmp_path / "ds" / "tokenizer" / "vocab.txt"])


def test_training_refuses_a_model_whose_tokenizer_file_does_not_parse(tmp_path: Path) -> None:
    directory = model_dir(tmp_path)
    student = SimpleNamespace(config=BertConfig(**TINY))
    check_data_and_model([_dataset(tmp_path / "ds", "pairs")], student, str(directory))  # type: ignore[list-item]
    spoilt = _spoil(directory, "an HTML page as tokenizer.json")
    with pytest.raises(TrainError) as refused:
        check_data_and_model([_dataset(tmp_path / "ds", "pairs")], student, str(directory))  # type: ignore[list-item]
    assert str(refused.value) == f"{spoilt}: not a tokenizer file (expected value at line 1 column 1)"


def test_a_model_of_one_token_type_is_refused_for_sentence_pairs(tmp_path: Path) -> None:
    """type_vocab_size 1 trained on pairs (token types 0 and 1) ended in an
    IndexError at the first step, after run.json was written."""
    config_file = tmp_path / "bert.json"
    config_file.write_text(json.dumps({**TINY, "type_vocab_size": 1}))
    student = SimpleNamespace(config=BertConfig(**TINY, type_vocab_size=1))
    pairs, single = _dataset(tmp_path / "pairs", "pairs"), _dataset(tmp_path / "single", "single-segment")
    check_data_and_model([single], student, str(config_file))  # type: ignore[list-item]  # token type 0 alone
    with pytest.raises(TrainError) as refused:
        check_data_and_model([single, pairs], student, str(config_file))  # type: ignore[list-item]
    assert str(refused.value) == (f"{config_file}: type_vocab_size 1, and {tmp_path / 'pairs'} holds sentence pairs, "
                                  "whose second segment is token type 1: set type_vocab_size 2 (BERT's), or train on "
                                  "a single-segment dataset")
    directory = model_dir(tmp_path)  # a model directory: its config.json is named
    with pytest.raises(TrainError, match=rf"^{directory / 'config.json'}: type_vocab_size 1, "):
        check_data_and_model([pairs], student, str(directory))  # type: ignore[list-item]


@pytest.mark.parametrize(("files", "said"), [
    ({"tokenizer_config.json": {"do_lower_case": False}}, (False, "tokenizer_config.json do_lower_case false")),
    # tokenizer_config.json's setting is the one AutoTokenizer applies over tokenizer.json's normalizer
    ({"tokenizer_config.json": {"do_lower_case": True},
      "tokenizer.json": {"normalizer": {"type": "BertNormalizer", "lowercase": False}}},
     (True, "tokenizer_config.json do_lower_case true")),
    ({"tokenizer_config.json": {"model_max_length": 512},
      "tokenizer.json": {"normalizer": {"type": "BertNormalizer", "lowercase": False}}},
     (False, "tokenizer.json's normalizer lowercase false")),
    ({"tokenizer.json": {"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "Lowercase"}]}}},
     (True, "tokenizer.json's normalizer lowercase true")),
    ({"tokenizer.json": {"normalizer": {"type": "NFKC"}}}, None),  # says nothing of case
    ({"tokenizer.json": {"normalizer": None}}, None),
    ({"tokenizer_config.json": ["not", "an", "object"]}, None),  # tokenizer_files_problem names it
    ({}, None),  # a vocab.txt alone
])
def test_a_models_lowercasing_is_read_from_its_tokenizer_settings(files: dict, said: tuple | None,
                                                                  tmp_path: Path) -> None:
    from tacl_scale.vocab import tokenizer_lowercase

    for name, content in files.items():
        (tmp_path / name).write_text(json.dumps(content), encoding="utf-8")
    (tmp_path / "vocab.txt").write_text(VOCAB, encoding="utf-8")
    assert tokenizer_lowercase(tmp_path) == said


def test_lowercasing_otherwise_than_the_models_tokenizer_is_refused_where_it_loses_what_the_model_knows(
        tmp_path: Path) -> None:
    """A dataset of the model's vocabulary built with --no-lowercase for a model that
    lower-cases (its capitals became [UNK]), or lower-cased for a model with a cased
    vocabulary: the same ids, so it trained, and the run's tokenizer and export (the
    model's) tokenized text otherwise than the data. Lower-cased data for a model
    that keeps the case of an uncased vocabulary (bert-base-chinese's
    tokenizer_config.json says do_lower_case false) loses nothing: it trains."""
    from tacl_scale.vocab import has_capitals

    student = SimpleNamespace(config=BertConfig(**TINY))
    dataset = _dataset(tmp_path / "ds", "pairs")
    directory = model_dir(tmp_path)
    check_data_and_model([dataset], student, str(directory))  # type: ignore[list-item]  # both lower-case
    dataset.manifest.tokenizer.lowercase = False  # built with --no-lowercase
    with pytest.raises(TrainError) as refused:
        check_data_and_model([dataset], student, str(directory))  # type: ignore[list-item]
    assert str(refused.value) == (
        f"{tmp_path / 'ds'} was tokenized without lower-casing, and the tokenizer of {directory} lower-cases "
        "(tokenizer_config.json do_lower_case true): the run's tokenizer and export, the model's, would tokenize "
        "text otherwise than the data it trained on; rebuild the dataset without --no-lowercase")
    dataset.manifest.tokenizer.lowercase = True
    (directory / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    assert not has_capitals({token: i for i, token in enumerate(VOCAB.split())})
    assert not check_data_and_model([dataset], student, str(directory))  # type: ignore[list-item]  # uncased vocab
    cased = VOCAB + "".join(f"Word{k}\n" for k in range(5))  # a cased vocabulary: capitalised words
    for vocab in (directory / "vocab.txt", tmp_path / "ds" / "tokenizer" / "vocab.txt"):
        vocab.write_text(cased, encoding="utf-8")
    (directory / "tokenizer.json").unlink()
    dataset.manifest.tokenizer.vocab_size = len(cased.split())
    with pytest.raises(TrainError) as refused:
        check_data_and_model([dataset], student, str(directory))  # type: ignore[list-item]
    assert str(refused.value) == (
        f"{tmp_path / 'ds'} was tokenized with lower-casing, and the tokenizer of {directory} keeps the case "
        "(tokenizer_config.json do_lower_case false): the run's tokenizer and export, the model's, would tokenize "
        "text otherwise than the data it trained on; rebuild the dataset with --no-lowercase")
    dataset.manifest.tokenizer.lowercase = None  # a SentencePiece dataset: no such setting to compare
    assert not check_data_and_model([dataset], student, str(directory))  # type: ignore[list-item]


def test_the_build_and_training_hold_a_vocabulary_to_one_casing_rule(tmp_path: Path) -> None:
    """The build lower-cases text for a vocab.txt without capitals, and training refuses
    a model whose tokenizer disagrees with its data by the same rule: two copies of
    it had drifted (training counted bert-base-chinese's <S> and <T> as capitalised
    words, the build did not), so one vocabulary could be uncased to one and cased to
    the other."""
    from data_prep.tokenization import TokenizerConfig, load_tokenizer
    from tacl_scale.vocab import has_capitals, is_placeholder

    words = [f"word{k}" for k in range(99)] + ["Paris"]  # one capitalised word in 100: an uncased vocabulary's stray
    lines = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<S>", "<T>", "<UNK>", *words]
    assert [is_placeholder(t) for t in ("[unused0]", "<S>", "<pad>", "Paris", "[x", "<S")] == [
        True, True, True, False, False, False]
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert not has_capitals({token: i for i, token in enumerate(lines)})
    assert load_tokenizer(TokenizerConfig(str(vocab_file))).lowercase is True
    cased = [*lines, "London"]  # two in 101: over the 1%, a cased vocabulary to both
    vocab_file.write_text("\n".join(cased) + "\n", encoding="utf-8")
    assert has_capitals({token: i for i, token in enumerate(cased)})
    assert load_tokenizer(TokenizerConfig(str(vocab_file))).lowercase is False


def test_the_tokens_of_added_tokens_json_travel_with_the_tokenizer(tmp_path: Path) -> None:
    """A model folder whose tokenizer keeps tokens beyond vocab.txt in added_tokens.json
    (AutoTokenizer reads it: "[NEW]" is id 6): the dataset's copy of the tokenizer and
    the run's (which its export ships) left that file out, so the copies made [UNK] of
    a token the data holds as id 6."""
    from transformers import AutoTokenizer

    from data_prep.tokenization import TokenizerConfig, load_tokenizer
    from tacl_scale.run_dir import TokenizerSource
    from tacl_scale.run_tokenizer import write_tokenizer

    model = tmp_path / "model"
    model.mkdir()
    (model / "vocab.txt").write_text(VOCAB, encoding="utf-8")
    (model / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True, "tokenizer_class": "BertTokenizer"}))
    (model / "added_tokens.json").write_text(json.dumps({"[NEW]": 6}))
    tokenizer = load_tokenizer(TokenizerConfig(str(model)))
    assert tokenizer.vocab_size == 7 and model / "added_tokens.json" in tokenizer.files()
    dataset = tmp_path / "ds"
    dataset.mkdir()
    tokenizer.copy_into(dataset, tokenizer.source_sha256())
    run_copy = tmp_path / "run-tokenizer"
    run_copy.mkdir()
    write_tokenizer(TokenizerSource(directory=str(model)), run_copy)
    for copy in (dataset / "tokenizer", run_copy):
        assert AutoTokenizer.from_pretrained(str(copy))("word [NEW]")["input_ids"] == [2, 5, 6, 3], copy
