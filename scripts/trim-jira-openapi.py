#!/usr/bin/env python3
"""Trims Atlassian's OpenAPI descriptions of Jira Cloud to the operations the agent may call.

The whole platform document is 2.4 MB and 417 paths; the agent calls a few dozen operations.
This keeps, of each document, the operations listed below (by path template and method), and
of its `components` only what they reference, transitively. Everything kept is unchanged: the
operations' parameters (with their minimum and maximum), request bodies, `deprecated` flags.

Usage: scripts/trim-jira-openapi.py <folder with platform.v3.json and software.v3.json>
writes tests/fixtures/jira-cloud-openapi/{platform,software}.trimmed.json.

The list is wider than what the agent calls today (comment lists, changelogs, a link by id,
the deprecated `GET /priority`): a request to an operation that is not kept fails the test as
"not in Atlassian's description", so that a new call means a new line here, reviewed.
"""
import json
import os
import sys

PLATFORM = {
    "/rest/api/3/serverInfo": ["get"],
    "/rest/api/3/myself": ["get"],
    "/rest/api/3/search/jql": ["get", "post"],
    "/rest/api/3/search/approximate-count": ["post"],
    "/rest/api/3/issue": ["post"],
    "/rest/api/3/issue/{issueIdOrKey}": ["get", "put"],
    "/rest/api/3/issue/{issueIdOrKey}/changelog": ["get"],
    "/rest/api/3/issue/{issueIdOrKey}/transitions": ["get", "post"],
    "/rest/api/3/issue/{issueIdOrKey}/comment": ["get", "post"],
    "/rest/api/3/issue/{issueIdOrKey}/editmeta": ["get"],
    "/rest/api/3/issue/{issueIdOrKey}/properties/{propertyKey}": ["get", "put"],
    "/rest/api/3/issue/createmeta/{projectIdOrKey}/issuetypes": ["get"],
    "/rest/api/3/issue/createmeta/{projectIdOrKey}/issuetypes/{issueTypeId}": ["get"],
    "/rest/api/3/comment/list": ["post"],
    "/rest/api/3/comment/{commentId}/properties/{propertyKey}": ["get", "put"],
    "/rest/api/3/issueLink": ["post"],
    "/rest/api/3/issueLink/{linkId}": ["get"],
    "/rest/api/3/issueLinkType": ["get"],
    "/rest/api/3/project/{projectIdOrKey}": ["get"],
    "/rest/api/3/project/{projectIdOrKey}/statuses": ["get"],
    "/rest/api/3/mypermissions": ["get"],
    "/rest/api/3/field": ["get"],
    "/rest/api/3/priority": ["get"],
    "/rest/api/3/priority/search": ["get"],
}

SOFTWARE = {
    "/rest/agile/1.0/board": ["get"],
    "/rest/agile/1.0/board/{boardId}": ["get"],
    "/rest/agile/1.0/board/{boardId}/configuration": ["get"],
    "/rest/agile/1.0/board/{boardId}/sprint": ["get"],
    "/rest/agile/1.0/sprint/{sprintId}/issue": ["post"],
}


def refs(value, found):
    """Every `#/components/...` reference inside `value`."""
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/"):
            found.add(ref)
        for item in value.values():
            refs(item, found)
    elif isinstance(value, list):
        for item in value:
            refs(item, found)


def trim(document, keep):
    paths = {}
    for path, methods in keep.items():
        item = document["paths"].get(path)
        if item is None:
            sys.exit(f"{path}: not in the document")
        kept = {m: item[m] for m in methods if m in item}
        missing = [m for m in methods if m not in item]
        if missing:
            sys.exit(f"{path}: no {missing}")
        if "parameters" in item:
            kept["parameters"] = item["parameters"]
        paths[path] = kept
    components = {}
    pending = set()
    refs(paths, pending)
    done = set()
    while pending:
        ref = pending.pop()
        if ref in done:
            continue
        done.add(ref)
        _, _, kind, name = ref.split("/", 3)
        value = document["components"][kind][name]
        components.setdefault(kind, {})[name] = value
        found = set()
        refs(value, found)
        pending |= found - done
    out = {key: document[key] for key in ("openapi", "info", "servers") if key in document}
    out["paths"] = paths
    out["components"] = {
        kind: dict(sorted(items.items())) for kind, items in sorted(components.items())
    }
    return out


def main():
    source = sys.argv[1]
    target = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "jira-cloud-openapi")
    for name, keep in (("platform", PLATFORM), ("software", SOFTWARE)):
        with open(os.path.join(source, f"{name}.v3.json"), encoding="utf-8") as f:
            document = json.load(f)
        trimmed = trim(document, keep)
        with open(os.path.join(target, f"{name}.trimmed.json"), "w", encoding="utf-8") as f:
            json.dump(trimmed, f, ensure_ascii=False, indent=1, sort_keys=False)
            f.write("\n")


if __name__ == "__main__":
    main()
