"""Every file the Makefile, README.md, BUILD.md and .ci/run name is tracked by git, so that a file
ignored by .gitignore (or never added) cannot make a command pass on one machine only."""
import os
import re
import shutil
import subprocess

import pytest

from conftest import ROOT

DOCUMENTS = ("Makefile", "README.md", "BUILD.md", ".ci/run")
SOURCE_DIRS = ("tfbench", "strategies", "cluster", "tools", "tests", ".ci")
# Paths that commands create at run time, never tracked.
GENERATED = re.compile(r"^(runs|sweeps|\.venv)(/|$)")
PATH = re.compile(r"(?<![\w./~-])((?:%s)/[\w./-]*[\w])" % "|".join(re.escape(d) for d in SOURCE_DIRS))
MODULE = re.compile(r"-m\s+((?:%s)(?:\.\w+)+)" % "|".join(d for d in SOURCE_DIRS if not d.startswith(".")))


def tracked_files():
    if shutil.which("git") is None or not os.path.exists(os.path.join(ROOT, ".git")):
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return set(out.split())


def referenced_paths(text: str):
    """Repository paths a document names: tools/sweeps/quick.yaml, tools/scripts/build_horovod.sh, and
    `python -m tools.sweep` as tools/sweep/__main__.py (or a module's tools/sweep.py)."""
    paths = {p.rstrip(".") for p in PATH.findall(text)}
    modules = {m.replace(".", "/") for m in MODULE.findall(text)}
    return {p for p in paths if not GENERATED.match(p) and "<" not in p}, modules


def test_every_file_named_by_the_build_and_docs_is_tracked():
    tracked = tracked_files()
    tracked_dirs = {os.path.dirname(f) for f in tracked}
    missing = []
    for document in DOCUMENTS:
        with open(os.path.join(ROOT, document), encoding="utf-8") as f:
            paths, modules = referenced_paths(f.read())
        for path in paths:
            is_dir = any(d == path or d.startswith(path + "/") for d in tracked_dirs)
            if path not in tracked and not is_dir:
                missing.append(f"{document}: {path}")
        for module in modules:
            if f"{module}.py" not in tracked and f"{module}/__main__.py" not in tracked:
                missing.append(f"{document}: python -m {module.replace('/', '.')}")
    assert not missing, "named but not tracked by git:\n" + "\n".join(sorted(missing))


def test_the_reference_finder_sees_configs_scripts_and_modules():
    paths, modules = referenced_paths("make run  # tools/sweeps/quick.yaml, ~3 min\n"
                                      "VENV=.venv bash tools/scripts/build_horovod.sh\n"
                                      "python -m tools.sweep --sweep_dir=sweeps/quick-1 --logdir runs/x\n")
    assert paths == {"tools/sweeps/quick.yaml", "tools/scripts/build_horovod.sh"}
    assert modules == {"tools/sweep"}


def test_ignore_rules_do_not_swallow_source_folders():
    """A path under a source folder named like an ignored output folder stays visible to git."""
    tracked_files()
    probe = ["tools/sweeps/quick.yaml", "tools/sweeps/new.yaml", "tests/runs/x.py", "cluster/sweeps/a.py"]
    result = subprocess.run(["git", "check-ignore", "--no-index", *probe], cwd=ROOT, capture_output=True, text=True)
    assert result.stdout.strip() == "", f"ignored by .gitignore: {result.stdout.split()}"
