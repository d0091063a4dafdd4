"""docs/architecture.md is true of the code: the one TensorFlow import, every path it names, and
the layout it describes (cluster/ by job, the parameter server one package)."""
import ast
import os
import re

from conftest import ROOT, python_sources

TF_MODULES = ("tensorflow", "tf_keras", "keras")
ONE_IMPORT = "tfbench/framework/tf_import.py"
# the reference loops, written as a user would, sharing nothing of tfbench (docs/architecture.md)
OWN_IMPORTS = {"tools/bench/minimal_loop.py", "tools/bench/minimal_ps_loop.py"}


def imported(path):
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            yield node.module


def test_tensorflow_is_imported_in_one_place():
    found = [f"{rel}: {name}" for rel, path in python_sources() if rel != ONE_IMPORT and rel not in OWN_IMPORTS
             for name in imported(path) if name.split(".")[0] in TF_MODULES]
    assert not found, "TensorFlow imported outside tfbench/framework/tf_import.py:\n" + "\n".join(found)
    assert {n.split(".")[0] for n in imported(os.path.join(ROOT, ONE_IMPORT))} >= {"tensorflow", "tf_keras"}


def test_every_path_the_doc_names_exists():
    text = open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8").read()
    paths = set(re.findall(r"`((?:tfbench|cluster|strategies|tools|tests|docs)/[\w./<>-]*)`", text))
    missing = [p for p in sorted(paths) if "<" not in p and not os.path.exists(os.path.join(ROOT, p))]
    assert paths and not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_cluster_holds_its_modules_by_job():
    direct = [f for f in os.listdir(os.path.join(ROOT, "cluster")) if f.endswith(".py")]
    assert len(direct) <= 12, f"modules directly in cluster/ (put them in the package of their job): {direct}"


def test_the_parameter_server_is_one_package():
    flat = [f for f in os.listdir(os.path.join(ROOT, "strategies")) if f.startswith(("ps_", "parameter_server."))]
    assert not flat, f"parameter-server modules beside the other strategies: {flat}"
    assert os.path.exists(os.path.join(ROOT, "strategies", "parameter_server", "__init__.py"))


def test_the_performance_model_is_in_rooms():
    """tfbench/perfmodel: a few modules at its top, the rest in its rooms (dense, sparse, fitting, curves)."""
    top = os.path.join(ROOT, "tfbench", "perfmodel")
    flat = [f for f in os.listdir(top) if f.endswith(".py")]
    rooms = [d for d in os.listdir(top) if os.path.exists(os.path.join(top, d, "__init__.py"))]
    assert len(flat) <= 12, f"modules flat in tfbench/perfmodel (put them in a room): {flat}"
    assert len(rooms) >= 3, rooms
