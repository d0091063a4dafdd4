"""`python -m cluster.k8s_index PLAN_JSON COMMAND...`: TF_CONFIG from an Indexed Job's pod index.

Kubernetes gives pod i of an Indexed Job JOB_COMPLETION_INDEX=i; this sets TF_CONFIG to the
plan's task i (whose address is that pod's name through the Job's headless Service, see
cluster.k8s) and replaces itself with COMMAND (`python -m tfbench.task --task tf_config ...`).
"""
from __future__ import annotations

import json
import os
import sys

from cluster.spec import ClusterPlan


def tf_config_for_index(plan: ClusterPlan, index: int) -> dict:
    if not 0 <= index < len(plan.tasks):
        raise ValueError(f"pod index {index} is outside the plan's {len(plan.tasks)} tasks")
    return plan.tasks[index].tf_config


def main(argv) -> int:
    if len(argv) < 3:
        print("usage: python -m cluster.k8s_index PLAN_JSON COMMAND...", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        plan = ClusterPlan.from_dict(json.load(f))
    os.environ["TF_CONFIG"] = json.dumps(tf_config_for_index(plan, int(os.environ["JOB_COMPLETION_INDEX"])))
    os.execvp(argv[2], argv[2:])
    return 1  # not reached: execvp replaces this process


if __name__ == "__main__":
    sys.exit(main(sys.argv))
