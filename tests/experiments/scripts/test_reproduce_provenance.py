"""reproduce.sh's warning about uncommitted changes says what the records will say: a build made
with uncommitted changes (every record's env.git_dirty), or a checkout changed after a clean build
(records name the build's commit as clean); with MEMSTRAT_GIT_SHA given, the checkout's git
metadata is not the source of truth and is not consulted."""
import os
import subprocess

import pytest
from script_support import reproduce_tree

FAKE_MEMSTRAT = """#!/bin/sh
case "$1" in
  info) echo "device 0 of 1: NVIDIA Test GPU" ;;
  --version) echo "memstrat 0.1.0"; echo "commit 0123456789ab$FAKE_DIRTY" ;;
  *) echo "fake memstrat: $*" >&2; exit 9 ;;
esac
"""
BUILD_WARNING = "was made with uncommitted changes; every record says so"
TREE_WARNING = "the working tree has uncommitted changes that the build of 0123456789ab"


def git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})


@pytest.fixture
def fake_repo(tmp_path):
    """reproduce_tree, committed to git (build/ ignored)."""
    reproduce_tree(tmp_path, FAKE_MEMSTRAT)
    (tmp_path / ".gitignore").write_text("build/\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "tree")
    return tmp_path


def run(repo, dirty_build=False, sha=None):
    env = {k: v for k, v in os.environ.items()
           if k not in ("MEMSTRAT_GIT_SHA", "MEMSTRAT_GIT_DIRTY")}
    env["FAKE_DIRTY"] = " (built with uncommitted changes)" if dirty_build else ""
    if sha:
        env["MEMSTRAT_GIT_SHA"] = sha
    return subprocess.run(["bash", str(repo / "experiments/scripts/reproduce.sh"), "--stages",
                           "data"], capture_output=True, text=True, env=env, check=False,
                          timeout=60, cwd=repo)


def test_a_clean_build_of_a_clean_tree_warns_of_nothing(fake_repo):
    r = run(fake_repo)
    assert "stage data" in r.stdout, r.stdout + r.stderr  # got past the checks
    assert "warning" not in r.stdout


def test_a_build_with_uncommitted_changes_is_named(fake_repo):
    r = run(fake_repo, dirty_build=True)
    assert BUILD_WARNING in r.stdout and TREE_WARNING not in r.stdout, r.stdout


def test_a_tree_changed_after_a_clean_build_is_named(fake_repo):
    script = fake_repo / "experiments/scripts/reproduce.sh"
    script.write_text(script.read_text() + "\n# changed\n")
    r = run(fake_repo)
    assert TREE_WARNING in r.stdout and BUILD_WARNING not in r.stdout, r.stdout


def test_a_given_commit_is_not_second_guessed_from_the_checkout(fake_repo):
    script = fake_repo / "experiments/scripts/reproduce.sh"
    script.write_text(script.read_text() + "\n# the copy's own git metadata differs\n")
    r = run(fake_repo, sha="0123456789ab")
    assert "stage data" in r.stdout, r.stdout + r.stderr
    assert "warning" not in r.stdout
