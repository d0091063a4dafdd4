"""Rebuilds the schemas in this folder from their published sources (see README.md here).

    python tests/data/k8s-schemas/extract.py KUBERNETES_JSON_SCHEMA_DIR JOBSET_CRD_YAML TFJOB_CRD_YAML

Kubernetes kinds: the kind's JSON schema from kubernetes-validate's `v<version>-local-strict`
folder with every definition it reaches copied in under `$defs`. CRD kinds: the served version's
`openAPIV3Schema`, made strict the same way (`additionalProperties: false` wherever an object
lists its properties and neither keeps unknown fields nor says otherwise: `kubectl apply`
validates strictly by default). Descriptions are dropped everywhere (they are most of the bytes).
"""
import json
import os
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
KINDS = {"ConfigMap": "configmap-v1.json", "Service": "service-v1.json", "Job": "job-batch-v1.json"}
CRDS = {"JobSet": "v1alpha2", "TFJob": "v1"}
DEFS = "/api/_definitions.json#/$defs/"


def lean(schema, strict: bool):
    """The schema without descriptions (and, if strict, closed to unknown fields)."""
    if isinstance(schema, list):
        return [lean(s, strict) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "description":
            continue
        if key == "$ref" and value.startswith(DEFS):
            value = "#/$defs/" + value[len(DEFS):]
        if key in ("properties", "patternProperties", "$defs", "definitions"):
            out[key] = {name: lean(sub, strict) for name, sub in value.items()}
        else:
            out[key] = lean(value, strict)
    if (strict and "properties" in out and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


def refs(schema, found: set) -> None:
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "$ref" and isinstance(value, str) and "#/$defs/" in value:
                found.add(value.partition("#/$defs/")[2])
            else:
                refs(value, found)
    elif isinstance(schema, list):
        for value in schema:
            refs(value, found)


def kubernetes_kind(folder: str, file_name: str) -> dict:
    with open(os.path.join(folder, file_name)) as f:
        schema = json.load(f)
    with open(os.path.join(folder, "_definitions.json")) as f:
        definitions = json.load(f)["$defs"]
    needed, todo = set(), set()
    refs(schema, todo)
    while todo:
        name = todo.pop()
        if name not in needed:
            needed.add(name)
            refs(definitions[name], todo)
    schema.pop("$id", None)
    schema["$defs"] = {name: definitions[name] for name in sorted(needed)}
    return lean(schema, strict=False)  # the -strict folder is closed already


def crd_kind(path: str, version: str) -> dict:
    with open(path) as f:
        crd = next(d for d in yaml.safe_load_all(f) if d)
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema = lean(served["schema"]["openAPIV3Schema"], strict=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def main(argv) -> int:
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    folder, jobset, tfjob = argv[1:]
    out = {kind: kubernetes_kind(folder, name) for kind, name in KINDS.items()}
    out["JobSet"] = crd_kind(jobset, CRDS["JobSet"])
    out["TFJob"] = crd_kind(tfjob, CRDS["TFJob"])
    for kind, schema in out.items():
        with open(os.path.join(HERE, f"{kind.lower()}.json"), "w") as f:
            json.dump(schema, f, indent=1, sort_keys=True)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
