"""A client's walk through the hub with the Python client openapi-python-client generated from the
served document, unchanged (scripts/ci-api.sh): submit a batch (sent twice under one
Idempotency-Key), wait for it (ETag and wait_seconds), read a slice with its ETag (304), retry a
failed command with no body, cancel a batch, resolve a conflict with a change made in Jira.

Usage: python3 walk.py <folder holding the generated package> <hub URL> <client token>
"""

import json
import sys
import time
import uuid

sys.path.insert(0, sys.argv[1])

from jira_hub_client import AuthenticatedClient  # noqa: E402
from jira_hub_client.api.batches import (  # noqa: E402
    cancel_batch,
    create_batch,
    get_batch,
    keep_jira,
    retry_command,
)
from jira_hub_client.api.mirror import get_issue, project_issues  # noqa: E402
from jira_hub_client.models import (  # noqa: E402
    BatchRequest,
    CommentCommandView,
    EditConflict,
    EnsureIssueCommandView,
    RetryBody,
)

BASE, TOKEN = sys.argv[2], sys.argv[3]
client = AuthenticatedClient(base_url=BASE, token=TOKEN, raise_on_unexpected_status=True, timeout=90.0)
FINAL = {"completed", "failed", "cancelled"}


def step(text):
    print(f"walk.py: {text}", flush=True)


def submit(commands, title):
    body = BatchRequest.from_dict({"title": title, "author": "walk-py", "commands": commands})
    key = str(uuid.uuid4())
    first = create_batch.sync_detailed(client=client, body=body, idempotency_key=f'"{key}"')
    again = create_batch.sync_detailed(client=client, body=body, idempotency_key=f'"{key}"')
    assert first.status_code == 201 and again.status_code == 201, (first.status_code, again.content)
    assert first.parsed.id == again.parsed.id, "the resend made another batch"
    return first.parsed


def wait(batch_id, statuses=FINAL):
    """Waits for the batch to reach one of `statuses`, each wait ended by a change."""
    answer = get_batch.sync_detailed(batch_id, client=client)
    assert answer.status_code == 200
    etag, batch = answer.headers["etag"], answer.parsed
    deadline = time.monotonic() + 240
    while batch.status.value not in statuses:
        assert time.monotonic() < deadline, f"batch {batch_id} still {batch.status.value}"
        answer = get_batch.sync_detailed(batch_id, client=client, wait_seconds=30, if_none_match=etag)
        assert answer.status_code in (200, 304), answer.status_code
        if answer.status_code == 200:
            etag, batch = answer.headers["etag"], answer.parsed
    return batch


batch = submit([{"type": "comment", "params": {"key": "AURORA-1", "body": "from the generated Python client"}}], "walk: comment")
step(f"batch {batch.id} submitted twice under one key: one batch")
batch = wait(batch.id)
posted = batch.commands[0]
assert isinstance(posted, CommentCommandView) and posted.status.value == "done", posted
step(f"batch {batch.id} completed (waited with wait_seconds and If-None-Match): comment {posted.result.comment_id}")

first = project_issues.sync_detailed("AWPCA", client=client)
assert first.status_code == 200 and len(first.parsed) > 0
second = project_issues.sync_detailed("AWPCA", client=client, if_none_match=first.headers["etag"])
assert second.status_code == 304, second.status_code
step(f"slice AWPCA: {len(first.parsed)} rows, then 304 with its ETag")

failing = submit([{"type": "comment", "params": {"key": "AURORA-999999", "body": "no such issue"}}], "walk: fails")
failing = wait(failing.id)
command = failing.commands[0]
assert failing.status.value == "completed" and command.status.value == "failed", (failing.status, command.status)
retried = retry_command.sync_detailed(command.id, client=client)
assert retried.status_code == 200, retried.content
step(f"command {command.id} failed, retried with no body: {retried.parsed.status.value}")

many = submit([{"type": "comment", "params": {"key": "AURORA-2", "body": f"comment {n}"}} for n in range(100)], "walk: cancelled")
cancelled = cancel_batch.sync_detailed(many.id, client=client, idempotency_key=str(uuid.uuid4()))
assert cancelled.status_code == 200, cancelled.content
many = wait(many.id, {"cancelled"})
step(f"batch {many.id} cancelled")

issue = get_issue.sync_detailed("AURORA-3", client=client)
assert issue.status_code == 200, issue.content
seen = "a summary this client saw and Jira no longer has"
edit = submit([{"type": "ensure_issue", "params": {"issue_type": "task", "key": "AURORA-3", "summary": "walk.py: written over", "base": {"summary": seen}}}], "walk: conflict")
edit = wait(edit.id)
assert edit.conflicts == 1 and edit.commands[0].status.value == "failed", (edit.status, edit.conflicts)
command = edit.commands[0]
# The command is parsed as an edit's view by its `type`: its result and conflict are typed.
assert isinstance(command, EnsureIssueCommandView), type(command)
conflict = command.result.conflict
assert isinstance(conflict, EditConflict), type(conflict)
assert [f.field.value for f in conflict.fields] == ["summary"], conflict.to_dict()
assert command.params.base.from_.value == "client", command.params.base.to_dict()
step(f"edit {command.id} stopped by a conflict: {json.dumps(conflict.to_dict(), ensure_ascii=False)[:160]}")
overwritten = retry_command.sync_detailed(command.id, client=client, body=RetryBody(overwrite=True))
assert overwritten.status_code == 200, overwritten.content
edit = wait(edit.id)
assert edit.commands[0].status.value == "done", edit.commands[0].status
step(f"conflict resolved by overwriting: batch {edit.id} completed")
assert keep_jira  # generated too: the other way to resolve one
print("walk.py: done", flush=True)
