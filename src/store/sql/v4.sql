-- Schema version 4: projects of the bridge (data-model «Схема базы хаба»).
CREATE TABLE project (
    label      TEXT PRIMARY KEY,                 -- the Jira label; unique case-insensitively (checked by the hub)
    name       TEXT NOT NULL,
    board_id   INTEGER CHECK (board_id IS NULL OR board_id > 0),
    board_type TEXT CHECK (board_type IS NULL OR board_type IN ('scrum', 'kanban')),
    created_at TEXT NOT NULL                     -- ISO-8601 UTC with microseconds; orders the base JQL
);

ALTER TABLE batch ADD COLUMN project TEXT REFERENCES project (label);
CREATE INDEX batch_project ON batch (project);
CREATE INDEX command_batch_status ON command (batch_id, status);
CREATE INDEX sync_run_command ON sync_run (command_id);
CREATE INDEX issue_jira_id ON issue (jira_id);
CREATE INDEX issue_link_jira_id ON issue_link (jira_id);

-- Agent requests already applied, by (kind, id), with the answer given: a request that arrives
-- again (a relay file seen after a crash, an HTTP retry) gets the same answer and changes nothing.
CREATE TABLE agent_request (
    kind        TEXT NOT NULL,                   -- claim | report | heartbeat
    id          TEXT NOT NULL,                   -- the sender's id
    agent       TEXT NOT NULL,
    received_at TEXT NOT NULL,
    answer      TEXT NOT NULL,                   -- JSON
    PRIMARY KEY (kind, id)
);
