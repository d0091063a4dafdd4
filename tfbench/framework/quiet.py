"""TensorFlow's C++ start-up lines kept off the console, unless the user asked for them
(TF_CPP_MIN_LOG_LEVEL 0 or 1).

TF_CPP_MIN_LOG_LEVEL=2 does not reach the lines TensorFlow's libraries log while they load,
before absl's logging is set up ('I0000 ... oneDNN custom operations are on', 'Could not find
cuda drivers'), nor the error a machine without a GPU driver gives when the devices are first
listed ('failed call to cuInit'): while TensorFlow loads and lists its devices, this process's
stderr goes to a file, and every line of it but those is written through afterwards. Only the
standard library here: the hand-written reference loops of tools.bench use it too.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile

STARTUP_LINE = re.compile(rb"^(?:[IW]\d{4} \d+:\d+:[\d.]+ +\d+ \S+:\d+\] .*"
                          rb"|E\d{4} \d+:\d+:[\d.]+ +\d+ \S+:\d+\] failed call to cuInit: .*"
                          rb"|WARNING: All log messages before absl::InitializeLog\(\) is called are written to "
                          rb"STDERR)$")


@contextlib.contextmanager
def without_startup_lines():
    """This process's stderr, less TensorFlow's C++ start-up lines, for the duration."""
    if os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2") in ("0", "1"):
        yield
        return
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no stderr at all
        yield
        return
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            kept = [line for line in caught.read().splitlines(keepends=True) if not STARTUP_LINE.match(line.rstrip())]
            if kept:
                os.write(2, b"".join(kept))
