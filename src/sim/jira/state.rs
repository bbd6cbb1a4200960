//! The fake's state: the issues, projects, boards and knobs behind one mutex, and the lock every
//! handler and accessor takes.

use super::*;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The project seeded at start.
pub const PROJECT: &str = "AURORA";

#[derive(Debug)]
pub(super) struct Issue {
    pub(super) id: u64,
    pub(super) key: String,
    pub(super) project: String,
    pub(super) labels: Vec<String>,
    pub(super) summary: String,
    /// What the caller gave, plus project, issuetype, reporter, creator as Jira makes them.
    pub(super) fields: Map<String, Value>,
    pub(super) status: usize,
    pub(super) created_ms: i64,
    pub(super) updated_ms: i64,
    /// For the Cloud search lag; seeded issues are long visible.
    pub(super) created_at: Option<Instant>,
    /// For the Cloud search lag of changes: when the issue last changed, and the `updated` the
    /// search index still holds for it until the lag has passed (see [`Issue::touch`]).
    pub(super) changed: Option<(Instant, i64)>,
    pub(super) links: Vec<u64>,
    pub(super) comments: Vec<Value>,
    /// Entity properties (`/issue/{key}/properties/{propertyKey}`).
    pub(super) properties: BTreeMap<String, Value>,
    /// The changelog's histories, oldest first (see `changes`).
    pub(super) histories: Vec<Value>,
}

impl Issue {
    /// The issue changed now (an edit, a comment, a link, a transition, a sprint, a move): its
    /// `updated` becomes `now_ms`, while Cloud's search index keeps the `updated` it held before
    /// until `lag` after the change (a change within the lag of the one before keeps the value
    /// the index held before both).
    pub(super) fn touch(&mut self, now_ms: i64, lag: Duration) {
        let indexed = match self.changed {
            Some((at, indexed)) if at.elapsed() < lag => indexed,
            _ => self.updated_ms,
        };
        self.changed = Some((Instant::now(), indexed));
        self.updated_ms = now_ms;
    }

    /// The `updated` Cloud's search sees now, `lag` behind the issue's changes.
    pub(super) fn indexed_updated_ms(&self, lag: Duration) -> i64 {
        match self.changed {
            Some((at, indexed)) if at.elapsed() < lag => indexed,
            _ => self.updated_ms,
        }
    }
}

pub(super) struct StateInner {
    pub(super) mode: Mode,
    pub(super) base: String,
    pub(super) basic: String,
    pub(super) bearer: String,
    pub(super) max_results: usize,
    pub(super) search_lag: Duration,
    pub(super) latency: Duration,
    pub(super) issues: BTreeMap<u64, Issue>,
    pub(super) by_key: HashMap<String, u64>,
    pub(super) projects: HashMap<String, u64>,
    pub(super) links: BTreeMap<u64, Link>,
    pub(super) next_id: u64,
    pub(super) next_link: u64,
    pub(super) next_comment: u64,
    pub(super) creates: HashMap<String, usize>,
    pub(super) calls: HashMap<Endpoint, usize>,
    pub(super) seen: Vec<Seen>,
    pub(super) rules: Vec<Rule>,
    pub(super) rate_limit: Option<u32>,
    pub(super) window: VecDeque<Instant>,
    pub(super) tokens: HashMap<String, (String, u64)>,
    pub(super) next_token: u64,
    pub(super) boards: BTreeMap<u64, (String, String)>,
    pub(super) sprints: Vec<Sprint>,
    /// Jira's clock minus the host's, in milliseconds (`serverInfo.serverTime`, `created`).
    pub(super) skew_ms: i64,
    /// Whether a create's `properties` member is applied (Cloud, recent Data Center) or ignored.
    pub(super) create_properties: bool,
    /// Entity properties of comments, by comment id.
    pub(super) comment_properties: HashMap<u64, BTreeMap<String, Value>>,
    /// Requests Jira is still working on after a proxy answered for it.
    pub(super) in_flight: usize,
    /// Old keys of moved issues → their id (Jira keeps them: `MovedIssueKeyStore`, since 6.1).
    pub(super) moved_keys: HashMap<String, u64>,
    /// A search answer over this many bytes is not served: see `set_search_byte_limit`.
    pub(super) search_byte_limit: Option<usize>,
    /// Transition id → the status a post-function leaves the issue in instead.
    pub(super) redirects: HashMap<String, &'static str>,
    /// Per issue key, the transitions still to collide (see `collide_transition`).
    pub(super) collisions: HashMap<String, std::collections::VecDeque<Option<&'static str>>>,
    /// Changes made right after the n-th search answer (see `after_search`).
    pub(super) scheduled: Vec<(usize, Change)>,
    pub(super) searches_served: usize,
    /// The agent's credentials are no longer accepted (`FakeJira::revoke_credentials`).
    pub(super) revoked: bool,
    /// A CAPTCHA lockout (`FakeJira::captcha_lockout`).
    pub(super) captcha: bool,
    /// Failed Basic logins in a row (Data Center: the third demands a CAPTCHA).
    pub(super) failed_logins: u32,
    /// Requests refused for their credentials, by the `Authorization` they carried
    /// (`FakeJira::refused_logins`).
    pub(super) refused_logins: HashMap<String, u32>,
    /// Data Center: the bearer token has expired (`FakeJira::expire_token`).
    pub(super) token_expired: bool,
    /// The token expires when this many more writes have arrived (`FakeJira::expire_token_at_write`).
    pub(super) token_expires_in_writes: Option<u32>,
    /// The project's permission scheme grants Browse Projects, Create Issues and Add Comments to
    /// "Anyone on the web" (`FakeJira::open_to_anyone`).
    pub(super) open_to_anyone: bool,
    /// The request being served runs as nobody (an expired token on a project open to anyone).
    pub(super) anonymous: bool,
    /// Jira Software is not installed (`FakeJira::without_jira_software`).
    pub(super) agile_absent: bool,
    /// Basic auth disabled on Data Center, and how it is refused.
    pub(super) basic_auth_off: Option<BasicAuthOff>,
    /// Paths and issue operations refused (`FakeJira::refuse_path`, `refuse_issue`).
    pub(super) refusals: Vec<Refusal>,
    /// Whether the user has a Jira Software licence (the agile API answers).
    pub(super) agile_licensed: bool,
    /// What a rule does to the summary of a new issue (`FakeJira::rewrite_summaries_on_create`).
    pub(super) summary_rewrite: Option<SummaryRewrite>,
    /// Cloud comment bodies go through the whole markup round trip (`set_markup_round_trip`).
    pub(super) markup_round_trip: bool,
    /// The language of the agent's account: of Jira's error texts (`FakeJira::set_language`).
    pub(super) language: Language,
    /// Project permissions the agent's user lacks (`mypermissions` answers `false` for them).
    pub(super) withheld: HashSet<String>,
    /// Fields left off every create and edit screen (see `take_off_screens`).
    pub(super) off_screens: HashSet<String>,
    /// Writes answered with success so far (see `changes`).
    pub(super) changes: u64,
    /// Edits by people and rules waiting for their time (`change_issue_after`, `_at`).
    pub(super) timed_changes: Vec<Scheduled>,
    /// The last changelog history id given.
    pub(super) next_history: u64,
    /// The agent's account name (`FakeJira::set_account_name`).
    pub(super) account_name: String,
    /// Other users of the directory, by the name as stored (`FakeJira::add_user`).
    pub(super) users: Vec<String>,
    /// A Data Center cluster (`FakeJira::set_cluster`), when the fake is one.
    pub(super) cluster: Option<Cluster>,
    /// The node the request being served reached (0 outside a cluster).
    pub(super) node: usize,
    /// A proxy in front of Jira drops `properties` from create bodies
    /// (`FakeJira::drop_create_properties`).
    pub(super) proxy_drops_properties: bool,
}

/// A Data Center cluster of `nodes` nodes behind a load balancer without sticky sessions: each
/// request reaches the next node, every answer names it (`X-ANODEID`), and a node's search shows
/// an issue created on another node only `lag` after its creation (index replication: Atlassian
/// KB "Lucene Index Synchronization in Jira Data Center": "not fully synchronous, but aims for
/// eventual consistency … each node polls for changes once per second … could start to fall
/// behind"; the health check's "Index replication … is behind by 763 seconds"; KB "Indexes
/// falling out of sync between nodes in JIRA Data Center": "An issue is created on one node and
/// doesn't appear when running a search in the others, even after waiting several minutes").
/// The database is shared: reads of an issue, its comments and properties see every write at
/// once. `now` is the clock the lag is measured on (a test's injected clock).
pub(super) struct Cluster {
    pub(super) nodes: usize,
    pub(super) lag: Duration,
    pub(super) now: Arc<dyn Fn() -> Duration + Send + Sync>,
    pub(super) next: usize,
    /// Issue id → (the node that created it, when on `now`).
    pub(super) created: HashMap<u64, (usize, Duration)>,
}

pub(super) type Shared = Arc<Mutex<StateInner>>;

pub(super) fn lock(state: &Shared) -> MutexGuard<'_, StateInner> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
