"""Deploying with Hayhooks (deepset's server for Haystack pipelines): a real ``hayhooks run`` on 127.0.0.1 serves the
PipelineWrapper of ``examples/hayhooks/pipelines/mvr_search`` and the YAML pipeline beside it, answering queries
with documents, and answers a caller's mistakes with 422, not 500.

Hayhooks keeps Haystack's deserialization allowlist as it is, so a YAML pipeline of haystack-mvr components deploys
only with ``HAYSTACK_DESERIALIZATION_ALLOWLIST=haystack_mvr`` set (the documented setting): without it Hayhooks
starts with the pipeline skipped and only its log says why. The server runs the tiny random backbone; the slow test
runs the packaged all-MiniLM-L6-v2 and checks the answer.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from haystack import Document, Pipeline
from haystack.components.writers import DocumentWriter

pytest.importorskip("hayhooks", reason="pip install 'haystack-mvr[serving]' (Hayhooks) to run the server tests")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "hayhooks"
WRAPPER = EXAMPLE / "pipelines" / "mvr_search" / "pipeline_wrapper.py"
ALLOWLIST = "HAYSTACK_DESERIALIZATION_ALLOWLIST"
DOCUMENTS = [
    Document(
        content="Warsaw is the capital of Poland. It lies on the Vistula. Its old town was rebuilt after 1945.",
        meta={"title": "Warsaw"},
    ),
    Document(
        content="Kraków was the capital of Poland until 1596. The Wawel castle stands above the river.",
        meta={"title": "Kraków"},
    ),
]
CLI = "import sys; from hayhooks.cli import hayhooks_cli; sys.exit(hayhooks_cli())"  # `hayhooks` (no __main__)
OPTIONS = ("--host", "127.0.0.1", "--without-tracing", "--without-monitoring")
START_TIMEOUT_S = 180  # imports torch, haystack and the model on a loaded 2-core machine


def wrapper_module():
    spec = importlib.util.spec_from_file_location("mvr_search_wrapper", WRAPPER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_index(model: str, folder: Path) -> str:
    from haystack_mvr.components.embedders import MultiViewDocumentEmbedder
    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore

    store = FaissMultiViewDocumentStore(index_factory="Flat")
    indexing = Pipeline()
    indexing.add_component("embedder", MultiViewDocumentEmbedder(model=model))
    indexing.add_component("writer", DocumentWriter(document_store=store))
    indexing.connect("embedder.documents", "writer.documents")
    indexing.run({"embedder": {"documents": [Document(content=d.content, meta=d.meta) for d in DOCUMENTS]}})
    store.save(folder)
    return str(folder)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(model: str, index_dir: str, *, allowlist: str | None) -> dict[str, str]:
    """The test process's environment without what importing haystack_mvr put there, plus the documented setting:
    ``allowlist="environment"`` sets it here, ``"dotenv"`` leaves it to a .env file (:func:`deploy_folder`)."""
    env = {k: v for k, v in os.environ.items() if k != ALLOWLIST}
    if allowlist == "environment":
        env[ALLOWLIST] = "haystack_mvr"
    env.update(
        MVR_MODEL=model,
        MVR_INDEX_DIR=index_dir,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HAYSTACK_TELEMETRY_ENABLED="False",
        OMP_NUM_THREADS="1",
        TOKENIZERS_PARALLELISM="false",
    )
    return env


def request(port: int, path: str, payload: dict | None = None, timeout: float = 60) -> tuple[int, dict]:
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=data, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


class Server:
    """``hayhooks run`` in a subprocess on a free port of 127.0.0.1, stopped by :meth:`stop`."""

    def __init__(self, pipelines_dir: Path, env: dict[str, str], log: Path) -> None:
        self.port = free_port()
        self.log = log
        self._out = log.open("wb")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                CLI,
                "run",
                "--port",
                str(self.port),
                "--pipelines-dir",
                str(pipelines_dir),
                *OPTIONS,
            ],
            env=env,
            cwd=pipelines_dir.parent,
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self) -> None:
        """Until the server answers (it listens only after its startup deploy), at most START_TIMEOUT_S."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"hayhooks exited with {self.process.returncode}:\n{self.output()}")
            try:
                request(self.port, "/status", timeout=5)
                return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                time.sleep(0.5)
        pytest.fail(f"hayhooks did not answer within {START_TIMEOUT_S} s:\n{self.output()}")

    def output(self) -> str:
        self._out.flush()
        return self.log.read_text(errors="replace")[-6000:]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._out.close()


def _nested_nots(depth: int) -> dict:
    cond: dict = {"field": "meta.title", "operator": "==", "value": "x"}
    for _ in range(depth):
        cond = {"operator": "NOT", "conditions": [cond]}
    return cond


NESTED_NOTS = _nested_nots(400)


def deploy_folder(root: Path, model: str, index_dir: str, *, dotenv: bool = False) -> Path:
    """The example's pipelines folder with its YAML written for this model and index; with ``dotenv``, a .env file
    with the allowlist setting beside it, in the folder the server starts in (Hayhooks reads it)."""
    if dotenv:
        (root / ".env").write_text(f"{ALLOWLIST}=haystack_mvr\n", encoding="utf-8")
    pipelines = root / "pipelines"
    (pipelines / "mvr_search").mkdir(parents=True)
    shutil.copy(WRAPPER, pipelines / "mvr_search" / "pipeline_wrapper.py")
    (pipelines / "mvr_search_yaml.yml").write_text(wrapper_module().hayhooks_yaml(model, index_dir), encoding="utf-8")
    return pipelines


@pytest.fixture(scope="module")
def tiny_server(tiny_backbone, tmp_path_factory):
    root = tmp_path_factory.mktemp("hayhooks")
    index_dir = build_index(str(tiny_backbone), root / "index")
    server = Server(
        deploy_folder(root, str(tiny_backbone), index_dir, dotenv=True),
        server_env(str(tiny_backbone), index_dir, allowlist="dotenv"),
        root / "log",
    )
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def test_the_committed_yaml_is_what_the_wrapper_writes():
    committed = (EXAMPLE / "pipelines" / "mvr_search_yaml.yml").read_text(encoding="utf-8")
    module = wrapper_module()
    assert committed == module.hayhooks_yaml(module.DEFAULT_MODEL, module.DEFAULT_INDEX_DIR)
    assert "/site-packages/" not in committed


def test_both_deploys_are_up(tiny_server):
    for name in ("mvr_search", "mvr_search_yaml"):
        status, body = request(tiny_server.port, f"/status/{name}")
        assert status == 200, (name, body, tiny_server.output())


def test_the_wrapper_answers_a_query_with_documents(tiny_server):
    status, body = request(tiny_server.port, "/mvr_search/run", {"query": "Which river flows through Warsaw?"})
    assert status == 200, (body, tiny_server.output())
    documents = body["result"]
    assert len(documents) == 2
    assert {d["meta"]["title"] for d in documents} == {"Warsaw", "Kraków"}
    assert all(isinstance(d["score"], float) and d["meta"]["mvr_matched_text"] for d in documents)
    status, body = request(
        tiny_server.port,
        "/mvr_search/run",
        {"query": "river", "top_k": 1, "filters": {"field": "meta.title", "operator": "==", "value": "Kraków"}},
    )
    assert status == 200 and [d["meta"]["title"] for d in body["result"]] == ["Kraków"]


YAML_REQUEST = {"query": "Which river flows through Warsaw?", "top_k": 5, "filters": None}


def test_the_yaml_deploy_answers_a_query_with_documents_only(tiny_server):
    status, body = request(tiny_server.port, "/mvr_search_yaml/run", YAML_REQUEST)
    assert status == 200, (body, tiny_server.output())
    result = body["result"]
    assert set(result) == {"retriever"} and set(result["retriever"]) == {"documents"}  # no query vector
    assert {d["meta"]["title"] for d in result["retriever"]["documents"]} == {"Warsaw", "Kraków"}


def test_the_yaml_deploy_passes_top_k_and_filters_to_the_retriever(tiny_server):
    """They were ignored (issue 48): top_k -1 and operator ~= answered 200 with every document."""
    only = {"field": "meta.title", "operator": "==", "value": "Kraków"}
    status, body = request(tiny_server.port, "/mvr_search_yaml/run", {**YAML_REQUEST, "top_k": 1, "filters": only})
    assert status == 200, (body, tiny_server.output())
    assert [d["meta"]["title"] for d in body["result"]["retriever"]["documents"]] == ["Kraków"]
    for mistake, reason in (
        ({"top_k": -1}, "top_k must be a positive integer"),
        ({"filters": {**only, "operator": "~="}}, "~="),
    ):
        status, body = request(tiny_server.port, "/mvr_search_yaml/run", {**YAML_REQUEST, **mistake})
        assert status == 500 and reason in body["detail"], (status, body)  # Hayhooks' status for a YAML deploy


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ({"query": ""}, "empty query"),
        ({"query": "   "}, "empty query"),
        ({"query": "river", "top_k": 0}, "top_k must be a positive integer"),
        ({"query": "river", "filters": {"field": "meta.title", "operator": "~", "value": "x"}}, "operator"),
        ({"query": "river", "filters": {"field": "meta.title", "value": "x"}}, "has no 'operator'"),
        ({"query": "river", "filters": {"title": "Warsaw"}}, "Haystack 1.x"),
        ({"query": "river", "filters": {"field": 1, "operator": "==", "value": "x"}}, "'field' must be a string"),
        ({"query": "river", "filters": {"field": "meta.title", "operator": ["=="], "value": "x"}}, "must be a string"),
        ({"query": "river", "filters": NESTED_NOTS}, "nest deeper than 32 levels"),
    ],
)
def test_the_callers_mistakes_are_client_errors(tiny_server, payload, reason):
    status, body = request(tiny_server.port, "/mvr_search/run", payload)
    assert status == 422 and reason in str(body["detail"]), (status, body)


def test_a_query_over_the_limit_is_refused_before_it_is_logged(tiny_server):
    """A 1 MB query answered 200 and was logged whole at INFO (issue 48); then its 422 echoed the whole query back
    (issue 57)."""
    marker = "unlikelyword"
    status, body = request(tiny_server.port, "/mvr_search/run", {"query": marker * (1_200_000 // len(marker))})
    assert status == 422 and "4096" in str(body["detail"]), (status, str(body)[:500])
    assert len(json.dumps(body)) < 1000, str(body)[:500]  # the reason, not the query
    assert "1200000 characters" in body["detail"]
    assert tiny_server.log.read_text(errors="replace").count(marker) < 100  # nothing near the query was logged


def test_the_yaml_deploy_refuses_an_oversized_query_and_logs_a_bounded_line(tiny_server):
    """A 1.2 MB query was answered 200 (the embedder cut it silently) and logged whole at INFO (issue 57)."""
    marker = "yamlmarkerword"
    query = marker * (1_200_000 // len(marker))
    status, body = request(tiny_server.port, "/mvr_search_yaml/run", {**YAML_REQUEST, "query": query})
    assert status == 500 and "more than max_chars=4096" in body["detail"], (status, str(body)[:500])
    assert len(json.dumps(body)) < 2000, str(body)[:500]
    log = tiny_server.log.read_text(errors="replace")
    assert "Running pipeline" in log and log.count(marker) < 100  # Hayhooks' own line, its params cut


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ({"top_k": True}, "valid integer"),  # was answered as top_k 1
        ({"top_k": 10**9}, "top_k must be at most 100"),  # returned the whole index
        ({"filters": {"field": "meta.title", "operator": ">", "value": {"a": 1}}}, "not a dict"),  # was 500
        ({"filters": {"field": "meta.title", "operator": "<=", "value": [1]}}, "not a list"),
    ],
    ids=["top_k-true", "top_k-huge", "greater-than-dict", "at-most-list"],
)
def test_more_of_the_callers_mistakes_are_bounded_client_errors(tiny_server, payload, reason):
    status, body = request(tiny_server.port, "/mvr_search/run", {"query": "river", **payload})
    assert status == 422 and reason in str(body["detail"]), (status, body)


def test_a_long_filter_value_is_not_echoed_whole(tiny_server):
    value = "v" * 200_000
    filters = {"field": "meta.title", "operator": ">", "value": [value]}
    status, body = request(tiny_server.port, "/mvr_search/run", {"query": "river", "filters": filters})
    assert status == 422 and len(json.dumps(body)) < 1000, (status, str(body)[:500])


def test_a_yaml_deploy_answers_a_callers_mistake_with_500(tiny_server):
    """Documented, not fixed: Hayhooks answers whatever a YAML pipeline raises with 500 (the reason is in detail);
    only a PipelineWrapper can map errors to status codes."""
    status, body = request(tiny_server.port, "/mvr_search_yaml/run", {**YAML_REQUEST, "query": " "})
    assert status == 500 and "empty query" in body["detail"], (status, body)


def test_a_yaml_deploy_needs_the_allowlist_setting(tiny_backbone, tmp_path):
    """Without HAYSTACK_DESERIALIZATION_ALLOWLIST=haystack_mvr Hayhooks cannot load the YAML (it skips it at start,
    saying why only in its log). The tiny server above has the setting in a .env file, the slow test in the
    environment."""
    index_dir = str(tmp_path / "index")
    (tmp_path / "p.yml").write_text(wrapper_module().hayhooks_yaml(str(tiny_backbone), index_dir), encoding="utf-8")
    load = (
        "import sys, hayhooks.settings; "  # as `hayhooks run` does first (it reads a .env file: there is none here)
        "from hayhooks.server.utils.yaml_pipeline_wrapper import YAMLPipelineWrapper as W; "
        "W.from_file(sys.argv[1]).setup(); print('loaded')"
    )
    done = subprocess.run(
        [sys.executable, "-c", load, str(tmp_path / "p.yml")],
        env=server_env(str(tiny_backbone), index_dir, allowlist=None),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "loaded" not in done.stdout
    assert "haystack_mvr" in done.stderr and "allowlist" in done.stderr.lower(), done.stderr[-3000:]


@pytest.mark.slow
def test_the_packaged_minilm_deploy_finds_the_vistula(minilm, tmp_path):
    index_dir = build_index(str(minilm), tmp_path / "index")
    server = Server(
        deploy_folder(tmp_path, str(minilm), index_dir),
        server_env(str(minilm), index_dir, allowlist="environment"),
        tmp_path / "log",
    )
    try:
        server.wait_ready()
        for name, documents in (
            ("mvr_search", lambda b: b["result"]),
            ("mvr_search_yaml", lambda b: b["result"]["retriever"]["documents"]),
        ):
            status, body = request(server.port, f"/{name}/run", YAML_REQUEST)
            assert status == 200, (body, server.output())
            assert documents(body)[0]["meta"]["mvr_matched_text"] == "It lies on the Vistula.", body
    finally:
        server.stop()


def test_run_api_answers_as_run_api_async_which_hayhooks_serves(tiny_backbone, tmp_path, monkeypatch):
    """Hayhooks serves ``run_api_async`` (the server tests above go through it); ``run_api`` gives the same
    documents and the same 422s."""
    import asyncio

    from fastapi import HTTPException

    module = wrapper_module()
    monkeypatch.setenv("MVR_MODEL", str(tiny_backbone))
    monkeypatch.setenv("MVR_INDEX_DIR", build_index(str(tiny_backbone), tmp_path / "index"))
    wrapper = module.PipelineWrapper()
    wrapper.setup()
    question = "Which river does Warsaw lie on?"
    title = {"field": "meta.title", "operator": "==", "value": "Kraków"}
    for kwargs in ({"top_k": 2}, {"top_k": 2, "filters": title}):
        sync = wrapper.run_api(question, **kwargs)
        async_ = asyncio.run(wrapper.run_api_async(question, **kwargs))
        assert [(d["id"], d["score"]) for d in sync] == [(d["id"], d["score"]) for d in async_]
        assert len(sync) == (1 if "filters" in kwargs else 2)
    for kwargs in ({"top_k": 0}, {"top_k": 101}, {"filters": {"field": "meta.title", "value": "x"}}):
        with pytest.raises(HTTPException) as sync_error:
            wrapper.run_api(question, **kwargs)
        with pytest.raises(HTTPException) as async_error:
            asyncio.run(wrapper.run_api_async(question, **kwargs))
        assert sync_error.value.status_code == async_error.value.status_code == 422
        assert sync_error.value.detail == async_error.value.detail
