"""The test suite's own rule for real data (tests/conftest.py): a test that reads
the real samples, by name, through a fixture or by its marker, is skipped without
``TACL_TEST_DATA``, one by one and with the reason; the others run. And the
project-made stand-ins have the real samples' formats."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import EN_DUMP, EN_VOCAB, ROOT, ZH_SEGMENTED, ZH_TEXT, ZH_VOCAB

pytest_plugins = ["pytester"]

PROBE = '''
import pytest
from conftest import REAL_EN_DUMP


@pytest.fixture
def real_corpus():
    return REAL_EN_DUMP


def test_made():
    assert True


def test_real_by_name():
    assert REAL_EN_DUMP.is_file()


def test_real_by_fixture(real_corpus):
    assert real_corpus.is_file()


@pytest.mark.real_data
def test_real_by_marker():
    assert False, "ran"
'''


@pytest.fixture
def probe(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest((ROOT / "tests" / "conftest.py").read_text(encoding="utf-8"))
    pytester.makepyfile(test_probe=PROBE)
    return pytester


def test_without_the_samples_each_reader_is_skipped_with_the_reason(probe: pytest.Pytester,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TACL_TEST_DATA", raising=False)
    result = probe.runpytest_subprocess("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(passed=1, skipped=3)
    result.stdout.fnmatch_lines(["*needs the real samples*set TACL_TEST_DATA*now unset*"])


def test_with_the_samples_every_test_runs(probe: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    (tmp_path / "enwiki-sample.xml.bz2").write_bytes(b"")
    monkeypatch.setenv("TACL_TEST_DATA", str(tmp_path))
    result = probe.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=1)  # the marked one ran (and failed on purpose)


def test_the_made_stand_ins_have_the_real_formats() -> None:
    import bz2

    xml = bz2.decompress(EN_DUMP.read_bytes()).decode()
    assert xml.lstrip().startswith("<mediawiki") and xml.count("<page>") > 300
    for vocab, size in ((EN_VOCAB, 30522), (ZH_VOCAB, 21128)):
        tokens = vocab.read_text(encoding="utf-8").split("\n")[:-1]
        assert len(tokens) == size and tokens[0] == "[PAD]" and tokens[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        assert len(set(tokens)) == size
    text, segmented = (p.read_text(encoding="utf-8").split("\n") for p in (ZH_TEXT, ZH_SEGMENTED))
    assert len(text) == len(segmented) > 300 and text.count("") > 10  # a blank line between documents
    for chars, words in zip(text, segmented, strict=True):
        assert chars.replace(" ", "") == words.replace(" ", "")  # the same sentence, split two ways
        assert all(len(c) == 1 for c in chars.split())
    assert sum(len(w) > 1 for line in segmented for w in line.split()) > 1000
