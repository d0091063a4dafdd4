"""The house's direction (docs/architecture.md): each floor imports only its own floor and those
below; no import circles between modules or between folders, function-level imports included;
tfbench/ holds few modules directly, tools/ its packages by job (at most a few entry shims beside
them) and no module is over 400 lines.

Imports are read with ast, so a lazy import inside a function counts like any other."""
import ast
import os

from conftest import ROOT, python_sources

# The front door (tfbench/app), the `python -m` names that open on it or on config alone, and the
# entry points of cluster/ and tools/.
ENTRY_POINTS = ("tfbench.app", "tfbench.__main__", "tfbench.task", "tfbench.usage", "tfbench.commands", "tools",
                "cluster.by_hand", "cluster.k8s", "cluster.merge")
FRONT_DOOR = "tfbench.app"
# Bottom to top. A module's floor is that of the longest prefix naming it.
FLOORS = (
    ("tfbench.framework",),
    ("tfbench.models", "tfbench.data"),
    ("tfbench.workloads",),
    ("tfbench.config",),
    ("tfbench.measure",),
    ("tfbench.results",),
    ("tfbench.tensorboard",),
    ("tfbench.loop", "tfbench.monitor"),
    ("tfbench.perfmodel",),
    ("cluster", "strategies"),
    ("cluster.slurm",),
    ("cluster.launchers",),
    ENTRY_POINTS,
)


def modules():
    return {rel[:-3].replace(os.sep, ".").removesuffix(".__init__"): path for rel, path in python_sources()}


def imports(mods):
    """{module: {imported project modules}}; `from pkg import name` names the module pkg.name
    when there is one, else pkg itself (whose __init__ runs)."""
    graph = {}
    for module, path in mods.items():
        package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                continue
            for name in names:
                while name and name not in mods:
                    name = name.rpartition(".")[0]
                if name and name != module and not module.startswith(name + "."):
                    targets.add(name)
        graph[module] = targets
    return graph


def floor_of(module: str) -> int:
    best, floor = "", None
    for level, prefixes in enumerate(FLOORS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) >= len(best):
                best, floor = prefix, level
    assert floor is not None, f"{module} has no floor in tests/test_layers.py: add its package to FLOORS"
    return floor


def cycles(graph):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def folder_graph(mods, graph):
    def folder(m):
        return m if mods[m].endswith("__init__.py") else m.rpartition(".")[0]

    folders = {}
    for module, targets in graph.items():
        folders.setdefault(folder(module), set()).update(folder(t) for t in targets if folder(t) != folder(module))
    return folders


def test_no_floor_imports_a_floor_above_it():
    graph = imports(modules())
    upward = [f"{m} (floor {floor_of(m)}) imports {t} (floor {floor_of(t)})"
              for m, targets in sorted(graph.items()) for t in sorted(targets) if floor_of(t) > floor_of(m)]
    assert not upward, "imports against the floors (docs/architecture.md):\n" + "\n".join(upward)


def test_no_import_circles_between_modules_or_folders():
    mods = modules()
    graph = imports(mods)
    assert cycles(graph) == []
    assert cycles(folder_graph(mods, graph)) == []


def test_the_checker_sees_lazy_imports_and_circles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    graph = imports(modules())
    # imported inside a method
    assert "strategies.parameter_server.sync" in graph["strategies.parameter_server.coordinator"]


def test_only_the_front_door_of_tfbench_enters_cluster_or_strategies():
    """tfbench/ is the ground the middle floor stands on: its modules import neither cluster/ nor
    strategies/, except the front door (tfbench/app) and the `python -m` names that open on it."""
    graph = imports(modules())
    doors = (FRONT_DOOR, "tfbench.__main__", "tfbench.task")
    entered = [f"{m} imports {t}" for m, targets in sorted(graph.items())
               if m.startswith("tfbench.") and not m.startswith(doors)
               for t in sorted(targets) if t.split(".")[0] in ("cluster", "strategies")]
    assert not entered, "modules of tfbench/ behind the front door import cluster/ or strategies/:\n" + "\n".join(entered)
    assert all(t.startswith(FRONT_DOOR) for door in doors[1:] for t in graph[door] if not t.startswith("tfbench.config"))


def test_tools_holds_packages_by_job():
    direct = [f for f in os.listdir(os.path.join(ROOT, "tools")) if f.endswith(".py") and f != "__init__.py"]
    assert len(direct) <= 5, f"modules directly in tools/ (put them in the package of their job): {direct}"


def test_few_modules_in_tfbench_and_none_too_long():
    direct = [f for f in os.listdir(os.path.join(ROOT, "tfbench")) if f.endswith(".py")]
    assert len(direct) <= 15, direct
    long = {m: n for m, path in modules().items() if (n := sum(1 for _ in open(path, encoding="utf-8"))) > 400}
    assert not long, long
