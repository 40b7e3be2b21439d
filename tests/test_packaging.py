"""pyproject.toml's metadata: the project's links, and dependency floors at the oldest versions the tests were run
with (not the newest, which would make co-installing with other Haystack integrations harder than it needs to be)."""

from __future__ import annotations

import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

PYPROJECT = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
REPOSITORY = "https://github.com/haystack-mvr/haystack-mvr"
# The oldest versions a targeted test run passed with, everything else at the suite's usual versions: numpy,
# transformers and tqdm on tests/modeling, components, readers, evaluation, test_views and the FAISS store (commit
# 6a49fdb); orjson, xxhash, nltk and faiss-cpu on the FAISS store, the versioned folder, copy_documents, the context
# builder and the sentence splitter (faiss-cpu 1.9 failed: no owned-vector check).
OLDEST_TESTED = {
    "numpy": "2.0.2",
    "transformers": "5.10.0",
    "tqdm": "4.66.5",
    "orjson": "3.9.10",
    "xxhash": "3.2.0",
    "nltk": "3.9.1",
    "faiss-cpu": "1.11.0",
}


def requirements() -> dict[str, Requirement]:
    found = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]
    found += [Requirement(r) for rs in PYPROJECT["project"]["optional-dependencies"].values() for r in rs]
    return {r.name: r for r in found if not r.name.startswith("haystack-mvr")}


def floor(requirement: Requirement) -> Version | None:
    floors = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
    return max(floors) if floors else None


def test_the_project_links_to_its_repository_docs_issues_and_changelog():
    urls = PYPROJECT["project"]["urls"]
    assert set(urls) >= {"Homepage", "Documentation", "Issues", "Changelog"}
    assert urls["Homepage"] == REPOSITORY
    assert all(url.startswith(REPOSITORY) for url in urls.values())
    assert urls["Changelog"].endswith("/CHANGELOG.md") and urls["Issues"] == f"{REPOSITORY}/issues"


@pytest.mark.parametrize("name", sorted(OLDEST_TESTED))
def test_a_floor_is_no_newer_than_the_oldest_version_tested(name):
    requirement = requirements()[name]
    assert floor(requirement) is not None, requirement
    assert floor(requirement) <= Version(OLDEST_TESTED[name]), f"{requirement}: {OLDEST_TESTED[name]} passed the tests"
    assert requirement.specifier.contains(OLDEST_TESTED[name]), requirement


def test_every_floor_admits_the_versions_the_suite_runs():
    for name, requirement in requirements().items():
        try:
            installed = version(name)
        except PackageNotFoundError:
            continue  # an extra this venv does not install (gpu, qdrant-edge)
        low = floor(requirement)
        assert low is None or Version(installed) >= low, f"{requirement} excludes the installed {installed}"
