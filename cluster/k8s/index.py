"""`python -m cluster.k8s.index PLAN_JSON ROLE COMMAND...`: TF_CONFIG from an Indexed Job's pod index.

In the JobSet and the plain Indexed Jobs cluster.k8s writes, each role's pods form one Indexed
Job, and Kubernetes gives pod i JOB_COMPLETION_INDEX=i: that pod is the role's task i. This sets
TF_CONFIG to that task's (whose address is that pod's DNS name, see cluster.k8s.manifests) and
replaces itself with COMMAND (`python -m tfbench.task --task tf_config ...`).
"""
from __future__ import annotations

import json
import os
import sys

from cluster.plan.spec import ClusterPlan


def tf_config_for(plan: ClusterPlan, role: str, index: int) -> dict:
    """The TF_CONFIG of the plan's task `role`_`index` (ValueError when the plan has none)."""
    try:
        return plan.task(f"{role}_{index}").tf_config
    except KeyError:
        raise ValueError(f"the plan has no task {role}_{index}: pod index {index} of role {role} is outside "
                         f"its {sum(t.role == role for t in plan.tasks)} task(s)") from None


def main(argv) -> int:
    if len(argv) < 4:
        print("usage: python -m cluster.k8s.index PLAN_JSON ROLE COMMAND...", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        plan = ClusterPlan.from_dict(json.load(f))
    index = os.environ.get("JOB_COMPLETION_INDEX", "")
    try:
        if not index.isdigit():
            raise ValueError(f"JOB_COMPLETION_INDEX={index!r}: run this as an Indexed Job's pod")
        tf_config = tf_config_for(plan, argv[2], int(index))
    except ValueError as e:
        print(f"cluster.k8s.index: {e}", file=sys.stderr)
        return 2
    os.environ["TF_CONFIG"] = json.dumps(tf_config)
    os.execvp(argv[3], argv[3:])
    return 1  # not reached: execvp replaces this process


if __name__ == "__main__":
    sys.exit(main(sys.argv))
