"""
``haystack-mvr tune-queries``: tune the query encoder against a saved, frozen index (no document is re-encoded),
and its Python face, :func:`tune_queries`::

    haystack-mvr tune-queries --index runs/index --questions my_questions.jsonl --output runs/tuned-queries

    from haystack_mvr.cli.tune_queries import tune_queries
    tune_queries("runs/index", "my_questions.jsonl", "runs/tuned-queries", max_steps=300)

The index is a saved ``FaissMultiViewDocumentStore`` folder (``store.save(path)``, or a ``haystack-mvr eval
--index-dir`` / quickstart index folder); it is opened, read and never written. The questions are JSONL: squad-mv
rows or ``{"question", "positive_id", "answers"?, "answer_starts"?}``. The output folder loads as
``MultiViewTextEmbedder(model=output)`` against that store (see
:mod:`haystack_mvr.training.query_tuning` for what is learnt).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import fields
from pathlib import Path
from typing import Any

from haystack_mvr.cli.errors import CommandError

QUESTION_FIELDS = ("question", "positive_id")


def add_tune_queries_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from haystack_mvr.training.query_tuning import QueryTuningArguments

    parser = subparsers.add_parser("tune-queries", help="Tune the query encoder against a frozen, saved index.")
    parser.add_argument("--index", type=Path, required=True, help="A saved FaissMultiViewDocumentStore folder.")
    parser.add_argument(
        "--questions", type=Path, required=True, help='JSONL: {"question", "positive_id", "answers"?} per line.'
    )
    parser.add_argument("--output", type=Path, required=True, help="Folder for the tuned query encoder.")
    parser.add_argument(
        "--model",
        default=None,
        help="The document encoder that built the index (default: the model its encoder record names).",
    )
    parser.add_argument("--encoder-kwargs", default=None, help="JSON encoder_kwargs of that encoder.")
    parser.add_argument("--device", default=None)
    defaults = QueryTuningArguments()
    for f in fields(QueryTuningArguments):
        flag = "--" + f.name.replace("_", "-")
        default = getattr(defaults, f.name)
        if isinstance(default, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=default)
        else:
            kind = float if f.name in ("learning_rate", "scale", "max_minutes", "warmup_ratio") else int
            parser.add_argument(flag, type=kind, default=default)
    parser.set_defaults(handler=run_tune_queries)
    return parser


def run_tune_queries(args: argparse.Namespace) -> int:
    from haystack_mvr.training.query_tuning import QueryTuningArguments

    kwargs = {f.name: getattr(args, f.name) for f in fields(QueryTuningArguments)}
    encoder_kwargs = None
    if args.encoder_kwargs:
        try:
            encoder_kwargs = json.loads(args.encoder_kwargs)
        except json.JSONDecodeError as e:
            msg = f"--encoder-kwargs is not valid JSON: {e}"
            raise CommandError(msg) from e
    output = tune_queries(
        args.index,
        args.questions,
        args.output,
        model=args.model,
        encoder_kwargs=encoder_kwargs,
        device=args.device,
        progress_bar=True,
        **kwargs,
    )
    record = json.loads((output / "query_tuning.json").read_text(encoding="utf-8"))
    print(json.dumps({"output": str(output), **record["report"]}, indent=2))
    return 0


def read_tuning_questions(path: str | Path):
    """The questions of a JSONL file as ``TuningQuestion``; a bad line is named by file and line.

    :raises ValueError: an empty file, a line without a non-empty ``question`` or ``positive_id``, answers that
        are not strings, offsets that are not integers, or text that is not UTF-8.
    """
    from haystack_mvr.datasets.jsonl import read_jsonl
    from haystack_mvr.training.query_tuning import TuningQuestion

    out = []
    for where, record in read_jsonl(path):
        for name in QUESTION_FIELDS:
            if not isinstance(record.get(name), str) or not record[name].strip():
                msg = f"{where}: field {name!r} must be a non-empty string."
                raise ValueError(msg)
        answers = record.get("answers") or []
        if isinstance(answers, str) or not all(isinstance(a, str) for a in answers):
            msg = f"{where}: field 'answers' must be a list of strings."
            raise ValueError(msg)
        starts = record.get("answer_starts") or []
        if isinstance(starts, str) or not all(isinstance(s, int) and not isinstance(s, bool) for s in starts):
            msg = f"{where}: field 'answer_starts' must be a list of integers."
            raise ValueError(msg)
        out.append(TuningQuestion(record["question"], record["positive_id"], list(answers), list(starts)))
    if not out:
        msg = f"{path}: no questions (the file is empty)."
        raise ValueError(msg)
    return out


def open_frozen_index(index: str | Path):
    """The saved store at ``index`` (a store folder, or a folder holding one as ``store/``), and its documents as
    ``FrozenDocument`` with the views it holds.

    :raises ValueError: not a saved store, a store without documents or without an encoder record, or one that
        keeps no vectors to read (a lossy index without kept rows: its views are only approximations).
    """
    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
    from haystack_mvr.document_stores.faiss.index_family import IndexFamily
    from haystack_mvr.training.query_tuning import FrozenDocument
    from haystack_mvr.views import extract_views

    folder = Path(index)
    if (folder / "store").is_dir() and not (folder / "CURRENT").exists():
        folder = folder / "store"
    if not folder.is_dir():
        msg = f"--index {index}: no such folder (save a store with store.save(path))."
        raise ValueError(msg)
    try:
        store = FaissMultiViewDocumentStore(index_path=str(folder))
        stats = store.stats()
    except Exception as e:
        msg = f"--index {index}: not a saved FaissMultiViewDocumentStore ({e})."
        raise ValueError(msg) from e
    if stats.documents == 0 or stats.views == 0:
        msg = f"--index {index}: the store holds no documents with views to tune against."
        raise ValueError(msg)
    if not store.encoder_config:
        msg = f"--index {index}: the store records no encoder (its documents were written without mvr_encoder)."
        raise ValueError(msg)
    exact = IndexFamily(stats.dimension, stats.index_factory or "Flat", {}).exact
    if not exact and stats.kept_vector_bytes == 0:
        msg = (
            f"--index {index}: a {stats.index_factory} index keeps no vectors to read (only their codes); tune "
            "against a Flat/HNSW store, or one built with keep_vectors=True."
        )
        raise ValueError(msg)
    documents = []
    for batch in store.export_documents():
        for doc in batch:
            views, spans, _ = extract_views(doc)
            if views is None:
                continue
            documents.append(FrozenDocument(doc.id, views, list(spans or [None] * len(views)), doc.content or ""))
    return store.encoder_config, documents


def _document_encoder(config: dict[str, Any], model: str | None, encoder_kwargs: dict[str, Any] | None, device: str):
    from haystack_mvr.document_stores.checks import check_query_encoder
    from haystack_mvr.modeling.loading import local_model_name
    from haystack_mvr.modeling.st_encoder import open_encoder

    if encoder_kwargs is None:
        encoder_kwargs = {"mode": "tokens"} if config.get("mode") == "tokens" else {}
    name = model or config.get("model")
    encoder = open_encoder(local_model_name(str(name)), device, **encoder_kwargs)
    if encoder.tuned_for is not None:
        msg = f"{name} is a tuned query encoder already: tune the document encoder that built the index."
        raise ValueError(msg)
    try:
        check_query_encoder(config, encoder.identity(name))
    except ValueError as e:
        msg = f"{name} (encoder_kwargs {encoder_kwargs}) did not build this index: pass --model / --encoder-kwargs. {e}"
        raise ValueError(msg) from e
    return encoder


def tune_queries(
    index: str | Path,
    questions: str | Path,
    output: str | Path,
    *,
    model: str | None = None,
    encoder_kwargs: dict[str, Any] | None = None,
    device: str | None = None,
    progress_bar: bool = True,
    **arguments: Any,
) -> Path:
    """
    Tune a copy of the index's query encoder on ``questions`` against the index's frozen views and save it to
    ``output``; ``arguments`` are :class:`~haystack_mvr.training.query_tuning.QueryTuningArguments` fields.
    Everything is checked (arguments, questions, index, encoder) before any training starts.

    :returns: ``output``.
    :raises ValueError: bad arguments, questions or index (:func:`read_tuning_questions`, :func:`open_frozen_index`),
        an output folder that is the index or holds files, or an encoder that did not build the index.
    """
    import torch

    from haystack_mvr.training.query_tuning import (
        QueryTuningArguments,
        save_tuned_query_encoder,
        tune_query_encoder,
    )

    args = QueryTuningArguments(**arguments)
    output = Path(output)
    index_folder = Path(index).resolve()
    if output.resolve() == index_folder or index_folder in output.resolve().parents:
        msg = f"--output {output} is inside the index {index}: tune-queries never writes into the index it reads."
        raise ValueError(msg)
    if output.exists() and any(output.iterdir()):
        msg = f"--output {output} is not empty: give a new folder."
        raise ValueError(msg)
    asked = read_tuning_questions(questions)
    config, documents = open_frozen_index(index)
    known = {d.id for d in documents}
    for n, q in enumerate(asked, 1):
        if q.positive_id not in known:
            msg = f"{questions}: question {n}: positive_id {q.positive_id!r} is not in the index {index}."
            raise ValueError(msg)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    encoder = _document_encoder(config, model, encoder_kwargs, device)
    tuned, report = tune_query_encoder(encoder, documents, asked, args, progress_bar=progress_bar)
    save_tuned_query_encoder(tuned, output, config, args, report)
    return output


__all__ = ["open_frozen_index", "read_tuning_questions", "tune_queries"]
