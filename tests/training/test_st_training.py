"""`haystack-mvr train --mode snippet` through sentence-transformers: arguments, datasets, the CLI, resume."""

import json

import pytest
import sentence_transformers as st

from haystack_mvr.datasets.squad_mv import Passage
from haystack_mvr.training.arguments import TrainingArguments
from haystack_mvr.training.data import TrainingExample
from haystack_mvr.training.st_training import (
    build_training_arguments,
    is_multi_vector_folder,
    load_model,
)

BASE = {"model": "m", "data_dir": "d", "output_dir": "o", "mode": "snippet"}
WORDS = ["cat", "dog", "horse", "river", "mountain", "piano", "guitar", "apple", "banana", "train", "ship", "castle"]


def toy_squad_mv(directory):
    directory.mkdir()
    with (directory / "corpus.jsonl").open("w") as f:
        for w in WORDS:
            f.write(json.dumps({"id": f"{w}#0", "title": w.title(), "text": f"The {w} is here. A {w} again."}) + "\n")
    with (directory / "train.jsonl").open("w") as f:
        for i, w in enumerate(WORDS):
            f.write(
                json.dumps(
                    {
                        "id": f"q{i}",
                        "question": f"where is the {w}?",
                        "answers": [w],
                        "answer_starts": [4],
                        "positive_id": f"{w}#0",
                        "title": w.title(),
                    }
                )
                + "\n"
            )
    return directory


def test_our_arguments_become_sentence_transformers_arguments():
    args = TrainingArguments(
        **BASE,
        epochs=3,
        batch_size=16,
        grad_accumulation=2,
        lr=1e-5,
        warmup_steps=7,
        precision="fp32",
        gradient_checkpointing=True,
        save_every=50,
        save_total_limit=0,
        query_max_length=32,
        doc_max_length=200,
        device="cpu",
        progress_bar=False,
    )
    st_args = build_training_arguments(args)
    assert (st_args.num_train_epochs, st_args.per_device_train_batch_size, st_args.gradient_accumulation_steps) == (
        3,
        16,
        2,
    )
    assert (st_args.learning_rate, st_args.warmup_steps, st_args.max_grad_norm, st_args.seed) == (1e-5, 7, 2.0, 42)
    assert getattr(st_args, "activation_checkpointing", st_args.gradient_checkpointing)
    assert not st_args.bf16 and st_args.use_cpu and st_args.disable_tqdm
    assert (st_args.save_strategy, st_args.save_steps, st_args.save_total_limit) == ("steps", 50, None)
    assert st_args.max_length == {"query": 32, "document": 200}
    assert st_args.batch_sampler == "no_duplicates"  # a paragraph is never its own question's in-batch negative
    assert build_training_arguments(TrainingArguments(**BASE, max_steps=5)).max_steps == 5
    defaults = build_training_arguments(TrainingArguments(**BASE))
    assert defaults.warmup_steps == 0.1 or defaults.warmup_ratio == 0.1  # transformers 5 takes the ratio as a float
    assert build_training_arguments(TrainingArguments(**BASE), save_strategy="no").save_strategy == "no"
    with pytest.raises(ValueError, match="CUDA_VISIBLE_DEVICES"):
        build_training_arguments(TrainingArguments(**BASE, device="cuda:1"))


def test_snippet_mode_rejects_viewer_options():
    with pytest.raises(ValueError, match="no viewer tokens"):
        TrainingArguments(**BASE, viewer_position=1)
    TrainingArguments(**BASE, loss="answer-view")  # snippets have answer views


def passage(pid, text, title=""):
    return Passage(id=pid, title=title, text=text)


def test_the_dataset_has_negative_columns_and_the_answer_view():
    datasets = pytest.importorskip("datasets")
    from haystack_mvr.training.st_dataset import answer_view_of, build_st_dataset

    corpus = [passage(f"c{i}", f"Filler passage number {i}.") for i in range(6)] + [passage("x", "Paris is nice.")]
    examples = [
        TrainingExample(
            "q0",
            "capital of france?",
            passage("p0", "France is in Europe. Paris is its capital. It is large.", "France"),
            answers=("Paris",),
            answer_start=21,
            hard_negatives=(passage("h0", "Berlin is the capital of Germany."),),
        ),
        TrainingExample("q1", "unknown", passage("p1", "One. Two."), hard_negatives=()),
    ]
    in_batch = build_st_dataset(examples, num_negatives=0)
    assert isinstance(in_batch, datasets.Dataset) and in_batch.column_names == ["query", "positive"]

    dataset = build_st_dataset(examples, num_negatives=2, corpus=corpus, num_snippets=3, embed_title=True)
    assert dataset.column_names == ["query", "positive", "negative_1", "negative_2", "answer_view"]
    first = dataset[0]
    assert first["positive"].startswith("France\n") and first["answer_view"] == 2  # the second sentence's snippet
    assert "Berlin is the capital of Germany." in (first["negative_1"], first["negative_2"])  # its pool first
    for row in dataset:
        assert "Paris" not in row["negative_1"] + row["negative_2"]  # never a passage holding an answer
    assert dataset[1]["answer_view"] == -1  # no answer offset
    assert build_st_dataset(examples, num_negatives=2, corpus=corpus, seed=1)["negative_2"] != []
    assert (
        build_st_dataset(examples, num_negatives=2, corpus=corpus).to_dict()
        == build_st_dataset(examples, num_negatives=2, corpus=corpus).to_dict()
    )  # seeded
    assert len(build_st_dataset(examples, num_negatives=1)) == 1  # q1 has no negative and no corpus: dropped
    with pytest.raises(ValueError, match="lower num_negatives"):
        build_st_dataset(examples[1:], num_negatives=1)
    assert answer_view_of("A one. B two. C three.", 8, 3) == 2
    assert answer_view_of("A one. B two. C three.", 8, 3, first_snippet_view=0) == 1
    assert answer_view_of("A one.", None, 3) == -1


def snippet_argv(backbone, data, out, *extra):
    return [
        "train",
        "--mode",
        "snippet",
        "--model",
        str(backbone),
        "--num-views",
        "3",
        "--data-dir",
        str(data),
        "--output-dir",
        str(out),
        "--max-examples",
        "12",
        "--batch-size",
        "4",
        "--doc-max-length",
        "64",
        "--query-max-length",
        "16",
        "--bm25-depth",
        "20",
        "--log-every",
        "1",
        "--device",
        "cpu",
        "--no-progress-bar",
        *extra,
    ]


def test_train_snippet_mode_from_the_cli_with_bm25_then_mined_negatives(trainable_backbone, squad_mv_dir, tmp_path):
    pytest.importorskip("datasets")
    from tests.training.test_api import parser

    out = tmp_path / "snippet"
    argv = snippet_argv(trainable_backbone, squad_mv_dir, out, "--num-bm25-negatives", "2", "--loss", "answer-view")
    ns = parser().parse_args(argv)
    assert ns.handler(ns) == 0
    model = st.MultiVectorEncoder(str(out), device="cpu", trust_remote_code=True)
    assert [type(m).__name__ for m in model] == ["SnippetTransformer", "SnippetViews"]
    assert model.encode_document(["One sentence. Another one."])[0].shape[0] == 3  # whole text + 2 snippets
    state = json.loads(next(out.glob("checkpoint-*/trainer_state.json")).read_text())
    logged = [h for h in state["log_history"] if "loss" in h]
    assert len(logged) == 3 and all("answer_view_loss" in h and h["temperature"] == 1.0 for h in logged)
    # the view diagnostics: each positive is won by one of its at most 4 views (whole text + 3 snippets); the first
    # squad-mv questions share paragraphs, which the no-duplicates sampler keeps out of one batch (batches shrink)
    assert all(len(h["view_wins"]) <= 4 and 1 <= sum(h["view_wins"]) <= 4 for h in logged)
    assert any(0 <= h.get("answer_view_agreement", -1) <= 1 for h in logged)  # squad-mv gives answer views
    assert json.loads((out / "training_args.json").read_text())["loss"] == "answer-view"
    assert len((out / "train_log.jsonl").read_text().splitlines()) == 3
    assert (out / "train_plot.png").stat().st_size > 1000

    # Round two: mine dense negatives with the trained folder, train again with them as negative columns.
    negatives = tmp_path / "negatives.jsonl"
    mine = ["mine-negatives", "--model", str(out), "--data-dir", str(squad_mv_dir), "--output", str(negatives)]
    ns = parser().parse_args([*mine, "--max-examples", "12", "--num-negatives", "2", "--depth", "10"])
    assert ns.handler(ns) == 0
    again = snippet_argv(trainable_backbone, squad_mv_dir, tmp_path / "round-two", "--num-bm25-negatives", "0")
    mined = ["--negatives-file", str(negatives), "--num-hard-negatives", "2", "--max-steps", "1"]
    ns = parser().parse_args([*again, *mined])
    assert ns.handler(ns) == 0
    assert (tmp_path / "round-two" / "modules.json").is_file()
    # MVR's global-local loss (the default) counts the answer views too: the diagnostic of every snippet model
    last = json.loads((tmp_path / "round-two" / "train_log.jsonl").read_text().splitlines()[-1])
    assert "global_loss" in last and 0 <= last["answer_view_agreement"] <= 1
    assert is_multi_vector_folder(out) and not is_multi_vector_folder(trainable_backbone)
    with pytest.raises(ValueError, match="num_views 3, not 5"):  # a saved folder keeps its own number of views
        load_model(TrainingArguments(**{**BASE, "model": str(out)}, num_views=5))


def test_resume_latest_continues_from_the_last_checkpoint(trainable_backbone, squad_mv_dir, tmp_path):
    pytest.importorskip("datasets")
    from haystack_mvr.training import train

    common = {
        "model": str(trainable_backbone),
        "mode": "snippet",
        "num_views": 2,
        "data_dir": str(squad_mv_dir),
        "output_dir": str(tmp_path),
        "max_examples": 8,
        "batch_size": 4,
        "doc_max_length": 32,
        "num_bm25_negatives": 0,
        "num_hard_negatives": 0,
        "progress_bar": False,
        "save_every": 1,
        "log_every": 1,
        "device": "cpu",
    }
    train(TrainingArguments(**common, max_steps=1))
    train(TrainingArguments(**common, max_steps=2, resume_from="latest"))
    state = json.loads((tmp_path / "checkpoint-2" / "trainer_state.json").read_text())
    assert [h["step"] for h in state["log_history"] if "loss" in h] == [1, 2]  # step 1 was not trained again


def test_gradcache_and_bf16_through_build_trainer(trainable_backbone, tmp_path):
    """The library's GradCache loss (Eq. 6 at lambda 0) in our trainer, annealed; bf16 autocast on the CPU."""
    datasets = pytest.importorskip("datasets")
    from sentence_transformers.multi_vector_encoder.losses import CachedMultiVectorMultipleNegativesRankingLoss

    from haystack_mvr.modeling.encoder_builders import snippet_encoder
    from haystack_mvr.training.st_training import build_trainer

    model = snippet_encoder(trainable_backbone, num_snippets=2)
    words = ["cat", "dog", "horse", "river", "piano", "apple", "ship", "castle"]
    dataset = datasets.Dataset.from_dict(
        {"query": [f"where is the {w}?" for w in words], "positive": [f"The {w} is here. A {w} again." for w in words]}
    )
    args = TrainingArguments(
        **{**BASE, "output_dir": str(tmp_path)}, batch_size=8, epochs=2, lr=1e-3, precision="bf16", device="cpu"
    )
    loss = CachedMultiVectorMultipleNegativesRankingLoss(model, mini_batch_size=2)
    trainer = build_trainer(model, args, dataset, loss=loss, save_strategy="no", logging_steps=1)
    assert trainer.args.bf16
    trainer.train()
    logged = [h for h in trainer.state.log_history if "loss" in h]
    assert [h["temperature"] for h in logged] == [1.0, pytest.approx(0.9048, abs=1e-4)]
    assert loss.scale == pytest.approx(1 / 0.9048, abs=1e-3)
    assert "view_wins" not in logged[0]  # the library's loss keeps no view statistics


# About 10 s on 2 CPU cores (two processes each load torch, transformers and the model): in the default run.
def test_ddp_under_torchrun_gathers_and_counts_both_processes(trainable_backbone, tmp_path):
    """`torchrun --nproc-per-node 2 ... train --mode snippet` on the CPU (gloo): transformers runs the DDP."""
    pytest.importorskip("datasets")
    from tests.training.conftest import torchrun

    data = toy_squad_mv(tmp_path / "toy")  # 12 questions on 12 passages
    out = tmp_path / "ddp"
    argv = snippet_argv(trainable_backbone, data, out, "--num-bm25-negatives", "0", "--num-hard-negatives", "0")
    argv[argv.index("--batch-size") + 1] = "2"
    argv[argv.index("--num-views") + 1] = "2"
    done = torchrun("-m", "haystack_mvr.cli.main", *argv)
    assert done.returncode == 0, done.stderr[-3000:]
    logged = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    # 12 questions / (2 processes x 2) = 3 steps; each step's positives of both processes are counted
    assert [h["step"] for h in logged] == [1, 2, 3]
    assert all(sum(h["view_wins"]) == 4 for h in logged)
    assert st.MultiVectorEncoder(str(out), device="cpu", trust_remote_code=True) is not None
