import doctest
import importlib
import math

import pytest

from haystack_mvr.evaluation import (
    answer_top_k_accuracy,
    compute_retrieval_metrics,
    first_answer_ranks,
    format_value,
    is_percent_metric,
    markdown_table,
)

# Two queries: q0's gold at rank 2, q1's gold at rank 3.
RETRIEVED = [["d2", "d1"], ["d4", "d5", "d3"]]
GOLD = ["d1", "d3"]


def test_gold_metrics_match_hand_values():
    m = compute_retrieval_metrics(RETRIEVED, GOLD, ks=[1, 2, 3])
    assert m["gold_R@1"] == 0.0
    assert m["gold_R@2"] == 0.5
    assert m["gold_R@3"] == 1.0
    assert m["MRR@10"] == pytest.approx((1 / 2 + 1 / 3) / 2)
    assert m["nDCG@10"] == pytest.approx((1 / math.log2(3) + 1 / math.log2(4)) / 2)
    assert m["Recall@100"] == 1.0
    assert set(m) == {"gold_R@1", "gold_R@2", "gold_R@3", "MRR@10", "nDCG@10", "Recall@100"}


def test_given_order_is_kept_not_resorted_by_id():
    m = compute_retrieval_metrics([["d9", "d10", "d1"]], ["d9"], ks=[1])
    assert m["gold_R@1"] == 1.0
    assert m["MRR@10"] == 1.0


def test_several_relevant_ids_and_cutoffs():
    m = compute_retrieval_metrics([["a", "x", "b"], ["y", "a"]], [{"a", "b"}, ["a", "b"]], ks=[1])
    ndcg_q0 = (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    ndcg_q1 = (1 / math.log2(3)) / (1 + 1 / math.log2(3))
    assert m["nDCG@10"] == pytest.approx((ndcg_q0 + ndcg_q1) / 2)
    assert m["Recall@100"] == pytest.approx((1.0 + 0.5) / 2)
    assert m["gold_R@1"] == 0.5
    assert m["MRR@10"] == pytest.approx((1 + 1 / 2) / 2)


def test_gold_beyond_cutoff_and_empty_list():
    ids = [f"d{i}" for i in range(12)]
    m = compute_retrieval_metrics([ids, []], ["d11", "d0"], ks=[5])
    assert m["MRR@10"] == 0.0
    assert m["gold_R@5"] == 0.0
    assert m["Recall@100"] == 0.5


def test_answer_accuracy():
    texts = [["Paris is in France.", "Denver Broncos won."], ["nothing here", "still nothing"]]
    answers = [["Denver Broncos"], ["Panthers"]]
    ids = [["d2", "d1"], ["d4", "d5"]]
    m = compute_retrieval_metrics(ids, None, retrieved_texts=texts, answers=answers, ks=[1, 2])
    assert m == {"answer_R@1": 0.0, "answer_R@2": 0.5}
    assert list(first_answer_ranks(texts, answers, max_k=2)) == [1, 2]
    assert answer_top_k_accuracy(texts, answers, ks=[2]) == {2: 0.5}


def test_gold_and_answer_metrics_together():
    texts = [["x", "the answer"], ["a", "b", "c"]]
    m = compute_retrieval_metrics(RETRIEVED, GOLD, retrieved_texts=texts, answers=[["answer"], ["z"]], ks=[2])
    assert m["gold_R@2"] == 0.5
    assert m["answer_R@2"] == 0.5


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"retrieved_ids": RETRIEVED, "gold_ids": ["d1"]}, "one entry per query"),
        ({"retrieved_ids": [["a", "a"]], "gold_ids": ["a"]}, "deduplicate"),
        ({"retrieved_ids": [["a"]], "gold_ids": [[]]}, "no gold id"),
        ({"retrieved_ids": [["a"]], "gold_ids": ["a"], "retrieved_texts": [["t"]]}, "together"),
        ({"retrieved_ids": [["a"]]}, "Nothing to evaluate"),
        ({"retrieved_ids": [["a"]], "gold_ids": ["a"], "ks": [0]}, "positive"),
        ({"retrieved_ids": [["a", "b"]], "retrieved_texts": [["t"]], "answers": [["t"]]}, "one text per"),
    ],
)
def test_bad_input_names_the_fix(kwargs, match):
    with pytest.raises(ValueError, match=match):
        compute_retrieval_metrics(**kwargs)


@pytest.mark.parametrize("module", ["answer_matching", "retrieval_metrics", "view_diagnostics", "report"])
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(f"haystack_mvr.evaluation.{module}"))
    assert result.failed == 0


# --- Report ---


def test_markdown_table_prints_fractions_as_percent():
    table = markdown_table(
        {"BM25": {"gold_R@1": 0.793, "nDCG@10": 0.5}, "MVR": {"gold_R@1": 0.8, "PPL": 3.19}},
    )
    assert table == (
        "| system | gold_R@1 | nDCG@10 | PPL |\n"
        "|---|---:|---:|---:|\n"
        "| BM25 | 79.3 | 50.0 | - |\n"
        "| MVR | 80.0 | - | 3.190 |\n"
    )
    assert markdown_table({"MRR@10": 0.25}, metrics=["MRR@10"]).endswith("|  | 25.0 |\n")
    assert is_percent_metric("view3_R@20") and not is_percent_metric("LV")
    assert format_value("answer_view_R@5", float("nan")) == "-"


def test_many_queries_match_hand_top_k_and_mrr():
    # 12 queries (ranx switches to its multi-threaded path from 10): query q's gold sits at rank q % 6.
    ranked = [[f"q{q}-d{r}" for r in range(6)] for q in range(12)]
    gold = [f"q{q}-d{q % 6}" for q in range(12)]
    m = compute_retrieval_metrics(ranked, gold, ks=[1, 3])
    assert m["gold_R@1"] == pytest.approx(2 / 12)
    assert m["gold_R@3"] == pytest.approx(6 / 12)
    assert m["MRR@10"] == pytest.approx(sum(1 / (1 + q % 6) for q in range(12)) / 12)


def test_all_rankings_empty_gives_zeros():
    assert compute_retrieval_metrics([[], []], ["a", "b"], ks=[1]) == {
        "gold_R@1": 0.0, "MRR@10": 0.0, "nDCG@10": 0.0, "Recall@100": 0.0,
    }  # fmt: skip
