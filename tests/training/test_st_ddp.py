"""MVR and CAMVR under DDP on the CPU: 2 gloo processes under torchrun (``ddp_worker.py``), through build_trainer."""

import json
import math
from pathlib import Path

import pytest
import torch

from tests.training.conftest import torchrun

pytest.importorskip("datasets")
import sentence_transformers as st

WORKER = Path(__file__).with_name("ddp_worker.py")
MODES = ("mvr", "camvr")


@pytest.fixture(scope="module")
def ddp_run(trainable_backbone, tmp_path_factory) -> Path:
    """One torchrun launch trains both modes (the processes import torch and transformers once)."""
    out = tmp_path_factory.mktemp("ddp")
    done = torchrun(str(WORKER), str(trainable_backbone), str(out), *MODES)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def ranks(out: Path, mode: str) -> list[dict]:
    return [json.loads((out / mode / f"rank{r}.json").read_text()) for r in (0, 1)]


@pytest.mark.parametrize("mode", MODES)
def test_ddp_gathers_the_documents_of_both_processes(ddp_run, mode):
    records = ranks(ddp_run, mode)
    assert [(r["world_size"], r["gather_across_devices"], r["global_step"]) for r in records] == [(2, True, 3)] * 2
    for rank, record in enumerate(records):
        assert len(record["steps"]) == 3  # the loss ran once a step, no step was skipped
        for step in record["steps"]:
            # 2 queries here; (positive, negative) of 2 processes x 2 rows: every query sees 8 documents
            assert (step["queries"], step["documents"]) == (2, 8)
            assert step["positive_index"] == [2 * rank, 2 * rank + 1]  # its own positives, after rank 0's
    for first, second in zip(records[0]["steps"], records[1]["steps"], strict=True):
        # the same gathered documents (8 different ones) on both processes, with each process's own queries
        assert first["doc_views"] == pytest.approx(second["doc_views"], abs=1e-5)
        assert first["query"] != pytest.approx(second["query"], abs=1e-4)
        # the annealed temperature (per fractional epoch here: 2 steps an epoch) is the same on both
        assert first["temperature"] == second["temperature"]
    assert [s["temperature"] for s in records[0]["steps"]] == pytest.approx([1.0, math.exp(-0.05), math.exp(-0.1)])
    # A hard negative here is another question's positive, so the other process's batch can hold a query's own
    # positive: that copy is left out of the query's denominator (the no-duplicates sampler sees one process only)
    excluded = 0
    for record in records:
        for step in record["steps"]:
            docs = [round(v, 4) for v in step["doc_views"]]
            copies = [
                [b, n]
                for b, p in enumerate(step["positive_index"])
                for n in range(len(docs))
                if n != p and docs[n] == docs[p]
            ]
            assert step["excluded"] == copies
            excluded += len(copies)
    assert excluded > 0
    if mode == "camvr":
        # the answer-view supervision: each process's own positives' answer views (the answer's snippet, view 1)
        assert all(s["answer_view"] == [1, 1] for r in records for s in r["steps"])


@pytest.mark.parametrize("mode", MODES)
def test_ddp_view_statistics_count_the_positives_of_both_processes(ddp_run, mode):
    logged = ranks(ddp_run, mode)[0]["log"]
    assert [h["step"] for h in logged] == [1, 2, 3]
    assert all(sum(h["view_wins"]) == 4 for h in logged)  # 2 positives a process, summed over both
    expected = ("global_loss", "local_loss") if mode == "mvr" else ("answer_view_loss", "local_loss")
    assert all(all(math.isfinite(h[k]) for k in expected) for h in logged)
    if mode == "camvr":
        assert all(0 <= h["answer_view_agreement"] <= 1 for h in logged)


@pytest.mark.parametrize("mode", MODES)
def test_ddp_ranks_agree_on_the_trained_weights(ddp_run, trainable_backbone, mode):
    from haystack_mvr.modeling.encoder_builders import viewer_encoder

    weights = [torch.load(ddp_run / mode / f"rank{r}.pt") for r in (0, 1)]
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    saved = st.MultiVectorEncoder(str(ddp_run / mode / "model"), device="cpu", trust_remote_code=True)
    assert all(torch.equal(v, weights[0][k]) for k, v in saved.state_dict().items())
    # and training moved them: the backbone's weights differ from the untrained ones
    fresh = viewer_encoder(trainable_backbone, mode=mode, views=3, device="cpu").state_dict()
    shared = [k for k in fresh if k in weights[0] and fresh[k].shape == weights[0][k].shape and "embeddings" not in k]
    assert shared and any(not torch.equal(fresh[k], weights[0][k]) for k in shared)
