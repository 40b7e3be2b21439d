"""benchmarks/ is a package with an index (issue 32): every script and results file is in its README, scripts import
each other as ``benchmarks.<script>`` without ``sys.path`` edits, the shared harness writes what they record, every
results file names the command that wrote it, and one whose script was removed names a commit that holds it."""

from __future__ import annotations

import ast
import json
import re
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
    from benchmarks.harness import machine_label, write_results

    label = machine_label(threads=2, detail="bf16")
    assert label.endswith("(2 threads, bf16)") and "CPU only" in label
    path = write_results(tmp_path / "sub" / "bench", {"machine": label, "runs": [1.0]}, markdown="# table")
    payload = json.loads(path.read_text(encoding="utf-8"))
    assert payload["machine"] == label and payload["runs"] == [1.0] and payload["date"].endswith("+00:00")
    assert "command" not in payload  # run from pytest, not as a benchmark: no command to name
    assert (tmp_path / "sub" / "bench.md").read_text(encoding="utf-8") == "# table\n"


def test_command_line_is_the_module_and_its_arguments():
    from benchmarks.harness import command_line

    script = str(BENCHMARKS / "rag_answers.py")
    assert command_line([script, "--tier", "pages"]) == "python -m benchmarks.rag_answers --tier pages"
    assert command_line([script, "--rows", "chunks @ 256"]) == "python -m benchmarks.rag_answers --rows 'chunks @ 256'"
    assert command_line([str(REPO / "tests" / "x.py"), "-q"]) is None  # not a benchmark
    assert command_line(["-c"]) is None and command_line([]) is None


def test_write_results_names_the_command_that_ran(tmp_path, monkeypatch):
    from benchmarks.harness import write_results

    monkeypatch.setattr(sys, "argv", [str(BENCHMARKS / "store_memory.py"), "--sizes", "1000"])
    path = write_results(tmp_path / "a", {"x": 1}, markdown="# A\n\nrows")
    assert json.loads(path.read_text(encoding="utf-8"))["command"] == "python -m benchmarks.store_memory --sizes 1000"
    assert (
        (tmp_path / "a.md")
        .read_text(encoding="utf-8")
        .endswith("rows\n\nWritten by `python -m benchmarks.store_memory --sizes 1000`.\n")
    )
    # a payload or markdown that names its command already is written as given
    own = "# B\n\n`python -m benchmarks.store_memory --portable`"
    path = write_results(tmp_path / "b", {"command": "python -m benchmarks.store_memory --portable"}, markdown=own)
    assert json.loads(path.read_text(encoding="utf-8"))["command"] == "python -m benchmarks.store_memory --portable"
    assert (tmp_path / "b.md").read_text(encoding="utf-8") == own + "\n"
    path = write_results(tmp_path / "c", {"commands": ["python -m benchmarks.quality --tier squad-mv"]})
    assert "command" not in json.loads(path.read_text(encoding="utf-8"))


RESULTS = BENCHMARKS / "results"
REMOVED_LINE = re.compile(
    r"^Written by `(?P<command>[^`]*)`.* at commit (?P<commit>[0-9a-f]{7,40}) \(`(?P<script>benchmarks/[\w.]+)`, "
    r"since removed",
    flags=re.M,
)
NAMED = re.compile(r"python -m benchmarks\.(\w+)|bash benchmarks/([\w.-]+\.sh)")


def results_files() -> dict[str, dict[str, Path]]:
    """Each results stem's files by suffix (``squad-mv`` -> {".json": ..., ".md": ...}); charts are left out."""
    stems: dict[str, dict[str, Path]] = {}
    for path in sorted(RESULTS.iterdir()):
        if path.suffix in (".json", ".md") and path.name != "README.md" and ".smoke." not in path.name:
            stems.setdefault(path.name[: -len(path.suffix)], {})[path.suffix] = path
    return stems


def recorded(files: dict[str, Path]) -> tuple[dict, str]:
    payload = json.loads(files[".json"].read_text(encoding="utf-8")) if ".json" in files else {}
    text = files[".md"].read_text(encoding="utf-8") if ".md" in files else ""
    return (payload if isinstance(payload, dict) else {}), text


def test_every_results_file_names_the_command_that_wrote_it():
    missing = []
    for stem, files in results_files().items():
        payload, text = recorded(files)
        in_json = any(isinstance(payload.get(k), str | list | dict) for k in ("command", "commands", "written_by"))
        if not (in_json or NAMED.search(text)):
            missing.append(stem)
    assert not missing, f"these results name no command (a `command` in the .json or in the .md): {missing}"


def test_results_of_removed_scripts_name_the_commit_that_holds_the_script():
    git = (REPO / ".git").exists()
    for stem, files in results_files().items():
        payload, text = recorded(files)
        written_by = payload.get("written_by")
        line = REMOVED_LINE.search(text)
        if line and not written_by and ".json" not in files:  # a markdown file alone: its line says it all
            written_by = {"command": line["command"], "commit": line["commit"], "script": line["script"]}
            written_by["script_removed"] = True
        commands = [written_by["command"]] if written_by else []
        commands += [payload["command"]] if isinstance(payload.get("command"), str) else []
        commands += payload.get("commands", []) if isinstance(payload.get("commands"), list) else []
        commands += re.findall(r"^Written by `([^`]*)`", text, flags=re.M)
        named = {m.group(1) for c in commands for m in NAMED.finditer(c) if m.group(1)}
        removed = sorted(name for name in named if name not in MODULES)
        if not removed:
            assert not written_by, f"{stem}: written_by names a removed script, but its command's script is here"
            continue
        assert written_by, f"{stem} was written by removed {removed}: add written_by (command, commit, script)"
        script, commit = written_by["script"], written_by["commit"]
        assert written_by["script_removed"] and not (REPO / script).exists(), f"{stem}: {script} still exists"
        assert script == f"benchmarks/{removed[0]}.py" and re.fullmatch(r"[0-9a-f]{7,40}", commit), stem
        if ".md" in files:
            assert f"at commit {commit}" in text, f"{stem}.md does not name the commit {commit}"
        if git:
            held = subprocess.run(["git", "cat-file", "-e", f"{commit}:{script}"], cwd=REPO, check=False)
            assert held.returncode == 0, f"{stem}: commit {commit} does not hold {script}"


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
