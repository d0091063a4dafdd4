"""python -m tools.report.tb_export <dir> [--out file.csv]

Every scalar of every TensorBoard event file below <dir> as CSV rows (run, tag, step, wall_time,
value), for analysis outside TensorBoard. "run" is the event directory relative to <dir>, as
TensorBoard names runs. Both scalar forms are read: simple values (what tfbench.tensorboard.events writes)
and scalar-plugin tensors (what tf.summary.scalar writes). Default --out: <dir>/scalars.csv;
--out=- writes to stdout. Exit code 0 when scalars were written, 1 when none was found, 2 on bad input.
"""
from __future__ import annotations

import csv
import os
import sys
import types
from typing import Iterator, List, Tuple

from absl import app, flags

# TensorBoard reads event files through a TF-like API: TensorFlow itself when it is importable
# (seconds to import, and an export never needs it) or TensorBoard's own stub. The presence of
# the module "tensorboard.compat.notf" is TensorBoard's switch for the stub (what its
# //tensorboard/compat:no_tensorflow target provides).
sys.modules.setdefault("tensorboard.compat.notf", types.ModuleType("tensorboard.compat.notf"))

from tensorboard.backend.event_processing import event_accumulator  # noqa: E402
from tensorboard.util import tensor_util  # noqa: E402

from tfbench.config import helptext  # noqa: E402

FLAGS = flags.FLAGS
COLUMNS = ("run", "tag", "step", "wall_time", "value")
# Keep every scalar; skip the kinds an export never reads.
_SIZE_GUIDANCE = {event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0,
                  event_accumulator.IMAGES: 1, event_accumulator.AUDIO: 1,
                  event_accumulator.HISTOGRAMS: 1, event_accumulator.COMPRESSED_HISTOGRAMS: 1}

Row = Tuple[str, str, int, float, float]


def event_dirs(root: str) -> List[str]:
    """Directories directly holding event files, in path order."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        if any("tfevents" in name for name in filenames):
            found.append(dirpath)
    return found


def scalars(event_dir: str, run: str) -> Iterator[Row]:
    """Every scalar in one run directory, tag by tag, in the order written."""
    # Purging would drop points whose step goes back (e.g. a monitor's series after a task's),
    # and an export must keep everything that was written.
    acc = event_accumulator.EventAccumulator(event_dir, size_guidance=_SIZE_GUIDANCE, purge_orphaned_data=False)
    acc.Reload()
    tags = acc.Tags()
    for tag in sorted(tags.get(event_accumulator.SCALARS, [])):
        for e in acc.Scalars(tag):
            yield run, tag, e.step, e.wall_time, e.value
    for tag in sorted(tags.get(event_accumulator.TENSORS, [])):
        if acc.SummaryMetadata(tag).plugin_data.plugin_name != "scalars":
            continue
        for e in acc.Tensors(tag):
            yield run, tag, e.step, e.wall_time, float(tensor_util.make_ndarray(e.tensor_proto).item())


def export(root: str, out) -> int:
    """Writes the CSV to the open file `out`; returns the number of rows."""
    writer = csv.writer(out)
    writer.writerow(COLUMNS)
    count = 0
    for event_dir in event_dirs(root):
        run = os.path.relpath(event_dir, root)
        for row in scalars(event_dir, run):
            writer.writerow(row)
            count += 1
    return count


def define_flags() -> None:
    if "out" not in FLAGS:
        flags.DEFINE_string("out", "", "CSV file to write; default <dir>/scalars.csv; '-' for stdout.")


def main(argv) -> int:
    if len(argv) != 2:
        print("usage: python -m tools.report.tb_export <dir> [--out file.csv]", file=sys.stderr)
        return 2
    root = argv[1]
    if not os.path.isdir(root):
        print(f"{root}: no such directory", file=sys.stderr)
        return 2
    if FLAGS.out == "-":
        return 0 if export(root, sys.stdout) else 1
    path = FLAGS.out or os.path.join(root, "scalars.csv")
    with open(path, "w", newline="", encoding="utf-8") as f:
        count = export(root, f)
    print(f"{count} scalar(s) from {len(event_dirs(root))} event director(ies) written to {path}")
    return 0 if count else 1


if __name__ == "__main__":
    app.run(main, flags_parser=helptext.parser(__doc__, lambda: [("Export", ["out"])], "tools.report.tb_export",
                                               define_flags))
