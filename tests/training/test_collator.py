"""The collator: unique documents, positive rows, CAMVR answer views (with and without a title head)."""

import pytest
import torch

from haystack_mvr.modeling import MultiViewEncoder
from haystack_mvr.training.collator import MultiViewCollator, passage_key
from haystack_mvr.training.data import Passage, TrainingItem

DOC = Passage("d1", "Pets", "Cats purr softly. Dogs bark at night. Fish swim in tanks.")
OTHER = Passage("d2", "Cars", "Cars drive on roads. Trains run on rails.")


@pytest.fixture(scope="module")
def camvr(tiny_backbone):
    torch.manual_seed(0)
    return MultiViewEncoder.from_pretrained(tiny_backbone, mode="camvr", num_views=4, doc_max_length=48)


def items():
    bark = DOC.text.index("bark")
    return [
        TrainingItem("what barks?", DOC, bark, [OTHER], frozenset({"d1"})),
        TrainingItem("what swims?", DOC, DOC.text.index("swim"), [], frozenset({"d1"})),
        TrainingItem("what drives?", OTHER, None, [DOC], frozenset({"d2", "d9"})),
    ]


def test_documents_are_unique_and_positives_point_at_them(camvr):
    batch = MultiViewCollator.from_encoder(camvr)(items())
    assert len(batch) == 3
    assert batch.positive_index.tolist() == [0, 0, 1]
    assert batch.documents.inputs["input_ids"].shape[0] == 2  # DOC once, OTHER once
    assert batch.doc_keys.tolist() == [passage_key("d1"), passage_key("d2")]
    assert sorted(batch.positive_keys[2].tolist()) == sorted([passage_key("d2"), passage_key("d9")])
    assert batch.positive_keys[0].tolist()[1] == 0  # padding
    assert batch.queries.inputs["input_ids"].shape[0] == 3


@pytest.mark.parametrize("embed_title", [False, True])
def test_answer_view_is_the_snippet_holding_the_answer(camvr, embed_title):
    collator = MultiViewCollator.from_encoder(camvr, embed_title=embed_title)
    batch = collator(items())
    spans = batch.documents.spans[0]
    text, head = collator.document_text(DOC)
    assert head == (len("Pets\n") if embed_title else 0)
    assert batch.answer_view.tolist() == [1, 2, -1]
    assert "bark" in text[slice(*spans[1])] and "swim" in text[slice(*spans[2])]


def test_mvr_has_no_answer_views(tiny_backbone):
    mvr = MultiViewEncoder.from_pretrained(tiny_backbone, mode="mvr", num_views=3, doc_max_length=32)
    batch = MultiViewCollator.from_encoder(mvr)(items())
    assert batch.answer_view.tolist() == [-1, -1, -1]
    assert batch.documents.view_mask.shape == (2, 3)


def test_passage_keys_are_stable_and_non_zero():
    assert passage_key("Super_Bowl_50#0") == passage_key("Super_Bowl_50#0") != passage_key("Super_Bowl_50#1")
    assert all(passage_key(str(i)) > 0 for i in range(100))
