"""The readers' wing: one module path per reader, the FiD reader's YAML names the module it is defined in, and the
generative reader answers through one path that cuts its passages to the prompt's budget. (Pipelines saved under the
readers' old paths: ``tests/test_moved_paths.py``.)"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from haystack import Document, Pipeline
from haystack.utils import ComponentDevice

from haystack_mvr.components.readers import FusionInDecoderReader, GenerativeReader, generative_reader_pipeline

NEW_TYPE = "haystack_mvr.readers.fusion_in_decoder_reader.FusionInDecoderReader"
CPU = ComponentDevice.from_str("cpu")


def test_the_components_package_exports_the_wing_s_components():
    """``haystack_mvr.components.readers`` is where pipelines import the readers from; each is defined in the wing."""
    package = importlib.import_module("haystack_mvr.components.readers")
    for name in package.__all__:
        home = getattr(package, name).__module__
        assert home.startswith("haystack_mvr.readers."), f"{name} is defined in {home}"
    assert sorted(p.name for p in Path(package.__file__).parent.glob("*.py")) == ["__init__.py"]


def test_no_name_the_training_package_exports_is_shadowed_by_one_of_its_modules():
    """Importing ``package.x`` sets the package attribute ``x`` to the module: a function named ``x`` is lost."""
    module = importlib.import_module("haystack_mvr.readers.training")
    assert not set(module.__all__) & {path.stem for path in Path(module.__file__).parent.glob("*.py")}


def test_the_fid_decoding_function_has_its_own_name():
    from haystack_mvr.readers import fusion_in_decoder_model

    assert callable(fusion_in_decoder_model.generate_from_fused_states)
    # the generative reader's generate_answers is the only one in the wing
    assert not hasattr(fusion_in_decoder_model, "generate_answers")


def test_new_dumps_name_the_class_where_it_is_defined():
    pipeline = Pipeline()
    pipeline.add_component("reader", FusionInDecoderReader(model="google/flan-t5-base", device=CPU, top_k=2))
    dumped = pipeline.dumps()
    assert f"type: {NEW_TYPE}" in dumped and "components.readers" not in dumped
    assert FusionInDecoderReader.__module__ == "haystack_mvr.readers.fusion_in_decoder_reader"


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
