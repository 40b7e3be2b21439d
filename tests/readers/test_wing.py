"""The readers' wing: the module paths readers had before the move still import (as re-exports of the wing), a
pipeline saved under the FiD reader's old path loads, and the generative reader answers through one path that cuts
its passages to the prompt's budget."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from haystack import Document, Pipeline
from haystack.utils import ComponentDevice

from haystack_mvr.components.readers import FusionInDecoderReader, GenerativeReader, generative_reader_pipeline
from haystack_mvr.readers.fusion_in_decoder_reader import LEGACY_TYPES

REPO = Path(__file__).resolve().parents[2]
OLD_TYPE = "haystack_mvr.components.readers.fusion_in_decoder_reader.FusionInDecoderReader"
NEW_TYPE = "haystack_mvr.readers.fusion_in_decoder_reader.FusionInDecoderReader"
CPU = ComponentDevice.from_str("cpu")

OLD_MODULES = [
    "haystack_mvr.components.readers",
    "haystack_mvr.components.readers.fusion_in_decoder_reader",
    "haystack_mvr.components.readers.generative",
    "haystack_mvr.modeling.fusion_in_decoder",
    "haystack_mvr.modeling.generative_prompt",
    "haystack_mvr.training.readers",
    "haystack_mvr.training.readers.arguments",
    "haystack_mvr.training.readers.budget_callback",
    "haystack_mvr.training.readers.extractive",
    "haystack_mvr.training.readers.fusion_in_decoder",
    "haystack_mvr.training.readers.generative",
    "haystack_mvr.training.readers.retrieved_passages",
    "haystack_mvr.training.readers.shared_normalization",
    "haystack_mvr.training.readers.trainer_setup",
]


@pytest.mark.parametrize("name", OLD_MODULES)
def test_every_old_module_path_re_exports_the_wing(name):
    module = importlib.import_module(name)
    assert module.__all__
    for attribute in module.__all__:
        value = getattr(module, attribute)
        home = getattr(value, "__module__", None)
        if home is not None and (callable(value) or isinstance(value, type)):
            assert home.startswith("haystack_mvr.readers."), f"{name}.{attribute} is defined in {home}"


@pytest.mark.parametrize("package", ["haystack_mvr.readers.training", "haystack_mvr.training.readers"])
def test_no_name_a_training_package_exports_is_shadowed_by_one_of_its_modules(package):
    """Importing ``package.x`` sets the package attribute ``x`` to the module: a function named ``x`` is lost."""
    module = importlib.import_module(package)
    assert not set(module.__all__) & {path.stem for path in Path(module.__file__).parent.glob("*.py")}


def test_the_fid_decoding_function_has_its_own_name_and_keeps_the_old_one_at_the_old_path():
    from haystack_mvr.modeling import fusion_in_decoder as old
    from haystack_mvr.readers import fusion_in_decoder_model as new

    assert old.generate_answers is new.generate_from_fused_states
    assert not hasattr(new, "generate_answers")  # the generative reader's generate_answers is the only one in the wing


def _fid_pipeline_yaml() -> str:
    pipeline = Pipeline()
    pipeline.add_component("reader", FusionInDecoderReader(model="google/flan-t5-base", device=CPU, top_k=2))
    return pipeline.dumps()


def test_new_dumps_name_the_class_where_it_is_defined():
    dumped = _fid_pipeline_yaml()
    assert f"type: {NEW_TYPE}" in dumped and OLD_TYPE not in dumped
    assert FusionInDecoderReader.__module__ == "haystack_mvr.readers.fusion_in_decoder_reader"
    assert OLD_TYPE in LEGACY_TYPES


def test_a_pipeline_saved_under_the_old_path_loads():
    old = _fid_pipeline_yaml().replace(NEW_TYPE, OLD_TYPE)
    assert f"type: {OLD_TYPE}" in old
    reader = Pipeline.loads(old).get_component("reader")
    assert isinstance(reader, FusionInDecoderReader) and reader.top_k == 2 and reader.model == "google/flan-t5-base"
    assert reader.to_dict()["type"] == NEW_TYPE  # written back under the new name
    data = reader.to_dict()
    assert FusionInDecoderReader.from_dict({**data, "type": OLD_TYPE}).to_dict() == data


def test_a_pipeline_saved_under_the_old_path_loads_in_a_fresh_interpreter():
    """Nothing of the readers imported yet: Haystack imports the old module to resolve the type, which registers it."""
    code = (
        "import sys\n"
        "import haystack_mvr\n"
        "from haystack import Pipeline\n"
        "pipeline = Pipeline.loads(sys.stdin.read())\n"
        "reader = pipeline.get_component('reader')\n"
        "print(type(reader).__module__, reader.top_k, pipeline.to_dict()['components']['reader']['type'])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "HAYSTACK_DESERIALIZATION_ALLOWLIST"}
    result = subprocess.run(
        [sys.executable, "-c", code],
        input=_fid_pipeline_yaml().replace(NEW_TYPE, OLD_TYPE),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=REPO,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == f"haystack_mvr.readers.fusion_in_decoder_reader 2 {NEW_TYPE}"


# ------------------------------------------------------------------------------------------------ one generative path

QUESTION = "Which river flows through Warsaw?"
LONG = ["Warsaw lies on the Vistula. " * 40, "The Vistula flows north. " * 40, "Short passage."]


@pytest.fixture
def prompts_seen(monkeypatch):
    """Wrap a reader's ``model.generate`` so that the prompt tokens it is handed are recorded."""
    seen: list[list[list[int]]] = []

    def watch(model):
        real = model.generate

        def generate(*args, input_ids, attention_mask, **kwargs):
            seen.append([row[mask.bool()].tolist() for row, mask in zip(input_ids, attention_mask, strict=True)])
            return real(*args, input_ids=input_ids, attention_mask=attention_mask, **kwargs)

        monkeypatch.setattr(model, "generate", generate)

    return seen, watch


@pytest.mark.usefixtures("one_torch_thread")
def test_the_pipeline_and_the_component_answer_through_one_path_within_the_prompt_budget(
    tiny_generative_reader, prompts_seen
):
    from transformers import AutoTokenizer

    from haystack_mvr.readers.generative_model import fitted_prompt_ids, generate_answers, prompt_ids, read_answer

    seen, watch = prompts_seen
    bare = len(prompt_ids(AutoTokenizer.from_pretrained(tiny_generative_reader), QUESTION, ["", "", ""]))
    budget = bare + 60  # room for the short passage and a part of each long one
    documents = [Document(content=p) for p in LONG]
    reader = GenerativeReader(model=str(tiny_generative_reader), precision="float32", max_prompt_tokens=budget)
    reader.warm_up()
    pipeline = generative_reader_pipeline(tiny_generative_reader, precision="float32", max_prompt_tokens=budget)
    pipeline.warm_up()
    served = pipeline.get_component("reader")
    assert isinstance(served, GenerativeReader) and list(pipeline.to_dict()["components"]) == ["reader"]
    model, tokenizer = reader._reader
    watch(model)
    watch(served._reader[0])

    alone = reader.run(query=QUESTION, documents=documents)["answers"][0]
    piped = pipeline.run({"reader": {"query": QUESTION, "documents": documents}})["reader"]["answers"][0]
    direct = generate_answers(model, tokenizer, [(QUESTION, LONG)], batch_size=1, max_length=budget)[0]
    grounded = read_answer(model, tokenizer, QUESTION, LONG, max_length=budget)

    cut, expected = fitted_prompt_ids(tokenizer, QUESTION, LONG, budget)
    assert len(expected) <= budget and cut[2] == LONG[2] and len(cut[0]) < len(LONG[0])
    # the component, the pipeline, generate_answers and read_answer: the same cut prompt
    assert seen == [[expected]] * 4
    assert grounded.generated == direct  # the same greedy answer, then snapped to a span of what was read
    assert alone.data == piped.data == grounded.span.text
    assert alone.meta["mvr_generated"] == direct and alone.meta == piped.meta
    assert grounded.span.end <= len(cut[grounded.span.passage])  # within the part of the passage that was read
