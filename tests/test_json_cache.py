"""The shared cache file (FLOPs, memory, peaks): writers in several processes at once keep every
key, and a reader never sees a torn file. No TensorFlow."""
import json
import multiprocessing
import os

from tfbench.measure import json_cache

WRITERS, KEYS = 4, 30


def _writer(path, who, start):
    start.wait()
    for k in range(KEYS):
        json_cache.write(path, f"{who}/{k}", {"writer": who, "k": k, "pad": "x" * 2000})


def _reader(path, start, stop, torn, reads):
    start.wait()
    while not stop.is_set():
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            continue
        try:
            json.loads(text)
        except ValueError:
            torn.value += 1
        reads.value += 1


def test_concurrent_writers_keep_every_key_and_readers_never_see_a_torn_file(tmp_path):
    path = str(tmp_path / "cache" / "counts.json")
    ctx = multiprocessing.get_context("fork")
    start, stop = ctx.Barrier(WRITERS + 1), ctx.Event()
    torn, reads = ctx.Value("i", 0), ctx.Value("i", 0)
    reader = ctx.Process(target=_reader, args=(path, start, stop, torn, reads))
    writers = [ctx.Process(target=_writer, args=(path, w, start)) for w in range(WRITERS)]
    reader.start()
    for p in writers:
        p.start()
    for p in writers:
        p.join(120)
        assert p.exitcode == 0
    stop.set()
    reader.join(30)
    data = json_cache.read(path)
    assert sorted(data) == sorted(f"{w}/{k}" for w in range(WRITERS) for k in range(KEYS))
    assert all(data[f"{w}/{k}"]["k"] == k for w in range(WRITERS) for k in range(KEYS))
    assert reads.value > 0 and torn.value == 0
    leftovers = sorted(os.listdir(os.path.dirname(path)))
    assert leftovers == ["counts.json", "counts.json.lock"]  # no temporary file left behind


def test_write_replaces_a_value_and_keeps_the_others(tmp_path):
    path = str(tmp_path / "peaks.json")
    json_cache.write(path, "a", 1)
    json_cache.write(path, "b", [2, 3])
    json_cache.write(path, "a", {"x": 4})
    assert json_cache.read(path) == {"a": {"x": 4}, "b": [2, 3]}
    assert json_cache.read(str(tmp_path / "missing.json")) == {}
