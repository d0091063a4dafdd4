"""docs/architecture.md is true of the code: the one TensorFlow import, every path it names, and
the layout it describes (cluster/ by job, the parameter server one package)."""
import ast
import os
import re

from conftest import PACKAGES, ROOT, python_sources

TF_MODULES = ("tensorflow", "tf_keras", "keras")
ONE_IMPORT = "tfbench/framework/tf_import.py"
# the reference loops, written as a user would, sharing nothing of tfbench but the recommender's
# examples, which the parameter-server loop trains on as tfbench does (docs/architecture.md)
OWN_IMPORTS = {"tools/bench/minimal_loop.py": set(), "tools/bench/minimal_ps_loop.py": {"tfbench.workloads"}}


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


def test_the_reference_loops_share_nothing_of_tfbench_but_the_examples():
    shared = {rel: {name for name in imported(os.path.join(ROOT, rel)) if name.split(".")[0] in PACKAGES}
              for rel in OWN_IMPORTS}
    assert shared == OWN_IMPORTS, shared


def test_horovods_tensorflow_binding_is_imported_in_one_place():
    found = sorted(rel for rel, path in python_sources() for name in imported(path)
                   if name.startswith("horovod.tensorflow"))
    assert found == ["strategies/horovod.py"], found


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


# -- who imports what: the table of docs/architecture.md, read and checked ---------------------

def _rows():
    """(package prefixes, allowed words) of each row of the table "What each package holds"."""
    text = open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8").read()
    section = text.split("## What each package holds", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        assert len(cells) == 3, line[:80]
        packages = [p.strip("/").replace("/", ".") for p in re.findall(r"`([\w/]+/)`", cells[0])]
        rows.append((packages, cells[2]))
    return rows


def _allowed(words: str, floor_of):
    """A predicate (importer, imported) -> bool for the table's "may import" cell."""
    core = floor_of("tfbench.perfmodel")
    tests = []
    words = re.sub(r"\s*\((?!not Python)[^)]*\)", "", words)  # remarks in parentheses
    for word in (w.strip() for w in re.split(r",| and (?!below)", words) if w.strip()):
        if word == "everything":
            tests.append(lambda m, t: True)
        elif word == "core":
            tests.append(lambda m, t: t.startswith("tfbench") and floor_of(t) <= core)
        elif word == "everything below":
            tests.append(lambda m, t: floor_of(t) < floor_of(m))
        elif word == "everything below `tools/`":
            tests.append(lambda m, t: not t.startswith("tools"))
        elif word in ("nothing of tfbench", "(not Python)"):
            continue
        elif word.endswith(" and below"):
            tests.append(lambda m, t, top=floor_of(f"tfbench.{word.split()[0]}"): t.startswith("tfbench")
                         and floor_of(t) <= top)
        elif word.startswith("`"):
            tests.append(lambda m, t, p=word.strip("`/").replace("/", "."): t == p or t.startswith(p + "."))
        else:
            assert re.fullmatch(r"[a-z]+", word), f"a word of the table no rule reads: {word!r}"
            tests.append(lambda m, t, p=f"tfbench.{word}": t == p or t.startswith(p + "."))
    return lambda m, t: any(test(m, t) for test in tests)


def test_every_import_is_one_the_table_allows():
    from test_layers import floor_of, imports, modules

    mods = modules()
    graph = imports(mods)
    rows = _rows()
    claims = {p: _allowed(words, floor_of) for packages, words in rows for p in packages}
    assert "tfbench.app" in claims and "tfbench.perfmodel" in claims and "cluster.launchers" in claims

    def row_of(module):
        found = [p for p in claims if module == p or module.startswith(p + ".")]
        return max(found, key=len) if found else None

    unclaimed = [m for m in mods if row_of(m) is None and m not in ("tools",)]
    assert not unclaimed, f"modules no row of docs/architecture.md's table holds: {unclaimed}"
    wrong = [f"{m} imports {t}" for m, targets in sorted(graph.items()) if row_of(m)
             for t in sorted(targets) if row_of(t) != row_of(m) and not claims[row_of(m)](m, t)]
    assert not wrong, "imports docs/architecture.md's table does not allow:\n" + "\n".join(wrong)


def test_the_checker_reads_the_tables_words():
    from test_layers import floor_of

    allowed = _allowed("`tools/rundirs`, everything below", floor_of)
    assert allowed("tools.sweep.cli", "tools.rundirs.runs") and allowed("tools.sweep.cli", "cluster.plan.spec")
    assert not allowed("tools.sweep.cli", "tools.report.cli")
    allowed = _allowed("results and below", floor_of)
    assert allowed("tfbench.tensorboard.x", "tfbench.measure.stats") and not allowed("tfbench.tensorboard.x", "tfbench.loop")
    assert not _allowed("nothing of tfbench", floor_of)("tfbench.perfmodel.cost", "tfbench.config")
