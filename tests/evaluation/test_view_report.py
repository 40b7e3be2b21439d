import numpy as np
import pytest
from haystack import Document

from haystack_mvr.datasets import Question
from haystack_mvr.evaluation.pipeline_evaluation import RankedResults
from haystack_mvr.evaluation.view_report import stack_views, view_diagnostics_report
from haystack_mvr.views import MATCHED_TEXT_KEY, attach_views


def _doc(doc_id, views, spans=None, content="text"):
    return attach_views(Document(id=doc_id, content=content), np.asarray(views, dtype=np.float32), spans)


def _question(i, gold, answers=("x",)):
    return Question(id=str(i), question=f"q{i}", answers=list(answers), positive_id=gold, title="t")


def test_stack_views_pads_ragged_documents_and_masks_padding():
    views, mask = stack_views([_doc("a", [[1, 0], [0, 1]]), _doc("b", [[2, 2]])])
    assert views.shape == (2, 2, 2)
    assert mask.tolist() == [[True, True], [True, False]]
    assert views[1, 1].tolist() == [0.0, 0.0]


def test_stack_views_rejects_documents_without_views():
    with pytest.raises(ValueError, match="no views"):
        stack_views([Document(id="plain", content="no vectors")])


def test_report_separates_distinct_views_from_collapsed_ones():
    # doc a: view 1 answers query 0, view 2 answers query 1; doc b is a distractor
    docs = [_doc("a", [[1, 0], [0, 1]]), _doc("b", [[0.6, 0.6], [0.6, 0.6]])]
    queries = np.array([[1, 0], [0, 1]], dtype=np.float32)
    report = view_diagnostics_report(docs, queries, [_question(0, "a"), _question(1, "a")])
    assert report["local_variation"] == pytest.approx(1.0)  # max 1 minus the mean 0 of the other views
    assert report["view_perplexity"] == pytest.approx(2.0)  # each view wins once on doc a
    assert report["winning_view_share"] == [0.5, 0.5]
    assert report["per_view"]["overall_R@1"] == 1.0
    assert report["per_view"]["view1_R@1"] == 0.5  # view 1 alone loses query 1 to doc b

    collapsed = [_doc("a", [[1, 1], [1, 1]]), docs[1]]
    report = view_diagnostics_report(collapsed, queries, [_question(0, "a"), _question(1, "a")])
    assert report["local_variation"] == 0.0
    assert report["view_perplexity"] == pytest.approx(1.0)
    assert report["per_view"]["view1_R@1"] == report["per_view"]["view2_R@1"] == report["per_view"]["overall_R@1"]


def test_report_adds_answer_view_accuracy_and_attention_kl():
    docs = [_doc("a", [[1, 0], [0, 1]], spans=[[0, 5], [6, 11]], content="alpha omega")]
    ranked_doc = Document(id="a", content="alpha omega", meta={MATCHED_TEXT_KEY: "alpha"})
    questions = [_question(0, "a", answers=["alpha"]), _question(1, "a", answers=["omega"])]
    ranked = RankedResults(questions, [[ranked_doc], [ranked_doc]])
    attention = [np.array([[0.5, 0.5, 0.0], [0.1, 0.1, 0.8]])]
    report = view_diagnostics_report(docs, np.eye(2, dtype=np.float32), questions, ranked=ranked, attention=attention)
    assert report["answer_view_R@5"] == 0.5  # the matched snippet "alpha" holds only the first answer
    assert report["viewer_attention_kl_mean"] > 0.1
    assert np.allclose(np.diag(np.array(report["viewer_attention_kl"], dtype=float)), 0.0)


def test_report_names_a_gold_document_missing_from_the_corpus():
    with pytest.raises(ValueError, match="'missing'"):
        view_diagnostics_report([_doc("a", [[1, 0]])], np.ones((1, 2)), [_question(0, "missing")])


def test_answer_view_accuracy_counts_a_view_without_snippet_as_quoting_nothing():
    docs = [_doc("a", [[1, 0], [0, 1]], spans=[[0, 5], [6, 11]], content="alpha omega")]
    with_snippet = Document(id="a", content="alpha omega", meta={MATCHED_TEXT_KEY: "omega"})
    without = Document(id="a", content="alpha omega", meta={MATCHED_TEXT_KEY: None})
    questions = [_question(0, "a", answers=["omega"]), _question(1, "a", answers=["omega"])]
    ranked = RankedResults(questions, [[with_snippet], [without]])
    report = view_diagnostics_report(docs, np.eye(2, dtype=np.float32), questions, ranked=ranked)
    assert report["answer_view_R@5"] == 0.5
    no_snippets = RankedResults(questions, [[Document(id="a", content="x")], [Document(id="a", content="x")]])
    assert "answer_view_R@5" not in view_diagnostics_report(docs, np.eye(2), questions, ranked=no_snippets)
