"""Every script in examples/ runs end to end on tiny random models, and the committed YAML pipelines load."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import torch
from haystack import Pipeline

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CORPUS = [
    {"id": "river#0", "title": "River", "text": "The river book was written by Anna Smith. It tells of a long river."},
    {"id": "river#1", "title": "River", "text": "Boats sail on the river in summer. Fish live under them."},
    {"id": "hills#0", "title": "Hills", "text": "The hills are green in spring. Sheep graze there all year."},
    {"id": "city#0", "title": "City", "text": "The city has a harbour and an old castle. Many people visit it."},
]
QUESTIONS = [
    {
        "id": "q1",
        "question": "Who wrote the river book?",
        "answers": ["Anna Smith"],
        "answer_starts": [30],
        "positive_id": "river#0",
        "title": "River",
    },
    {
        "id": "q2",
        "question": "Where do fish live?",
        "answers": ["under them"],
        "answer_starts": [45],
        "positive_id": "river#1",
        "title": "River",
    },
    {
        "id": "q3",
        "question": "What grazes on the hills?",
        "answers": ["Sheep"],
        "answer_starts": [31],
        "positive_id": "hills#0",
        "title": "Hills",
    },
    {
        "id": "q4",
        "question": "What does the city have?",
        "answers": ["a harbour"],
        "answer_starts": [13],
        "positive_id": "city#0",
        "title": "City",
    },
]


@pytest.fixture(autouse=True)
def examples_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: thread hand-offs cost more than the matmuls
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def data_dir(tmp_path) -> Path:
    directory = tmp_path / "squad-mv"
    directory.mkdir()
    (directory / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in CORPUS), encoding="utf-8")
    (directory / "train.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8")
    return directory


def test_index_then_answer_with_fid_and_round_trip_the_yaml(tmp_path, data_dir, tiny_backbone, tiny_t5, capsys):
    import index_corpus
    import rag_fid

    index_corpus.main(
        [
            "--index-dir",
            str(tmp_path / "index"),
            "--corpus",
            str(data_dir / "corpus.jsonl"),
            "--model",
            str(tiny_backbone),
            "--save-yaml",
            str(tmp_path / "indexing.yaml"),
        ]
    )
    assert "Wrote 4 documents" in capsys.readouterr().out
    written = (tmp_path / "indexing.yaml").read_text()
    assert written == index_corpus.indexing_yaml(str(tiny_backbone), str(tmp_path / "index"))
    assert Pipeline.loads(written).get_component("writer") is not None

    rag_fid.main(
        [
            "--index-dir",
            str(tmp_path / "index"),
            "--model",
            str(tiny_backbone),
            "--reader",
            str(tiny_t5),
            "--context",
            "matched_view",
            "--top-k",
            "3",
            "--question",
            "Who wrote the river book?",
            "--save-yaml",
            str(tmp_path / "rag.yaml"),
        ]
    )
    out = capsys.readouterr().out
    assert "Q: Who wrote the river book?" in out and "A: " in out and "from " in out
    options = {"top_k": 3, "context": "matched_view", "max_passages": 10}
    expected = rag_fid.rag_yaml(str(tiny_backbone), str(tmp_path / "index"), str(tiny_t5), **options)
    assert (tmp_path / "rag.yaml").read_text() == expected

    rag_fid.main(["--from-yaml", str(tmp_path / "rag.yaml"), "--question", "Where do fish live?"])
    assert "A: " in capsys.readouterr().out


@pytest.mark.parametrize("name", ["indexing.yaml", "rag_fid.yaml"])
def test_committed_yaml_pipelines_are_what_save_yaml_writes(name):
    """Byte for byte: examples/pipelines/*.yaml are what --save-yaml writes for the hub id and runs/index."""
    from index_corpus import indexing_yaml
    from rag_fid import rag_yaml

    committed = (EXAMPLES / "pipelines" / name).read_text(encoding="utf-8")
    model = "sentence-transformers/all-MiniLM-L6-v2"
    if name == "indexing.yaml":
        written = indexing_yaml(model, "runs/index")
    else:
        written = rag_yaml(model, "runs/index", "google/flan-t5-base", context="matched_view")
    assert committed == written, f"regenerate examples/pipelines/{name} with the example's --save-yaml"
    assert Pipeline.loads(committed).to_dict() == Pipeline.loads(written).to_dict()


def test_rag_fid_offline_recipe_from_its_help_runs(tmp_path, data_dir, tiny_backbone, tiny_t5, monkeypatch, capsys):
    """
    The --help's offline recipe, as written: index with the default (packaged) model, then the committed YAML with
    only --index-dir and a local --reader; the YAML's all-MiniLM-L6-v2 hub id becomes the packaged copy. (The tiny
    backbone stands in for the packaged MiniLM here; tests/test_readme.py runs the real weights.)
    """
    import index_corpus
    import rag_fid

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(index_corpus, "packaged_minilm", lambda: str(tiny_backbone))
    monkeypatch.setattr(rag_fid, "packaged_minilm", lambda: str(tiny_backbone))
    assert "--from-yaml examples/pipelines/rag_fid.yaml --index-dir runs/index" in rag_fid.__doc__
    index = str(tmp_path / "index")
    index_corpus.main(["--index-dir", index, "--corpus", str(data_dir / "corpus.jsonl")])
    committed = str(EXAMPLES / "pipelines" / "rag_fid.yaml")
    rag_fid.main(["--from-yaml", committed, "--index-dir", index, "--reader", str(tiny_t5), "--question", "Who?"])
    out = capsys.readouterr().out
    assert "Q: Who?" in out and "A: " in out and "from " in out


def test_rag_fid_offline_without_reader_weights_is_one_line_before_loading(
    tmp_path, data_dir, tiny_backbone, monkeypatch
):
    import index_corpus
    import rag_fid

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    index = str(tmp_path / "index")
    index_corpus.main(["--index-dir", index, "--corpus", str(data_dir / "corpus.jsonl"), "--model", str(tiny_backbone)])
    for argv in (
        ["--index-dir", index, "--model", str(tiny_backbone)],  # the default reader, google/flan-t5-base
        ["--from-yaml", str(EXAMPLES / "pipelines" / "rag_fid.yaml"), "--index-dir", index],
    ):
        with pytest.raises(SystemExit) as exit_info:
            rag_fid.main(argv)
        message = str(exit_info.value.code)
        assert "'google/flan-t5-base' is not a local folder" in message and "No reader weights are packaged" in message
        assert "\n" not in message


def test_rag_fid_refuses_an_index_built_with_another_model(tmp_path, data_dir, tiny_backbone, tiny_t5):
    """The encoder check is wired: a query model other than the index's is refused, not silently compared."""
    import index_corpus
    import rag_fid

    from tests.conftest import build_tiny_backbone

    other = build_tiny_backbone(tmp_path / "other", seed=1)
    index = str(tmp_path / "index")
    index_corpus.main(["--index-dir", index, "--corpus", str(data_dir / "corpus.jsonl"), "--model", str(tiny_backbone)])
    with pytest.raises(Exception, match="document store was built with encoder"):
        rag_fid.main(["--index-dir", index, "--model", str(other), "--reader", str(tiny_t5), "--question", "Who?"])


@pytest.mark.parametrize(
    "name", ["quickstart", "index_corpus", "rag_fid", "hybrid_rag", "qdrant_rag", "train_and_plug"]
)
def test_every_example_help_imports_nothing_heavy(name):
    """--help answers without torch, transformers, Haystack or qdrant-client (so without the optional extras too)."""
    import subprocess
    import sys

    probe = (
        "import runpy, sys\n"
        f"sys.path.insert(0, {str(EXAMPLES)!r}); sys.argv = [{name!r}, '--help']\n"
        "try:\n"
        f"    runpy.run_path({str(EXAMPLES / (name + '.py'))!r}, run_name='__main__')\n"
        "except SystemExit as e:\n    assert e.code in (0, None), e.code\n"
        "heavy = ('torch', 'transformers', 'haystack', 'qdrant_client', 'sentence_transformers', 'faiss')\n"
        "print('IMPORTED', sorted(m for m in heavy if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert "usage:" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "IMPORTED []"


def test_committed_rag_yaml_runs_once_its_models_point_at_local_weights(tmp_path, tiny_backbone, tiny_t5, data_dir):
    import index_corpus

    index_corpus.main(
        [
            "--index-dir",
            str(tmp_path / "index"),
            "--corpus",
            str(data_dir / "corpus.jsonl"),
            "--model",
            str(tiny_backbone),
        ]
    )
    data = Pipeline.loads((EXAMPLES / "pipelines" / "rag_fid.yaml").read_text(encoding="utf-8")).to_dict()
    data["components"]["query_embedder"]["init_parameters"]["model"] = str(tiny_backbone)
    data["components"]["reader"]["init_parameters"]["model"] = str(tiny_t5)
    store = data["components"]["retriever"]["init_parameters"]["document_store"]["init_parameters"]
    store["index_path"] = str(tmp_path / "index")
    pipeline = Pipeline.from_dict(data)
    question = "Who wrote the river book?"
    answers = pipeline.run({"query_embedder": {"text": question}, "reader": {"query": question}})["reader"]["answers"]
    assert len(answers) == 1 and answers[0].query == question
    assert {d.id for d in answers[0].documents} <= {r["id"] for r in CORPUS}


@pytest.mark.parametrize("kind", ["fid", "extractive"])
def test_hybrid_example_with_each_reader(data_dir, tiny_backbone, tiny_t5, tiny_extractive_reader, kind, capsys):
    pytest.importorskip("haystack_integrations.components.readers.transformers")
    import hybrid_rag

    reader = tiny_t5 if kind == "fid" else tiny_extractive_reader
    hybrid_rag.main(
        [
            "--corpus",
            str(data_dir / "corpus.jsonl"),
            "--model",
            str(tiny_backbone),
            "--top-k",
            "3",
            "--reader",
            str(reader),
            "--reader-kind",
            kind,
            "--question",
            "What grazes on the hills?",
        ]
    )
    out = capsys.readouterr().out
    assert "Q: What grazes on the hills?" in out
    assert out.count("] ") >= 3  # three fused documents, each with its RRF score


@pytest.mark.parametrize("fusion", ["rrf", "convex"])
def test_hybrid_fuses_both_retrievers(data_dir, tiny_backbone, fusion):
    import hybrid_rag
    from common import read_corpus

    documents = read_corpus(data_dir / "corpus.jsonl")
    bm25_store, dense_store = hybrid_rag.build_stores(documents, str(tiny_backbone))
    question = "Who wrote the river book?"

    def fused(bm25_weight):
        pipeline = hybrid_rag.hybrid_pipeline(
            bm25_store, dense_store, str(tiny_backbone), top_k=4, fusion=fusion, bm25_weight=bm25_weight
        )
        result = hybrid_rag.run(pipeline, question)
        return [d.id for d in result["joiner"]["documents"]], result

    ids, result = fused(0.5)
    assert len(ids) == 4 and len(set(ids)) == 4
    assert set(ids) <= {d.id for d in result["bm25"]["documents"] + result["dense"]["documents"]}
    # the weights reach the right inputs: all on BM25 gives BM25's ranking, none gives the dense one
    bm25_only, result = fused(1.0)
    assert bm25_only[:2] == [d.id for d in result["bm25"]["documents"]][:2] and bm25_only[0] == "river#0"
    dense_only, result = fused(0.0)
    assert dense_only[:2] == [d.id for d in result["dense"]["documents"]][:2]


def test_hybrid_extractive_without_its_extra_is_one_line_before_indexing(data_dir, tiny_backbone, monkeypatch):
    import hybrid_rag

    monkeypatch.setattr(hybrid_rag, "extractive_reader_installed", lambda: False)
    monkeypatch.setattr(hybrid_rag, "build_stores", lambda *a: pytest.fail("indexed before the reader check"))
    argv = ["--corpus", str(data_dir / "corpus.jsonl"), "--model", str(tiny_backbone), "--reader-kind", "extractive"]
    with pytest.raises(SystemExit) as exit_info:
        hybrid_rag.main([*argv, "--reader", "deepset/roberta-base-squad2"])
    assert str(exit_info.value.code) == (
        "--reader-kind extractive needs transformers-haystack's TransformersExtractiveReader: "
        'pip install "haystack-mvr[readers]"'
    )


@pytest.mark.parametrize("kind", ["fid", "extractive"])
def test_hybrid_reader_offline_is_one_line_before_indexing(data_dir, tiny_backbone, monkeypatch, kind):
    import hybrid_rag

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hybrid_rag, "extractive_reader_installed", lambda: True)
    monkeypatch.setattr(hybrid_rag, "build_stores", lambda *a: pytest.fail("indexed before the reader check"))
    argv = ["--corpus", str(data_dir / "corpus.jsonl"), "--model", str(tiny_backbone), "--reader-kind", kind]
    with pytest.raises(SystemExit) as exit_info:
        hybrid_rag.main([*argv, "--reader", "deepset/roberta-base-squad2"])
    message = str(exit_info.value.code)
    assert (
        message.startswith("Model 'deepset/roberta-base-squad2' is not a local folder") and "HF_HUB_OFFLINE" in message
    )


def test_train_and_plug_trains_the_readme_snippet_recipe(tmp_path, data_dir, tiny_backbone, capsys):
    import train_and_plug

    from haystack_mvr.training.st_training import is_multi_vector_folder

    assert train_and_plug.build_parser().get_default("mode") == "snippet"
    argv = ["--output-dir", str(tmp_path / "run"), "--data-dir", str(data_dir), "--model", str(tiny_backbone)]
    train_and_plug.main([*argv, "--max-steps", "2", "--batch-size", "2", "--question", "Who wrote the river book?"])
    out = capsys.readouterr().out
    assert "Trained checkpoint" in out and "matched view" in out
    assert is_multi_vector_folder(tmp_path / "run")
    arguments = json.loads((tmp_path / "run" / "training_args.json").read_text())
    assert arguments["mode"] == "snippet" and arguments["normalize"] is True and arguments["temperature"] == 0.05
    assert arguments["embed_title"] is True
    modules = (tmp_path / "run" / "modules.json").read_text()
    assert "SnippetViews" in modules


def test_train_and_plug(tmp_path, data_dir, tiny_backbone, capsys):
    import train_and_plug

    train_and_plug.main(
        [
            "--output-dir",
            str(tmp_path / "run"),
            "--data-dir",
            str(data_dir),
            "--model",
            str(tiny_backbone),
            "--mode",
            "camvr",
            "--num-views",
            "2",
            "--max-steps",
            "2",
            "--batch-size",
            "2",
            "--question",
            "Who wrote the river book?",
        ]
    )
    out = capsys.readouterr().out
    assert "Trained checkpoint" in out and "matched view" in out
    assert (tmp_path / "run" / "modules.json").exists()  # a sentence-transformers MultiVectorEncoder folder


def test_a_prompt_builder_can_quote_the_matched_snippets(data_dir, tiny_backbone):
    """The README's generator recipe: a ChatPromptBuilder template reads meta['mvr_matched_text']."""
    from common import read_corpus
    from haystack.components.builders import ChatPromptBuilder
    from haystack.dataclasses import ChatMessage
    from index_corpus import indexing_pipeline

    from haystack_mvr.components.embedders import MultiViewTextEmbedder
    from haystack_mvr.components.retrievers import MultiViewRetriever
    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore

    store = FaissMultiViewDocumentStore()
    indexing_pipeline(str(tiny_backbone), store).run(
        {"embedder": {"documents": read_corpus(data_dir / "corpus.jsonl")}}
    )
    template = [
        ChatMessage.from_user(
            "{% for d in documents %}- {{ d.meta['mvr_matched_text'] or d.content }}\n{% endfor %}Question: {{ query }}"
        )
    ]
    pipeline = Pipeline()
    pipeline.add_component("query_embedder", MultiViewTextEmbedder(model=str(tiny_backbone)))
    pipeline.add_component("retriever", MultiViewRetriever(document_store=store, top_k=2))
    pipeline.add_component("prompt", ChatPromptBuilder(template=template, required_variables=["query", "documents"]))
    pipeline.connect("query_embedder.embedding", "retriever.query_embedding")
    pipeline.connect("retriever.documents", "prompt.documents")
    question = "Who wrote the river book?"
    result = pipeline.run(
        {"query_embedder": {"text": question}, "prompt": {"query": question}}, include_outputs_from={"retriever"}
    )
    prompt = result["prompt"]["prompt"][0].text
    quoted = [d.meta.get("mvr_matched_text") or d.content for d in result["retriever"]["documents"]]
    assert all(f"- {text}\n" in prompt for text in quoted)
    assert prompt.endswith(f"Question: {question}")


def test_quickstart_caches_its_index_and_shows_a_snippet_for_every_hit(
    tmp_path, data_dir, tiny_backbone, tiny_generative_reader, capsys
):
    import quickstart

    argv = ["--corpus", str(data_dir / "corpus.jsonl"), "--model", str(tiny_backbone), "--top-k", "4"]
    argv += ["--index-dir", str(tmp_path / "index"), "--question", "Who wrote the river book?"]
    argv += ["--reader", str(tiny_generative_reader), "--budget-tokens", "40"]
    quickstart.main(argv)
    first = capsys.readouterr().out
    assert "Indexed 4 documents" in first and "Saved the index" in first
    assert "(global view)" not in first
    hits = [line for line in first.splitlines() if line.strip().startswith(("matched snippet:", "whole paragraph"))]
    assert len(hits) == 4  # every hit shows the text that matched, whole-document matches included
    # then the reader's answer (a random tiny reader: any text) and the pieces it read, each a span of its source
    lines = first.split("Q: ")[1].splitlines()
    assert sum(line.startswith("  Answer: ") for line in lines) == 1
    read = [re.match(r"    read (\S+) \[(\d+):(\d+)\]: ", line) for line in lines if line.startswith("    read ")]
    assert read and all(read)
    texts = {json.loads(line)["id"]: json.loads(line)["text"] for line in (data_dir / "corpus.jsonl").open()}
    assert all(m[1] in texts and 0 <= int(m[2]) < int(m[3]) <= len(texts[m[1]]) for m in read)

    quickstart.main(argv)  # same corpus, model and splitter: loaded, not encoded again
    second = capsys.readouterr().out
    assert "Loaded 4 documents" in second and "Indexed" not in second
    assert second.split("Q: ")[1] == first.split("Q: ")[1]

    changed = data_dir / "corpus2.jsonl"
    changed.write_text(json.dumps(CORPUS[0]) + "\n", encoding="utf-8")
    quickstart.main([*argv[:1], str(changed), *argv[2:]])  # another corpus: encoded again
    assert "Indexed 1 documents" in capsys.readouterr().out


def test_quickstart_without_the_shared_corpus_is_one_line(tmp_path, tiny_backbone):
    import quickstart

    with pytest.raises(SystemExit) as exit_info:
        quickstart.main(["--corpus", str(tmp_path / "missing.jsonl"), "--model", str(tiny_backbone)])
    message = str(exit_info.value.code)
    assert message.startswith(f"No corpus at {tmp_path / 'missing.jsonl'}") and "\n" not in message


def test_rag_fid_without_an_index_is_one_line(tmp_path, tiny_backbone):
    import rag_fid

    with pytest.raises(SystemExit) as exit_info:
        rag_fid.main(["--index-dir", str(tmp_path / "none"), "--model", str(tiny_backbone)])
    assert "python examples/index_corpus.py --index-dir" in str(exit_info.value.code)
    with pytest.raises(SystemExit) as exit_info:  # the committed YAML, pointed at a store that was never built
        rag_fid.main(["--from-yaml", str(EXAMPLES / "pipelines" / "rag_fid.yaml"), "--index-dir", str(tmp_path / "x")])
    assert str(exit_info.value.code).startswith(f"No index at {tmp_path / 'x'}")


def test_train_and_plug_default_question_is_answerable_from_its_default_index():
    """The default question's paragraph is among the first --index-limit paragraphs of the corpus."""
    import train_and_plug
    from common import DEFAULT_DATA, read_corpus

    corpus = DEFAULT_DATA / "squad-mv" / "corpus.jsonl"
    if not corpus.is_file():
        pytest.skip("the shared squad-mv data is not beside this clone")
    parser_defaults = {a.dest: a.default for a in train_and_plug.build_parser()._actions}
    question, limit = parser_defaults["question"], parser_defaults["index_limit"]
    titles = {d.meta["title"] for d in read_corpus(corpus, limit)}
    questions = [json.loads(line) for line in (DEFAULT_DATA / "squad-mv" / "train.jsonl").open(encoding="utf-8")]
    asked = [q for q in questions if q["question"] == question]
    assert asked and asked[0]["title"] in titles


@pytest.mark.parametrize("name", ["indexing.yaml", "rag_fid.yaml"])
def test_committed_yaml_loads_in_a_fresh_process(name):
    """Haystack 3 allowlists haystack_mvr once it is imported, or with allowed_modules; the YAML says so."""
    import subprocess
    import sys

    path = EXAMPLES / "pipelines" / name
    assert "allowed_modules" in path.read_text(encoding="utf-8").split("components:")[0]
    probe = (
        "import sys\nfrom haystack import Pipeline\ntext = open(sys.argv[1]).read()\n"
        "try:\n    Pipeline.loads(text)\nexcept Exception as e:\n    print('refused:', 'allowed_modules' in str(e))\n"
        "Pipeline.loads(text, allowed_modules=['haystack_mvr'])\nprint('loaded')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "HAYSTACK_DESERIALIZATION_ALLOWLIST"}
    result = subprocess.run(
        [sys.executable, "-c", probe, str(path)], capture_output=True, text=True, timeout=300, env=env, check=True
    )
    assert result.stdout.split() == ["refused:", "True", "loaded"]
