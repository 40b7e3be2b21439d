"""Arguments (CLI, JSON, validation), and `haystack-mvr train` / `mine-negatives` end to end on squad-mv."""

import argparse
import json
from dataclasses import fields

import pytest
import torch

from haystack_mvr.cli.train import add_mine_parser, add_train_parser
from haystack_mvr.modeling.st_encoder import open_encoder
from haystack_mvr.training.arguments import MiningArguments, TrainingArguments
from haystack_mvr.training.negatives import read_negatives


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="haystack-mvr")
    subparsers = p.add_subparsers(dest="command", required=True)
    add_train_parser(subparsers)
    add_mine_parser(subparsers)
    return p


def test_every_argument_has_help_and_a_flag():
    help_text = parser().parse_known_args(["train", "--model", "x"])[0]  # parses
    assert help_text.model == "x"
    for cls in (TrainingArguments, MiningArguments):
        for f in fields(cls):
            assert f.metadata.get("help"), f"{cls.__name__}.{f.name} has no help"
    sub = parser()._subparsers._group_actions[0].choices["train"]
    text = sub.format_help()
    for f in fields(TrainingArguments):
        assert "--" + f.name.replace("_", "-") in text


def test_cli_flags_override_the_json_config(tmp_path):
    config = tmp_path / "args.json"
    config.write_text(json.dumps({"model": "m", "data_dir": "d", "output_dir": "o", "epochs": 3, "num_views": 4}))
    ns = parser().parse_args(["train", "--config", str(config), "--epochs", "5", "--no-progress-bar"])
    args = TrainingArguments.from_namespace(ns)
    assert (args.epochs, args.num_views, args.progress_bar, args.mode, args.lr) == (5, 4, False, None, 2e-5)
    assert TrainingArguments.from_json(args.to_json(tmp_path / "again.json")) == args


def test_invalid_arguments_are_rejected_with_the_fix(tmp_path):
    base = {"model": "m", "data_dir": "d", "output_dir": "o"}
    with pytest.raises(ValueError, match="model is required"):
        TrainingArguments(data_dir="d", output_dir="o")
    with pytest.raises(ValueError, match="would never be used"):
        TrainingArguments(**base, num_hard_negatives=0)
    with pytest.raises(ValueError, match="fixed temperature ignores"):
        TrainingArguments(**base, temperature=0.5, temperature_alpha=0.3)
    with pytest.raises(ValueError, match="camvr"):
        TrainingArguments(**base, loss="answer-view", mode="mvr")
    with pytest.raises(ValueError, match="squad-mv format only"):
        TrainingArguments(**base, data_format="beir", include_dev_articles=True)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**base, "learning_rate": 1e-5}))
    with pytest.raises(ValueError, match="learning_rate"):
        TrainingArguments.from_json(bad)
    with pytest.raises(SystemExit):
        parser().parse_args(["train", "--mode", "colbert"])


def test_train_camvr_on_squad_mv_from_the_cli(tiny_backbone, squad_mv_dir, tmp_path):
    out = tmp_path / "camvr"
    ns = parser().parse_args(
        [
            "train",
            "--data-format",
            "squad-mv",
            "--data-dir",
            str(squad_mv_dir),
            "--model",
            str(tiny_backbone),
            "--mode",
            "camvr",
            "--num-views",
            "4",
            "--output-dir",
            str(out),
            "--epochs",
            "1",
            "--max-examples",
            "12",
            "--batch-size",
            "4",
            "--doc-max-length",
            "64",
            "--query-max-length",
            "16",
            "--num-bm25-negatives",
            "2",
            "--bm25-depth",
            "20",
            "--log-every",
            "1",
            "--no-progress-bar",
        ]
    )
    assert ns.handler(ns) == 0
    encoder = open_encoder(out, "cpu")
    assert (encoder.config.mode, encoder.config.num_views) == ("camvr", 4)
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert len(log) == 3 and all("answer_view_agreement" in r for r in log)  # squad-mv answers give answer views
    assert (out / "train_plot.png").is_file()
    assert json.loads((out / "training_args.json").read_text())["mode"] == "camvr"

    # Round two: mine with the round-one model, then train again with the mined negatives.
    negatives = tmp_path / "negatives.jsonl"
    ns = parser().parse_args(
        [
            "mine-negatives",
            "--model",
            str(out),
            "--data-dir",
            str(squad_mv_dir),
            "--output",
            str(negatives),
            "--max-examples",
            "12",
            "--num-negatives",
            "3",
            "--depth",
            "10",
            "--device",
            "cpu",
        ]
    )
    assert ns.handler(ns) == 0
    mined = read_negatives(negatives)
    assert len(mined) == 12 and all(len(v) == 3 for v in mined.values())
    ns = parser().parse_args(
        [
            "train",
            "--data-dir",
            str(squad_mv_dir),
            "--model",
            str(tiny_backbone),
            "--mode",
            "mvr",
            "--num-views",
            "1",
            "--output-dir",
            str(tmp_path / "dpr"),
            "--max-examples",
            "12",
            "--batch-size",
            "4",
            "--doc-max-length",
            "48",
            "--num-bm25-negatives",
            "0",
            "--negatives-file",
            str(negatives),
            "--no-progress-bar",
            "--max-steps",
            "2",
        ]
    )
    assert ns.handler(ns) == 0
    assert open_encoder(tmp_path / "dpr", "cpu").config.num_views == 1


def test_resume_latest_through_the_api(tiny_backbone, squad_mv_dir, tmp_path):
    from haystack_mvr.training import train

    common = {
        "model": str(tiny_backbone),
        "data_dir": str(squad_mv_dir),
        "output_dir": str(tmp_path),
        "mode": "mvr",
        "num_views": 2,
        "max_examples": 8,
        "batch_size": 4,
        "doc_max_length": 32,
        "num_bm25_negatives": 0,
        "num_hard_negatives": 0,
        "progress_bar": False,
        "save_every": 1,
        "log_every": 1,
        "warmup_ratio": 0.0,  # a one-step run would spend its step warming up from 0
    }
    train(TrainingArguments(**common, max_steps=1))
    first = open_encoder(tmp_path, "cpu").model.state_dict()
    train(TrainingArguments(**common, max_steps=2, resume_from="latest"))
    log = [json.loads(line)["step"] for line in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    assert log == [1, 2]
    # step 1 was not trained again: the second run resumed from checkpoint-1 (the library's resume)
    state = json.loads((tmp_path / "checkpoint-2" / "trainer_state.json").read_text())
    assert [h["step"] for h in state["log_history"] if "loss" in h] == [1, 2]
    resumed = open_encoder(tmp_path, "cpu").model.state_dict()
    assert resumed.keys() == first.keys()
    # the resumed step trained: at this run's rate, not the stopped run's finished schedule's last one (0)
    assert any(not torch.equal(first[k], resumed[k]) for k in first)
    with pytest.raises(FileNotFoundError, match="cannot resume"):
        train(TrainingArguments(**{**common, "output_dir": str(tmp_path / "empty")}, resume_from="latest"))
