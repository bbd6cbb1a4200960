// A client's walk through the hub with the TypeScript types openapi-typescript generated from the
// served document, unchanged, compiled with `tsc --strict` (scripts/ci-api.sh): submit a batch
// (sent twice under one Idempotency-Key), wait for it (ETag and wait_seconds), read a slice with
// its ETag (304), retry a failed command with no body, cancel a batch, resolve a conflict.
//
// Usage: node walk.js <hub URL> <client token>

import type { components, paths } from "./api";

// Node's own globals, declared here rather than with @types/node (fetch and crypto come with
// the DOM library: Node 18 and later have both).
declare const process: { argv: string[]; exit(code: number): never };

type BatchView = components["schemas"]["BatchView"];
type BatchRequest = paths["/batches"]["post"]["requestBody"]["content"]["application/json"];
type SliceRows = paths["/projects/{label}/issues"]["get"]["responses"][200]["content"]["application/json"];
type CommandView = paths["/commands/{id}/retry"]["post"]["responses"][200]["content"]["application/json"];
type RetryBody = components["schemas"]["RetryBody"];
type BatchQuery = NonNullable<paths["/batches/{id}"]["get"]["parameters"]["query"]>;
type CommandRequest = BatchRequest["commands"][number];
type AnyCommand = components["schemas"]["CommandView"];
type EditConflict = components["schemas"]["EditConflict"];

// `type` narrows a command's `params` and `result`: an edit's stored `base` and its conflict
// exist on `ensure_issue` alone, so these lines compile only because the document discriminates
// the command views by `type` (a view with untyped `params` and `result` fails `tsc --strict`).
function conflictOf(command: AnyCommand): EditConflict | undefined {
  if (command.type !== "ensure_issue") return undefined;
  const from: "client" | "mirror" | "none" | undefined = command.params.base?.from;
  check(from === "client", `the edit's base is the client's: ${String(from)}`);
  return command.result?.conflict;
}

function commentId(command: AnyCommand): string | undefined {
  return command.type === "comment" ? command.result?.comment_id : undefined;
}

const [base, token] = process.argv.slice(2);
const FINAL = ["completed", "failed", "cancelled"];

function step(text: string): void {
  console.log(`walk.ts: ${text}`);
}

async function call(method: string, path: string, headers: Record<string, string> = {}, body?: unknown): Promise<Response> {
  const init: RequestInit = { method, headers: { Authorization: `Bearer ${token}`, ...headers } };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    (init.headers as Record<string, string>)["Content-Type"] = "application/json";
  }
  return fetch(`${base}${path}`, init);
}

function check(condition: boolean, what: string): asserts condition {
  if (!condition) throw new Error(what);
}

async function submit(commands: CommandRequest[], title: string): Promise<BatchView> {
  const body: BatchRequest = { title, author: "walk-ts", commands };
  const key = `"${crypto.randomUUID()}"`;
  const first = await call("POST", "/batches", { "Idempotency-Key": key }, body);
  const again = await call("POST", "/batches", { "Idempotency-Key": key }, body);
  check(first.status === 201 && again.status === 201, `submit: ${first.status} ${again.status}`);
  const [one, two] = [(await first.json()) as BatchView, (await again.json()) as BatchView];
  check(one.id === two.id, "the resend made another batch");
  return one;
}

async function wait(id: number, statuses: string[] = FINAL): Promise<BatchView> {
  let answer = await call("GET", `/batches/${id}`);
  check(answer.status === 200, `GET /batches/${id}: ${answer.status}`);
  let etag = answer.headers.get("etag") ?? "";
  let batch = (await answer.json()) as BatchView;
  const deadline = Date.now() + 240_000;
  while (!statuses.includes(batch.status)) {
    check(Date.now() < deadline, `batch ${id} still ${batch.status}`);
    const query: BatchQuery = { wait_seconds: 30 };
    answer = await call("GET", `/batches/${id}?wait_seconds=${query.wait_seconds}`, { "If-None-Match": etag });
    check(answer.status === 200 || answer.status === 304, `wait: ${answer.status}`);
    if (answer.status === 200) {
      etag = answer.headers.get("etag") ?? "";
      batch = (await answer.json()) as BatchView;
    }
  }
  return batch;
}

async function main(): Promise<void> {
  let batch = await submit([{ type: "comment", params: { key: "AURORA-1", body: "from the generated TypeScript types" } }], "walk: comment");
  step(`batch ${batch.id} submitted twice under one key: one batch`);
  batch = await wait(batch.id);
  check(batch.commands[0].status === "done", `status ${batch.commands[0].status}`);
  const posted = commentId(batch.commands[0]);
  check(posted !== undefined && posted.length > 0, "a done comment's result names the comment");
  step(`batch ${batch.id} completed (waited with wait_seconds and If-None-Match): comment ${posted}`);

  const first = await call("GET", "/projects/AWPCA/issues");
  const rows = (await first.json()) as SliceRows;
  const second = await call("GET", "/projects/AWPCA/issues", { "If-None-Match": first.headers.get("etag") ?? "" });
  check(first.status === 200 && rows.length > 0 && second.status === 304, `slice: ${first.status} ${second.status}`);
  step(`slice AWPCA: ${rows.length} rows, then 304 with its ETag`);

  let failing = await submit([{ type: "comment", params: { key: "AURORA-999999", body: "no such issue" } }], "walk: fails");
  failing = await wait(failing.id);
  check(failing.commands[0].status === "failed", `status ${failing.commands[0].status}`);
  const retried = await call("POST", `/commands/${failing.commands[0].id}/retry`);
  check(retried.status === 200, `plain retry: ${retried.status}`);
  step(`command ${failing.commands[0].id} failed, retried with no body: ${((await retried.json()) as CommandView).status}`);

  const comments: CommandRequest[] = [];
  for (let n = 0; n < 100; n++) comments.push({ type: "comment", params: { key: "AURORA-2", body: `comment ${n}` } });
  const many = await submit(comments, "walk: cancelled");
  const cancelled = await call("POST", `/batches/${many.id}/cancel`, { "Idempotency-Key": crypto.randomUUID() });
  check(cancelled.status === 200, `cancel: ${cancelled.status}`);
  await wait(many.id, ["cancelled"]);
  step(`batch ${many.id} cancelled`);

  let edit = await submit(
    [{ type: "ensure_issue", params: { issue_type: "task", key: "AURORA-4", summary: "walk.ts: written over", base: { summary: "a summary this client saw" } } }],
    "walk: conflict",
  );
  edit = await wait(edit.id);
  check(edit.conflicts === 1 && edit.commands[0].status === "failed", `conflict: ${edit.conflicts}`);
  const command = edit.commands[0];
  const conflict = conflictOf(command);
  check(conflict !== undefined && conflict.fields[0].field === "summary", `no conflict on the summary: ${JSON.stringify(command.result)}`);
  step(`edit ${command.id} stopped by a conflict on ${conflict.fields.map((f) => f.field).join(", ")}: ${JSON.stringify(conflict).slice(0, 160)}`);
  const overwrite: RetryBody = { overwrite: true };
  const overwritten = await call("POST", `/commands/${command.id}/retry`, {}, overwrite);
  check(overwritten.status === 200, `overwrite: ${overwritten.status}`);
  edit = await wait(edit.id);
  check(edit.commands[0].status === "done", `status ${edit.commands[0].status}`);
  step(`conflict resolved by overwriting: batch ${edit.id} completed`);
  console.log("walk.ts: done");
}

main().catch((error: unknown) => {
  console.error(`walk.ts: ${String(error)}`);
  process.exit(1);
});
