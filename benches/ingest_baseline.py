#!/usr/bin/env python3
"""The baseline of `cargo bench --bench ingest`: a plain Python ingest of refresh pages.

    python3 benches/ingest_baseline.py DB REPORT_FILE...

Each report file (a relay report whose results carry refresh pages of raw Jira issues) is read
with json.load; the mirror's columns are taken from each issue, its `fields` serialized again,
and issues, links and comments are upserted with sqlite3's executemany into tables shaped like
the hub's (`issue` with the same indexes, `issue_link`, `issue_comment`), one transaction per
page, WAL and synchronous=FULL as the hub runs. Prints "<issues stored> <seconds>", the time
taken from the first file opened to the last transaction committed.
"""

import json
import sqlite3
import sys
import time

SCHEMA = """
CREATE TABLE IF NOT EXISTS issue (
    key TEXT PRIMARY KEY, jira_id TEXT, issue_type TEXT NOT NULL, summary TEXT NOT NULL,
    description TEXT, status TEXT NOT NULL, priority TEXT, assignee TEXT, reporter TEXT,
    labels TEXT NOT NULL DEFAULT '[]', epic_key TEXT, sprint TEXT, duedate TEXT,
    plan_start TEXT, plan_end TEXT, created_at TEXT, updated_at TEXT,
    fields TEXT NOT NULL DEFAULT '{}', synced_at TEXT NOT NULL, mirror_changed_at TEXT
);
CREATE INDEX IF NOT EXISTS issue_epic_key ON issue (epic_key);
CREATE INDEX IF NOT EXISTS issue_jira_id ON issue (jira_id);
CREATE TABLE IF NOT EXISTS issue_link (
    id INTEGER PRIMARY KEY, jira_id TEXT, source_key TEXT NOT NULL, target_key TEXT NOT NULL,
    link_type TEXT NOT NULL, UNIQUE (source_key, target_key, link_type)
);
CREATE INDEX IF NOT EXISTS issue_link_target ON issue_link (target_key);
CREATE TABLE IF NOT EXISTS issue_comment (
    id TEXT PRIMARY KEY, issue_key TEXT NOT NULL, author TEXT, body TEXT NOT NULL,
    created TEXT, updated TEXT
);
CREATE INDEX IF NOT EXISTS issue_comment_issue ON issue_comment (issue_key);
"""

UPSERT_ISSUE = """
INSERT INTO issue (key, jira_id, issue_type, summary, description, status, priority, assignee,
    reporter, labels, epic_key, sprint, duedate, plan_start, plan_end, created_at, updated_at,
    synced_at, mirror_changed_at, fields)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (key) DO UPDATE SET jira_id = excluded.jira_id, issue_type = excluded.issue_type,
    summary = excluded.summary, description = excluded.description, status = excluded.status,
    priority = excluded.priority, assignee = excluded.assignee, reporter = excluded.reporter,
    labels = excluded.labels, epic_key = excluded.epic_key, sprint = excluded.sprint,
    duedate = excluded.duedate, plan_start = excluded.plan_start, plan_end = excluded.plan_end,
    created_at = excluded.created_at, updated_at = excluded.updated_at,
    synced_at = excluded.synced_at, fields = excluded.fields
"""

UPSERT_LINK = """
INSERT INTO issue_link (jira_id, source_key, target_key, link_type) VALUES (?, ?, ?, ?)
ON CONFLICT (source_key, target_key, link_type) DO UPDATE SET jira_id = excluded.jira_id
"""

UPSERT_COMMENT = """
INSERT INTO issue_comment (id, issue_key, author, body, created, updated) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET issue_key = excluded.issue_key, author = excluded.author,
    body = excluded.body, created = excluded.created, updated = excluded.updated
"""

EPIC_LINK, SPRINT, PLAN_START, PLAN_END = (
    "customfield_10101",
    "customfield_10105",
    "customfield_12001",
    "customfield_12002",
)


def named(value):
    return value.get("name") if isinstance(value, dict) else None


def user(value):
    if not isinstance(value, dict):
        return None
    return value.get("name") or value.get("displayName")


def sprint_name(value):
    """The name of the last sprint listed (either form Jira uses)."""
    if isinstance(value, list) and value:
        value = value[-1]
    if isinstance(value, dict):
        return value.get("name")
    if isinstance(value, str) and "name=" in value:
        return value.split("name=", 1)[1].split(",", 1)[0]
    return None


def rows_of(raw, synced_at):
    key = raw["key"]
    fields = raw["fields"]
    issue = (
        key,
        raw.get("id"),
        named(fields.get("issuetype")) or "",
        fields.get("summary") or "",
        fields.get("description"),
        named(fields.get("status")) or "",
        named(fields.get("priority")),
        user(fields.get("assignee")),
        user(fields.get("reporter")),
        json.dumps(fields.get("labels") or [], ensure_ascii=False),
        fields.get(EPIC_LINK),
        sprint_name(fields.get(SPRINT)),
        (fields.get("duedate") or "")[:10] or None,
        (fields.get(PLAN_START) or "")[:10] or None,
        (fields.get(PLAN_END) or "")[:10] or None,
        fields.get("created"),
        fields.get("updated"),
        synced_at,
        synced_at,
        json.dumps(fields, ensure_ascii=False, separators=(",", ":")),
    )
    links = []
    for link in fields.get("issuelinks") or []:
        link_type = named(link.get("type"))
        if link_type is None:
            continue
        if "outwardIssue" in link:
            links.append((link.get("id"), key, link["outwardIssue"]["key"], link_type))
        elif "inwardIssue" in link:
            links.append((link.get("id"), link["inwardIssue"]["key"], key, link_type))
    comments = [
        (c["id"], key, user(c.get("author")), c.get("body") or "", c.get("created"), c.get("updated"))
        for c in (fields.get("comment") or {}).get("comments") or []
    ]
    return issue, links, comments


def main():
    db, files = sys.argv[1], sys.argv[2:]
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.executescript(SCHEMA)
    synced_at = "2026-11-29T10:00:00.000000Z"
    stored = 0
    started = time.perf_counter()
    for path in files:
        with open(path, "rb") as file:
            report = json.load(file)
        issues, links, comments = [], [], []
        for result in report["results"]:
            for raw in (result.get("page") or {}).get("issues") or []:
                issue, its_links, its_comments = rows_of(raw, synced_at)
                issues.append(issue)
                links.extend(its_links)
                comments.extend(its_comments)
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(UPSERT_ISSUE, issues)
        conn.executemany(UPSERT_LINK, links)
        conn.executemany(UPSERT_COMMENT, comments)
        conn.execute("COMMIT")
        stored += len(issues)
    elapsed = time.perf_counter() - started
    print(stored, elapsed)


if __name__ == "__main__":
    main()
