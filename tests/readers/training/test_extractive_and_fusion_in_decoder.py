"""Reader training (extractive span head, bert2bert Fusion-in-Decoder): tiny random models, a few Trainer steps."""

from __future__ import annotations

import json

import pytest
import torch
from haystack import Document
from haystack_integrations.components.readers.transformers import TransformersExtractiveReader
from transformers import AutoTokenizer, BertModel, EncoderDecoderModel

from haystack_mvr.cli.main import main
from haystack_mvr.components.readers import FusionInDecoderReader
from haystack_mvr.datasets import DEV_ARTICLES, Passage, Question
from haystack_mvr.readers.fusion_in_decoder_model import encode_passages, fused_encoder_outputs
from haystack_mvr.readers.training import (
    FusionInDecoderCollator,
    ReaderTrainingArguments,
    bert2bert,
    extractive_features,
    fid_examples,
    train_extractive_reader,
    train_fid_reader,
    training_questions,
)
from haystack_mvr.readers.training.budget_callback import WallClockBudgetCallback
from haystack_mvr.readers.training.fusion_in_decoder import FusionInDecoderTrainer, fresh_parameter_names
from haystack_mvr.readers.training.fusion_in_decoder_data import (
    PassageStatesCollator,
    answer_window_text,
    passage_states,
)
from haystack_mvr.readers.training.trainer_setup import trainer_settings
from tests.conftest import build_tiny_backbone, minilm_tokenizer, shared_data_dir

SQUAD_MV = shared_data_dir() / "squad-mv"
needs_data = pytest.mark.skipif(not (SQUAD_MV / "train.jsonl").exists(), reason="the shared squad-mv data is absent")


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def printed_summary(out: str) -> dict:
    """The JSON summary the command prints last (the Trainer prints its own log lines before it)."""
    return json.loads(out[out.rindex("{\n") :])


def test_extractive_features_label_the_answer_tokens():
    tokenizer = minilm_tokenizer()
    context = "The river Vistula flows through Warsaw. " + "Other words fill this long paragraph. " * 20
    start = context.index("Vistula")
    features = extractive_features(
        tokenizer, ["Which river?"], [context], [start], ["Vistula"], max_length=48, stride=16
    )
    assert len(features) > 1  # the paragraph is cut into windows
    first = features[0]
    span = first["input_ids"][first["start_positions"] : first["end_positions"] + 1]
    assert tokenizer.decode(span) == "vistula"
    assert "token_type_ids" not in first  # Haystack's reader never passes them
    assert all(f["start_positions"] == f["end_positions"] == 0 for f in features[2:])  # windows without it: [CLS]


@needs_data
def test_training_questions_never_come_from_dev_articles():
    questions, passages = training_questions(SQUAD_MV)
    assert questions
    assert not {q.title for q in questions} & set(DEV_ARTICLES)
    assert all(q.positive_id in passages for q in questions)


def test_fid_examples_always_hold_the_gold_passage():
    passages = {i: Passage(id=i, title=f"T{i}", text=f"text {i}") for i in "abcd"}
    q = Question(id="q", question="who?", answers=["x"], positive_id="d", title="T")
    missed = fid_examples([q], passages, {"q": ["a", "b", "c"]}, k=3)[0]["texts"]
    assert len(missed) == 3
    assert missed[-1].endswith("context: text d")
    assert missed[0].endswith("context: text a")
    found = fid_examples([q], passages, {"q": ["d", "a", "b"]}, k=2)[0]["texts"]
    assert [t[-1] for t in found] == ["d", "a"]
    assert fid_examples([q], passages, None, k=3)[0]["texts"] == ["question: who? title: Td context: text d"]


def test_answer_window_keeps_the_answer_from_a_sentence_start():
    text = "First sentence here. Second one is long. The answer is Warsaw, said he. Tail text goes on and on."
    start = text.index("Warsaw")
    assert answer_window_text(text, start, "Warsaw", None) == text
    assert answer_window_text(text, start, "Warsaw", len(text)) == text
    assert answer_window_text(text, start, "Warsaw", 70) == text[:70]  # the answer ends within 70: paragraph start
    assert answer_window_text(text, start, "Warsaw", 40) == "Second one is long. The answer is Warsaw"  # earliest
    cut = answer_window_text(text, start, "Warsaw", 30)
    assert cut.startswith("The answer is Warsaw") and len(cut) == 30
    assert answer_window_text(text, start, "Warsaw", 10) == text[start : start + 10]  # no sentence start fits
    assert answer_window_text(text, None, "Warsaw", 10) == text


def test_fid_examples_cut_only_the_gold_passage_to_the_answer_window():
    long = "Intro words. " * 10 + "Here is Warsaw."
    passages = {"d": Passage(id="d", title="T", text=long), "a": Passage(id="a", title="T", text=long)}
    q = Question(
        id="q", question="who?", answers=["Warsaw"], positive_id="d", title="T", answer_starts=[long.index("Warsaw")]
    )
    texts = fid_examples([q], passages, {"q": ["a", "d"]}, k=2, answer_window=20)[0]["texts"]
    assert texts[0].endswith(long)  # a retrieved negative stays whole
    assert texts[1].endswith("context: Here is Warsaw.")


def test_fid_trainer_gives_the_fresh_layers_their_own_learning_rate(tiny_backbone, tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_backbone)
    model = bert2bert(str(tiny_backbone), tokenizer)
    fresh = fresh_parameter_names(model)
    assert fresh and all(n.startswith("decoder.") for n in fresh)
    assert any(".crossattention." in n for n in fresh) and not any(n.startswith("encoder.") for n in fresh)
    args = ReaderTrainingArguments(kind="fid", model=str(tiny_backbone), output_dir=tmp_path, learning_rate=1e-4)
    training_args, _ = trainer_settings(args)
    plain = FusionInDecoderTrainer(model=model, args=training_args, train_dataset=[{}]).create_optimizer()
    assert {g["lr"] for g in plain.param_groups} == {1e-4}  # the Trainer's own optimizer
    trainer = FusionInDecoderTrainer(model=model, args=training_args, train_dataset=[{}], fresh_learning_rate=1e-3)
    optimizer = trainer.create_optimizer()
    assert type(optimizer) is type(plain)
    by_id = {id(p): n for n, p in model.named_parameters()}
    decay = set(trainer.get_decay_parameter_names(model))
    for group in optimizer.param_groups:
        names = {by_id[id(p)] for p in group["params"]}
        assert group["lr"] == (1e-3 if names <= fresh else 1e-4)
        assert names <= fresh or not names & fresh
        assert group["weight_decay"] == (0.01 if names <= decay else 0.0)
        assert names <= decay or not names & decay
    assert sum(len(g["params"]) for g in optimizer.param_groups) == len(list(model.parameters()))
    model.get_encoder().requires_grad_(False)  # a frozen encoder is left out
    trainer = FusionInDecoderTrainer(model=model, args=training_args, train_dataset=[{}], fresh_learning_rate=1e-3)
    optimized = {id(p) for g in trainer.create_optimizer().param_groups for p in g["params"]}
    assert optimized == {id(p) for p in model.parameters() if p.requires_grad} and optimized


def test_bert2bert_encoder_and_decoder_layers_can_differ(tiny_backbone, tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_backbone)
    other = build_tiny_backbone(tmp_path / "other", seed=1)
    model = bert2bert(str(tiny_backbone), tokenizer, encoder=str(other), decoder_layers=1)
    assert model.config.decoder.num_hidden_layers == 1 and model.config.encoder.num_hidden_layers == 2
    encoder_weights = BertModel.from_pretrained(other).state_dict()
    name = "encoder.layer.1.attention.self.query.weight"
    torch.testing.assert_close(model.encoder.state_dict()[name], encoder_weights[name])
    decoder_weights = BertModel.from_pretrained(tiny_backbone).state_dict()
    torch.testing.assert_close(
        model.decoder.state_dict()["bert.encoder.layer.0.attention.self.query.weight"],
        decoder_weights["encoder.layer.0.attention.self.query.weight"],
    )
    with pytest.raises(ValueError, match="only apply to --kind fid"):
        ReaderTrainingArguments(kind="extractive", model="m", output_dir=tmp_path, freeze_encoder=True)
    with pytest.raises(ValueError, match="decoder_layers"):
        ReaderTrainingArguments(kind="fid", model="m", output_dir=tmp_path, decoder_layers=0)


def test_passage_states_are_the_fused_states_of_each_question(tiny_backbone):
    tokenizer = AutoTokenizer.from_pretrained(tiny_backbone)
    model = bert2bert(str(tiny_backbone), tokenizer)
    collator = FusionInDecoderCollator(tokenizer, num_passages=2, max_length=32)
    examples = [
        {"texts": ["question: who? context: a short one", "question: who? context: a longer passage of words"],
         "answer": "a"},
        {"texts": ["question: where? context: only one passage"], "answer": "b c"},
    ]  # fmt: skip
    model.train()  # as the Trainer finds it: the states are computed without dropout all the same
    cached = passage_states(model, collator, examples, batch_size=1)
    assert model.training  # the model is left as it was found
    model.eval()
    for example, row in zip(examples, cached, strict=True):
        alone = torch.cat(encode_passages(model, tokenizer, example["texts"], max_length=32))
        torch.testing.assert_close(row["states"].float(), alone, atol=2e-3, rtol=2e-3)  # float16 storage
        assert row["answer"] == example["answer"]
    batch = PassageStatesCollator(tokenizer, max_answer_length=4)(cached)
    n = max(row["states"].shape[0] for row in cached)
    assert batch["encoder_hidden_states"].shape == (2, n, model.config.encoder.hidden_size)
    assert batch["attention_mask"].sum(dim=1).tolist() == [row["states"].shape[0] for row in cached]
    assert (
        batch["labels"].tolist()
        == FusionInDecoderCollator(tokenizer, 2, max_answer_length=4)(examples)["labels"].tolist()
    )


def test_bert2bert_cross_attention_can_start_from_self_attention(tiny_backbone):
    tokenizer = AutoTokenizer.from_pretrained(tiny_backbone)
    torch.manual_seed(0)
    copied = bert2bert(str(tiny_backbone), tokenizer, cross_attention_init="self_attention")
    layers = [m for m in copied.decoder.modules() if hasattr(m, "crossattention")]
    assert layers
    for layer in layers:
        for name, value in layer.attention.state_dict().items():
            torch.testing.assert_close(layer.crossattention.state_dict()[name], value)
    torch.manual_seed(0)
    fresh = bert2bert(str(tiny_backbone), tokenizer)
    first = next(m for m in fresh.decoder.modules() if hasattr(m, "crossattention"))
    assert not torch.equal(first.crossattention.self.query.weight, first.attention.self.query.weight)
    with pytest.raises(ValueError, match="cross_attention_init"):
        bert2bert(str(tiny_backbone), tokenizer, cross_attention_init="copy")
    with pytest.raises(ValueError, match="cross_attention_init"):
        ReaderTrainingArguments(kind="fid", model="m", output_dir="o", cross_attention_init="copy")


def test_fid_collator_shapes_and_labels():
    tokenizer = minilm_tokenizer()
    collator = FusionInDecoderCollator(tokenizer, num_passages=3, max_length=16, max_answer_length=4)
    batch = collator(
        [
            {"texts": ["question: a context: b", "question: a context: c d e"], "answer": "Warsaw"},
            {"texts": ["q1", "q2", "q3"], "answer": "the long answer of many words"},
        ]
    )
    assert batch["input_ids"].shape[:2] == (2, 3)
    assert batch["attention_mask"][0, 2].sum() == 1  # the missing third passage is masked but for [CLS]
    labels = batch["labels"]
    assert labels.shape == (2, 4)
    assert labels[0, 1] == tokenizer.sep_token_id and (labels[0, 2:] == -100).all()
    assert labels[1, 3] == tokenizer.sep_token_id  # cut to max_answer_length, still ended


def test_fused_encoder_outputs_match_passages_encoded_alone(tiny_backbone):
    tokenizer = AutoTokenizer.from_pretrained(tiny_backbone)
    model = EncoderDecoderModel.from_encoder_decoder_pretrained(str(tiny_backbone), str(tiny_backbone)).eval()
    texts = ["question: who? context: a short one", "question: who? context: a much longer passage of many words"]
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    hidden, mask = fused_encoder_outputs(model, batch["input_ids"][None], batch["attention_mask"][None])
    assert hidden.shape[:2] == mask.shape == (1, batch["input_ids"].numel())
    alone = torch.cat(encode_passages(model, tokenizer, texts))
    torch.testing.assert_close(hidden[0][mask[0].bool()], alone, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match=r"\(B, k, L\)"):
        fused_encoder_outputs(model, batch["input_ids"], batch["attention_mask"])


def test_budget_callback_stops_training():
    callback = WallClockBudgetCallback(minutes=1e-9)

    class Control:
        should_training_stop = False

    control = Control()
    callback.on_train_begin(None, None, control)
    callback.on_step_end(None, None, control)
    assert control.should_training_stop and callback.stopped_early
    with pytest.raises(ValueError, match="positive"):
        WallClockBudgetCallback(minutes=0)


def test_arguments_reject_unknown_kind_and_bad_stride(tmp_path):
    with pytest.raises(ValueError, match="kind"):
        ReaderTrainingArguments(kind="abstractive", model="m", output_dir=tmp_path)
    with pytest.raises(ValueError, match="stride"):
        ReaderTrainingArguments(kind="extractive", model="m", output_dir=tmp_path, max_length=64, stride=32)


@needs_data
def test_extractive_reader_trains_from_one_command_and_answers_in_haystack(tiny_backbone, tmp_path, capsys):
    out = tmp_path / "extractive"
    code = main(
        [
            "train-reader", "--kind", "extractive", "--model", str(tiny_backbone), "--output-dir", str(out),
            "--data-dir", str(SQUAD_MV), "--limit", "8", "--max-steps", "2", "--batch-size", "4",
            "--max-length", "96", "--stride", "16", "--threads", "1",
        ]
    )  # fmt: skip
    assert code == 0
    summary = printed_summary(capsys.readouterr().out)
    assert summary["steps"] == 2 and summary["kind"] == "extractive"
    reader = TransformersExtractiveReader(model=out, top_k=1, no_answer=False)
    reader.warm_up()
    doc = Document(content="The river Vistula flows through Warsaw, the capital of Poland.")
    answer = reader.run(query="Which river flows through Warsaw?", documents=[doc])["answers"][0]
    assert answer.data and answer.data in doc.content
    assert answer.document.id == doc.id


@needs_data
def test_extractive_reader_learns_a_span(tiny_backbone, tmp_path):
    """Overfit one question: the trained head must point at its answer (fails if labels or offsets are wrong)."""
    args = ReaderTrainingArguments(
        kind="extractive", model=str(tiny_backbone), output_dir=tmp_path / "one", data_dir=SQUAD_MV, limit=1,
        max_steps=60, batch_size=1, learning_rate=5e-3, max_length=256, stride=32, threads=1, logging_steps=100,
    )  # fmt: skip
    train_extractive_reader(args)
    question, passages = training_questions(SQUAD_MV, limit=1)
    q, passage = question[0], passages[question[0].positive_id]
    reader = TransformersExtractiveReader(model=tmp_path / "one", top_k=1, no_answer=False, max_seq_length=256)
    answer = reader.run(query=q.question, documents=[Document(content=passage.text)])["answers"][0]
    assert answer.data.strip() in q.answers


@needs_data
def test_fid_reader_trains_from_one_command_and_answers_in_haystack(tiny_backbone, tmp_path, capsys):
    retrieved = tmp_path / "retrieved.jsonl"
    assert main(
        [
            "train-reader", "--kind", "fid", "--model", str(tiny_backbone), "--output-dir", str(tmp_path / "x"),
            "--data-dir", str(SQUAD_MV), "--limit", "8", "--num-passages", "2", "--write-bm25-retrieved",
            str(retrieved),
        ]
    ) == 0  # fmt: skip
    assert len(retrieved.read_text(encoding="utf-8").splitlines()) == 8
    capsys.readouterr()
    out = tmp_path / "fid"
    code = main(
        [
            "train-reader", "--kind", "fid", "--model", str(tiny_backbone), "--output-dir", str(out),
            "--data-dir", str(SQUAD_MV), "--retrieved-file", str(retrieved), "--num-passages", "2", "--limit", "8",
            "--max-steps", "2", "--batch-size", "4", "--max-length", "64", "--threads", "1",
        ]
    )  # fmt: skip
    assert code == 0
    summary = printed_summary(capsys.readouterr().out)
    assert summary["steps"] == 2 and summary["num_passages"] == 2
    reader = FusionInDecoderReader(model=out, max_input_length=64, max_answer_length=4)
    docs = [Document(content="Warsaw lies on the Vistula."), Document(content="Kraków lies on the Vistula too.")]
    answers = reader.run(query="Which river?", documents=docs)["answers"]
    assert len(answers) == 1 and isinstance(answers[0].data, str)
    assert answers[0].meta["log_probability"] <= 0 and answers[0].meta["num_passages"] == 2


@needs_data
def test_fid_reader_trains_further_from_a_saved_reader(tiny_backbone, tmp_path):
    """--model may name a saved FiD reader: its weights are loaded (not a fresh bert2bert) and trained on."""
    common = dict(kind="fid", data_dir=SQUAD_MV, limit=2, max_steps=1, batch_size=2, max_length=32, threads=1)
    train_fid_reader(ReaderTrainingArguments(model=str(tiny_backbone), output_dir=tmp_path / "first", **common))
    summary = train_fid_reader(
        ReaderTrainingArguments(
            model=str(tmp_path / "first"), output_dir=tmp_path / "second", learning_rate=1e-12, **common
        )
    )
    assert summary["steps"] == 1
    first = EncoderDecoderModel.from_pretrained(tmp_path / "first").state_dict()
    second = EncoderDecoderModel.from_pretrained(tmp_path / "second").state_dict()
    name = next(n for n in first if ".crossattention.self.query.weight" in n)  # random in a fresh bert2bert
    torch.testing.assert_close(second[name], first[name], atol=1e-6, rtol=0)


@needs_data
def test_fid_reader_learns_an_answer(tiny_backbone, tmp_path):
    """Overfit one question through the Trainer: the FiD reader must then generate its answer exactly."""
    args = ReaderTrainingArguments(
        kind="fid", model=str(tiny_backbone), output_dir=tmp_path / "one", data_dir=SQUAD_MV, limit=1,
        max_steps=60, batch_size=1, learning_rate=5e-3, max_length=64, threads=1, logging_steps=100,
    )  # fmt: skip
    summary = train_fid_reader(args)
    assert summary["train_loss"] < 8
    question, passages = training_questions(SQUAD_MV, limit=1)
    q, passage = question[0], passages[question[0].positive_id]
    reader = FusionInDecoderReader(model=tmp_path / "one", max_input_length=64, max_answer_length=8)
    doc = Document(content=passage.text, meta={"title": passage.title})
    answer = reader.run(query=q.question, documents=[doc])["answers"][0]
    assert answer.data == q.answers[0].lower()  # the uncased tokenizer lower-cases


@needs_data
def test_fid_reader_with_a_frozen_encoder_learns_an_answer_and_leaves_the_encoder_alone(tiny_backbone, tmp_path):
    """--freeze-encoder: the encoder is the warm start unchanged, and the decoder alone still learns the answer."""
    args = ReaderTrainingArguments(
        kind="fid", model=str(tiny_backbone), output_dir=tmp_path / "one", data_dir=SQUAD_MV, limit=1,
        max_steps=60, batch_size=1, learning_rate=5e-3, max_length=64, threads=1, logging_steps=100,
        freeze_encoder=True, decoder_layers=1,
    )  # fmt: skip
    summary = train_fid_reader(args)
    assert summary["freeze_encoder"] and summary["decoder_layers"] == 1 and summary["train_loss"] < 8
    trained = EncoderDecoderModel.from_pretrained(tmp_path / "one")
    start = BertModel.from_pretrained(tiny_backbone, add_pooling_layer=False).state_dict()
    for name, value in start.items():  # the encoder's pooler is new, and unused
        torch.testing.assert_close(trained.encoder.state_dict()[name], value, atol=0, rtol=0)
    question, passages = training_questions(SQUAD_MV, limit=1)
    q, passage = question[0], passages[question[0].positive_id]
    reader = FusionInDecoderReader(model=tmp_path / "one", max_input_length=64, max_answer_length=8)
    doc = Document(content=passage.text, meta={"title": passage.title})
    assert reader.run(query=q.question, documents=[doc])["answers"][0].data == q.answers[0].lower()
