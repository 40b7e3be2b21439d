"""benchmarks/ is a package with an index (issue 32): every script and results file is in its README, scripts import
each other as ``benchmarks.<script>`` without ``sys.path`` edits, and the shared harness writes what they record."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCHMARKS = REPO / "benchmarks"
README = (BENCHMARKS / "README.md").read_text(encoding="utf-8")
SHARED = {"__init__.py", "harness.py", "packaged_model.py"}
SCRIPTS = sorted(p for p in BENCHMARKS.iterdir() if p.suffix in (".py", ".sh") and p.name not in SHARED)
MODULES = {p.stem for p in BENCHMARKS.glob("*.py")}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_script_is_in_the_index(script):
    assert f"[`{script.name}`]" in README, f"benchmarks/README.md does not list {script.name}: add its row"


def test_every_results_file_is_in_the_index():
    missing = [
        path.name
        for path in sorted((BENCHMARKS / "results").iterdir())
        if path.name != "README.md"
        and ".smoke." not in path.name  # smoke runs' files, never committed (.gitignore)
        and (path.name if path.is_dir() else path.name.rsplit(".", 1)[0]) not in README
    ]
    assert not missing, f"benchmarks/README.md names no command for {missing}"


@pytest.mark.parametrize("script", [p for p in SCRIPTS if p.suffix == ".py"], ids=lambda p: p.name)
def test_scripts_import_each_other_through_the_package(script):
    source = script.read_text(encoding="utf-8")
    assert "sys.path" not in source, f"{script.name} edits sys.path: import benchmarks.<script> instead"
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            assert name.split(".")[0] not in MODULES, f"{script.name} imports {name}: use benchmarks.{name}"
    assert f"python benchmarks/{script.name}" not in source, f"{script.name}: say python -m benchmarks.{script.stem}"


def test_readmes_run_the_scripts_as_modules():
    for readme in (REPO / "README.md", BENCHMARKS / "results" / "README.md", BENCHMARKS / "README.md"):
        text = readme.read_text(encoding="utf-8")
        stale = {name for name in MODULES if f"python benchmarks/{name}.py" in text}
        assert not stale, f"{readme.relative_to(REPO)} runs {sorted(stale)} by path: python -m benchmarks.<script>"


def test_harness_writes_json_with_a_date_and_the_markdown(tmp_path):
    from benchmarks.harness import alternate, machine_label, write_results

    label = machine_label(threads=2, detail="bf16")
    assert label.endswith("(2 threads, bf16)") and "CPU only" in label
    calls = []
    runs = alternate({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, repeats=3, warmup=1)
    assert calls == ["a", "b"] * 4  # one warm-up round, then three, the variants in turn
    assert {name: len(seconds) for name, seconds in runs.items()} == {"a": 3, "b": 3}
    path = write_results(tmp_path / "sub" / "bench", {"machine": label, "runs": runs}, markdown="# table")
    payload = json.loads(path.read_text(encoding="utf-8"))
    assert payload["machine"] == label and payload["runs"] == runs and payload["date"].endswith("+00:00")
    assert (tmp_path / "sub" / "bench.md").read_text(encoding="utf-8") == "# table\n"


def test_harness_keeps_a_dotted_stem_whole(tmp_path):
    from benchmarks.harness import write_results

    path = write_results(tmp_path / "rag_context.pages", {"x": 1}, markdown="# t")
    assert path.name == "rag_context.pages.json"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rag_context.pages.json", "rag_context.pages.md"]


def test_the_harness_needs_no_torch():
    probe = (
        "import sys, benchmarks.harness; print(sorted(m for m in ('torch', 'numpy', 'haystack') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True)
    assert result.stdout.strip() == "[]"


@pytest.mark.slow
@pytest.mark.parametrize("script", [p for p in SCRIPTS if p.suffix == ".py"], ids=lambda p: p.name)
def test_every_script_runs_as_a_module(script):
    """``python -m benchmarks.<script> --help`` from the repository root: the package imports resolve."""
    result = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{script.stem}", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "usage" in result.stdout.lower(), result.stdout[:500]
