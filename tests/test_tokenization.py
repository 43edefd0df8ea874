"""What the build learns from its tokenizer before it reads anything
(data_prep.tokenization): the positions a model folder's config.json allows, and a
case setting that does not fit the vocabulary. No Beam build runs here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from data_prep.build import BuildError, parse_args, run_build
from data_prep.tokenization import (
    DEFAULT_MAX_POSITIONS,
    TokenizerConfig,
    TokenizerError,
    load_tokenizer,
    no_lowercase_problem,
)

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["the", "river", "runs", "past", "old", "mill", "##s", "a", "b", "c"]


def write_vocab(path: Path, words: list[str] = WORDS) -> Path:
    path.write_text("".join(f"{token}\n" for token in (*SPECIALS, *words)), encoding="utf-8")
    return path


def model_folder(tmp_path: Path, positions: int | None = 32, tokenizer_json: bool = False) -> Path:
    """A Hugging Face model folder: a tiny BertConfig's config.json (with
    ``max_position_embeddings`` ``positions``) and a vocab.txt, or the tokenizer files
    that ``save_pretrained`` writes."""
    from transformers import BertConfig, BertTokenizerFast

    folder = tmp_path / "model"
    folder.mkdir()
    config = BertConfig(vocab_size=len(SPECIALS) + len(WORDS), hidden_size=8, num_hidden_layers=1,
                        num_attention_heads=1, intermediate_size=16)
    if positions is not None:
        config.max_position_embeddings = positions
    config.to_json_file(folder / "config.json")
    write_vocab(folder / "vocab.txt")
    if tokenizer_json:
        BertTokenizerFast(str(folder / "vocab.txt")).save_pretrained(folder)
        (folder / "vocab.txt").unlink()
    return folder


@pytest.mark.parametrize("tokenizer_json", [False, True], ids=["vocab.txt", "tokenizer.json"])
def test_a_model_folders_position_table_bounds_max_seq_len(tmp_path: Path, tokenizer_json: bool) -> None:
    """With a model folder whose config.json has max_position_embeddings 32, a build at
    --max-seq-len 64 succeeded and training refused the dataset; now the build refuses
    at start-up, naming the length and the file."""
    folder = model_folder(tmp_path, 32, tokenizer_json)
    tokenizer = load_tokenizer(TokenizerConfig(str(folder)))
    assert tokenizer.max_positions == 32
    assert tokenizer.max_positions_from == f"max_position_embeddings 32 in {folder / 'config.json'}"
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the river runs past the old mill\n\n" * 3, encoding="utf-8")
    out = tmp_path / "ds"
    command = parse_args(["--input", str(corpus), "--format", "text", "--tokenizer", str(folder), "--output",
                          str(out), "--max-seq-len", "64"])
    with pytest.raises(BuildError, match="^" + re.escape(
            f"--max-seq-len 64 is larger than the 32 positions a model of tokenizer {folder} supports "
            f"(max_position_embeddings 32 in {folder / 'config.json'})") + "$"):
        run_build(command.config, command.beam_args)
    assert not out.exists()


def test_the_positions_are_the_smaller_of_the_model_and_the_tokenizer(tmp_path: Path) -> None:
    # A larger position table does not raise the tokenizer's limit (512 for a vocab.txt) ...
    folder = model_folder(tmp_path, 1024)
    tokenizer = load_tokenizer(TokenizerConfig(str(folder)))
    assert (tokenizer.max_positions, tokenizer.max_positions_from) == (DEFAULT_MAX_POSITIONS, None)
    # ... a config.json without the field, or no config.json, leaves it as it was ...
    config = json.loads((folder / "config.json").read_text())
    del config["max_position_embeddings"]
    (folder / "config.json").write_text(json.dumps(config))
    assert load_tokenizer(TokenizerConfig(str(folder))).max_positions == DEFAULT_MAX_POSITIONS
    (folder / "config.json").unlink()
    assert load_tokenizer(TokenizerConfig(str(folder))).max_positions == DEFAULT_MAX_POSITIONS
    # ... and one that is not JSON is named.
    (folder / "config.json").write_text("{")
    with pytest.raises(TokenizerError, match=f"^{re.escape(str(folder / 'config.json'))}: unreadable model config"):
        load_tokenizer(TokenizerConfig(str(folder)))


def test_no_lowercase_with_an_uncased_vocabulary_is_named(tmp_path: Path) -> None:
    """--no-lowercase with bert-base-uncased made 12% of the real English sample's tokens
    [UNK] without a word; the build warns at start-up, naming the flag."""
    uncased = write_vocab(tmp_path / "uncased.txt")
    cased = write_vocab(tmp_path / "cased.txt", [*WORDS, "River"])
    for vocab, lowercase, problem in ((uncased, False, True), (uncased, None, False), (uncased, True, False),
                                      (cased, False, False)):
        tokenizer = load_tokenizer(TokenizerConfig(str(vocab), lowercase))
        said = no_lowercase_problem(tokenizer, lowercase)
        assert (said is not None) == problem, (vocab, lowercase)
    assert no_lowercase_problem(load_tokenizer(TokenizerConfig(str(uncased), False)), False) == (
        f"--no-lowercase with tokenizer {uncased}, an uncased vocabulary (not one upper-case letter in its tokens): "
        "every capitalised word becomes [UNK]; drop --no-lowercase")
