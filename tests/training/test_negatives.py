"""Hard negatives never are the positive and never contain an answer (DPR has_answer), on real squad-mv passages."""

import dataclasses
import json

import numpy as np
import pytest
import torch

from haystack_mvr.datasets.squad_mv import Passage
from haystack_mvr.evaluation.answer_matching import has_answer
from haystack_mvr.modeling.encoder_interface import EncodedDocument
from haystack_mvr.training.data import TrainingExample, load_squad_mv
from haystack_mvr.training.negatives import (
    bm25_negatives,
    is_valid_negative,
    mine_negatives,
    read_negatives,
    write_negatives,
)

ARTICLES = {"Super Bowl 50", "Warsaw", "Normans"}


@pytest.fixture(scope="module")
def real(squad_mv_dir):
    data = load_squad_mv(squad_mv_dir)
    examples = [e for e in data.examples if e.positive.title in ARTICLES][::4]  # about 100 questions
    corpus = [p for p in data.corpus if p.title in ARTICLES]
    assert len(examples) > 50 and len(corpus) > 50
    return examples, corpus


def assert_clean(examples, negatives, text_of=lambda p: p.text):
    for e in examples:
        for p in negatives.get(e.query_id, []):
            assert p.id not in e.positive_ids, (e.query, p.id)
            assert not has_answer(list(e.answers), text_of(p)), (e.query, e.answers, p.text)


def test_bm25_negatives_exclude_positive_and_answers(real):
    examples, corpus = real
    negatives = bm25_negatives(examples, corpus, num_negatives=10, depth=40)
    assert set(negatives) == {e.query_id for e in examples}
    assert sum(len(v) for v in negatives.values()) > 5 * len(examples)
    assert_clean(examples, negatives)
    # The filter matters: without answers, answer-bearing passages would be among the "negatives".
    unfiltered = bm25_negatives(
        [dataclasses.replace(e, answers=()) for e in examples], corpus, num_negatives=10, depth=40
    )
    leaked = sum(has_answer(list(e.answers), p.text) for e in examples for p in unfiltered[e.query_id])
    assert leaked > 0


def test_bm25_negatives_are_topically_hard(real):
    examples, corpus = real
    negatives = bm25_negatives(examples, corpus, num_negatives=3, depth=40)
    same_article = sum(p.title == e.positive.title for e in examples for p in negatives[e.query_id])
    assert same_article > 0.5 * sum(len(v) for v in negatives.values())


def test_answer_check_runs_on_the_encoded_text():
    example = TrainingExample("q", "who?", Passage("p", "T", "x"), answers=("Warsaw",))
    titled = Passage("n", "Warsaw", "The city has a river.")
    assert is_valid_negative(example, titled)
    assert not is_valid_negative(example, titled, text_of=lambda p: p.title + "\n" + p.text)
    assert not is_valid_negative(example, Passage("p", "", "other"))


def test_mined_negatives_exclude_positive_and_answers(real, tiny_backbone):
    examples, corpus = real
    torch.manual_seed(0)
    from haystack_mvr.modeling.encoder_builders import viewer_encoder
    from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter

    encoder = MultiVectorEncoderAdapter(viewer_encoder(tiny_backbone, mode="mvr", views=2, doc_max_length=32))
    negatives = mine_negatives(encoder, examples[:20], corpus[:60], num_negatives=5, depth=30, batch_size=32)
    assert all(len(v) == 5 for v in negatives.values())
    assert_clean(examples[:20], negatives)


def test_negatives_file_round_trip_and_errors(tmp_path):
    negatives = {"q1": [Passage("a", "T", "text a")], "q2": []}
    path = write_negatives(tmp_path / "neg.jsonl", negatives)
    assert read_negatives(path) == negatives
    path.write_text(json.dumps({"query_id": "q1", "negatives": [{"id": "a", "title": "T"}]}) + "\n")
    with pytest.raises(ValueError, match=r"neg.jsonl:1: field 'negatives\[0\]'"):
        read_negatives(path)
    path.write_text("\n" + json.dumps({"negatives": []}) + "\n")
    with pytest.raises(ValueError, match=r"neg.jsonl:2: field 'query_id'"):
        read_negatives(path)


def brute_force_negatives(encoder, examples, corpus, num_negatives, text_of=lambda p: p.text):
    """Each query's first ``num_negatives`` valid passages by MaxSim in float64 numpy, from the encoder's own views."""
    views = [d.views.astype(np.float64) for d in encoder.encode_documents([text_of(p) for p in corpus])]
    result = {}
    for e in examples:
        (query,) = encoder.query_views([e.query])
        scores = np.array([(query @ v.T).max(axis=1).sum() if len(v) else -np.inf for v in views])
        ranked = [corpus[i] for i in np.argsort(-scores, kind="stable") if is_valid_negative(e, corpus[i], text_of)]
        result[e.query_id] = ranked[:num_negatives]
    return result


def test_mined_negatives_with_a_colbert_follow_brute_force_maxsim(real, tiny_colbert):
    from haystack_mvr.modeling.late_interaction import LateInteractionEncoder
    from haystack_mvr.modeling.st_encoder import open_encoder

    examples, corpus = real
    examples, corpus = examples[:8], corpus[:30]
    encoder = open_encoder(tiny_colbert, "cpu")
    assert isinstance(encoder, LateInteractionEncoder)
    expected = brute_force_negatives(encoder, examples, corpus, 5)
    # Small query chunks and a small score budget: several chunks against several blocks of documents.
    for options in ({}, {"query_chunk": 3, "max_scores": 20_000}):
        negatives = mine_negatives(encoder, examples, corpus, num_negatives=5, depth=30, batch_size=8, **options)
        assert {q: [p.id for p in v] for q, v in negatives.items()} == {
            q: [p.id for p in v] for q, v in expected.items()
        }
        assert all(len(v) == 5 for v in negatives.values())
        assert_clean(examples, negatives)


class RaggedEncoder:
    """Queries of 1 to 3 vectors, documents of 0 to 5 views: MaxSim must mask the padding of both."""

    device = torch.device("cpu")

    def __init__(self, dim: int = 4, seed: int = 0):
        self.dim, self.rng = dim, np.random.default_rng(seed)
        self.cache: dict[str, np.ndarray] = {}

    def _rows(self, text: str, most: int, least: int) -> np.ndarray:
        if text not in self.cache:
            n = int(self.rng.integers(least, most + 1))
            self.cache[text] = self.rng.standard_normal((n, self.dim)).astype(np.float32)
        return self.cache[text]

    def encode_documents(self, texts, batch_size=32, progress_bar=False):
        return [EncodedDocument(views=self._rows("d:" + t, 5, 0), spans=[]) for t in texts]

    def query_views(self, texts, batch_size=32, progress_bar=False):
        return [self._rows("q:" + t, 3, 1) for t in texts]


def test_mined_negatives_mask_padded_query_vectors_and_views():
    corpus = [Passage(f"p{i}", "", f"passage {i}") for i in range(40)]
    examples = [TrainingExample(f"q{i}", f"query {i}", corpus[i]) for i in range(10)]
    encoder = RaggedEncoder()
    expected = {q: [p.id for p in v] for q, v in brute_force_negatives(encoder, examples, corpus, 6).items()}
    assert {len(v) for v in encoder.query_views([e.query for e in examples])} == {1, 2, 3}
    assert 0 in {len(d.views) for d in encoder.encode_documents([p.text for p in corpus])}
    for options in ({}, {"query_chunk": 4, "max_scores": 50}):
        negatives = mine_negatives(encoder, examples, corpus, num_negatives=6, depth=20, **options)
        assert {q: [p.id for p in v] for q, v in negatives.items()} == expected


def test_mine_negatives_command_reads_a_colbert_folder(real, squad_mv_dir, tiny_colbert, tmp_path, capsys):
    from haystack_mvr.cli.main import main
    from haystack_mvr.modeling.st_encoder import open_encoder

    examples, corpus = real
    keep = {p.id for p in corpus[:25]} | {e.positive.id for e in examples[:6]}
    wanted = {"corpus.jsonl": keep, "train.jsonl": {e.query_id for e in examples[:6]}}
    data = tmp_path / "squad-mv"
    data.mkdir()
    for name, ids in wanted.items():
        lines = (squad_mv_dir / name).read_text(encoding="utf-8").splitlines()
        (data / name).write_text("".join(f"{x}\n" for x in lines if x.strip() and json.loads(x)["id"] in ids))
    output = tmp_path / "negatives.jsonl"
    argv = ["mine-negatives", "--model", str(tiny_colbert), "--data-dir", str(data), "--output", str(output)]
    assert main([*argv, "--num-negatives", "3", "--depth", "10", "--device", "cpu"]) == 0
    assert f"Wrote mined negatives to {output}" in capsys.readouterr().out

    loaded = load_squad_mv(data)
    expected = brute_force_negatives(open_encoder(tiny_colbert, "cpu"), loaded.examples, loaded.corpus, 3)
    mined = read_negatives(output)
    assert len(mined) == 6
    assert {q: [p.id for p in v] for q, v in mined.items()} == {q: [p.id for p in v] for q, v in expected.items()}
