-- Schema version 1, the first release: the shape of history/schema-v1.sql. Shipped; never edit.
CREATE TABLE setting (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE issue (
    key         TEXT PRIMARY KEY,
    jira_id     TEXT,
    issue_type  TEXT NOT NULL,
    summary     TEXT NOT NULL,
    description TEXT,
    status      TEXT NOT NULL,
    priority    TEXT,
    assignee    TEXT,
    reporter    TEXT,
    labels      TEXT NOT NULL DEFAULT '[]',
    epic_key    TEXT,
    sprint      TEXT,
    duedate     TEXT,
    plan_start  TEXT,
    plan_end    TEXT,
    created_at  TEXT,
    updated_at  TEXT,
    fields      TEXT NOT NULL DEFAULT '{}',
    synced_at   TEXT NOT NULL
);
CREATE INDEX issue_epic_key ON issue (epic_key);

CREATE TABLE issue_link (
    id         INTEGER PRIMARY KEY,
    jira_id    TEXT,
    source_key TEXT NOT NULL,
    target_key TEXT NOT NULL,
    link_type  TEXT NOT NULL,
    UNIQUE (source_key, target_key, link_type)
);
CREATE INDEX issue_link_target ON issue_link (target_key);

CREATE TABLE issue_note (
    id         INTEGER PRIMARY KEY,
    issue_key  TEXT NOT NULL,
    author     TEXT NOT NULL,
    body       TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT
);
CREATE INDEX issue_note_issue ON issue_note (issue_key);

CREATE TABLE batch (
    id               INTEGER PRIMARY KEY,
    title            TEXT NOT NULL,
    author           TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    cancelled_at     TEXT,
    estimate_seconds INTEGER
);

CREATE TABLE command (
    id            INTEGER PRIMARY KEY,
    batch_id      INTEGER NOT NULL REFERENCES batch (id),
    seq           INTEGER NOT NULL,
    type          TEXT NOT NULL,
    params        TEXT NOT NULL,
    status        TEXT NOT NULL,
    claimed_at    TEXT,
    finished_at   TEXT,
    result        TEXT,
    error         TEXT,
    jira_calls    INTEGER NOT NULL DEFAULT 0,
    rate_limited  INTEGER NOT NULL DEFAULT 0,
    pause_seconds INTEGER NOT NULL DEFAULT 0,
    depends_on    INTEGER REFERENCES command (id),
    UNIQUE (batch_id, seq)
);
CREATE INDEX command_status ON command (status);

CREATE TABLE sync_run (
    id             INTEGER PRIMARY KEY,
    command_id     INTEGER REFERENCES command (id),
    query          TEXT NOT NULL,
    started_at     TEXT NOT NULL,
    finished_at    TEXT,
    status         TEXT NOT NULL,
    issues_seen    INTEGER NOT NULL DEFAULT 0,
    issues_changed INTEGER NOT NULL DEFAULT 0,
    error          TEXT
);

CREATE TABLE agent_status (
    agent          TEXT PRIMARY KEY,
    version        TEXT,
    last_seen_at   TEXT NOT NULL,
    last_claim_at  TEXT,
    last_report_at TEXT,
    jira_ok        INTEGER,
    last_error     TEXT
);
