"""FusionInDecoderReader on a tiny random T5 (offline: the MiniLM WordPiece tokenizer, random weights)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from haystack import Document, Pipeline
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import GeneratedAnswer
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.utils import ComponentDevice

from haystack_mvr.components.readers import FusionInDecoderReader
from haystack_mvr.readers import fusion_in_decoder_reader as reader_module
from haystack_mvr.readers.fusion_in_decoder_model import (
    encode_passages,
    format_fid_input,
    fuse_passage_states,
    generate_from_fused_states,
    sequence_log_probs,
)
from haystack_mvr.views import MATCHED_TEXT_KEY

CPU = ComponentDevice.from_str("cpu")
QUERY = "who wrote the book about the river?"
DOCS = [
    Document(content="The river book was written by Anna Smith in 1901.", meta={"title": "River"}),
    Document(content="Mountains are tall and the weather there is cold.", meta={"title": "Mountains"}),
    Document(content="A cat sat on the mat and looked at the bird outside."),
]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def make_reader(path: Path, **kwargs) -> FusionInDecoderReader:
    kwargs.setdefault("max_answer_length", 6)
    kwargs.setdefault("max_input_length", 64)
    reader = FusionInDecoderReader(model=path, device=CPU, **kwargs)
    reader.warm_up()
    return reader


@pytest.fixture(scope="session")
def reader(tiny_t5) -> FusionInDecoderReader:
    return make_reader(tiny_t5)


def outcome(answers: list[GeneratedAnswer]) -> list[tuple[str, float]]:
    return [(a.data, a.meta["log_probability"]) for a in answers]


def capture_texts(monkeypatch) -> list[list[str]]:
    """Record the encoder inputs the reader hands to answer_with_fusion_in_decoder."""
    seen: list[list[str]] = []
    real = reader_module.answer_with_fusion_in_decoder

    def spy(model, tokenizer, texts, **kwargs):
        seen.append(list(texts))
        return real(model, tokenizer, texts, **kwargs)

    monkeypatch.setattr(reader_module, "answer_with_fusion_in_decoder", spy)
    return seen


def test_answers_are_generated_answers(reader):
    answers = reader.run(query=QUERY, documents=DOCS)["answers"]
    assert len(answers) == 1
    answer = answers[0]
    assert isinstance(answer, GeneratedAnswer) and isinstance(answer.data, str)
    assert answer.query == QUERY and answer.documents == DOCS
    assert answer.meta["context"] == "document" and answer.meta["num_passages"] == 3
    assert isinstance(answer.meta["log_probability"], float) and answer.meta["log_probability"] <= 0.0


def test_encoder_sees_each_passage_alone(reader):
    texts = [format_fid_input(QUERY, d.content, d.meta.get("title")) for d in DOCS]
    model, tokenizer = reader.seq2seq_model, reader.tokenizer
    batched = encode_passages(model, tokenizer, texts, batch_size=4, max_length=64)
    for text, states in zip(texts, batched, strict=True):
        alone = encode_passages(model, tokenizer, [text], batch_size=1, max_length=64)[0]
        assert states.shape == alone.shape == (len(tokenizer(text)["input_ids"]), 32)
        torch.testing.assert_close(states, alone, atol=1e-5, rtol=1e-5)
    hidden, mask = fuse_passage_states(batched)
    assert hidden.shape == (1, sum(s.shape[0] for s in batched), 32) and bool(mask.all())
    # the fused states of passage 2 are exactly passage 2 encoded alone
    start = batched[0].shape[0]
    torch.testing.assert_close(hidden[0, start : start + batched[1].shape[0]], batched[1])


def test_reader_decodes_from_passages_encoded_alone(reader):
    # the reader's answer is exactly: encode each passage on its own, concatenate, decode once
    model, tokenizer = reader.seq2seq_model, reader.tokenizer
    texts = [format_fid_input(QUERY, d.content, d.meta.get("title")) for d in DOCS]
    states = [encode_passages(model, tokenizer, [text], max_length=64)[0] for text in texts]
    hidden, mask = fuse_passage_states(states)
    sequence = generate_from_fused_states(model, hidden, mask, max_new_tokens=6)
    expected_score = float(sequence_log_probs(model, hidden, mask, sequence)[0])
    expected_text = tokenizer.decode(sequence[0], skip_special_tokens=True).strip()
    (answer,) = reader.run(query=QUERY, documents=DOCS)["answers"]
    assert answer.data == expected_text
    assert answer.meta["log_probability"] == pytest.approx(expected_score, abs=1e-5)


def test_batch_size_does_not_change_answers(tiny_t5):
    one = make_reader(tiny_t5, batch_size=1, top_k=2).run(query=QUERY, documents=DOCS)["answers"]
    four = make_reader(tiny_t5, batch_size=4, top_k=2).run(query=QUERY, documents=DOCS)["answers"]
    assert [a.data for a in one] == [a.data for a in four]
    for a, b in zip(one, four, strict=True):
        assert a.meta["log_probability"] == pytest.approx(b.meta["log_probability"], abs=1e-5)


def test_decoder_fuses_later_passages(reader):
    # the same answer sequence, scored with passage 2 changed: its log-probability moves
    model, tokenizer = reader.seq2seq_model, reader.tokenizer
    other = "Completely different evidence about ships and harbours."
    texts = [format_fid_input(QUERY, d.content) for d in DOCS]
    changed = [texts[0], format_fid_input(QUERY, other), texts[2]]
    sequence = torch.tensor([[model.config.decoder_start_token_id, 2000, 2001, tokenizer.sep_token_id]])
    scores = []
    for inputs in (texts, changed):
        hidden, mask = fuse_passage_states(encode_passages(model, tokenizer, inputs, max_length=64))
        scores.append(float(sequence_log_probs(model, hidden, mask, sequence)[0]))
    assert abs(scores[0] - scores[1]) > 1e-4

    # through the reader: changing only the second document changes the outcome
    base = outcome(reader.run(query=QUERY, documents=DOCS, top_k=2)["answers"])
    docs = [DOCS[0], Document(content=other), DOCS[2]]
    assert outcome(reader.run(query=QUERY, documents=docs, top_k=2)["answers"]) != base
    # ... and dropping passage 3 does too
    assert outcome(reader.run(query=QUERY, documents=DOCS[:2], top_k=2)["answers"]) != base


def test_max_passages_uses_the_first_documents(tiny_t5, monkeypatch):
    reader = make_reader(tiny_t5, max_passages=2)
    seen = capture_texts(monkeypatch)
    first = reader.run(query=QUERY, documents=DOCS)["answers"]
    changed = reader.run(query=QUERY, documents=[*DOCS[:2], Document(content="Something else entirely.")])
    assert outcome(first) == outcome(changed["answers"])
    assert first[0].documents == DOCS[:2] and first[0].meta["num_passages"] == 2
    assert seen[0] == [
        format_fid_input(QUERY, DOCS[0].content, "River"),
        format_fid_input(QUERY, DOCS[1].content, "Mountains"),
    ]


def test_title_meta_field(tiny_t5, monkeypatch):
    seen = capture_texts(monkeypatch)
    make_reader(tiny_t5, title_meta_field=None).run(query=QUERY, documents=DOCS[:1])
    make_reader(tiny_t5).run(query=QUERY, documents=DOCS[:1])
    assert seen[0] == [f"question: {QUERY} context: {DOCS[0].content}"]
    assert seen[1] == [f"question: {QUERY} title: River context: {DOCS[0].content}"]


def test_matched_view_reads_the_snippet(tiny_t5, monkeypatch):
    snippet = "written by Anna Smith"
    docs = [
        Document(content=DOCS[0].content, meta={MATCHED_TEXT_KEY: snippet}),
        Document(content=DOCS[1].content),  # no snippet: falls back to the content
        Document(content=None, meta={MATCHED_TEXT_KEY: "a cat on a mat"}),
    ]
    seen = capture_texts(monkeypatch)
    by_view = make_reader(tiny_t5, context="matched_view").run(query=QUERY, documents=docs)["answers"]
    by_doc = make_reader(tiny_t5, context="document").run(query=QUERY, documents=docs)["answers"]
    assert seen[0] == [
        format_fid_input(QUERY, snippet),
        format_fid_input(QUERY, DOCS[1].content),
        format_fid_input(QUERY, "a cat on a mat"),
    ]
    assert seen[1] == [format_fid_input(QUERY, DOCS[0].content), format_fid_input(QUERY, DOCS[1].content)]
    assert by_view[0].meta["context"] == "matched_view" and by_view[0].documents == docs
    assert by_doc[0].documents == docs[:2]
    assert outcome(by_view) != outcome(by_doc)


def test_top_k_returns_sorted_answers(reader):
    answers = reader.run(query=QUERY, documents=DOCS, top_k=3)["answers"]
    assert len(answers) == 3
    scores = [a.meta["log_probability"] for a in answers]
    assert scores == sorted(scores, reverse=True) and all(s <= 0.0 for s in scores)
    assert len({(a.data, a.meta["log_probability"]) for a in answers}) == 3
    for answer in answers:
        assert isinstance(answer, GeneratedAnswer) and answer.documents == DOCS and answer.query == QUERY
    # the init value is the default
    assert len(reader.run(query=QUERY, documents=DOCS)["answers"]) == 1


def test_to_dict_from_dict(tiny_t5):
    reader = FusionInDecoderReader(
        model=tiny_t5, device=CPU, top_k=2, context="matched_view", generation_kwargs={"num_beams": 3}
    )
    data = reader.to_dict()
    assert data == {
        "type": "haystack_mvr.readers.fusion_in_decoder_reader.FusionInDecoderReader",
        "init_parameters": {
            "model": str(tiny_t5),
            "device": {"type": "single", "device": "cpu"},
            "top_k": 2,
            "max_passages": 20,
            "context": "matched_view",
            "batch_size": 8,
            "max_input_length": 256,
            "max_answer_length": 32,
            "generation_kwargs": {"num_beams": 3},
            "title_meta_field": "title",
            "model_kwargs": {},
            "tokenizer_kwargs": {},
        },
    }
    again = FusionInDecoderReader.from_dict(data)
    assert again.to_dict() == data and again.device == CPU and again.seq2seq_model is None


def test_warm_up_is_idempotent_and_lazy(tiny_t5):
    reader = FusionInDecoderReader(model=tiny_t5, device=CPU, max_answer_length=4)
    assert reader.seq2seq_model is None  # light init
    reader.warm_up()
    model, tokenizer = reader.seq2seq_model, reader.tokenizer
    assert not model.training and model.device.type == "cpu"
    reader.warm_up()
    assert reader.seq2seq_model is model and reader.tokenizer is tokenizer
    lazy = FusionInDecoderReader(model=tiny_t5, device=CPU, max_answer_length=4)
    assert len(lazy.run(query=QUERY, documents=DOCS)["answers"]) == 1


def test_wordpiece_answers_keep_punctuation_joined(reader):
    """A WordPiece tokenizer decodes "Levi's Stadium" as "levi ' s stadium" unless the clean-up joins it back."""
    reader.warm_up()
    ids = reader.tokenizer("Levi's Stadium, Denver.", add_special_tokens=False)["input_ids"]
    assert reader.tokenizer.decode(ids) == "levi's stadium, denver."


def test_bad_input(reader):
    with pytest.raises(ValueError, match="empty query"):
        reader.run(query="  ", documents=DOCS)
    with pytest.raises(ValueError, match="empty query"):
        reader.run(query="", documents=[])
    with pytest.raises(TypeError):
        reader.run(query=None, documents=DOCS)
    with pytest.raises(ValueError, match="top_k"):
        reader.run(query=QUERY, documents=DOCS, top_k=0)
    assert reader.run(query=QUERY, documents=[]) == {"answers": []}
    blank = [Document(content=None), Document(content="   "), Document(content="")]
    assert reader.run(query=QUERY, documents=blank) == {"answers": []}
    mixed = [blank[0], DOCS[0], blank[1], DOCS[1]]
    answers = reader.run(query=QUERY, documents=mixed)["answers"]
    assert answers[0].documents == DOCS[:2]
    assert outcome(answers) == outcome(reader.run(query=QUERY, documents=DOCS[:2])["answers"])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"top_k": 0},
        {"max_passages": -1},
        {"batch_size": 0},
        {"max_input_length": 0},
        {"max_answer_length": 1.5},
        {"top_k": True},
        {"context": "snippet"},
        {"generation_kwargs": {"num_return_sequences": 2}},
    ],
)
def test_invalid_init(kwargs):
    with pytest.raises(ValueError):
        FusionInDecoderReader(model="unused", **kwargs)


def test_in_pipeline_and_round_trip(tiny_t5):
    store = InMemoryDocumentStore()
    store.write_documents([Document(id=str(i), content=d.content, meta=d.meta) for i, d in enumerate(DOCS)])
    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=2))
    pipeline.add_component("reader", FusionInDecoderReader(model=tiny_t5, device=CPU, top_k=2, max_answer_length=4))
    pipeline.connect("retriever.documents", "reader.documents")
    inputs = {"retriever": {"query": QUERY}, "reader": {"query": QUERY}}
    answers = pipeline.run(inputs)["reader"]["answers"]
    assert len(answers) == 2 and all(isinstance(a, GeneratedAnswer) for a in answers)
    assert len(answers[0].documents) == 2 and answers[0].documents[0].content == DOCS[0].content

    loaded = Pipeline.loads(pipeline.dumps())
    reader = loaded.get_component("reader")
    assert isinstance(reader, FusionInDecoderReader) and reader.to_dict() == pipeline.get_component("reader").to_dict()
    again = loaded.run(inputs)["reader"]["answers"]
    assert [a.data for a in again] == [a.data for a in answers]
    for a, b in zip(again, answers, strict=True):
        assert a.meta["log_probability"] == pytest.approx(b.meta["log_probability"], abs=1e-5)
