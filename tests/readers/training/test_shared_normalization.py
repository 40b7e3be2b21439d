"""Extractive reader training across passages (shared normalization): examples, collator, loss, one command."""

from __future__ import annotations

import json

import pytest
import torch
from haystack import Document
from haystack_integrations.components.readers.transformers import TransformersExtractiveReader

from haystack_mvr.cli.main import main
from haystack_mvr.datasets import DEV_ARTICLES, Passage, Question
from haystack_mvr.readers.training import (
    ReaderTrainingArguments,
    SharedNormalizationCollator,
    passages_with_gold,
    read_retrieved,
    shared_normalization_examples,
    train_extractive_reader,
    training_passages,
    training_questions,
)
from haystack_mvr.readers.training.extractive import _answer_offset
from haystack_mvr.readers.training.shared_normalization import shared_normalization_loss
from tests.conftest import minilm_tokenizer

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def corpus() -> dict[str, Passage]:
    texts = {
        "gold": "The river Vistula flows through Warsaw, the capital of Poland.",
        "mentions": "Boats on the Vistula carry coal.",  # mentions the answer: never a distractor
        "plain": "The Oder flows through Wrocław.",
        "other": "Kraków lies in the south of Poland.",
        "dev": "A dev paragraph about rivers.",
    }
    titles = {"dev": DEV_ARTICLES[0]}
    return {i: Passage(id=i, title=titles.get(i, "Rivers"), text=t) for i, t in texts.items()}


def question() -> Question:
    text = corpus()["gold"].text
    return Question(
        id="q",
        question="Which river flows through Warsaw?",
        answers=["Vistula"],
        positive_id="gold",
        title="Rivers",
        answer_starts=[text.index("Vistula")],
    )


def test_passages_with_gold_drops_dev_articles_and_ensures_the_gold_one():
    passages = corpus()
    assert passages_with_gold(question(), passages, {"q": ["dev", "plain", "other"]}, 2) == ["plain", "gold"]
    assert passages_with_gold(question(), passages, {"q": ["gold", "plain"]}, 2) == ["gold", "plain"]
    assert passages_with_gold(question(), passages, {"q": ["unknown"]}, 3) == ["gold"]
    assert passages_with_gold(question(), passages, None, 3) == ["gold"]
    assert {p.id for p in training_passages(passages)} == {"gold", "mentions", "plain", "other"}


def test_examples_label_the_gold_window_and_skip_distractors_that_mention_the_answer():
    tokenizer = minilm_tokenizer()
    retrieved = {"q": ["mentions", "dev", "plain", "gold", "other"]}
    (example,) = shared_normalization_examples(
        tokenizer, [question()], corpus(), retrieved, 3, max_length=64, stride=16, answer_offset=_answer_offset
    )
    windows = [tokenizer.decode(w, skip_special_tokens=True) for w in example["windows"]]
    assert len(windows) == 3
    assert "coal" not in " ".join(windows) and "dev paragraph" not in " ".join(windows)
    assert "oder" in windows[0] and "vistula" in windows[1] and "krakow" in windows[2]
    gold = example["windows"][example["gold"]]
    assert tokenizer.decode(gold[example["start"] : example["end"] + 1]) == "vistula"
    assert all(example["context"][example["gold"]][t] for t in (example["start"], example["end"]))
    assert not example["context"][0][0]  # [CLS] is no context token


def test_examples_take_the_window_that_holds_the_answer_of_a_long_paragraph():
    tokenizer = minilm_tokenizer()
    text = "Filler words without it. " * 30 + "The river Vistula flows through Warsaw."
    passages = {"gold": Passage(id="gold", title="Rivers", text=text)}
    q = Question(
        id="q", question="Which river?", answers=["Vistula"], positive_id="gold", title="Rivers",
        answer_starts=[text.index("Vistula")],
    )  # fmt: skip
    (example,) = shared_normalization_examples(
        tokenizer, [q], passages, None, 3, max_length=48, stride=16, answer_offset=_answer_offset
    )
    assert len(example["windows"]) == 1
    assert tokenizer.decode(example["windows"][0][example["start"] : example["end"] + 1]) == "vistula"


def test_collator_indexes_the_answer_in_the_flattened_windows():
    tokenizer = minilm_tokenizer()
    examples = shared_normalization_examples(
        tokenizer, [question()], corpus(), {"q": ["plain", "gold"]}, 3, max_length=64, stride=16,
        answer_offset=_answer_offset,
    )  # fmt: skip
    examples.append({**examples[0], "windows": examples[0]["windows"][:1], "context": examples[0]["context"][:1]})
    examples[1]["gold"], examples[1]["start"], examples[1]["end"] = 0, 1, 1  # any in-range label will do here
    batch = SharedNormalizationCollator(tokenizer, num_passages=3)(examples)
    b, k, length = batch["input_ids"].shape
    assert (b, k) == (2, 3) and batch["attention_mask"].shape == batch["context_mask"].shape == (b, k, length)
    flat = batch["input_ids"].reshape(b, -1)
    start, end = batch["start_positions"][0], batch["end_positions"][0]
    assert tokenizer.decode(flat[0, start : end + 1]) == "vistula"
    assert batch["context_mask"][0, 2].sum() == 0 and batch["attention_mask"][0, 2].sum() == 1  # an empty window
    assert batch["context_mask"][1, 1:].sum() == 0


def test_loss_is_one_softmax_over_the_context_tokens_of_all_windows():
    torch.manual_seed(0)
    start, end = torch.randn(2, 3, 5), torch.randn(2, 3, 5)
    mask = torch.rand(2, 3, 5) > 0.3
    mask[0, 1, 2] = mask[0, 2, 4] = mask[1, 0, 0] = mask[1, 2, 1] = True
    s, e = torch.tensor([7, 0]), torch.tensor([14, 11])
    loss = shared_normalization_loss(start, end, mask, s, e)
    expected = []
    for logits, target in ((start, s), (end, e)):
        for b in range(2):
            kept = logits[b].reshape(-1)[mask[b].reshape(-1)]
            position = mask[b].reshape(-1)[: target[b]].sum()
            expected.append(-torch.log_softmax(kept, 0)[position])
    torch.testing.assert_close(loss, (sum(expected[:2]) / 2 + sum(expected[2:]) / 2) / 2)
    # what is not context never counts, whatever its logit
    assert torch.isclose(shared_normalization_loss(start.masked_fill(~mask, 50.0), end, mask, s, e), loss)
    # the order of a question's windows does not matter
    order = torch.tensor([2, 0, 1])  # new window j is old window order[j]
    where = torch.argsort(order)  # old window w is new window where[w]

    def moved(target: torch.Tensor) -> torch.Tensor:
        return where[target // 5] * 5 + target % 5

    permuted = shared_normalization_loss(start[:, order], end[:, order], mask[:, order], moved(s), moved(e))
    torch.testing.assert_close(permuted, loss)


def test_extractive_reader_trains_across_passages_from_one_command(tiny_backbone, squad_mv_dir, tmp_path, capsys):
    retrieved = tmp_path / "retrieved.jsonl"
    common = ["--model", str(tiny_backbone), "--data-dir", str(squad_mv_dir), "--limit", "8", "--num-passages", "3"]
    assert main(["train-reader", "--kind", "extractive", "--output-dir", str(tmp_path / "x"), *common,
                 "--write-bm25-retrieved", str(retrieved)]) == 0  # fmt: skip
    _, passages = training_questions(squad_mv_dir)
    ids = {i for row in read_retrieved(retrieved).values() for i in row}
    assert len(ids) > 3 and not {passages[i].title for i in ids} & set(DEV_ARTICLES)
    capsys.readouterr()
    out = tmp_path / "reader"
    code = main(
        [
            "train-reader", "--kind", "extractive", "--output-dir", str(out), *common, "--retrieved-file",
            str(retrieved), "--max-steps", "2", "--batch-size", "4", "--max-length", "96", "--stride", "16",
            "--threads", "1",
        ]
    )  # fmt: skip
    assert code == 0
    out_text = capsys.readouterr().out
    summary = json.loads(out_text[out_text.rindex("{\n") :])
    assert summary["steps"] == 2 and summary["loss"] == "shared normalization" and summary["num_passages"] == 3
    assert summary["questions"] == 8 and 8 < summary["windows"] <= 24
    reader = TransformersExtractiveReader(model=out, top_k=1, no_answer=False)
    reader.warm_up()
    doc = Document(content="The river Vistula flows through Warsaw, the capital of Poland.")
    answer = reader.run(query="Which river flows through Warsaw?", documents=[doc])["answers"][0]
    assert answer.data and answer.data in doc.content


RIVERS = {"London": "Thames", "Paris": "Seine", "Vienna": "Danube", "Cologne": "Rhine", "Cairo": "Nile"}


def write_rivers_data(folder) -> None:
    """A squad-mv-shaped data folder: one passage per city ("The river R flows through C.") and its question."""
    folder.mkdir()
    corpus, questions = [], []
    for city, river in RIVERS.items():
        text = f"The river {river} flows through {city}."
        corpus.append({"id": city, "title": "Rivers", "text": text})
        questions.append(
            {
                "id": city, "question": f"Which river flows through {city}?", "answers": [river],
                "answer_starts": [text.index(river)], "positive_id": city, "title": "Rivers",
            }
        )  # fmt: skip
    for name, rows in (("corpus.jsonl", corpus), ("train.jsonl", questions)):
        (folder / name).write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def test_shared_normalization_teaches_which_passage_holds_the_answer(trainable_backbone, tmp_path):
    """
    Every passage has a river right after "river": read alone, "the word after river" answers every question, and
    a reader trained on gold paragraphs alone picks among the passages it is given by chance. Trained with the other
    cities' passages as distractors in one softmax, it must match the city, and Haystack's reader then picks the
    gold passage's river (5 of 5; trained on the gold passages alone the same way, it got 3 of 5).
    """
    data = tmp_path / "rivers"
    write_rivers_data(data)
    retrieved = tmp_path / "retrieved.jsonl"
    cities = list(RIVERS)
    with retrieved.open("w", encoding="utf-8") as f:
        for n, city in enumerate(cities):
            f.write(json.dumps({"id": city, "passages": [cities[n - 1], cities[n - 2]]}) + "\n")
    args = ReaderTrainingArguments(
        kind="extractive", model=str(trainable_backbone), output_dir=tmp_path / "reader", data_dir=data,
        retrieved_file=retrieved, num_passages=3, max_steps=120, batch_size=5, learning_rate=5e-3, max_length=64,
        stride=16, threads=1, logging_steps=1000,
    )  # fmt: skip
    train_extractive_reader(args)
    reader = TransformersExtractiveReader(
        model=tmp_path / "reader", top_k=1, no_answer=False, max_seq_length=64, stride=16
    )
    right = 0
    for n, city in enumerate(cities):
        docs = [Document(content=f"The river {RIVERS[c]} flows through {c}.") for c in (cities[n - 1], cities[n - 2])]
        docs.insert(n % 3, Document(content=f"The river {RIVERS[city]} flows through {city}."))
        answer = reader.run(query=f"Which river flows through {city}?", documents=docs)["answers"][0]
        right += answer.data.strip() == RIVERS[city]
    assert right == len(cities)
