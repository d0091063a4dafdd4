"""A fast test run (`make test-fast`) starts no TensorFlow and no network namespace:
tests/conftest.py puts this folder first on PYTHONPATH, so that every Python process the tests
start loads it, and loads it in pytest's own process too.

- Importing TensorFlow fails, and the process, its command line and the test that started it are
  written to $TFBENCH_FAST_GUARD_DIR, where conftest finds them and fails that test.
- A local multi-task run goes ahead without its private network namespace, as it does for a user
  without root (cluster/net/private_net.py), so that a fast run as root creates none either; the
  whole suite runs the same tests with the namespace."""
import importlib.machinery
import os
import sys

REFUSED = ("tensorflow",)  # tf_keras, keras and horovod.tensorflow import it too
NO_NAMESPACE = "cluster.net.private_net"
DIR_ENV = "TFBENCH_FAST_GUARD_DIR"


def no_namespace(run):
    """cluster.net.private_net.create in a fast run: the answer it gives a user without root."""
    return None, None, "a fast test run (make test-fast) creates no network namespace"


class FastGuard:
    """A meta path finder: refuses the modules above, noting who asked; patches private_net."""

    def __init__(self, directory):
        self.directory = directory

    def find_spec(self, name, path=None, target=None):
        if name == NO_NAMESPACE:
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is not None:
                load = spec.loader.exec_module

                def exec_module(module):
                    load(module)
                    module.create = no_namespace

                spec.loader.exec_module = exec_module
            return spec
        if name.partition(".")[0] not in REFUSED:
            return None
        test = os.environ.get("PYTEST_CURRENT_TEST", "outside any test")
        with open(os.path.join(self.directory, f"{os.getpid()}.txt"), "a") as f:
            f.write(f"{test}\t{name}\t{' '.join(sys.argv)}\n")
        raise ImportError(f"{name} imported in a fast test run (tests/fast_guard)")


def install(directory):
    if not any(isinstance(f, FastGuard) for f in sys.meta_path):
        sys.meta_path.insert(0, FastGuard(directory))


if os.environ.get(DIR_ENV):
    install(os.environ[DIR_ENV])
