#!/usr/bin/env python3
"""trim.py keeps, of a published OpenAPI document, the operations handoff
calls and every component they reference (transitively), unchanged, and
writes it as JSON. Pipedrive publishes each API version as one file (v1:
2.6 MB); the crm tests need a handful of its operations.

  python3 trim.py <spec.yaml> <out.json> 'GET /persons/search' 'POST /persons' ...
"""
import json
import sys

import yaml


def refs(node, out):
    if isinstance(node, dict):
        r = node.get("$ref")
        if isinstance(r, str) and r.startswith("#/components/"):
            out.add(tuple(r[len("#/components/"):].split("/", 1)))
        for v in node.values():
            refs(v, out)
    elif isinstance(node, list):
        for v in node:
            refs(v, out)


def main():
    src, dst, ops = sys.argv[1], sys.argv[2], sys.argv[3:]
    with open(src) as f:
        doc = yaml.safe_load(f)
    paths = {}
    for op in ops:
        method, path = op.split(" ", 1)
        item = doc["paths"][path]
        keep = paths.setdefault(path, {k: v for k, v in item.items() if k == "parameters"})
        keep[method.lower()] = item[method.lower()]
    want, done = set(), set()
    refs(paths, want)
    while want - done:
        kind, name = sorted(want - done)[0]
        done.add((kind, name))
        refs(doc["components"][kind][name], want)
    comps = {}
    for kind, name in sorted(done):
        comps.setdefault(kind, {})[name] = doc["components"][kind][name]
    for kind in ("securitySchemes",):
        if kind in doc.get("components", {}):
            comps[kind] = doc["components"][kind]
    out = {k: doc[k] for k in ("openapi", "info", "servers", "security") if k in doc}
    out["paths"], out["components"] = paths, comps
    with open(dst, "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False, default=str)
        f.write("\n")


main()
