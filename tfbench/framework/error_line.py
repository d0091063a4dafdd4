"""The one line that says why a task failed: the error's type and the informative line of its message.

TensorFlow's error from a traced step opens with 'Graph execution error:', then the node and the
Python stack it was defined at, and only then the op's own message ('Received a label value of
1000 which is outside the valid range of [0, 1000)', 'corrupted record at 0'); an error of
several ops carries it after a count and a status code ('2 root error(s) found. (0)
INVALID_ARGUMENT: ...'); an eager op's ends in '[Op:IteratorGetNext]' and begins with the
function it ran in. The informative line is the first line of the message that is none of these
wrappings, cut of them.

A task prints `tfbench: <task> failed: <Type>: <line>` (tfbench.task) after its traceback, and the
launcher reads that line back from the task's log into the run's failure reason
(cluster.launchers.supervise): one line naming the task and its error, the whole log kept in the
run directory. A parameter server's closures fail on a worker and raise on the chief, whose log
names the worker (TensorFlow's 'encountered the following error when processing closure'): the
line adds it. horovodrun names the first rank that failed, whose own log says why (first_rank).
No TensorFlow is imported here.
"""
from __future__ import annotations

import re
from typing import Optional

_WRAPPING = re.compile(
    r"^(Graph execution error:?|Detected at node\b.*|Node: .*|\d+ root error\(s\) found\.?|"
    r"\d+ successful operations\.?|\d+ derived errors ignored\.?|"
    r"Encountered when executing an operation using EagerExecutor\..*|Additional GRPC error information.*|"
    r"Traceback \(most recent call last\):|Stack trace.*|<stack traces unavailable>)$")
_CODE = re.compile(r"^\(\d+\) [A-Z_]+:\s*")  # '(0) INVALID_ARGUMENT:  ' of one of several errors
_FUNCTION = re.compile(r"^\{\{function_node [^}]*\}\}\s*")  # the function an eager op ran in
_TAIL = re.compile(r"\s*(\[\[\{\{node [^}]*\}\}\]\].*|\[Op:[^\]]*\].*)$")  # the node and op after the message
_MAX = 300


def informative(message: str) -> str:
    """The informative line of an error message ('' for an empty one)."""
    lines = [line for line in message.splitlines() if line.strip()]
    for line in lines:
        if line[:1].isspace() and not _CODE.match(line.strip()):  # the stack a node was defined at, and its code
            continue
        text = _TAIL.sub("", _FUNCTION.sub("", _CODE.sub("", line.strip()))).strip()
        if text and not _WRAPPING.match(text):
            return _cut(text)
    return _cut(lines[0].strip()) if lines else ""


def describe(error: BaseException) -> str:
    """'<Type>: <informative line>' of an exception."""
    line = informative(str(error))
    return f"{type(error).__name__}: {line}" if line else type(error).__name__


def task_line(task: str, error: BaseException) -> str:
    """The line a failing task prints last: `tfbench: <task> failed: <Type>: <line>`."""
    return f"tfbench: {task} failed: {describe(error)}"


def told(log_text: str, task: str) -> Optional[str]:
    """What a task's log says it failed of: its own last failure line (tfbench.task's, or the one-line
    error of a refused input), else the last line of an uncaught Python traceback; None when neither."""
    own = re.compile(rf"^tfbench: (?:{re.escape(task)} failed|error): (.+)$")
    uncaught = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)): (.+)$")
    closure = re.compile(r"/job:(\w+)/(?:replica:\d+/)?task:(\d+) encountered the following error when processing "
                         r"closure")
    said = raised = worker = None
    for line in log_text.splitlines():
        line = line.rstrip()
        match = own.match(line)
        if match:
            said = match.group(1)
            continue
        match = closure.search(line)
        if match:
            worker = worker or f"{match.group(1)}_{match.group(2)}"
        match = uncaught.match(line)
        if match:
            raised = f"{match.group(1).rsplit('.', 1)[-1]}: {informative(match.group(2))}"
    found = said or raised
    return f"{found} (in a closure on {worker})" if found and worker else found


def first_rank(log_text: str) -> Optional[int]:
    """The rank horovodrun's log names as the first process to exit non-zero, or None."""
    match = re.search(r"The first process to do so was:\s*\n\s*Process name: (\d+)", log_text)
    return int(match.group(1)) if match else None


def _cut(text: str) -> str:
    return text if len(text) <= _MAX else text[:_MAX - 3] + "..."
