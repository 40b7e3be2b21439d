"""``MultiViewTextRetriever``: a text query in, documents out (a ``MultiViewTextEmbedder`` and a
``MultiViewRetriever`` in one component), for what takes a ``query: str`` retriever."""

from __future__ import annotations

from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict
from haystack.core.serialization import component_from_dict, component_to_dict, import_class_by_name

from haystack_mvr.components.embedders import MultiViewTextEmbedder
from haystack_mvr.components.retrievers.multi_view_retriever import MultiViewRetriever


@component
class MultiViewTextRetriever:
    """
    Retrieves documents for a text query: embeds it with a ``MultiViewTextEmbedder``, then searches with a
    ``MultiViewRetriever``, passing the query's ``packed_embedding`` and ``encoder`` as the README's query pipeline
    wires them (so a late-interaction model's query travels whole, and a query model the store was not built with
    is refused).

    It has the ``query: str`` face that Haystack's ``MultiRetriever``, agent tools (``ComponentTool``) and
    Hayhooks' MCP server expect, as Haystack's ``TextEmbeddingRetriever`` gives other retrievers (which for a
    single-vector model also works with these two components, but passes only the ``embedding`` output).

    ```python
    retriever = MultiViewTextRetriever(
        text_embedder=MultiViewTextEmbedder(model=model, embedding_output="packed"),
        retriever=MultiViewRetriever(document_store=store, top_k=5),
    )
    documents = retriever.run(query="Which river flows through Warsaw?")["documents"]
    ```
    """

    def __init__(self, *, text_embedder: MultiViewTextEmbedder, retriever: MultiViewRetriever) -> None:
        """
        :param text_embedder: Embeds the query; its ``embedding_output`` must include ``packed_embedding``
            (``"packed"`` or ``"both"``). Use the model the store's documents were embedded with.
        :param retriever: Searches with the query's vectors; its ``top_k``, ``filters``, ``filter_policy``,
            ``scale_score`` and ``score_threshold`` apply (``run`` can override ``filters`` and ``top_k``).
        """
        if not isinstance(text_embedder, MultiViewTextEmbedder):
            msg = f"text_embedder must be a MultiViewTextEmbedder, got {type(text_embedder).__name__}."
            raise ValueError(msg)
        if not isinstance(retriever, MultiViewRetriever):
            msg = f"retriever must be a MultiViewRetriever, got {type(retriever).__name__}."
            raise ValueError(msg)
        if text_embedder.embedding_output == "list":
            msg = (
                'text_embedder has embedding_output="list", which leaves out packed_embedding (the query as '
                'MultiViewRetriever takes it whole); use embedding_output="packed".'
            )
            raise ValueError(msg)
        self.text_embedder = text_embedder
        self.retriever = retriever

    def warm_up(self) -> None:
        """Load the query model and open the store (once)."""
        self.text_embedder.warm_up()
        self.retriever.warm_up()

    async def warm_up_async(self) -> None:
        """:meth:`warm_up` on an event loop (the model loads in this thread; the store opens asynchronously)."""
        self.text_embedder.warm_up()
        await self.retriever.warm_up_async()

    def close(self) -> None:
        """Close the retriever's store (see ``MultiViewRetriever.close``)."""
        self.retriever.close()

    async def close_async(self) -> None:
        """Close the retriever's store's async resources."""
        await self.retriever.close_async()

    @component.output_types(documents=list[Document])
    def run(
        self, query: str, filters: dict[str, Any] | None = None, top_k: int | None = None
    ) -> dict[str, list[Document]]:
        """
        Retrieve documents for a text query.

        :param query: The query text (refused when empty, or longer than the embedder's ``max_chars``).
        :param filters: Runtime filters, combined with the retriever's by its ``filter_policy``.
        :param top_k: How many documents (``None``: the retriever's ``top_k``).
        :returns: ``{"documents": [...]}``, best first, as ``MultiViewRetriever.run`` returns them.
        """
        embedded = self.text_embedder.run(text=query)
        return self.retriever.run(
            packed_query_embedding=embedded["packed_embedding"],
            encoder=embedded["encoder"],
            filters=filters,
            top_k=top_k,
        )

    @component.output_types(documents=list[Document])
    async def run_async(
        self, query: str, filters: dict[str, Any] | None = None, top_k: int | None = None
    ) -> dict[str, list[Document]]:
        """Asynchronous :meth:`run`: the query is embedded in this thread, the store searched asynchronously."""
        embedded = self.text_embedder.run(text=query)
        return await self.retriever.run_async(
            packed_query_embedding=embedded["packed_embedding"],
            encoder=embedded["encoder"],
            filters=filters,
            top_k=top_k,
        )

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self,
            text_embedder=component_to_dict(obj=self.text_embedder, name="text_embedder"),
            retriever=component_to_dict(obj=self.retriever, name="retriever"),
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MultiViewTextRetriever:
        params = dict(data["init_parameters"])
        for name in ("text_embedder", "retriever"):
            inner = params[name]
            params[name] = component_from_dict(import_class_by_name(inner["type"]), inner, name)
        return default_from_dict(cls, {**data, "init_parameters": params})
