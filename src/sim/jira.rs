//! A simulated Jira for the agent's tests and benchmark: a real HTTP server on a loopback port,
//! stateful, answering with the shapes of real Jira (REST v2 + Agile 1.0), with faults on demand.
//!
//! Self-contained (nothing else of the crate): the tests, the benchmarks and `jira-hub demo` use it. It runs on its
//! own tokio runtime thread, so sync tests drive it directly; its state sits behind a mutex that
//! the accessors read.
//!
//! What it imitates: Jira's documented and observed behaviour (error bodies, paging, the
//! 10,000-row window, Cloud's `search/jql` and its lag, as docs/design/agent-and-jira.md
//! recalls), and the shapes of the real answers in `tests/fixtures/jira/` (issue, board and sprint;
//! the link types of `links` are those of `go-jira-all_issuelinktypes.json`, from andygrunwald/go-jira,
//! MIT).
//!
//! The module tree, one concern each (every behaviour with its source beside it):
//! - `server`: the loopback server, the connection layer, the one handler; `routes`: which
//!   endpoint a request is and who answers it; `reply`: requests and Jira's reply shapes;
//! - `search` and `jql`: Data Center and Cloud search, the JQL subset;
//! - `issues` (and `links`): issues and their fields; `workflow`: statuses and transitions;
//! - `comments`: comments and entity properties; `agile`: boards and sprints; `meta`: the
//!   preflight's read-only metadata;
//! - `auth`: who the caller is (credentials, the `X-Seraph-LoginReason` stamp, CAPTCHA,
//!   revoked tokens, Basic auth disabled); `access`: what the caller may do (403s on a path or
//!   an issue operation, no Jira Software licence); `language`: the account's language;
//! - `faults`: misbehaviour on demand; `record`: what the fake saw; `clock`: Jira's clock
//!   and time formats; `state`: the state behind the mutex;
//! - `client`: a tiny HTTP client for the tests and the benchmark; [`demo`]: the demo's
//!   project and its state on disk.
//!
//! Always on, as Jira does it: `GET /issue/{key}?expand=transitions` lists the transitions;
//! createmeta pages with `startAt`/`maxResults` (at most 200) and names the priorities as the
//! priority field's `allowedValues`; the request log keeps each request's body. Data Center stamps `X-Seraph-LoginReason: OK` and `X-AUSERNAME`
//! on every answer to an authenticated request (Cloud: `OUT, OK`); comment entity properties on
//! both deployments; Cloud's `search/jql` returns the issue properties asked in `properties`
//! (up to 5), Data Center's search never does.
//!
//! The knobs a test turns on [`FakeJira`] (each documented where it is defined):
//! - search: `set_max_results`, `set_search_lag` (Cloud; `reconcileIssues` lifts it for the ids
//!   named), `set_cluster` (a Data Center cluster whose nodes' search lags another node's
//!   creates, `X-ANODEID` on answers), `set_search_byte_limit` (a proxy's
//!   504), `after_search` (a delete or move between pages); two projects: `add_project`,
//!   `seed_issues(project, label, n)` (JQL `project in (A, B)`);
//! - issues: `seed_issue`, `move_issue`, `delete_issue`, `set_create_properties`,
//!   `drop_create_properties` (a proxy that strips `properties` from create bodies),
//!   `rewrite_summaries_on_create(Some(SummaryRewrite::Prefix(..)))`, `redirect_transition`,
//!   `collide_transition` (Cloud's 409 on colliding transitions);
//! - comments: `set_markup_round_trip(true)` (Cloud's wiki → ADF → wiki beyond whitespace; a
//!   description goes through the same round trip on Cloud);
//! - people and rules (`changes`): `change_issue` (now), `change_issue_after(n, …)` (after the
//!   n-th request from now), `change_issue_at(instant, …)`; every edit keeps a changelog,
//!   answered to `GET /issue/{key}?expand=changelog` as each deployment does; `histories`;
//! - agile: `add_board`, `add_sprint`, `set_agile_licensed(false)`;
//! - who and what: `set_account_name` (`X-AUSERNAME` URL-encoded as Jira does),
//!   `revoke_credentials(true)`, `captcha_lockout(true)`,
//!   `disable_basic_auth(Some(BasicAuthOff::..))`, `refuse_path(prefix)`,
//!   `refuse_issue(key, endpoint, status)`, `clear_refusals`, `withhold_permission`,
//!   `set_language(Language::Russian)`;
//! - faults and time: `fault(endpoint, Fault::.., times)`, `clear_faults`, `rate_limit`,
//!   `set_latency`, `set_clock_skew_ms`.
#![allow(dead_code)] // the tests, the benchmarks and the demo each use a part of it

mod access;
mod agile;
mod auth;
mod changes;
mod client;
mod clock;
mod comments;
pub mod demo;
mod faults;
mod issues;
mod jql;
mod language;
mod links;
mod meta;
mod record;
mod reply;
mod routes;
mod search;
mod server;
mod state;
#[cfg(test)]
mod tests;
mod workflow;

// The modules share their items through this root (each says `use super::*`); the public API
// is re-exported below.
use self::{
    access::*, agile::*, changes::*, clock::*, faults::*, issues::*, jql::*, links::*, reply::*,
    routes::*, state::*,
};

pub use self::auth::{
    ACCOUNT_ID, BasicAuthOff, DISPLAY_NAME, PASSWORD, TOKEN, USER, base64, basic_auth,
    basic_auth_with, bearer_auth, jira_url_encode,
};
pub use self::client::{Answer, call, encode};
pub use self::clock::{agile_time, jira_time};
pub use self::faults::{Broken, Fault};
pub use self::issues::{
    EPIC_LINK_FIELD, ISSUE_TYPES, PLAN_END_FIELD, PLAN_START_FIELD, SPRINT_FIELD, SummaryRewrite,
};
pub use self::language::Language;
pub use self::links::{LINK_TYPES, LinkView};
pub use self::meta::{PERMISSIONS, PRIORITIES};
pub use self::record::Seen;
pub use self::routes::Endpoint;
pub use self::search::Change;
pub use self::server::FakeJira;
pub use self::state::PROJECT;
pub use self::workflow::{BUG_TRANSITIONS, STATUSES, TRANSITIONS};

/// Which Jira to imitate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Jira Server / Data Center: `GET /rest/api/2/search` with `startAt` and `total`.
    DataCenter,
    /// Jira Cloud: `/rest/api/2/search` is gone (410); `search/jql` with page tokens and lag.
    Cloud,
}
