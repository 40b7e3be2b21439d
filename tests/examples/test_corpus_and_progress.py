"""The examples read a corpus with the reader `haystack-mvr eval` uses (a bad line is named by file and line), and the
quickstart says what it is doing between loading the model and encoding."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GOOD = {"id": "river#0", "title": "River", "text": "The river book was written by Anna Smith. It tells of a river."}


@pytest.fixture(autouse=True)
def examples_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "x", "title": "T", "text": "unterminated}', "not valid JSON"),
        ('["a", "list"]', "expected a JSON object"),
        ('{"id": "x", "title": "T", "text": ""}', "field 'text' must be a non-empty"),
        ('{"id": "x", "title": "T"}', "field 'text' must be a non-empty"),
    ],
)
def test_a_bad_corpus_line_is_named_by_file_and_line(tmp_path, line, message):
    from common import read_corpus

    corpus = write_lines(tmp_path / "bad.jsonl", [json.dumps(GOOD), line, json.dumps(GOOD)])
    with pytest.raises(SystemExit) as exit_info:
        read_corpus(corpus)
    text = str(exit_info.value.code)
    assert text.startswith(f"{corpus}:2: ") and message in text and "\n" not in text


def test_the_examples_reader_is_the_eval_reader(tmp_path):
    """Same records, same errors: what `haystack-mvr eval --corpus` reads, the examples read."""
    from common import read_corpus

    from haystack_mvr.datasets import load_corpus

    corpus = write_lines(tmp_path / "c.jsonl", [json.dumps(GOOD), "", json.dumps({**GOOD, "id": "b", "title": None})])
    documents = read_corpus(corpus)
    passages = load_corpus(corpus)
    assert [(d.id, d.content, d.meta["title"]) for d in documents] == [(p.id, p.text, p.title) for p in passages]
    bad = write_lines(tmp_path / "bad.jsonl", [json.dumps(GOOD), "{broken"])
    with pytest.raises(ValueError) as from_eval:
        load_corpus(bad)
    with pytest.raises(SystemExit) as from_examples:
        read_corpus(bad)
    assert str(from_examples.value.code) == str(from_eval.value)
    assert len(read_corpus(corpus, limit=1)) == 1


def test_quickstart_with_a_broken_corpus_line_is_one_line_naming_it(tmp_path, tiny_backbone):
    import quickstart

    corpus = write_lines(tmp_path / "bad.jsonl", [json.dumps(GOOD), '{"id": "b", "text": "oops"'])
    with pytest.raises(SystemExit) as exit_info:
        quickstart.main(["--corpus", str(corpus), "--model", str(tiny_backbone), "--no-cache"])
    message = str(exit_info.value.code)
    assert message.startswith(f"{corpus}:2: not valid JSON") and "\n" not in message


def test_quickstart_says_what_it_does_before_and_after_encoding(tmp_path, tiny_backbone, capsys):
    import quickstart

    corpus = write_lines(tmp_path / "c.jsonl", [json.dumps({**GOOD, "id": f"d{i}"}) for i in range(3)])
    argv = ["--corpus", str(corpus), "--model", str(tiny_backbone), "--index-dir", str(tmp_path / "index")]
    quickstart.main([*argv, "--question", "Who wrote the river book?", "--no-answers"])
    out = capsys.readouterr().out
    steps = [
        f"Reading the corpus {corpus}",
        "Read 3 documents",
        f"Encoding 3 documents with {tiny_backbone}",
        "Indexed 3 documents",
        f"Saving the index to {tmp_path / 'index'}",
        "Saved the index",
    ]
    positions = [out.find(step) for step in steps]
    assert -1 not in positions, out
    assert positions == sorted(positions)


def test_short_documents_beside_long_ones_show_a_progress_bar(tiny_backbone, monkeypatch):
    """The paragraphs of a corpus with a few long documents were encoded without any progress bar."""
    from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter

    encoder = MultiVectorEncoderAdapter.snippet(
        tiny_backbone, device="cpu", doc_max_length=32, snippet_encoding="late_chunking"
    )
    bars = []
    real = encoder.model.encode_document

    def recording(texts, **kwargs):
        bars.append((len(texts), kwargs.get("show_progress_bar")))
        return real(texts, **kwargs)

    monkeypatch.setattr(encoder.model, "encode_document", recording)
    texts = ["Short one.", "Another short one.", "A long one. " * 40]
    encoder.encode_documents(texts, progress_bar=True)
    assert (2, True) in bars  # the two short documents, with their bar


def test_a_duplicate_id_is_named_with_both_lines_before_anything_is_encoded(tmp_path, tiny_backbone):
    import quickstart

    corpus = write_lines(
        tmp_path / "dup.jsonl", [json.dumps(GOOD), json.dumps({**GOOD, "id": "other"}), json.dumps(GOOD)]
    )
    with pytest.raises(SystemExit) as exit_info:  # before the model is even loaded: nothing encoded
        quickstart.main(["--corpus", str(corpus), "--model", str(tiny_backbone), "--no-cache", "--no-answers"])
    message = str(exit_info.value.code)
    assert message == f"{corpus}:3: id {GOOD['id']!r} is already the id of {corpus}:1; every id must be unique."


def test_corpus_text_errors_name_file_and_line_and_a_bom_is_read(tmp_path):
    from haystack_mvr.datasets import load_corpus

    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + (json.dumps(GOOD) + "\n").encode())
    assert [p.id for p in load_corpus(bom)] == [GOOD["id"]]
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes((json.dumps(GOOD) + "\n").encode() + b'{"id": "b", "text": "caf\xe9"}\n')
    with pytest.raises(ValueError, match=rf"^{latin}:2: not UTF-8 text \(byte b'\\xe9' at column 25\)\.$"):
        load_corpus(latin)
    control = write_lines(tmp_path / "control.jsonl", ['{"id": "a", "text": "tab\there"}'])
    with pytest.raises(ValueError, match=rf"^{control}:1: not valid JSON \(Invalid control character at column 25\)"):
        load_corpus(control)


def test_quickstart_refuses_an_empty_corpus_before_encoding(tmp_path, tiny_backbone):
    import quickstart

    corpus = tmp_path / "empty.jsonl"
    corpus.write_text("\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"empty\.jsonl.*no documents"):
        quickstart.main(["--corpus", str(corpus), "--model", str(tiny_backbone), "--no-cache", "--no-answers"])


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--budget-tokens", "0"], r"--budget-tokens.*positive"),
        (["--budget-tokens", "-5"], r"--budget-tokens.*positive"),
        (["--top-k", "0"], r"--top-k.*positive"),
    ],
)
def test_quickstart_refuses_a_bad_number_up_front(tmp_path, tiny_backbone, capsys, option, message):
    import quickstart

    corpus = tmp_path / "missing-on-purpose.jsonl"  # never read: the arguments are checked first
    with pytest.raises(SystemExit):
        quickstart.main(["--corpus", str(corpus), "--model", str(tiny_backbone), *option])
    assert re.search(message, capsys.readouterr().err)


def test_quickstart_checks_the_reader_before_indexing(tmp_path, tiny_backbone):
    import quickstart

    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "title": "T", "text": "One sentence here."}\n', encoding="utf-8")
    index = tmp_path / "index"
    with pytest.raises(SystemExit, match="nonexistent"):
        quickstart.main(["--corpus", str(corpus), "--model", str(tiny_backbone), "--index-dir", str(index),
                         "--reader", str(tmp_path / "nonexistent")])  # fmt: skip
    assert not index.exists()  # nothing was encoded or cached before the reader was found missing
