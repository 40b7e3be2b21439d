"""Query-side tuning against a frozen index: only the query encoder learns, no document is re-encoded, the tuned
folder is accepted by the store it was tuned against and refused by any other, and bad input changes nothing."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from haystack import Document, Pipeline

from haystack_mvr.cli.main import main as cli_main
from haystack_mvr.cli.tune_queries import open_frozen_index, read_tuning_questions, tune_queries
from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder
from haystack_mvr.components.retrievers import MultiViewRetriever
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.modeling.st_encoder import open_encoder
from haystack_mvr.training.query_tuning import (
    FrozenDocument,
    QueryTuningArguments,
    TuningQuestion,
    answer_view_indices,
    query_forward,
)
from tests.conftest import build_tiny_backbone

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PAGES = {
    "vistula": "The Vistula is the longest river in Poland. It flows through Warsaw and Kraków to the Baltic Sea.",
    "yuan": "Kublai Khan founded the Yuan dynasty in 1271. He ruled from Khanbaliq, today's Beijing.",
    "broncos": "The Denver Broncos represented the AFC in Super Bowl 50. They beat the Carolina Panthers.",
    "oxygen": "Oxygen is a chemical element with symbol O. It was discovered by Scheele and Priestley.",
    "rhine": "The Rhine rises in the Swiss Alps. It flows into the North Sea at Rotterdam.",
    "tesla": "Nikola Tesla was born in Smiljan in 1856. He worked for Edison in New York.",
}
QUESTIONS = [
    ("Which river flows through Warsaw?", "vistula", "Vistula"),
    ("Who founded the Yuan dynasty?", "yuan", "Kublai Khan"),
    ("Which team represented the AFC?", "broncos", "Denver Broncos"),
    ("Who discovered oxygen?", "oxygen", "Scheele and Priestley"),
    ("Where does the Rhine rise?", "rhine", "Swiss Alps"),
    ("Where was Tesla born?", "tesla", "Smiljan"),
]


def folder_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def saved_store(model: Path, folder: Path, encoder_kwargs=None, **store_options) -> Path:
    embedder = MultiViewDocumentEmbedder(model=str(model), encoder_kwargs=encoder_kwargs, progress_bar=False)
    documents = embedder.run([Document(id=k, content=v) for k, v in PAGES.items()])["documents"]
    store = FaissMultiViewDocumentStore(index_factory="Flat", **store_options)
    store.write_documents(documents)
    store.save(folder)
    return folder


def write_questions(path: Path, rows=None) -> Path:
    rows = rows or [
        {"question": q, "positive_id": p, "answers": [a], "answer_starts": [PAGES[p].index(a)]} for q, p, a in QUESTIONS
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def snippet_index(tmp_path_factory, tiny_backbone) -> Path:
    return saved_store(tiny_backbone, tmp_path_factory.mktemp("snippet-index") / "store")


@pytest.fixture
def questions_file(tmp_path) -> Path:
    return write_questions(tmp_path / "questions.jsonl")


def opened(folder: Path) -> FaissMultiViewDocumentStore:
    store = FaissMultiViewDocumentStore(index_path=str(folder))
    store.count_documents()  # loads the saved store (and its encoder record)
    return store


def retrieve(model: Path, store_folder: Path, question: str, encoder_kwargs=None):
    store = FaissMultiViewDocumentStore(index_path=str(store_folder))
    pipeline = Pipeline()
    pipeline.add_component(
        "embedder", MultiViewTextEmbedder(model=str(model), embedding_output="packed", encoder_kwargs=encoder_kwargs)
    )
    pipeline.add_component("retriever", MultiViewRetriever(document_store=store, top_k=3))
    pipeline.connect("embedder.packed_embedding", "retriever.packed_query_embedding")
    pipeline.connect("embedder.encoder", "retriever.encoder")
    return pipeline.run({"embedder": {"text": question}})["retriever"]["documents"]


# ----------------------------------------------------------------------------------------------- the pieces


@pytest.mark.parametrize("kind", ["snippet", "tokens", "colbert"])
def test_the_training_forward_is_what_inference_encodes(kind, tiny_backbone, tiny_colbert):
    encoder = {
        "snippet": lambda: open_encoder(tiny_backbone, "cpu"),
        "tokens": lambda: open_encoder(tiny_backbone, "cpu", mode="tokens"),
        "colbert": lambda: open_encoder(tiny_colbert, "cpu"),
    }[kind]()
    texts = ["Which river flows through Warsaw?", "old"]
    with torch.no_grad():
        vectors, mask = query_forward(encoder.model, texts)
    expected = encoder.query_views(texts)
    for row, (v, m) in enumerate(zip(vectors, mask, strict=True)):
        got = v[:1] if kind == "snippet" else v[m]
        np.testing.assert_allclose(got.numpy(), expected[row], atol=1e-5)


def test_the_answer_view_is_the_view_whose_span_holds_the_answer():
    content = "Warsaw is big. The Vistula flows through it. Kraków is old."
    doc = FrozenDocument("d", np.zeros((4, 2), np.float32), [None, (0, 14), (15, 44), (45, 59)], content)
    question = TuningQuestion("river?", "d", ["Vistula"], [content.index("Vistula")])
    assert answer_view_indices(doc, question) == [2]
    assert answer_view_indices(doc, TuningQuestion("river?", "d", ["vistula"])) == [2]  # found without offsets
    assert answer_view_indices(doc, TuningQuestion("river?", "d", ["Oder"])) == []
    tokens = FrozenDocument("t", np.zeros((3, 2), np.float32), [(0, 6), (19, 22), (22, 26)], content)
    assert answer_view_indices(tokens, question) == [1, 2]  # the answer's tokens, "Vis" + "tula"


# ------------------------------------------------------------------------------------------ tuning end to end


def test_tuning_learns_from_the_questions_and_never_touches_the_index(snippet_index, questions_file, tmp_path):
    before = folder_digest(snippet_index)
    output = tune_queries(
        snippet_index, questions_file, tmp_path / "tuned", max_steps=30, batch_size=6, negatives=2,
        learning_rate=1e-3, progress_bar=False,
    )  # fmt: skip
    assert folder_digest(snippet_index) == before  # not a byte of the index changed
    record = json.loads((output / "query_tuning.json").read_text())
    report = record["report"]
    assert report["steps"] == 30 and report["answer_view_questions"] == len(QUESTIONS)
    assert report["last_loss"] < report["first_loss"]
    store_encoder = opened(snippet_index).encoder_config
    assert record["document_encoder"] == store_encoder
    # the tuned folder answers through the README's query pipeline against the frozen store
    documents = retrieve(output, snippet_index, QUESTIONS[0][0])
    assert len(documents) == 3 and documents[0].meta["mvr_matched_scope"] in ("snippet", "document")


def test_tuned_queries_rank_their_gold_documents_better(snippet_index, questions_file, tmp_path, tiny_backbone):
    def gold_rank_sum(model):
        return sum(
            [d.id for d in retrieve(model, snippet_index, q)].index(p)
            if p in [d.id for d in retrieve(model, snippet_index, q)]
            else 3
            for q, p, _ in QUESTIONS
        )

    output = tune_queries(
        snippet_index, questions_file, tmp_path / "tuned", max_steps=40, batch_size=6, negatives=2,
        learning_rate=2e-3, progress_bar=False,
    )  # fmt: skip
    assert gold_rank_sum(output) < gold_rank_sum(tiny_backbone) or gold_rank_sum(output) == 0


@pytest.mark.parametrize("kind", ["tokens", "colbert"])
def test_multi_vector_indexes_tune_by_maxsim(kind, tiny_backbone, tiny_colbert, questions_file, tmp_path):
    model, kwargs = (tiny_backbone, {"mode": "tokens"}) if kind == "tokens" else (tiny_colbert, None)
    index = saved_store(model, tmp_path / "index", encoder_kwargs=kwargs)
    output = tune_queries(index, questions_file, tmp_path / "tuned", max_steps=3, batch_size=3, progress_bar=False)
    tuned = open_encoder(output, "cpu")
    store = opened(index)
    identity = tuned.identity(output)
    assert identity["mode"] == store.encoder_config["mode"] and identity["scoring"] == "maxsim"
    store.check_query_encoder(identity)  # accepted by its own store
    assert len(retrieve(output, index, QUESTIONS[1][0])) == 3


def test_a_tuned_folder_is_refused_by_a_store_of_another_document_encoder(snippet_index, questions_file, tmp_path):
    other = saved_store(build_tiny_backbone(tmp_path / "other-bert", seed=1), tmp_path / "other-index")
    output = tune_queries(snippet_index, questions_file, tmp_path / "tuned", max_steps=1, progress_bar=False)
    tuned = json.loads((output / "query_tuning.json").read_text())["document_encoder"]["fingerprint"]
    theirs = opened(other).encoder_config["fingerprint"]
    with pytest.raises(Exception, match="encoder") as refused:
        retrieve(output, other, QUESTIONS[0][0])
    assert tuned in str(refused.value) and theirs in str(refused.value)  # both fingerprints named


def test_a_tuned_folder_cannot_embed_documents(snippet_index, questions_file, tmp_path):
    output = tune_queries(snippet_index, questions_file, tmp_path / "tuned", max_steps=1, progress_bar=False)
    with pytest.raises(ValueError, match="tuned against a frozen index"):
        MultiViewDocumentEmbedder(model=str(output)).run([Document(content="x")])


def test_lora_tunes_and_saves_a_plain_folder(snippet_index, questions_file, tmp_path):
    output = tune_queries(
        snippet_index, questions_file, tmp_path / "tuned", max_steps=5, lora_rank=4, learning_rate=1e-3,
        progress_bar=False,
    )  # fmt: skip
    assert not list(output.rglob("adapter_config.json"))  # merged: the folder loads without peft
    assert len(retrieve(output, snippet_index, QUESTIONS[2][0])) == 3


def test_the_cli_tunes_and_prints_its_report(snippet_index, questions_file, tmp_path, capsys):
    code = cli_main(
        ["tune-queries", "--index", str(snippet_index), "--questions", str(questions_file), "--output",
         str(tmp_path / "tuned"), "--max-steps", "2", "--batch-size", "3", "--max-minutes", "5"]
    )  # fmt: skip
    assert code == 0
    assert json.loads(capsys.readouterr().out)["steps"] == 2


# ------------------------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"", "no questions"),
        (b"{not json\n", "not valid JSON"),
        (b'{"question": "q", "positive_id": "vistula"}\n\xff\xfe\n', "not UTF-8"),
        (b'{"question": "", "positive_id": "vistula"}\n', "'question'"),
        (b'{"question": "q"}\n', "'positive_id'"),
        (b'{"question": "q", "positive_id": "vistula", "answers": "Vistula"}\n', "'answers'"),
    ],
)
def test_bad_questions_files_are_named_by_line(tmp_path, content, match):
    path = tmp_path / "q.jsonl"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=match):
        read_tuning_questions(path)


def test_an_unknown_positive_id_is_named_and_nothing_is_written(snippet_index, tmp_path):
    path = write_questions(tmp_path / "q.jsonl", [{"question": "q", "positive_id": "vistula"},
                                                   {"question": "q2", "positive_id": "atlantis"}])  # fmt: skip
    before = folder_digest(snippet_index)
    with pytest.raises(ValueError, match=r"question 2: positive_id 'atlantis' is not in the index"):
        tune_queries(snippet_index, path, tmp_path / "tuned", max_steps=1, progress_bar=False)
    assert not (tmp_path / "tuned").exists() and folder_digest(snippet_index) == before


@pytest.mark.parametrize(
    ("arguments", "match"),
    [
        ({"max_steps": 0}, "max_steps"),
        ({"learning_rate": float("inf")}, "learning_rate"),
        ({"batch_size": -1}, "batch_size"),
        ({"max_minutes": 0}, "max_minutes"),
    ],
)
def test_bad_arguments_are_refused_before_anything_runs(snippet_index, questions_file, tmp_path, arguments, match):
    with pytest.raises(ValueError, match=match):
        tune_queries(snippet_index, questions_file, tmp_path / "tuned", progress_bar=False, **arguments)
    assert not (tmp_path / "tuned").exists()


def test_the_cli_names_a_bad_argument_in_one_line(snippet_index, questions_file, tmp_path, capsys):
    args = ["tune-queries", "--index", str(snippet_index), "--questions", str(questions_file), "--output",
            str(tmp_path / "tuned"), "--max-steps", "0"]  # fmt: skip
    assert cli_main(args) == 1
    assert "max_steps must be a positive integer" in capsys.readouterr().err


def test_a_store_without_vectors_to_read_is_refused(tiny_backbone, questions_file, tmp_path):
    embedder = MultiViewDocumentEmbedder(model=str(tiny_backbone), progress_bar=False)
    documents = embedder.run([Document(id=f"{k}{i}", content=v) for i in range(40) for k, v in PAGES.items()])
    store = FaissMultiViewDocumentStore(index_factory="PQ4x4", keep_vectors=False, train_size=200)
    store.write_documents(documents["documents"])
    store.save(tmp_path / "pq")
    with pytest.raises(ValueError, match="keeps no vectors"):
        open_frozen_index(tmp_path / "pq")
    with pytest.raises(ValueError, match="no such folder"):
        open_frozen_index(tmp_path / "missing")


def test_the_output_may_not_be_the_index_nor_a_full_folder(snippet_index, questions_file, tmp_path):
    with pytest.raises(ValueError, match="never writes into the index"):
        tune_queries(snippet_index, questions_file, snippet_index / "tuned", max_steps=1, progress_bar=False)
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="not empty"):
        tune_queries(snippet_index, questions_file, full, max_steps=1, progress_bar=False)
    assert (full / "keep.txt").read_text() == "mine"


def test_arguments_validate_by_name():
    with pytest.raises(ValueError, match="negatives"):
        QueryTuningArguments(negatives=-2)
    with pytest.raises(ValueError, match="scale"):
        QueryTuningArguments(scale=float("nan"))
