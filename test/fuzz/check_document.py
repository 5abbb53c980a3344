"""Checks src/api/openapi.yaml beyond what openapi-spec-validator checks.

  check_document.py DOC                      the document loads in Schemathesis (every operation and schema
                                             resolves), every operation has an operationId, every route
                                             template the API server's code names is documented
  check_document.py DOC --same-as FILE.json  the server's GET /openapi.json says the same as DOC

Runs in the fuzz venv (test/fuzz/schemathesis.sh validate): it needs PyYAML and schemathesis.
"""

import argparse
import json
import pathlib
import re
import sys

import yaml

METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")


def fail(msg: str) -> None:
    print(f"check_document: {msg}", file=sys.stderr)
    sys.exit(1)


def routes_in_code(src: pathlib.Path) -> set[str]:
    """Route templates (`/v1/exps/{exp_id}`, `/healthz`) written as string literals in the server's code."""
    found = set()
    literal = re.compile(r'"(/(?:v1/[A-Za-z0-9_{}/:.-]*|healthz|readyz|metrics|_hello|openapi\.json))"')
    for path in sorted(src.glob("*.cc")):
        if path.name.endswith("_test.cc"):
            continue
        for m in literal.finditer(path.read_text(encoding="utf-8")):
            route = m.group(1)
            # Message fragments ("GET /v1/analyses/" + id) end in '/'; templates do not.
            if not route.endswith("/"):
                found.add(route)
    return found


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("doc")
    ap.add_argument("--same-as")
    args = ap.parse_args()
    doc_path = pathlib.Path(args.doc)
    doc = yaml.safe_load(doc_path.read_text(encoding="utf-8"))

    if args.same_as:
        served = json.loads(pathlib.Path(args.same_as).read_text(encoding="utf-8"))
        if served != doc:
            fail(f"GET /openapi.json differs from {doc_path}; the server must serve this document")
        print("check_document: GET /openapi.json is the checked-in document")
        return

    if not str(doc.get("openapi", "")).startswith("3."):
        fail("not an OpenAPI 3 document")
    ids = []
    for path, item in doc["paths"].items():
        for method in METHODS:
            op = item.get(method)
            if op is None:
                continue
            if "operationId" not in op:
                fail(f"{method.upper()} {path} has no operationId")
            ids.append(op["operationId"])
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        fail(f"operationIds used twice: {sorted(dup)}")

    # Every link must name an operation that exists.
    for path, item in doc["paths"].items():
        for method in METHODS:
            for status, resp in (item.get(method) or {}).get("responses", {}).items():
                for name, link in (resp.get("links") or {}).items():
                    if link.get("operationId") not in ids:
                        fail(f"{method.upper()} {path} {status}: link {name} names an unknown operation")

    src = doc_path.parents[1] / "apiserver"
    if src.is_dir():
        missing = sorted(r for r in routes_in_code(src) if r not in doc["paths"])
        if missing:
            fail(f"routes in src/apiserver missing from the document: {missing}")

    import schemathesis  # noqa: E402 (only needed here; the --same-as mode does without it)

    schema = schemathesis.openapi.from_path(str(doc_path))
    n = 0
    for result in schema.get_all_operations():
        op = result.ok()  # raises on an operation that does not resolve
        n += 1
        for status in op.definition.raw.get("responses", {}):
            if not (status == "default" or re.fullmatch(r"[1-5][0-9][0-9]", str(status))):
                fail(f"{op.label}: response key {status!r} is not a status code")
    if n != len(ids):
        fail(f"Schemathesis loaded {n} operations, the document has {len(ids)}")
    print(f"check_document: {doc_path.name} is valid: {n} operations, every server route documented")


if __name__ == "__main__":
    main()
