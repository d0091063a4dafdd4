"""The environment `make setup` made: its scripts start (a shebang naming the interpreter of a
clone that is gone would leave `tensorboard` and `horovodrun` unable to start)."""
import os
import sys


def test_every_script_of_the_environment_names_an_interpreter_that_exists():
    bin_dir = os.path.join(sys.prefix, "bin")
    broken = []
    for name in sorted(os.listdir(bin_dir)):
        path = os.path.join(bin_dir, name)
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            first = f.readline(512)
        if first.startswith(b"#!"):
            interpreter = first[2:].split()[0].decode()
            if not os.path.exists(interpreter):
                broken.append(f"{name}: {interpreter}")
    assert not broken, broken
