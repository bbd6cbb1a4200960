//! A simulated Jira for the agent's tests and benchmark: a real HTTP server on a loopback port,
//! stateful, answering with the shapes of real Jira (REST v2 + Agile 1.0), with faults on demand.
//!
//! Self-contained (nothing else of the crate): the tests, the benchmarks and `jira-hub demo` use it. It runs on its
//! own tokio runtime thread, so sync tests drive it directly; its state sits behind a mutex that
//! the accessors read.
//!
//! What it imitates: Jira's documented and observed behaviour (error bodies, paging, the
//! 10,000-row window, Cloud's `search/jql` and its lag, as ARCHITECTURE.md's agent decisions
//! recall), and the shapes of the real answers in `tests/fixtures/jira/` (issue, board and sprint;
//! the link types below are those of `go-jira-all_issuelinktypes.json`, from andygrunwald/go-jira,
//! MIT).
#![allow(dead_code)] // the tests, the benchmarks and the demo each use a part of it

use axum::body::Bytes;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Which Jira to imitate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Jira Server / Data Center: `GET /rest/api/2/search` with `startAt` and `total`.
    DataCenter,
    /// Jira Cloud: `/rest/api/2/search` is gone (410); `search/jql` with page tokens and lag.
    Cloud,
}

/// What a request asks for; faults and counters are kept per endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    ServerInfo,
    Myself,
    /// `GET /rest/api/2/search` (DC; 410 on Cloud).
    Search,
    /// `GET /rest/api/2/search/jql` (Cloud).
    SearchJql,
    GetIssue,
    CreateIssue,
    EditIssue,
    GetTransitions,
    DoTransition,
    CreateLink,
    LinkTypes,
    GetComments,
    AddComment,
    Board,
    Boards,
    Sprints,
    AddToSprint,
    /// `GET /rest/api/2/issue/{key}/properties/{propertyKey}`.
    GetIssueProperty,
    /// `PUT /rest/api/2/issue/{key}/properties/{propertyKey}`.
    SetIssueProperty,
    /// `GET /rest/api/2/comment/{id}/properties/{propertyKey}`.
    GetCommentProperty,
    /// `GET /rest/api/2/project/{key}` (the preflight's reads below are all read-only).
    Project,
    /// `GET /rest/api/2/project/{key}/statuses`.
    ProjectStatuses,
    /// `GET /rest/api/2/mypermissions`.
    MyPermissions,
    /// `GET /rest/api/2/issue/createmeta/{project}/issuetypes`.
    CreateMetaTypes,
    /// `GET /rest/api/2/issue/createmeta/{project}/issuetypes/{typeId}`.
    CreateMetaFields,
    /// `GET /rest/api/2/field`.
    Fields,
    /// `GET /rest/api/2/priority`.
    Priorities,
    /// `GET /rest/api/2/issue/{key}/editmeta`.
    EditMeta,
    Other,
    /// In [`FakeJira::fault`]: any endpoint.
    Any,
}

impl Endpoint {
    pub fn is_write(self) -> bool {
        matches!(
            self,
            Endpoint::CreateIssue
                | Endpoint::EditIssue
                | Endpoint::DoTransition
                | Endpoint::CreateLink
                | Endpoint::AddComment
                | Endpoint::AddToSprint
                | Endpoint::SetIssueProperty
        )
    }
}

/// A misbehaviour, served instead of (or around) the normal answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// 429, nothing applied; `Retry-After: n` when given; a JSON body, or Cloud's HTML error page.
    TooManyRequests {
        retry_after: Option<u64>,
        html: bool,
    },
    /// 503, nothing applied.
    Unavailable,
    /// Waits this long (past the client's timeout), then applies and answers (to nobody, usually).
    Slow(Duration),
    /// Hangs up without an answer, nothing applied.
    DropBeforeApply,
    /// Applies the request, then hangs up without an answer.
    DropAfterApply,
    /// A reverse proxy in front of Jira gives up on the request and answers `504 Gateway
    /// Time-out` (nginx's page) while Jira goes on: the request is applied after `apply_after`
    /// (at once when zero). Issue 19: "A 504 from a proxy at 30–60 s usually means Jira is still
    /// working (listeners, post-functions, indexing)"; nginx answers 504 when
    /// `proxy_read_timeout` (60 s by default) passes without Jira's answer
    /// (nginx.org/en/docs/http/ngx_http_proxy_module.html#proxy_read_timeout). Tests get the
    /// 504 at once.
    ProxyTimeout { apply_after: Duration },
    /// A 200 that is not Jira's answer: see [`Broken`].
    Broken(Broken),
    /// Cloud's 429, nothing applied: `Retry-After` when given, `X-RateLimit-Reset` (ISO 8601 to
    /// the minute, `yyyy-MM-ddTHH:mmZ`) `reset_in` seconds from now when given, and
    /// `RateLimit-Reason` (developer.atlassian.com/cloud/jira/platform/rate-limiting/: "429
    /// responses may be accompanied by Retry-After and X-RateLimit-Reset headers";
    /// `jira-burst-based`, `jira-per-issue-on-write`, `jira-quota-tenant-based`, …).
    CloudRateLimit {
        retry_after: Option<u64>,
        reset_in: Option<u64>,
        reason: &'static str,
    },
    /// Data Center's token-bucket 429 (confluence.atlassian.com "_RateLimiting_HTTPheaders":
    /// `X-RateLimit-Limit`, `-Remaining`, `-Interval-Seconds`, `-FillRate`, `retry-after`).
    DataCenterRateLimit { retry_after: u64 },
    /// 503 with `Retry-After` ("a 503 response may be returned when a resource limit has been
    /// reached", developer.atlassian.com rate-limiting), nothing applied.
    UnavailableFor(u64),
    /// A proxy in front of Jira sends the caller to its login page: 302 with `Location`.
    RedirectToLogin,
    /// 403 with `X-Seraph-LoginReason: AUTHENTICATION_DENIED`: Jira wants a CAPTCHA before it
    /// checks the password again (developer.atlassian.com, "JIRA REST API Example - Basic
    /// Authentication").
    CaptchaRequired,
}

/// 200 answers a client must not take for a good page. Each is seen in the field: an SSO or proxy
/// login page served with 200 to an expired session (Atlassian KB "REST API calls return the
/// login page HTML with a 200 status"; jira-python #1125), a body cut short by a proxy that
/// closed the stream (`Content-Length` absent, chunked: the client sees a clean end), and a JSON
/// object without `issues` (an error envelope or another API's answer behind a misrouted proxy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Broken {
    /// `text/html` 200: a login page.
    Html,
    /// The normal JSON answer cut in the middle (the request is applied).
    Truncated,
    /// `{"startAt":0,"maxResults":50,"total":0}`: JSON with no `issues` array.
    NoIssues,
}

/// The login page an SSO proxy serves in place of the API's answer.
const LOGIN_PAGE: &str = "<!DOCTYPE html><html><head><title>Log in - Jira</title></head><body>\
<form id=\"login-form\" action=\"/login.jsp\" method=\"post\"><input name=\"os_username\"></form></body></html>";

/// One request as the fake saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// When it arrived.
    pub at: SystemTime,
    pub method: String,
    pub path: String,
    pub query: String,
    pub endpoint: Endpoint,
    /// The status answered; 0 when the connection was dropped.
    pub status: u16,
}

/// A link as Jira stores it: `source` (the request's `inwardIssue`) `<outward>` `target`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkView {
    pub id: String,
    pub type_name: String,
    pub source: String,
    pub target: String,
}

/// The caller every valid credential authenticates as.
pub const USER: &str = "agent";
pub const PASSWORD: &str = "secret";
pub const TOKEN: &str = "pat-secret";
pub const ACCOUNT_ID: &str = "5b10a2844c20165700ede21g";
pub const DISPLAY_NAME: &str = "Агент синхронизации";
/// The project seeded at start.
pub const PROJECT: &str = "AURORA";

/// `(id, name, inward, outward)`: the link types of a real Jira Server
/// (`go-jira-all_issuelinktypes.json`).
pub const LINK_TYPES: &[(&str, &str, &str, &str)] = &[
    ("12310361", "Blocked", "Blocked", "Blocked"),
    ("10032", "Blocker", "is blocked by", "blocks"),
    ("12310460", "Child-Issue", "is a child of", "is a parent of"),
    ("10020", "Cloners", "is cloned by", "is a clone of"),
    ("12310060", "Container", "Is contained by", "contains"),
    ("12310461", "Dependency", "Dependency", "Dependency"),
    ("12310360", "Dependent", "Dependent", "Dependent"),
    ("12310000", "Duplicate", "is duplicated by", "duplicates"),
    ("12310010", "Incorporates", "is part of", "incorporates"),
    (
        "12310462",
        "Parent Feature",
        "Parent Feature",
        "Parent Feature",
    ),
    ("12310560", "Problem/Incident", "is caused by", "causes"),
    ("10030", "Reference", "is related to", "relates to"),
    ("12310050", "Regression", "is broken by", "breaks"),
    ("12310260", "Related", "is related to", "relates to"),
    ("12310040", "Required", "is required by", "requires"),
    ("12310051", "Supercedes", "is superceded by", "supercedes"),
    ("10001", "dependent", "is depended upon by", "depends upon"),
];

/// `(id, name)` of the issue types the fake knows (the example config's, and English ones).
pub const ISSUE_TYPES: &[(&str, &str)] = &[
    ("10002", "Задача"),
    ("10000", "Эпик"),
    ("10004", "Ошибка"),
    ("3", "Task"),
    ("10001", "Epic"),
];

/// `(id, name)` of the workflow's statuses; the first is where issues start.
pub const STATUSES: &[(&str, &str)] = &[
    ("1", "Открыта"),
    ("3", "В работе"),
    ("10001", "Готово"),
    ("10002", "Снято"),
];

/// `(transition id, name, from status (None: any but the target), to status)`.
pub const TRANSITIONS: &[(&str, &str, Option<&str>, &str)] = &[
    ("11", "Начать работу", Some("Открыта"), "В работе"),
    ("21", "Завершить", Some("В работе"), "Готово"),
    ("31", "Снять", None, "Снято"),
];

/// The bugs' workflow (issue type `Ошибка`, id 10004): other transition ids, and `11` means
/// something else here. Jira gives each issue type of a project its workflow (workflow schemes),
/// and a transition id is only an index inside one workflow (`GET …/transitions` lists "ids per
/// workflow", the project guide to Jira's API (guide/jira-api.md of the specification); ansible's "Failed find valid transition for '6'").
pub const BUG_TRANSITIONS: &[(&str, &str, Option<&str>, &str)] = &[
    ("11", "Не исправлять", None, "Снято"),
    ("711", "Взять в работу", Some("Открыта"), "В работе"),
    ("721", "Исправлено", Some("В работе"), "Готово"),
];

/// The custom fields the fake treats specially (the example config's ids).
pub const SPRINT_FIELD: &str = "customfield_10105";
pub const EPIC_LINK_FIELD: &str = "customfield_10101";

/// `(id, name)` of the priorities (`GET /rest/api/2/priority`): Jira's five defaults, in Russian
/// as a Russian-language instance names them (ids 1–5, Highest … Lowest).
pub const PRIORITIES: &[(&str, &str)] = &[
    ("1", "Блокирующий"),
    ("2", "Высокий"),
    ("3", "Средний"),
    ("4", "Низкий"),
    ("5", "Незначительный"),
];

/// The plan-date fields of the example config (`field_ids.plan_start`, `plan_end`).
pub const PLAN_START_FIELD: &str = "customfield_12001";
pub const PLAN_END_FIELD: &str = "customfield_12002";

/// The project permissions `mypermissions` knows, `(key, id, name)`: Jira's built-in ones the
/// agent needs (docs.atlassian.com/software/jira/docs/api/REST/9.12.0/#api/2/mypermissions;
/// developer.atlassian.com/cloud/jira/platform/rest/v2/api-group-permissions/#api-rest-api-2-mypermissions-get).
pub const PERMISSIONS: &[(&str, &str, &str)] = &[
    ("BROWSE_PROJECTS", "10", "Browse Projects"),
    ("CREATE_ISSUES", "11", "Create Issues"),
    ("EDIT_ISSUES", "12", "Edit Issues"),
    ("TRANSITION_ISSUES", "46", "Transition Issues"),
    ("ADD_COMMENTS", "15", "Add Comments"),
    ("LINK_ISSUES", "21", "Link Issues"),
];

const WINDOW: usize = 10_000;
/// Jira's offset: Moscow, +03:00.
const OFFSET_SECONDS: i64 = 3 * 3600;

#[derive(Debug)]
struct Issue {
    id: u64,
    key: String,
    project: String,
    labels: Vec<String>,
    summary: String,
    /// What the caller gave, plus project, issuetype, reporter, creator as Jira makes them.
    fields: Map<String, Value>,
    status: usize,
    created_ms: i64,
    updated_ms: i64,
    /// For the Cloud search lag; seeded issues are long visible.
    created_at: Option<Instant>,
    links: Vec<u64>,
    comments: Vec<Value>,
    /// Entity properties (`/issue/{key}/properties/{propertyKey}`).
    properties: BTreeMap<String, Value>,
}

#[derive(Debug)]
struct Link {
    id: u64,
    kind: usize,
    source: String,
    target: String,
}

#[derive(Debug, Clone)]
struct Sprint {
    id: u64,
    board: u64,
    name: String,
    state: String,
}

struct Rule {
    endpoint: Endpoint,
    fault: Fault,
    remaining: usize,
}

struct StateInner {
    mode: Mode,
    base: String,
    basic: String,
    bearer: String,
    max_results: usize,
    search_lag: Duration,
    latency: Duration,
    issues: BTreeMap<u64, Issue>,
    by_key: HashMap<String, u64>,
    projects: HashMap<String, u64>,
    links: BTreeMap<u64, Link>,
    next_id: u64,
    next_link: u64,
    next_comment: u64,
    creates: HashMap<String, usize>,
    calls: HashMap<Endpoint, usize>,
    seen: Vec<Seen>,
    rules: Vec<Rule>,
    rate_limit: Option<u32>,
    window: VecDeque<Instant>,
    tokens: HashMap<String, (String, u64)>,
    next_token: u64,
    boards: BTreeMap<u64, (String, String)>,
    sprints: Vec<Sprint>,
    /// Jira's clock minus the host's, in milliseconds (`serverInfo.serverTime`, `created`).
    skew_ms: i64,
    /// Whether a create's `properties` member is applied (Cloud, recent Data Center) or ignored.
    create_properties: bool,
    /// Entity properties of comments, by comment id.
    comment_properties: HashMap<u64, BTreeMap<String, Value>>,
    /// Requests Jira is still working on after a proxy answered for it.
    in_flight: usize,
    /// Old keys of moved issues → their id (Jira keeps them: `MovedIssueKeyStore`, since 6.1).
    moved_keys: HashMap<String, u64>,
    /// A search answer over this many bytes is not served: see `set_search_byte_limit`.
    search_byte_limit: Option<usize>,
    /// Transition id → the status a post-function leaves the issue in instead.
    redirects: HashMap<String, &'static str>,
    /// Changes made right after the n-th search answer (see `after_search`).
    scheduled: Vec<(usize, Change)>,
    searches_served: usize,
    /// Project permissions the agent's user lacks (`mypermissions` answers `false` for them).
    withheld: HashSet<String>,
}

/// A change to Jira made by someone else while the agent pages.
#[derive(Debug, Clone)]
pub enum Change {
    Delete(String),
    Move(String, String),
}

type Shared = Arc<Mutex<StateInner>>;

fn lock(state: &Shared) -> MutexGuard<'_, StateInner> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The running fake; stops when dropped.
pub struct FakeJira {
    url: String,
    state: Shared,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl FakeJira {
    pub fn start(mode: Mode) -> FakeJira {
        let state = Arc::new(Mutex::new(StateInner {
            mode,
            base: String::new(),
            basic: format!("Basic {}", base64(&format!("{USER}:{PASSWORD}"))),
            bearer: format!("Bearer {TOKEN}"),
            max_results: 1000,
            search_lag: Duration::ZERO,
            latency: Duration::ZERO,
            issues: BTreeMap::new(),
            by_key: HashMap::new(),
            projects: HashMap::from([(PROJECT.to_string(), 1)]),
            links: BTreeMap::new(),
            next_id: 10_000,
            next_link: 20_000,
            next_comment: 30_000,
            creates: HashMap::new(),
            calls: HashMap::new(),
            seen: Vec::new(),
            rules: Vec::new(),
            rate_limit: None,
            window: VecDeque::new(),
            tokens: HashMap::new(),
            next_token: 1,
            boards: BTreeMap::from([
                (4216, ("AURORA board".to_string(), "scrum".to_string())),
                (4217, ("AURORA support".to_string(), "kanban".to_string())),
            ]),
            sprints: vec![
                Sprint {
                    id: 740,
                    board: 4216,
                    name: "Sprint 4".into(),
                    state: "closed".into(),
                },
                Sprint {
                    id: 741,
                    board: 4216,
                    name: "Sprint 5".into(),
                    state: "active".into(),
                },
                Sprint {
                    id: 742,
                    board: 4216,
                    name: "Sprint 6".into(),
                    state: "future".into(),
                },
            ],
            skew_ms: 0,
            // A create's `properties` are applied: Cloud documents them ("Details of issue
            // properties to be add or update", IssueUpdateDetails), and so does Server since 7.2
            // (REST 7.2.8, Issue Update schema: "properties can be set at issue create or update
            // time"). Older servers' `IssueUpdateBean` ignores the member
            // (`@JsonIgnoreProperties(ignoreUnknown = true)`): `set_create_properties(false)`.
            create_properties: true,
            withheld: HashSet::new(),
            comment_properties: HashMap::new(),
            in_flight: 0,
            moved_keys: HashMap::new(),
            search_byte_limit: None,
            redirects: HashMap::new(),
            scheduled: Vec::new(),
            searches_served: 0,
        }));
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the fake Jira");
        std_listener.set_nonblocking(true).expect("nonblocking");
        let address = std_listener.local_addr().expect("address");
        let url = format!("http://{address}");
        lock(&state).base = url.clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let app = state.clone();
        std::thread::Builder::new()
            .name("fake-jira".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("runtime");
                runtime.block_on(async move {
                    let listener = KillListener(
                        tokio::net::TcpListener::from_std(std_listener).expect("listener"),
                    );
                    let router = axum::Router::new().fallback(handle).with_state(app);
                    let serve = axum::serve(
                        listener,
                        router.into_make_service_with_connect_info::<Conn>(),
                    );
                    tokio::select! {
                        _ = serve.into_future() => {}
                        _ = stopped => {}
                    }
                });
                runtime.shutdown_background();
            })
            .expect("fake Jira thread");
        FakeJira {
            url,
            state,
            stop: Some(stop),
        }
    }

    pub fn url(&self) -> String {
        self.url.clone()
    }

    pub fn mode(&self) -> Mode {
        lock(&self.state).mode
    }

    /// Jira's page size cap: it returns at most this many issues whatever `maxResults` asks.
    pub fn set_max_results(&self, max: usize) {
        lock(&self.state).max_results = max;
    }

    /// Cloud: an issue created less than `lag` ago does not show in search.
    pub fn set_search_lag(&self, lag: Duration) {
        lock(&self.state).search_lag = lag;
    }

    /// Every normal answer takes this long: half before the request is applied, half after (so
    /// a client killed meanwhile may have written without hearing of it).
    pub fn set_latency(&self, latency: Duration) {
        lock(&self.state).latency = latency;
    }

    /// Answers 429 (`Retry-After: 1`) to requests beyond `per_second` in any one-second window.
    pub fn rate_limit(&self, per_second: Option<u32>) {
        let mut state = lock(&self.state);
        state.rate_limit = per_second;
        state.window.clear();
    }

    /// The next `times` requests to `endpoint` get `fault`. Rules apply in the order given.
    pub fn fault(&self, endpoint: Endpoint, fault: Fault, times: usize) {
        lock(&self.state).rules.push(Rule {
            endpoint,
            fault,
            remaining: times,
        });
    }

    pub fn clear_faults(&self) {
        lock(&self.state).rules.clear();
    }

    /// Faults not yet served.
    pub fn faults_pending(&self) -> usize {
        lock(&self.state).rules.iter().map(|r| r.remaining).sum()
    }

    /// Jira's clock runs this many milliseconds ahead of the host's (behind when negative):
    /// `serverInfo.serverTime`, the times of new issues and comments, and so `created` in JQL.
    pub fn set_clock_skew_ms(&self, skew_ms: i64) {
        lock(&self.state).skew_ms = skew_ms;
    }

    /// Whether a create's `properties` are applied (default yes; no imitates Jira before 7.2).
    pub fn set_create_properties(&self, applied: bool) {
        lock(&self.state).create_properties = applied;
    }

    /// Waits (at most `limit`) until Jira has finished every request a proxy answered for
    /// early, so that a test sees their effects before it counts.
    pub fn wait_applied(&self, limit: Duration) {
        let started = Instant::now();
        while lock(&self.state).in_flight > 0 && started.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// An issue's entity properties.
    pub fn issue_properties(&self, key: &str) -> BTreeMap<String, Value> {
        let state = lock(&self.state);
        state
            .by_key
            .get(key)
            .map(|id| state.issues[id].properties.clone())
            .unwrap_or_default()
    }

    /// A comment's entity properties.
    pub fn comment_properties(&self, comment_id: &str) -> BTreeMap<String, Value> {
        let state = lock(&self.state);
        comment_id
            .parse()
            .ok()
            .and_then(|id| state.comment_properties.get(&id).cloned())
            .unwrap_or_default()
    }

    /// Labels of an issue, as Jira holds them.
    pub fn labels_of(&self, key: &str) -> Vec<String> {
        let state = lock(&self.state);
        state
            .by_key
            .get(key)
            .map(|id| state.issues[id].labels.clone())
            .unwrap_or_default()
    }

    pub fn add_project(&self, key: &str) {
        lock(&self.state)
            .projects
            .entry(key.to_string())
            .or_insert(1);
    }

    /// `n` issues of `project` labelled `label`, made directly (no HTTP), visible to search at
    /// once; returns their keys.
    pub fn seed_issues(&self, project: &str, label: &str, n: usize) -> Vec<String> {
        let mut state = lock(&self.state);
        state.projects.entry(project.to_string()).or_insert(1);
        let base_ms = 1_767_225_600_000_i64; // 2026-01-01T00:00:00Z
        let mut keys = Vec::with_capacity(n);
        for i in 0..n {
            let number = state.issues.len() as i64;
            let mut fields = Map::new();
            fields.insert("summary".into(), format!("Задача {label} номер {i}").into());
            fields.insert(
                "description".into(),
                format!("Описание задачи {i}: что сделать и зачем.").into(),
            );
            fields.insert("issuetype".into(), json!({"id": "10002", "name": "Задача"}));
            fields.insert("priority".into(), json!({"id": "3", "name": "Средний"}));
            fields.insert("labels".into(), json!([label]));
            let created = base_ms + number * 60_000;
            let key = state.insert_issue(project, fields, created, None);
            keys.push(key);
        }
        keys
    }

    /// One issue made directly, `fields` as a create would give them; returns its key.
    pub fn seed_issue(&self, project: &str, fields: Value) -> String {
        let mut state = lock(&self.state);
        state.projects.entry(project.to_string()).or_insert(1);
        let fields = fields.as_object().cloned().unwrap_or_default();
        state.insert_issue(project, fields, now_ms(), None)
    }

    /// Moves an issue to `project` as Jira's Move does: a new key (the next number there), the
    /// old key remembered (`GET /issue/OLD` still finds it; a relational JQL on it is refused).
    /// Returns the new key.
    pub fn move_issue(&self, key: &str, project: &str) -> String {
        let mut state = lock(&self.state);
        let id = state.by_key.remove(key).expect("the issue to move");
        let number = state.projects.entry(project.to_string()).or_insert(1);
        let new_key = format!("{project}-{number}");
        *number += 1;
        let base = state.base.clone();
        let issue = state.issues.get_mut(&id).expect("issue");
        issue.key = new_key.clone();
        issue.project = project.to_string();
        issue.fields.insert(
            "project".into(),
            json!({"self": format!("{base}/rest/api/2/project/{project}"), "id": "10101",
                   "key": project, "name": format!("Проект {project}"), "projectTypeKey": "software"}),
        );
        issue.updated_ms = now_ms();
        state.by_key.insert(new_key.clone(), id);
        state.moved_keys.insert(key.to_string(), id);
        new_key
    }

    /// Deletes an issue: its key names nothing any more.
    pub fn delete_issue(&self, key: &str) {
        let mut state = lock(&self.state);
        let id = state.by_key.remove(key).expect("the issue to delete");
        state.issues.remove(&id);
    }

    /// A search answer larger than `bytes` takes longer than the proxy in front of Jira waits:
    /// it is answered 504 by the proxy (see `gateway_timeout`). `None`: no limit.
    pub fn set_search_byte_limit(&self, bytes: Option<usize>) {
        lock(&self.state).search_byte_limit = bytes;
    }

    /// A post-function of transition `tid` leaves the issue in `status` instead of the
    /// transition's target (as a "fast-track" or "update issue field: status" post-function
    /// does: Atlassian's "Configure advanced work item workflows"/post functions documentation).
    pub fn redirect_transition(&self, tid: &str, status: &'static str) {
        lock(&self.state).redirects.insert(tid.to_string(), status);
    }

    /// `change` happens right after the `n`-th Server search has been answered (1-based).
    pub fn after_search(&self, n: usize, change: Change) {
        lock(&self.state).scheduled.push((n, change));
    }

    pub fn issue_count(&self) -> usize {
        lock(&self.state).issues.len()
    }

    /// Every issue, raw, as search returns it with all fields.
    pub fn issues(&self) -> Vec<Value> {
        let state = lock(&self.state);
        state
            .issues
            .values()
            .map(|i| state.render(i, &FieldFilter::All))
            .collect()
    }

    pub fn issue(&self, key: &str) -> Option<Value> {
        let state = lock(&self.state);
        let id = state.by_key.get(key)?;
        Some(state.render(&state.issues[id], &FieldFilter::All))
    }

    /// Keys of the issues with this summary.
    pub fn keys_with_summary(&self, summary: &str) -> Vec<String> {
        lock(&self.state)
            .issues
            .values()
            .filter(|i| i.summary == summary)
            .map(|i| i.key.clone())
            .collect()
    }

    pub fn status_of(&self, key: &str) -> Option<String> {
        let state = lock(&self.state);
        let id = state.by_key.get(key)?;
        Some(STATUSES[state.issues[id].status].1.to_string())
    }

    pub fn links(&self) -> Vec<LinkView> {
        lock(&self.state)
            .links
            .values()
            .map(|l| LinkView {
                id: l.id.to_string(),
                type_name: LINK_TYPES[l.kind].1.to_string(),
                source: l.source.clone(),
                target: l.target.clone(),
            })
            .collect()
    }

    pub fn comments(&self, key: &str) -> Vec<Value> {
        let state = lock(&self.state);
        state
            .by_key
            .get(key)
            .map(|id| state.issues[id].comments.clone())
            .unwrap_or_default()
    }

    /// How many issues were created over HTTP with this summary.
    pub fn creates_of(&self, summary: &str) -> usize {
        lock(&self.state).creates.get(summary).copied().unwrap_or(0)
    }

    /// Requests to `endpoint`, answered or not (`Endpoint::Any`: all of them).
    pub fn calls(&self, endpoint: Endpoint) -> usize {
        let state = lock(&self.state);
        if endpoint == Endpoint::Any {
            state.calls.values().sum()
        } else {
            state.calls.get(&endpoint).copied().unwrap_or(0)
        }
    }

    pub fn requests(&self) -> Vec<Seen> {
        lock(&self.state).seen.clone()
    }
}

impl Drop for FakeJira {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The connection layer: a stream the handler can condemn, so that the answer never goes out.

struct KillListener(tokio::net::TcpListener);

struct KillStream {
    inner: tokio::net::TcpStream,
    kill: Arc<AtomicBool>,
}

impl axum::serve::Listener for KillListener {
    type Io = KillStream;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.0.accept().await {
                Ok((inner, addr)) => {
                    let _ = inner.set_nodelay(true);
                    return (
                        KillStream {
                            inner,
                            kill: Arc::new(AtomicBool::new(false)),
                        },
                        addr,
                    );
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.0.local_addr()
    }
}

impl tokio::io::AsyncRead for KillStream {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for KillStream {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if self.kill.load(Ordering::SeqCst) {
            return std::task::Poll::Ready(Err(std::io::ErrorKind::ConnectionAborted.into()));
        }
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[derive(Clone)]
struct Conn(Arc<AtomicBool>);

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, KillListener>>
    for Conn
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, KillListener>) -> Self {
        Conn(stream.io().kill.clone())
    }
}

// ---------------------------------------------------------------------------------------------
// Requests.

enum Body {
    Json(Value),
    Html(String),
    /// JSON text cut short, served as `application/json`.
    Cut(String),
    Empty,
}

struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Body,
}

impl Reply {
    fn json(status: u16, body: Value) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: Body::Json(body),
        }
    }

    fn empty(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: Body::Empty,
        }
    }

    /// Jira's error body: `{"errorMessages": [message], "errors": {}}`.
    fn error(status: u16, message: &str) -> Reply {
        Reply::json(status, json!({"errorMessages": [message], "errors": {}}))
    }

    /// Jira's field error body: `{"errorMessages": [], "errors": {field: message}}`.
    fn field_error(field: &str, message: &str) -> Reply {
        Reply::json(
            400,
            json!({"errorMessages": [], "errors": {field: message}}),
        )
    }

    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = match self.body {
            Body::Json(value) => (
                status,
                [("content-type", "application/json;charset=UTF-8")],
                value.to_string(),
            )
                .into_response(),
            Body::Html(text) => {
                (status, [("content-type", "text/html;charset=UTF-8")], text).into_response()
            }
            Body::Cut(text) => (
                status,
                [("content-type", "application/json;charset=UTF-8")],
                text,
            )
                .into_response(),
            Body::Empty => status.into_response(),
        };
        for (name, value) in self.headers {
            if let Ok(value) = HeaderValue::from_str(&value) {
                response.headers_mut().insert(name, value);
            }
        }
        response
    }
}

struct Request {
    method: Method,
    segments: Vec<String>,
    query: Vec<(String, String)>,
    body: Bytes,
}

impl Request {
    fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

fn classify(method: &Method, segments: &[&str]) -> Endpoint {
    let get = method == Method::GET;
    let post = method == Method::POST;
    match segments {
        ["rest", "api", "2" | "latest", rest @ ..] => match rest {
            ["issue", "createmeta", _, "issuetypes"] if get => Endpoint::CreateMetaTypes,
            ["issue", "createmeta", _, "issuetypes", _] if get => Endpoint::CreateMetaFields,
            ["project", _] if get => Endpoint::Project,
            ["project", _, "statuses"] if get => Endpoint::ProjectStatuses,
            ["mypermissions"] if get => Endpoint::MyPermissions,
            ["field"] if get => Endpoint::Fields,
            ["priority"] if get => Endpoint::Priorities,
            ["issue", _, "editmeta"] if get => Endpoint::EditMeta,
            ["serverInfo"] if get => Endpoint::ServerInfo,
            ["myself"] if get => Endpoint::Myself,
            ["search"] if get || post => Endpoint::Search,
            ["search", "jql"] if get || post => Endpoint::SearchJql,
            ["issue"] if post => Endpoint::CreateIssue,
            ["issue", _] if get => Endpoint::GetIssue,
            ["issue", _] if method == Method::PUT => Endpoint::EditIssue,
            ["issue", _, "transitions"] if get => Endpoint::GetTransitions,
            ["issue", _, "transitions"] if post => Endpoint::DoTransition,
            ["issue", _, "comment"] if get => Endpoint::GetComments,
            ["issue", _, "comment"] if post => Endpoint::AddComment,
            ["issueLink"] if post => Endpoint::CreateLink,
            ["issue", _, "properties", _] if get => Endpoint::GetIssueProperty,
            ["issue", _, "properties", _] if method == Method::PUT => Endpoint::SetIssueProperty,
            ["comment", _, "properties", _] if get => Endpoint::GetCommentProperty,
            ["issueLinkType"] if get => Endpoint::LinkTypes,
            _ => Endpoint::Other,
        },
        ["rest", "agile", "1.0", rest @ ..] => match rest {
            ["board"] if get => Endpoint::Boards,
            ["board", _] if get => Endpoint::Board,
            ["board", _, "sprint"] if get => Endpoint::Sprints,
            ["sprint", _, "issue"] if post => Endpoint::AddToSprint,
            _ => Endpoint::Other,
        },
        _ => Endpoint::Other,
    }
}

fn decode_segment(segment: &str) -> String {
    percent_decode(segment, false)
}

/// `%XX` decoding; `+` is a space in query strings.
fn percent_decode(text: &str, plus_is_space: bool) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                    }
                    Err(_) => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k, true), percent_decode(v, true))
        })
        .collect()
}

async fn handle(
    State(state): State<Shared>,
    ConnectInfo(conn): ConnectInfo<Conn>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    // A request counts from its arrival: a pause must see no request start inside it.
    let arrived = SystemTime::now();
    let path = uri.path().to_string();
    let raw_query = uri.query().unwrap_or("").to_string();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let endpoint = classify(&method, &segments);
    let request = Request {
        method: method.clone(),
        segments: segments.iter().map(|s| decode_segment(s)).collect(),
        query: parse_query(&raw_query),
        body,
    };
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();

    // Before the request touches anything: rate limit, credentials, faults.
    let (early, fault) = {
        let mut s = lock(&state);
        *s.calls.entry(endpoint).or_insert(0) += 1;
        let early = s.gate(&auth);
        let fault = if early.is_none() {
            s.take_fault(endpoint)
        } else {
            None
        };
        (early, fault)
    };
    let record = |status: u16| {
        lock(&state).seen.push(Seen {
            at: arrived,
            method: method.to_string(),
            path: path.clone(),
            query: raw_query.clone(),
            endpoint,
            status,
        });
    };
    if let Some(reply) = early {
        record(reply.status);
        return reply.into_response();
    }
    let reply = match fault {
        None => {
            let half = lock(&state).latency / 2;
            if !half.is_zero() {
                tokio::time::sleep(half).await;
            }
            let reply = lock(&state).apply(endpoint, &request);
            if !half.is_zero() {
                tokio::time::sleep(half).await;
            }
            reply
        }
        Some(Fault::TooManyRequests { retry_after, html }) => {
            let mut reply = if html {
                Reply {
                    status: 429,
                    headers: Vec::new(),
                    body: Body::Html(OOPS_429.to_string()),
                }
            } else {
                Reply::error(429, "Rate limit exceeded.")
            };
            if let Some(seconds) = retry_after {
                reply.headers.push(("retry-after", seconds.to_string()));
            }
            reply
        }
        Some(Fault::Unavailable) => Reply::error(503, "Service Unavailable"),
        Some(Fault::CloudRateLimit {
            retry_after,
            reset_in,
            reason,
        }) => {
            let mut reply = Reply::error(429, "Rate limit exceeded.");
            if let Some(seconds) = retry_after {
                reply.headers.push(("retry-after", seconds.to_string()));
            }
            if let Some(seconds) = reset_in {
                // To the minute, rounded up so that the reset is never early.
                let at = now_ms() / 1000 + seconds as i64 + 59;
                let at = time::OffsetDateTime::from_unix_timestamp(at - at % 60)
                    .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
                reply.headers.push((
                    "x-ratelimit-reset",
                    format!(
                        "{:04}-{:02}-{:02}T{:02}:{:02}Z",
                        at.year(),
                        u8::from(at.month()),
                        at.day(),
                        at.hour(),
                        at.minute()
                    ),
                ));
            }
            reply.headers.push(("x-ratelimit-limit", "350".into()));
            reply.headers.push(("x-ratelimit-remaining", "0".into()));
            reply.headers.push(("x-ratelimit-nearlimit", "true".into()));
            reply.headers.push(("ratelimit-reason", reason.into()));
            reply
        }
        Some(Fault::DataCenterRateLimit { retry_after }) => {
            let mut reply = Reply::error(429, "Rate limit exceeded.");
            reply.headers.push(("x-ratelimit-limit", "20".into()));
            reply.headers.push(("x-ratelimit-remaining", "0".into()));
            reply
                .headers
                .push(("x-ratelimit-interval-seconds", "1".into()));
            reply.headers.push(("x-ratelimit-fillrate", "10".into()));
            reply.headers.push(("retry-after", retry_after.to_string()));
            reply
        }
        Some(Fault::UnavailableFor(seconds)) => {
            let mut reply = Reply::error(503, "Service Unavailable");
            reply.headers.push(("retry-after", seconds.to_string()));
            reply
        }
        Some(Fault::RedirectToLogin) => {
            let base = lock(&state).base.clone();
            let mut reply = Reply {
                status: 302,
                headers: Vec::new(),
                body: Body::Empty,
            };
            reply.headers.push((
                "location",
                format!("{base}/login.jsp?os_destination=%2Frest%2Fapi%2F2%2FserverInfo"),
            ));
            reply
        }
        Some(Fault::CaptchaRequired) => {
            let mut reply = Reply::error(403, "CAPTCHA_CHALLENGE; login-url=/login.jsp");
            reply
                .headers
                .push(("x-seraph-loginreason", "AUTHENTICATION_DENIED".into()));
            reply
        }
        Some(Fault::DropBeforeApply) => {
            conn.0.store(true, Ordering::SeqCst);
            record(0);
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
        Some(Fault::DropAfterApply) => {
            let reply = lock(&state).apply(endpoint, &request);
            conn.0.store(true, Ordering::SeqCst);
            let _ = reply;
            record(0);
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
        Some(Fault::ProxyTimeout { apply_after }) => {
            // Jira goes on with the request whatever the proxy told the client.
            if apply_after.is_zero() {
                let _ = lock(&state).apply(endpoint, &request);
            } else {
                lock(&state).in_flight += 1;
                let state = state.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(apply_after).await;
                    let mut state = lock(&state);
                    let _ = state.apply(endpoint, &request);
                    state.in_flight -= 1;
                });
            }
            Reply {
                status: 504,
                headers: Vec::new(),
                body: Body::Html(GATEWAY_TIMEOUT_504.to_string()),
            }
        }
        Some(Fault::Broken(kind)) => {
            let body = match kind {
                Broken::Html => Body::Html(LOGIN_PAGE.to_string()),
                Broken::NoIssues => Body::Json(json!({"startAt": 0, "maxResults": 50, "total": 0})),
                Broken::Truncated => {
                    let reply = lock(&state).apply(endpoint, &request);
                    let text = match reply.body {
                        Body::Json(value) => value.to_string(),
                        Body::Html(text) | Body::Cut(text) => text,
                        Body::Empty => String::new(),
                    };
                    let mut cut = text.len() / 2;
                    while !text.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    Body::Cut(text[..cut].to_string())
                }
            };
            Reply {
                status: 200,
                headers: Vec::new(),
                body,
            }
        }
        Some(Fault::Slow(delay)) => {
            // In a task of its own: the client hanging up must not cancel the write.
            let state = state.clone();
            let task = tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                lock(&state).apply(endpoint, &request)
            });
            match task.await {
                Ok(reply) => reply,
                Err(_) => Reply::error(500, "internal error"),
            }
        }
    };
    record(reply.status);
    reply.into_response()
}

/// nginx's own page for a 504 (its `ngx_http_error_504_page`).
const GATEWAY_TIMEOUT_504: &str = "<html>\r\n<head><title>504 Gateway Time-out</title></head>\r\n<body>\r\n<center><h1>504 Gateway Time-out</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n";

const OOPS_429: &str = "<!DOCTYPE html><html lang=\"en\"><head><title>Oops - an error has occurred</title></head>\
<body><div id=\"error-page\"><h1>Oops - an error has occurred</h1>\
<p>error429: Too many requests. Please try again later.</p></div></body></html>";

// ---------------------------------------------------------------------------------------------
// Jira's behaviour.

enum FieldFilter {
    All,
    /// Cloud's `search/jql` without `fields`: ids only.
    IdOnly,
    Only(HashSet<String>),
    Except(HashSet<String>),
}

impl FieldFilter {
    fn parse(fields: Option<&str>, default: FieldFilter) -> FieldFilter {
        let Some(fields) = fields.filter(|f| !f.trim().is_empty()) else {
            return default;
        };
        let mut only = HashSet::new();
        let mut except = HashSet::new();
        let mut all = false;
        for name in fields.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if name == "*all" || name == "*navigable" {
                all = true;
            } else if let Some(name) = name.strip_prefix('-') {
                except.insert(name.to_string());
            } else {
                only.insert(name.to_string());
            }
        }
        if all || only.is_empty() {
            FieldFilter::Except(except)
        } else {
            only.retain(|n| !except.contains(n));
            FieldFilter::Only(only)
        }
    }

    fn keeps(&self, name: &str) -> bool {
        match self {
            FieldFilter::All => true,
            FieldFilter::IdOnly => false,
            FieldFilter::Only(names) => names.contains(name),
            FieldFilter::Except(names) => !names.contains(name),
        }
    }
}

impl StateInner {
    fn gate(&mut self, auth: &str) -> Option<Reply> {
        if let Some(limit) = self.rate_limit {
            let now = Instant::now();
            while self
                .window
                .front()
                .is_some_and(|t| now.duration_since(*t) >= Duration::from_secs(1))
            {
                self.window.pop_front();
            }
            if self.window.len() >= limit as usize {
                let mut reply = Reply::error(429, "Rate limit exceeded.");
                reply.headers.push(("retry-after", "1".into()));
                reply.headers.push(("x-ratelimit-limit", limit.to_string()));
                reply.headers.push(("x-ratelimit-remaining", "0".into()));
                return Some(reply);
            }
            self.window.push_back(now);
        }
        if auth != self.basic && auth != self.bearer {
            let mut reply = Reply::error(
                401,
                "You are not authenticated. Authentication required to perform this operation.",
            );
            reply
                .headers
                .push(("www-authenticate", "Basic realm=\"protected-area\"".into()));
            return Some(reply);
        }
        None
    }

    fn take_fault(&mut self, endpoint: Endpoint) -> Option<Fault> {
        let rule = self
            .rules
            .iter_mut()
            .find(|r| r.remaining > 0 && (r.endpoint == endpoint || r.endpoint == Endpoint::Any))?;
        rule.remaining -= 1;
        let fault = rule.fault.clone();
        self.rules.retain(|r| r.remaining > 0);
        Some(fault)
    }

    fn insert_issue(
        &mut self,
        project: &str,
        mut fields: Map<String, Value>,
        created_ms: i64,
        created_at: Option<Instant>,
    ) -> String {
        let id = self.next_id;
        self.next_id += 1;
        let number = self.projects.entry(project.to_string()).or_insert(1);
        let key = format!("{project}-{number}");
        *number += 1;
        let labels: Vec<String> = fields
            .get("labels")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|l| l.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let summary = fields
            .get("summary")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        fields.insert(
            "project".into(),
            json!({"self": format!("{}/rest/api/2/project/{project}", self.base), "id": "10100",
                   "key": project, "name": format!("Проект {project}"), "projectTypeKey": "software"}),
        );
        fields.insert("labels".into(), json!(labels));
        let user = self.user_json();
        fields.insert("reporter".into(), user.clone());
        fields.insert("creator".into(), user);
        self.issues.insert(
            id,
            Issue {
                id,
                key: key.clone(),
                project: project.to_string(),
                labels,
                summary,
                fields,
                status: 0,
                created_ms,
                updated_ms: created_ms,
                created_at,
                links: Vec::new(),
                comments: Vec::new(),
                properties: BTreeMap::new(),
            },
        );
        self.by_key.insert(key.clone(), id);
        key
    }

    fn user_json(&self) -> Value {
        if self.mode == Mode::Cloud {
            // Cloud users have an `accountId` and no `name` or `key` since the privacy changes
            // ("Deprecation notice and migration guide for major changes to Jira Cloud REST APIs
            // to improve user privacy", developer.atlassian.com, 2019).
            return json!({"self": format!("{}/rest/api/2/user?accountId={ACCOUNT_ID}", self.base),
                   "accountId": ACCOUNT_ID, "accountType": "atlassian", "displayName": DISPLAY_NAME,
                   "active": true, "timeZone": "Europe/Moscow"});
        }
        json!({"self": format!("{}/rest/api/2/user?username={USER}", self.base), "name": USER,
               "key": "JIRAUSER10100", "accountId": ACCOUNT_ID, "displayName": DISPLAY_NAME,
               "active": true, "timeZone": "Europe/Moscow"})
    }

    /// Now on Jira's clock (the host's plus the configured skew).
    fn jira_now_ms(&self) -> i64 {
        now_ms() + self.skew_ms
    }

    fn issue_ref(&self, key: &str) -> Value {
        let Some(issue) = self.by_key.get(key).map(|id| &self.issues[id]) else {
            return json!({"key": key});
        };
        let (status_id, status) = STATUSES[issue.status];
        json!({"id": issue.id.to_string(), "key": issue.key,
               "self": format!("{}/rest/api/2/issue/{}", self.base, issue.id),
               "fields": {"summary": issue.summary, "status": {"id": status_id, "name": status},
                          "issuetype": issue.fields.get("issuetype").cloned().unwrap_or(Value::Null)}})
    }

    fn link_json(&self, link: &Link, from: &str) -> Value {
        let (id, name, inward, outward) = LINK_TYPES[link.kind];
        let mut value = json!({
            "id": link.id.to_string(),
            "self": format!("{}/rest/api/2/issueLink/{}", self.base, link.id),
            "type": {"id": id, "name": name, "inward": inward, "outward": outward,
                     "self": format!("{}/rest/api/2/issueLinkType/{id}", self.base)},
        });
        if link.source == from {
            value["outwardIssue"] = self.issue_ref(&link.target);
        } else {
            value["inwardIssue"] = self.issue_ref(&link.source);
        }
        value
    }

    fn render(&self, issue: &Issue, filter: &FieldFilter) -> Value {
        if let FieldFilter::IdOnly = filter {
            return json!({"id": issue.id.to_string()});
        }
        let mut fields = Map::new();
        for (name, value) in &issue.fields {
            if filter.keeps(name) {
                fields.insert(name.clone(), value.clone());
            }
        }
        if filter.keeps("status") {
            let (id, name) = STATUSES[issue.status];
            fields.insert(
                "status".into(),
                json!({"self": format!("{}/rest/api/2/status/{id}", self.base), "id": id, "name": name,
                       "statusCategory": {"key": if issue.status == 0 { "new" } else if issue.status == 1 { "indeterminate" } else { "done" }}}),
            );
        }
        if filter.keeps("created") {
            fields.insert("created".into(), jira_time(issue.created_ms).into());
        }
        if filter.keeps("updated") {
            fields.insert("updated".into(), jira_time(issue.updated_ms).into());
        }
        if filter.keeps("issuelinks") {
            let links: Vec<Value> = issue
                .links
                .iter()
                .filter_map(|id| self.links.get(id))
                .map(|l| self.link_json(l, &issue.key))
                .collect();
            fields.insert("issuelinks".into(), links.into());
        }
        if filter.keeps("comment") {
            let total = issue.comments.len();
            fields.insert(
                "comment".into(),
                json!({"comments": issue.comments, "maxResults": total, "total": total, "startAt": 0}),
            );
        }
        json!({"expand": "operations,versionedRepresentations,editmeta,changelog,renderedFields",
               "id": issue.id.to_string(),
               "self": format!("{}/rest/api/2/issue/{}", self.base, issue.id),
               "key": issue.key, "fields": fields})
    }

    fn body_json(request: &Request) -> Result<Value, Reply> {
        serde_json::from_slice(&request.body).map_err(|e| {
            Reply::error(
                400,
                &format!("Unexpected character in the request body: {e}"),
            )
        })
    }

    fn find(&self, key: &str) -> Result<u64, Reply> {
        // An old key of a moved issue still finds it (`MovedIssueKeyStore`, Jira 6.1+).
        let moved = self
            .moved_keys
            .get(key)
            .filter(|id| self.issues.contains_key(id));
        self.by_key.get(key).or(moved).copied().ok_or_else(|| {
            Reply::error(
                404,
                "Issue does not exist or you do not have permission to see it.",
            )
        })
    }

    fn apply(&mut self, endpoint: Endpoint, request: &Request) -> Reply {
        let result = match endpoint {
            Endpoint::ServerInfo => Ok(self.server_info()),
            Endpoint::Myself => Ok(Reply::json(200, self.user_json())),
            Endpoint::Search => self.search_dc(request),
            Endpoint::SearchJql => self.search_cloud(request),
            Endpoint::GetIssue => self.get_issue(request),
            Endpoint::CreateIssue => self.create_issue(request),
            Endpoint::EditIssue => self.edit_issue(request),
            Endpoint::GetTransitions => self.get_transitions(request),
            Endpoint::DoTransition => self.do_transition(request),
            Endpoint::CreateLink => self.create_link(request),
            Endpoint::LinkTypes => Ok(self.link_types()),
            Endpoint::GetComments => self.get_comments(request),
            Endpoint::AddComment => self.add_comment(request),
            Endpoint::Board => self.board(request),
            Endpoint::Boards => Ok(self.boards(request)),
            Endpoint::Sprints => self.sprints(request),
            Endpoint::AddToSprint => self.add_to_sprint(request),
            Endpoint::GetIssueProperty => self.get_issue_property(request),
            Endpoint::SetIssueProperty => self.set_issue_property(request),
            Endpoint::GetCommentProperty => self.get_comment_property(request),
            Endpoint::Project => self.project(request),
            Endpoint::ProjectStatuses => self.project_statuses(request),
            Endpoint::MyPermissions => self.my_permissions(request),
            Endpoint::CreateMetaTypes => self.create_meta_types(request),
            Endpoint::CreateMetaFields => self.create_meta_fields(request),
            Endpoint::Fields => Ok(self.fields()),
            Endpoint::Priorities => Ok(self.priorities()),
            Endpoint::EditMeta => self.edit_meta(request),
            Endpoint::Other | Endpoint::Any => Err(Reply::error(
                404,
                &format!("null for uri: {}/{}", self.base, request.segments.join("/")),
            )),
        };
        result.unwrap_or_else(|reply| reply)
    }

    fn server_info(&self) -> Reply {
        let (deployment, version) = match self.mode {
            Mode::DataCenter => ("Server", "9.12.15"),
            Mode::Cloud => ("Cloud", "1001.0.0-SNAPSHOT"),
        };
        Reply::json(
            200,
            json!({"baseUrl": self.base, "version": version, "versionNumbers": [9, 12, 15],
                   "deploymentType": deployment, "buildNumber": 9120015,
                   "buildDate": "2026-01-15T00:00:00.000+0300",
                   "serverTime": jira_time(self.jira_now_ms()), "scmInfo": "fake", "serverTitle": "Jira"}),
        )
    }

    // --- search -------------------------------------------------------------------------

    fn search_params(request: &Request) -> Result<Vec<(String, String)>, Reply> {
        if request.method != Method::POST {
            return Ok(request.query.clone());
        }
        let body = Self::body_json(request)?;
        let mut params = Vec::new();
        if let Some(object) = body.as_object() {
            for (name, value) in object {
                let text = match value {
                    Value::String(s) => s.clone(),
                    Value::Array(items) => items
                        .iter()
                        .map(|i| {
                            i.as_str()
                                .map(String::from)
                                .unwrap_or_else(|| i.to_string())
                        })
                        .collect::<Vec<_>>()
                        .join(","),
                    other => other.to_string(),
                };
                params.push((name.clone(), text));
            }
        }
        Ok(params)
    }

    fn matching(&self, query: &Query, lag: bool) -> Result<Vec<u64>, Reply> {
        for clause in &query.clauses {
            if let Clause::Project(key) = clause
                && !self.projects.contains_key(key)
            {
                return Err(Reply::error(
                    400,
                    &format!("The value '{key}' does not exist for the field 'project'."),
                ));
            }
        }
        let ranges = self.key_ranges(query)?;
        let now = Instant::now();
        let mut ids: Vec<u64> = self
            .issues
            .values()
            .filter(|issue| query.clauses.iter().all(|c| c.matches(issue)))
            .filter(|issue| {
                ranges.iter().all(|(project, operator, number)| {
                    let n = key_number(&issue.key);
                    issue.project == *project
                        && match operator.as_str() {
                            ">" => n > *number,
                            ">=" => n >= *number,
                            "<" => n < *number,
                            _ => n <= *number,
                        }
                })
            })
            .filter(|issue| {
                !lag || issue
                    .created_at
                    .is_none_or(|at| now.duration_since(at) >= self.search_lag)
            })
            .map(|issue| issue.id)
            .collect();
        if query.by_key {
            ids.sort_by_cached_key(|id| {
                let issue = &self.issues[id];
                (issue.project.clone(), key_number(&issue.key))
            });
        }
        Ok(ids)
    }

    fn change(&mut self, change: Change) {
        match change {
            Change::Delete(key) => {
                if let Some(id) = self.by_key.remove(&key) {
                    self.issues.remove(&id);
                }
            }
            Change::Move(key, project) => {
                let Some(id) = self.by_key.remove(&key) else {
                    return;
                };
                let number = self.projects.entry(project.clone()).or_insert(1);
                let new_key = format!("{project}-{number}");
                *number += 1;
                let issue = self.issues.get_mut(&id).expect("issue");
                issue.key = new_key.clone();
                issue.project = project.clone();
                issue
                    .fields
                    .insert("project".into(), json!({"key": project, "id": "10101"}));
                self.by_key.insert(new_key, id);
                self.moved_keys.insert(key, id);
            }
        }
    }

    /// The relational issue-key clauses of `query`, resolved as Jira resolves them: the literal
    /// names one issue (by id when it is a number, else by key), and the clause becomes "that
    /// issue's project, key number compared" (`IssueIdClauseQueryFactory.handleRelational`,
    /// Jira Server source). The validator refuses a literal that names no issue
    /// (`IssueIdValidator`: "An issue with key 'X' does not exist for field 'key'." — the text
    /// jira-resilient's `_STALE_KEY_PATTERNS` records from a production Jira Server, 2026-05-20;
    /// an id: `jira.jql.clause.no.value.for.id`), and a relational operator on the old key of a
    /// moved issue ("Operator '>=' cannot be applied to moved issue key 'ALC-1'.", Jira's own
    /// webdriver test of moved issues, `MovedIssueKeyStore` since 6.1).
    fn key_ranges(&self, query: &Query) -> Result<Vec<(String, String, u64)>, Reply> {
        let mut ranges = Vec::new();
        for clause in &query.clauses {
            let Clause::KeyCompare {
                field,
                operator,
                literal,
                numeric,
            } = clause
            else {
                continue;
            };
            let id = if *numeric {
                let id: u64 = literal.parse().unwrap_or(u64::MAX);
                if !self.issues.contains_key(&id) {
                    return Err(Reply::error(
                        400,
                        &format!(
                            "A value with ID '{literal}' does not exist for the field '{field}'."
                        ),
                    ));
                }
                id
            } else if let Some(id) = self.by_key.get(literal) {
                *id
            } else if self.moved_keys.contains_key(literal) {
                return Err(Reply::error(
                    400,
                    &format!(
                        "Operator '{operator}' cannot be applied to moved issue key '{literal}'."
                    ),
                ));
            } else {
                return Err(Reply::error(
                    400,
                    &format!("An issue with key '{literal}' does not exist for field '{field}'."),
                ));
            };
            let issue = &self.issues[&id];
            ranges.push((
                issue.project.clone(),
                operator.clone(),
                key_number(&issue.key),
            ));
        }
        Ok(ranges)
    }

    fn search_dc(&mut self, request: &Request) -> Result<Reply, Reply> {
        if self.mode == Mode::Cloud {
            return Err(Reply::error(
                410,
                "The requested API has been removed. Please migrate to the /rest/api/3/search/jql API. A full migration guideline is available at https://developer.atlassian.com/changelog/#CHANGE-2046",
            ));
        }
        let params = Self::search_params(request)?;
        let get = |name: &str| {
            params
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        let query = parse_jql(get("jql").unwrap_or(""))?;
        let start_at: usize = number_param(get("startAt"), 0, "startAt")?;
        let asked: usize = number_param(get("maxResults"), 50, "maxResults")?;
        let max = asked.min(self.max_results);
        if start_at + max > WINDOW {
            return Err(Reply::error(
                400,
                &format!(
                    "Search limit exceeded: startAt + maxResults must not exceed {WINDOW} (jira.search.platform.max.result.window); narrow the query instead of paging deeper."
                ),
            ));
        }
        let filter = FieldFilter::parse(get("fields"), FieldFilter::Except(HashSet::new()));
        let ids = self.matching(&query, false)?;
        let issues: Vec<Value> = ids
            .iter()
            .skip(start_at)
            .take(max)
            .map(|id| self.render(&self.issues[id], &filter))
            .collect();
        let body = json!({"expand": "schema,names", "startAt": start_at, "maxResults": max,
                          "total": ids.len(), "issues": issues});
        if let Some(limit) = self.search_byte_limit
            && body.to_string().len() > limit
        {
            return Err(gateway_timeout());
        }
        self.searches_served += 1;
        let served = self.searches_served;
        let due: Vec<Change> = self
            .scheduled
            .iter()
            .filter(|(n, _)| *n == served)
            .map(|(_, c)| c.clone())
            .collect();
        for change in due {
            self.change(change);
        }
        Ok(Reply::json(200, body))
    }

    fn search_cloud(&mut self, request: &Request) -> Result<Reply, Reply> {
        if self.mode == Mode::DataCenter {
            return Err(Reply::error(
                404,
                &format!("null for uri: {}/rest/api/2/search/jql", self.base),
            ));
        }
        let params = Self::search_params(request)?;
        let get = |name: &str| {
            params
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        let jql = get("jql").unwrap_or("").to_string();
        let query = parse_jql(&jql)?;
        if query.clauses.is_empty() {
            return Err(Reply::error(
                400,
                "Unbounded JQL queries are not allowed here. Please add a search restriction to your query.",
            ));
        }
        let asked: usize = number_param(get("maxResults"), 50, "maxResults")?;
        if asked == 0 || asked > 5000 {
            return Err(Reply::error(
                400,
                "The max results parameter has to be between 1 and 5,000.",
            ));
        }
        let after = match get("nextPageToken").filter(|t| !t.is_empty()) {
            None => None,
            Some(token) => match self.tokens.get(token) {
                Some((token_jql, last)) if *token_jql == jql => Some(*last),
                _ => {
                    return Err(Reply::error(
                        400,
                        "The provided next page token is invalid or expired.",
                    ));
                }
            },
        };
        let max = asked.min(self.max_results);
        let filter = FieldFilter::parse(get("fields"), FieldFilter::IdOnly);
        let ids = self.matching(&query, true)?;
        let rest: Vec<u64> = ids
            .into_iter()
            .filter(|id| after.is_none_or(|last| *id > last))
            .collect();
        let page = &rest[..rest.len().min(max)];
        let issues: Vec<Value> = page
            .iter()
            .map(|id| self.render(&self.issues[id], &filter))
            .collect();
        let is_last = page.len() == rest.len();
        let mut body = json!({"issues": issues, "isLast": is_last});
        if !is_last && let Some(last) = page.last() {
            let token = format!(
                "CgwI{:016x}EAAYAQ{:08x}",
                self.next_token.wrapping_mul(0x9E37_79B9_7F4A_7C15),
                self.next_token
            );
            self.next_token += 1;
            self.tokens.insert(token.clone(), (jql, *last));
            body["nextPageToken"] = token.into();
        }
        Ok(Reply::json(200, body))
    }

    // --- issues ---------------------------------------------------------------------------

    fn get_issue(&self, request: &Request) -> Result<Reply, Reply> {
        let id = self.find(&request.segments[4])?;
        let filter = FieldFilter::parse(request.param("fields"), FieldFilter::All);
        Ok(Reply::json(200, self.render(&self.issues[&id], &filter)))
    }

    fn check_fields(&self, fields: &Map<String, Value>) -> Result<(), Reply> {
        if let Some(labels) = fields.get("labels") {
            let Some(labels) = labels.as_array() else {
                return Err(Reply::field_error("labels", "data was not an array"));
            };
            for label in labels {
                let label = label.as_str().unwrap_or("");
                if label.is_empty() || label.contains(' ') {
                    return Err(Reply::field_error(
                        "labels",
                        &format!("The label '{label}' contains spaces which is invalid."),
                    ));
                }
            }
        }
        if let Some(sprint) = fields.get(SPRINT_FIELD)
            && !sprint.is_null()
            && !sprint.is_number()
        {
            return Err(Reply::json(
                400,
                json!({"errorMessages": ["Number value expected as the Sprint id."],
                       "errors": {SPRINT_FIELD: "The Sprint (id) must be a number"}}),
            ));
        }
        if let Some(epic) = fields.get(EPIC_LINK_FIELD).and_then(Value::as_str)
            && !self.by_key.contains_key(epic)
        {
            return Err(Reply::field_error(
                EPIC_LINK_FIELD,
                &format!("The issue {epic} does not exist."),
            ));
        }
        if fields.contains_key("status") {
            return Err(Reply::field_error(
                "status",
                "Field 'status' cannot be set. It is not on the appropriate screen, or unknown.",
            ));
        }
        Ok(())
    }

    /// Jira's shape for the values a caller sets by name.
    fn normalise(&self, fields: &mut Map<String, Value>) {
        if let Some(sprint) = fields.get(SPRINT_FIELD).and_then(Value::as_u64) {
            let value = self.sprint_value(sprint);
            fields.insert(SPRINT_FIELD.into(), value);
        }
    }

    fn create_issue(&mut self, request: &Request) -> Result<Reply, Reply> {
        let body = Self::body_json(request)?;
        let mut fields = body
            .get("fields")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let project = fields
            .get("project")
            .and_then(|p| p.get("key").or_else(|| p.get("id")))
            .and_then(Value::as_str)
            .map(String::from)
            .filter(|p| self.projects.contains_key(p))
            .ok_or_else(|| Reply::field_error("project", "Specify a valid project ID or key"))?;
        let issuetype = fields
            .get("issuetype")
            .ok_or_else(|| Reply::field_error("issuetype", "Specify an issue type"))?;
        let (type_id, type_name) = ISSUE_TYPES
            .iter()
            .find(|(id, name)| {
                issuetype.get("id").and_then(Value::as_str) == Some(id)
                    || issuetype.get("name").and_then(Value::as_str) == Some(name)
            })
            .ok_or_else(|| Reply::field_error("issuetype", "valid issue type is required"))?;
        let summary = fields
            .get("summary")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if summary.trim().is_empty() {
            return Err(Reply::field_error(
                "summary",
                "You must specify a summary of the issue.",
            ));
        }
        self.check_fields(&fields)?;
        self.check_parent(&fields)?;
        self.normalise(&mut fields);
        fields.insert(
            "issuetype".into(),
            json!({"self": format!("{}/rest/api/2/issuetype/{type_id}", self.base),
                   "id": type_id, "name": type_name, "subtask": false}),
        );
        let properties = if self.create_properties {
            Self::entity_properties(&body)?
        } else {
            BTreeMap::new()
        };
        let now = self.jira_now_ms();
        let key = self.insert_issue(&project, fields, now, Some(Instant::now()));
        *self.creates.entry(summary).or_insert(0) += 1;
        let id = self.by_key[&key];
        self.issues.get_mut(&id).expect("made").properties = properties;
        Ok(Reply::json(
            201,
            json!({"id": id.to_string(), "key": key,
                   "self": format!("{}/rest/api/2/issue/{id}", self.base)}),
        ))
    }

    fn edit_issue(&mut self, request: &Request) -> Result<Reply, Reply> {
        let id = self.find(&request.segments[4])?;
        let body = Self::body_json(request)?;
        let mut fields = body
            .get("fields")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if fields.contains_key("project") || fields.contains_key("issuetype") {
            return Err(Reply::field_error(
                "project",
                "Field 'project' cannot be set. It is not on the appropriate screen, or unknown.",
            ));
        }
        if fields
            .get("summary")
            .is_some_and(|s| s.as_str().is_none_or(|s| s.trim().is_empty()))
        {
            return Err(Reply::field_error(
                "summary",
                "You must specify a summary of the issue.",
            ));
        }
        self.check_fields(&fields)?;
        self.check_parent(&fields)?;
        self.normalise(&mut fields);
        let update = body
            .get("update")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let labels = Self::label_operations(&update, &fields)?;
        let issue = self.issues.get_mut(&id).expect("found");
        if let Some(labels) = labels {
            issue.labels = labels(&issue.labels);
            issue.fields.insert("labels".into(), json!(issue.labels));
        }
        for (name, value) in fields {
            match name.as_str() {
                "labels" => {
                    issue.labels = value
                        .as_array()
                        .map(|a| {
                            a.iter()
                                .filter_map(|l| l.as_str().map(String::from))
                                .collect()
                        })
                        .unwrap_or_default();
                }
                "summary" => issue.summary = value.as_str().unwrap_or("").to_string(),
                _ => {}
            }
            issue.fields.insert(name, value);
        }
        issue.updated_ms = now_ms();
        Ok(Reply::empty(204))
    }

    /// Edit issue's `update` for labels: `add`, `remove`, `set` operations applied in order
    /// ("Edit issue": "update: A Map containing the field name and a list of operations to
    /// perform on the issue screen field"; labels take add, set and remove, REST API examples
    /// "Edit issues": `{"update": {"labels": [{"add": "triaged"}, {"remove": "blocker"}]}}`). A
    /// field in both `fields` and `update` is refused ("Fields included in here cannot be
    /// included in `update`"). Returns what turns the old labels into the new ones.
    #[allow(clippy::type_complexity)]
    fn label_operations(
        update: &Map<String, Value>,
        fields: &Map<String, Value>,
    ) -> Result<Option<Box<dyn Fn(&[String]) -> Vec<String>>>, Reply> {
        let Some(operations) = update.get("labels") else {
            return Ok(None);
        };
        if fields.contains_key("labels") {
            return Err(Reply::field_error(
                "labels",
                "Field 'labels' cannot be set in both 'fields' and 'update'.",
            ));
        }
        let Some(operations) = operations.as_array() else {
            return Err(Reply::field_error("labels", "data was not an array"));
        };
        let mut steps: Vec<(String, Vec<String>)> = Vec::new();
        for operation in operations {
            let Some((verb, value)) = operation.as_object().and_then(|o| o.iter().next()) else {
                return Err(Reply::field_error("labels", "Operation is not an object"));
            };
            let values: Vec<String> = match value {
                Value::String(label) => vec![label.clone()],
                Value::Array(items) => items
                    .iter()
                    .filter_map(|l| l.as_str().map(String::from))
                    .collect(),
                _ => return Err(Reply::field_error("labels", "data was not a string")),
            };
            for label in &values {
                if label.is_empty() || label.contains(' ') {
                    return Err(Reply::field_error(
                        "labels",
                        &format!("The label '{label}' contains spaces which is invalid."),
                    ));
                }
            }
            match verb.as_str() {
                "add" | "remove" | "set" => steps.push((verb.clone(), values)),
                other => {
                    return Err(Reply::field_error(
                        "labels",
                        &format!("Operation '{other}' is not supported for field 'labels'."),
                    ));
                }
            }
        }
        Ok(Some(Box::new(move |old: &[String]| {
            let mut labels = old.to_vec();
            for (verb, values) in &steps {
                match verb.as_str() {
                    "add" => {
                        for label in values {
                            if !labels.contains(label) {
                                labels.push(label.clone());
                            }
                        }
                    }
                    "remove" => labels.retain(|l| !values.contains(l)),
                    _ => labels = values.clone(),
                }
            }
            labels
        })))
    }

    /// The epic of an issue: on Cloud through `parent` (the Epic Link field is gone from the
    /// REST API: "Deprecation of the Epic Link, Parent Link and other related fields in REST APIs
    /// and webhooks", community.developer.atlassian.com, t/54048), on Data Center through Epic
    /// Link, where `parent` is for sub-tasks only and a standard issue type has no such field on
    /// its screens (Jira's refusal of a field it cannot set: "Field 'x' cannot be set. It is not
    /// on the appropriate screen, or unknown.", recorded for `labels` in jiralert#74).
    fn check_parent(&self, fields: &Map<String, Value>) -> Result<(), Reply> {
        match self.mode {
            Mode::Cloud => {
                if fields.contains_key(EPIC_LINK_FIELD) {
                    return Err(Reply::field_error(
                        EPIC_LINK_FIELD,
                        &format!(
                            "Field '{EPIC_LINK_FIELD}' cannot be set. It is not on the appropriate screen, or unknown."
                        ),
                    ));
                }
                if let Some(parent) = fields.get("parent") {
                    let key = parent.get("key").and_then(Value::as_str).unwrap_or("");
                    if !self.by_key.contains_key(key) {
                        return Err(Reply::field_error(
                            "parent",
                            &format!("Issue '{key}' could not be found."),
                        ));
                    }
                }
            }
            Mode::DataCenter => {
                if fields.contains_key("parent") {
                    return Err(Reply::field_error(
                        "parent",
                        "Field 'parent' cannot be set. It is not on the appropriate screen, or unknown.",
                    ));
                }
            }
        }
        Ok(())
    }

    /// The `properties` member of a create: `[{"key", "value"}]`, values JSON of at most 32768
    /// characters ("The maximum length of an issue property value is 32768 characters").
    fn entity_properties(body: &Value) -> Result<BTreeMap<String, Value>, Reply> {
        let mut properties = BTreeMap::new();
        for property in body
            .get("properties")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = property.get("key").and_then(Value::as_str).unwrap_or("");
            let value = property.get("value").cloned().unwrap_or(Value::Null);
            if key.is_empty() || key.len() > 255 {
                return Err(Reply::error(
                    400,
                    "The property key cannot be null and must be at most 255 characters.",
                ));
            }
            if value.to_string().chars().count() > 32_768 {
                return Err(Reply::error(
                    400,
                    "The property value is too long: it must be at most 32768 characters.",
                ));
            }
            properties.insert(key.to_string(), value);
        }
        Ok(properties)
    }

    /// `{"key", "value"}` of a property, or Jira's 404 when it is not set.
    fn property_reply(key: &str, value: Option<&Value>) -> Result<Reply, Reply> {
        match value {
            Some(value) => Ok(Reply::json(200, json!({"key": key, "value": value}))),
            None => Err(Reply::error(
                404,
                &format!("The property with key '{key}' does not exist."),
            )),
        }
    }

    fn get_issue_property(&self, request: &Request) -> Result<Reply, Reply> {
        let id = self.find(&request.segments[4])?;
        let key = &request.segments[6];
        Self::property_reply(key, self.issues[&id].properties.get(key))
    }

    /// `PUT …/properties/{propertyKey}`: the body is the value; 201 when new, 200 when replaced.
    fn set_issue_property(&mut self, request: &Request) -> Result<Reply, Reply> {
        let id = self.find(&request.segments[4])?;
        let key = request.segments[6].clone();
        let value = Self::body_json(request)?;
        let issue = self.issues.get_mut(&id).expect("found");
        let existed = issue.properties.insert(key, value).is_some();
        Ok(Reply::empty(if existed { 200 } else { 201 }))
    }

    fn get_comment_property(&self, request: &Request) -> Result<Reply, Reply> {
        let id: u64 = request.segments[4].parse().unwrap_or(0);
        let text = id.to_string();
        let exists = self
            .issues
            .values()
            .any(|i| i.comments.iter().any(|c| c["id"].as_str() == Some(&text)));
        if !exists {
            return Err(Reply::error(
                404,
                &format!("Can not find a comment for the id: {id}."),
            ));
        }
        let key = &request.segments[6];
        Self::property_reply(
            key,
            self.comment_properties.get(&id).and_then(|p| p.get(key)),
        )
    }

    // --- workflow -------------------------------------------------------------------------

    fn offered(
        status: usize,
    ) -> Vec<&'static (
        &'static str,
        &'static str,
        Option<&'static str>,
        &'static str,
    )> {
        let current = STATUSES[status].1;
        TRANSITIONS
            .iter()
            .filter(|(_, _, from, to)| match from {
                Some(from) => *from == current,
                None => *to != current,
            })
            .collect()
    }

    /// The workflow of the issue's type: bugs have their own.
    fn workflow(
        issue: &Issue,
    ) -> &'static [(
        &'static str,
        &'static str,
        Option<&'static str>,
        &'static str,
    )] {
        if issue.fields["issuetype"]["id"] == "10004" {
            BUG_TRANSITIONS
        } else {
            TRANSITIONS
        }
    }

    fn offered_in(
        workflow: &'static [(
            &'static str,
            &'static str,
            Option<&'static str>,
            &'static str,
        )],
        status: usize,
    ) -> Vec<&'static (
        &'static str,
        &'static str,
        Option<&'static str>,
        &'static str,
    )> {
        let current = STATUSES[status].1;
        workflow
            .iter()
            .filter(|(_, _, from, to)| match from {
                Some(from) => *from == current,
                None => *to != current,
            })
            .collect()
    }

    fn get_transitions(&self, request: &Request) -> Result<Reply, Reply> {
        let id = self.find(&request.segments[4])?;
        let issue = &self.issues[&id];
        let transitions: Vec<Value> = Self::offered_in(Self::workflow(issue), issue.status)
            .into_iter()
            .map(|(tid, name, _, to)| {
                let (sid, _) = STATUSES.iter().find(|(_, n)| n == to).expect("status");
                json!({"id": tid, "name": name,
                       "to": {"self": format!("{}/rest/api/2/status/{sid}", self.base), "id": sid, "name": to},
                       "hasScreen": false, "isGlobal": from_any(tid), "isInitial": false, "isConditional": false})
            })
            .collect();
        Ok(Reply::json(
            200,
            json!({"expand": "transitions", "transitions": transitions}),
        ))
    }

    fn do_transition(&mut self, request: &Request) -> Result<Reply, Reply> {
        let id = self.find(&request.segments[4])?;
        let body = Self::body_json(request)?;
        let Some(tid) = body.get("transition").and_then(|t| {
            t.get("id").and_then(|i| {
                i.as_str()
                    .map(String::from)
                    .or_else(|| i.as_u64().map(|n| n.to_string()))
            })
        }) else {
            return Err(Reply::error(400, "Missing 'transition' identifier"));
        };
        let redirect = self.redirects.get(&tid).copied();
        let issue = self.issues.get_mut(&id).expect("found");
        let Some((_, _, _, to)) = Self::offered_in(Self::workflow(issue), issue.status)
            .into_iter()
            .find(|(t, _, _, _)| *t == tid)
        else {
            return Err(Reply::error(
                400,
                &format!(
                    "It seems that you have tried to perform a workflow operation ({tid}) that is not valid for the current state of this issue ({}). The likely cause is that somebody has changed the issue recently, please look at the issue history for details.",
                    issue.key
                ),
            ));
        };
        let to = redirect.unwrap_or(to);
        issue.status = STATUSES.iter().position(|(_, n)| *n == to).expect("status");
        issue.updated_ms = now_ms();
        Ok(Reply::empty(204))
    }

    // --- links ----------------------------------------------------------------------------

    fn create_link(&mut self, request: &Request) -> Result<Reply, Reply> {
        let body = Self::body_json(request)?;
        let type_name = body["type"]["name"].as_str();
        let type_id = body["type"]["id"].as_str();
        let kind = LINK_TYPES
            .iter()
            .position(|(id, name, _, _)| Some(*name) == type_name || Some(*id) == type_id)
            .ok_or_else(|| {
                Reply::error(
                    404,
                    &format!(
                        "No issue link type with name '{}' found.",
                        type_name.or(type_id).unwrap_or("")
                    ),
                )
            })?;
        let source = body["inwardIssue"]["key"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let target = body["outwardIssue"]["key"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let source_id = self.find(&source)?;
        let target_id = self.find(&target)?;
        let id = self.next_link;
        self.next_link += 1;
        self.links.insert(
            id,
            Link {
                id,
                kind,
                source,
                target,
            },
        );
        let now = now_ms();
        for issue in [source_id, target_id] {
            let issue = self.issues.get_mut(&issue).expect("found");
            issue.links.push(id);
            issue.updated_ms = now;
        }
        Ok(Reply::empty(201))
    }

    fn link_types(&self) -> Reply {
        let types: Vec<Value> = LINK_TYPES
            .iter()
            .map(|(id, name, inward, outward)| {
                json!({"id": id, "name": name, "inward": inward, "outward": outward,
                       "self": format!("{}/rest/api/2/issueLinkType/{id}", self.base)})
            })
            .collect();
        Reply::json(200, json!({"issueLinkTypes": types}))
    }

    // --- comments -------------------------------------------------------------------------

    fn get_comments(&self, request: &Request) -> Result<Reply, Reply> {
        let id = self.find(&request.segments[4])?;
        let start_at: usize = number_param(request.param("startAt"), 0, "startAt")?;
        let max: usize =
            number_param(request.param("maxResults"), 50, "maxResults")?.min(self.max_results);
        let comments = &self.issues[&id].comments;
        let page: Vec<Value> = comments.iter().skip(start_at).take(max).cloned().collect();
        Ok(Reply::json(
            200,
            json!({"startAt": start_at, "maxResults": max, "total": comments.len(), "comments": page}),
        ))
    }

    fn add_comment(&mut self, request: &Request) -> Result<Reply, Reply> {
        let id = self.find(&request.segments[4])?;
        let body = Self::body_json(request)?;
        let text = match body.get("body") {
            Some(Value::String(text)) if !text.trim().is_empty() => text.clone(),
            _ => {
                return Err(Reply::field_error(
                    "comment",
                    "Comment body can not be empty!",
                ));
            }
        };
        // Cloud keeps a REST v2 body as ADF and converts it back to wiki markup when read.
        let text = match self.mode {
            Mode::Cloud => through_adf(&text),
            Mode::DataCenter => text,
        };
        let properties = Self::entity_properties(&body)?;
        let comment_id = self.next_comment;
        self.next_comment += 1;
        if !properties.is_empty() {
            self.comment_properties.insert(comment_id, properties);
        }
        let now = jira_time(self.jira_now_ms());
        let author = self.user_json();
        let comment = json!({
            "self": format!("{}/rest/api/2/issue/{id}/comment/{comment_id}", self.base),
            "id": comment_id.to_string(), "author": author, "body": text,
            "updateAuthor": author, "created": now, "updated": now});
        let issue = self.issues.get_mut(&id).expect("found");
        issue.comments.push(comment.clone());
        issue.updated_ms = now_ms();
        Ok(Reply::json(201, comment))
    }

    // --- agile ----------------------------------------------------------------------------

    fn board_json(&self, id: u64) -> Option<Value> {
        let (name, kind) = self.boards.get(&id)?;
        Some(
            json!({"id": id, "self": format!("{}/rest/agile/1.0/board/{id}", self.base),
                    "name": name, "type": kind,
                    "location": {"projectKey": PROJECT, "displayName": format!("Проект {PROJECT} ({PROJECT})")}}),
        )
    }

    fn board_id(request: &Request) -> Result<u64, Reply> {
        request.segments[4]
            .parse()
            .map_err(|_| Reply::error(400, "The board id must be a number."))
    }

    fn board(&self, request: &Request) -> Result<Reply, Reply> {
        let id = Self::board_id(request)?;
        self.board_json(id)
            .map(|b| Reply::json(200, b))
            .ok_or_else(|| {
                Reply::error(
                    404,
                    "Board does not exist or you do not have permission to see it.",
                )
            })
    }

    fn boards(&self, request: &Request) -> Reply {
        let kind = request.param("type");
        let values: Vec<Value> = self
            .boards
            .iter()
            .filter(|(_, (_, k))| kind.is_none_or(|kind| kind == k))
            .filter_map(|(id, _)| self.board_json(*id))
            .collect();
        paged(request, values, 50)
    }

    fn sprints(&self, request: &Request) -> Result<Reply, Reply> {
        let id = Self::board_id(request)?;
        let Some((_, kind)) = self.boards.get(&id) else {
            return Err(Reply::error(
                404,
                "Board does not exist or you do not have permission to see it.",
            ));
        };
        if kind != "scrum" {
            return Err(Reply::error(400, "The board does not support sprints"));
        }
        let states: Option<Vec<&str>> = request.param("state").map(|s| s.split(',').collect());
        let values: Vec<Value> = self
            .sprints
            .iter()
            .filter(|s| s.board == id)
            .filter(|s| {
                states
                    .as_ref()
                    .is_none_or(|states| states.contains(&s.state.as_str()))
            })
            .map(|s| self.sprint_json(s))
            .collect();
        Ok(paged(request, values, 50))
    }

    fn sprint_json(&self, sprint: &Sprint) -> Value {
        let start = agile_time(1_772_431_200_000 + (sprint.id as i64 - 740) * 14 * 86_400_000);
        let end = agile_time(1_773_640_800_000 + (sprint.id as i64 - 740) * 14 * 86_400_000);
        let mut value = json!({"id": sprint.id, "self": format!("{}/rest/agile/1.0/sprint/{}", self.base, sprint.id),
                               "state": sprint.state, "name": sprint.name, "originBoardId": sprint.board});
        if sprint.state != "future" {
            value["startDate"] = start.into();
            value["endDate"] = end.clone().into();
        }
        if sprint.state == "closed" {
            value["completeDate"] = end.into();
        }
        value
    }

    /// The sprint field's value: Server's `toString` form on DC, objects on Cloud.
    fn sprint_value(&self, sprint_id: u64) -> Value {
        let Some(sprint) = self.sprints.iter().find(|s| s.id == sprint_id) else {
            return json!([]);
        };
        match self.mode {
            Mode::DataCenter => json!([format!(
                "com.atlassian.greenhopper.service.sprint.Sprint@5c1a3f2e[id={},rapidViewId={},state={},name={},startDate=2026-03-02T09:00:00.000+03:00,endDate=2026-03-16T09:00:00.000+03:00,completeDate=<null>,activatedDate=2026-03-02T09:00:00.000+03:00,sequence={},goal=,autoStartStop=false,synced=false]",
                sprint.id,
                sprint.board,
                sprint.state.to_uppercase(),
                sprint.name,
                sprint.id
            )]),
            Mode::Cloud => json!([{"id": sprint.id, "name": sprint.name, "state": sprint.state,
                                   "boardId": sprint.board, "goal": ""}]),
        }
    }

    fn add_to_sprint(&mut self, request: &Request) -> Result<Reply, Reply> {
        let sprint_id: u64 = request.segments[4]
            .parse()
            .map_err(|_| Reply::error(400, "Number value expected as the Sprint id."))?;
        if !self.sprints.iter().any(|s| s.id == sprint_id) {
            return Err(Reply::error(
                404,
                &format!(
                    "Sprint with id {sprint_id} does not exist or you do not have permission to see it."
                ),
            ));
        }
        let body = Self::body_json(request)?;
        let keys: Vec<String> = body["issues"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|k| k.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let ids = keys
            .iter()
            .map(|k| self.find(k))
            .collect::<Result<Vec<u64>, Reply>>()?;
        let value = self.sprint_value(sprint_id);
        let now = now_ms();
        for id in ids {
            let issue = self.issues.get_mut(&id).expect("found");
            issue.fields.insert(SPRINT_FIELD.into(), value.clone());
            issue.updated_ms = now;
        }
        Ok(Reply::empty(204))
    }

    // --- seeding agile --------------------------------------------------------------------
}

// --- the preflight's metadata (`jira-hub agent --check`): read-only ---------------------------
impl StateInner {
    /// The project, or Jira's 404 (REST v2 `GET /rest/api/2/project/{projectIdOrKey}`:
    /// "Returned if the project is not found, or the calling user does not have permission to
    /// view it", body `{"errorMessages":["No project could be found with key 'X'."]}`).
    fn find_project(&self, key: &str) -> Result<(), Reply> {
        if self.projects.contains_key(key) {
            Ok(())
        } else {
            Err(Reply::error(
                404,
                &format!("No project could be found with key '{key}'."),
            ))
        }
    }

    fn issue_type_json(&self, id: &str, name: &str) -> Value {
        json!({"self": format!("{}/rest/api/2/issuetype/{id}", self.base), "id": id,
               "name": name, "description": "", "subtask": false})
    }

    fn project(&self, request: &Request) -> Result<Reply, Reply> {
        let key = &request.segments[4];
        self.find_project(key)?;
        let types: Vec<Value> = ISSUE_TYPES
            .iter()
            .map(|(id, name)| self.issue_type_json(id, name))
            .collect();
        Ok(Reply::json(
            200,
            json!({"self": format!("{}/rest/api/2/project/10000", self.base), "id": "10000",
                   "key": key, "name": format!("Проект {key}"), "projectTypeKey": "software",
                   "issueTypes": types}),
        ))
    }

    /// `GET /rest/api/2/project/{key}/statuses`: per issue type, its workflow's statuses
    /// (`[{id, name, subtask, statuses: [{id, name, …}]}]`, REST v2 "Get all statuses for
    /// project"). Every type here goes through the same four statuses (the bugs' workflow has
    /// other transitions, not other statuses).
    fn project_statuses(&self, request: &Request) -> Result<Reply, Reply> {
        self.find_project(&request.segments[4])?;
        let statuses: Vec<Value> = STATUSES
            .iter()
            .map(|(id, name)| {
                json!({"self": format!("{}/rest/api/2/status/{id}", self.base), "id": id,
                       "name": name, "description": ""})
            })
            .collect();
        let types: Vec<Value> = ISSUE_TYPES
            .iter()
            .map(|(id, name)| {
                json!({"self": format!("{}/rest/api/2/issuetype/{id}", self.base), "id": id,
                       "name": name, "subtask": false, "statuses": statuses})
            })
            .collect();
        Ok(Reply::json(200, Value::Array(types)))
    }

    /// `GET /rest/api/2/mypermissions?projectKey=…&permissions=…`: `{"permissions": {KEY:
    /// {id, key, name, type, description, havePermission}}}`. Cloud refuses the call without
    /// `permissions` (developer.atlassian.com/cloud/jira/platform/rest/v2/api-group-permissions:
    /// "permissions: A list of permission keys. This parameter is required."; 400 otherwise).
    /// An unknown project: 404 as the project itself.
    fn my_permissions(&self, request: &Request) -> Result<Reply, Reply> {
        if let Some(project) = request.param("projectKey") {
            self.find_project(project)?;
        }
        let asked: Vec<&str> = request
            .param("permissions")
            .map(|p| {
                p.split(',')
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        if asked.is_empty() && self.mode == Mode::Cloud {
            return Err(Reply::error(
                400,
                "The 'permissions' query parameter is required.",
            ));
        }
        let mut out = Map::new();
        for (key, id, name) in PERMISSIONS {
            if !asked.is_empty() && !asked.contains(key) {
                continue;
            }
            out.insert(
                key.to_string(),
                json!({"id": id, "key": key, "name": name, "type": "PROJECT", "description": "",
                       "havePermission": !self.withheld.contains(*key)}),
            );
        }
        if let Some(unknown) = asked
            .iter()
            .find(|a| !PERMISSIONS.iter().any(|(k, _, _)| k == *a))
        {
            return Err(Reply::error(
                400,
                &format!("Permission key '{unknown}' does not exist."),
            ));
        }
        Ok(Reply::json(200, json!({"permissions": out})))
    }

    /// `GET /rest/api/2/issue/createmeta/{project}/issuetypes`: Data Center 8.4+ pages them as
    /// `{maxResults, startAt, total, isLast, values}`, Cloud as `{maxResults, startAt, total,
    /// issueTypes}` (jira.js `server.getCreateIssueMetaProjectIssueTypes` and
    /// `cloud.getCreateIssueMetaIssueTypes`, from the two REST specs).
    fn create_meta_types(&self, request: &Request) -> Result<Reply, Reply> {
        self.find_project(&request.segments[5])?;
        let types: Vec<Value> = ISSUE_TYPES
            .iter()
            .map(|(id, name)| self.issue_type_json(id, name))
            .collect();
        Ok(self.create_meta_page(types, "issueTypes"))
    }

    /// One page of createmeta as each deployment pages it: Data Center `values` with `isLast`,
    /// Cloud under its own member (`issueTypes`, `fields`).
    fn create_meta_page(&self, values: Vec<Value>, cloud_member: &str) -> Reply {
        let total = values.len();
        let mut page = json!({"maxResults": 50, "startAt": 0, "total": total});
        match self.mode {
            Mode::DataCenter => {
                page["isLast"] = json!(true);
                page["values"] = Value::Array(values);
            }
            Mode::Cloud => page[cloud_member] = Value::Array(values),
        }
        Reply::json(200, page)
    }

    /// The create screen's fields of one type: Data Center `{…, values: [{fieldId, name, …}]}`,
    /// Cloud `{…, fields: [{fieldId, key, name, …}]}` (the same two specs). On Data Center the
    /// epic goes through Epic Link (not on the epic's own screen); on Cloud through `parent`
    /// (Epic Link is not on any screen: "Field 'customfield_…' cannot be set", see
    /// `check_parent`).
    fn create_meta_fields(&self, request: &Request) -> Result<Reply, Reply> {
        self.find_project(&request.segments[5])?;
        let type_id = &request.segments[7];
        let Some((_, type_name)) = ISSUE_TYPES.iter().find(|(id, _)| id == type_id) else {
            return Err(Reply::error(
                404,
                &format!("Issue type with id '{type_id}' does not exist."),
            ));
        };
        let ids = self.screen_fields(type_name);
        let fields: Vec<Value> = ids
            .iter()
            .map(|id| {
                json!({"fieldId": id, "key": id, "name": field_name(id),
                       "required": matches!(*id, "summary" | "issuetype" | "project"),
                       "hasDefaultValue": false, "operations": ["set"]})
            })
            .collect();
        Ok(self.create_meta_page(fields, "fields"))
    }

    /// `GET /rest/api/2/issue/{key}/editmeta`: `{"fields": {fieldId: {required, name, key,
    /// operations, …}}}`, the edit screen's fields (REST v2 "Get edit issue metadata", Data
    /// Center and Cloud alike). The edit screen here is the create screen without `project`.
    fn edit_meta(&self, request: &Request) -> Result<Reply, Reply> {
        let id = self.find(&request.segments[4])?;
        let issue = &self.issues[&id];
        let type_name = issue.fields["issuetype"]["name"].as_str().unwrap_or("");
        let mut fields = Map::new();
        for id in self.screen_fields(type_name) {
            if id == "project" {
                continue;
            }
            fields.insert(
                id.to_string(),
                json!({"required": id == "summary", "name": field_name(id), "key": id,
                       "operations": ["set"]}),
            );
        }
        Ok(Reply::json(200, json!({"fields": fields})))
    }

    /// The fields on the create screen of a type (by its name).
    fn screen_fields(&self, type_name: &str) -> Vec<&'static str> {
        let epic = type_name == "Эпик" || type_name == "Epic";
        let mut ids: Vec<&'static str> = vec![
            "summary",
            "issuetype",
            "project",
            "description",
            "labels",
            "priority",
            "assignee",
            "reporter",
            SPRINT_FIELD,
            PLAN_START_FIELD,
            PLAN_END_FIELD,
        ];
        if !epic {
            ids.push(match self.mode {
                Mode::DataCenter => EPIC_LINK_FIELD,
                Mode::Cloud => "parent",
            });
        }
        ids
    }

    /// `GET /rest/api/2/field`: every field, system and custom (`[{id, key, name, custom, …}]`).
    fn fields(&self) -> Reply {
        let fields: Vec<Value> = [
            "summary",
            "issuetype",
            "project",
            "description",
            "labels",
            "priority",
            "assignee",
            "reporter",
            "status",
            "parent",
            EPIC_LINK_FIELD,
            SPRINT_FIELD,
            PLAN_START_FIELD,
            PLAN_END_FIELD,
        ]
        .iter()
        .map(|id| {
            json!({"id": id, "key": id, "name": field_name(id),
                   "custom": id.starts_with("customfield_"), "orderable": true,
                   "navigable": true, "searchable": true})
        })
        .collect();
        Reply::json(200, Value::Array(fields))
    }

    /// `GET /rest/api/2/priority`: `[{self, id, name, …}]`.
    fn priorities(&self) -> Reply {
        let values: Vec<Value> = PRIORITIES
            .iter()
            .map(|(id, name)| {
                json!({"self": format!("{}/rest/api/2/priority/{id}", self.base), "id": id,
                       "name": name, "description": ""})
            })
            .collect();
        Reply::json(200, Value::Array(values))
    }
}

/// The names the fake gives its fields.
fn field_name(id: &str) -> &'static str {
    match id {
        "summary" => "Тема",
        "issuetype" => "Тип задачи",
        "project" => "Проект",
        "description" => "Описание",
        "labels" => "Метки",
        "priority" => "Приоритет",
        "assignee" => "Исполнитель",
        "reporter" => "Автор",
        "status" => "Статус",
        "parent" => "Родитель",
        EPIC_LINK_FIELD => "Epic Link",
        SPRINT_FIELD => "Sprint",
        PLAN_START_FIELD => "Плановое начало",
        PLAN_END_FIELD => "Плановое окончание",
        _ => "",
    }
}

impl FakeJira {
    /// The agent's user loses a project permission (`mypermissions` says `false`).
    pub fn withhold_permission(&self, key: &str) {
        lock(&self.state).withheld.insert(key.to_string());
    }

    pub fn add_board(&self, id: u64, name: &str, kind: &str) {
        lock(&self.state)
            .boards
            .insert(id, (name.to_string(), kind.to_string()));
    }

    pub fn add_sprint(&self, board: u64, id: u64, name: &str, state: &str) {
        lock(&self.state).sprints.push(Sprint {
            id,
            board,
            name: name.to_string(),
            state: state.to_string(),
        });
    }
}

fn from_any(tid: &str) -> bool {
    TRANSITIONS
        .iter()
        .any(|(t, _, from, _)| *t == tid && from.is_none())
}

/// Agile paging: `{maxResults, startAt, total, isLast, values}`.
fn paged(request: &Request, values: Vec<Value>, default_max: usize) -> Reply {
    let start_at: usize = request
        .param("startAt")
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let max: usize = request
        .param("maxResults")
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_max)
        .clamp(1, 50);
    let total = values.len();
    let page: Vec<Value> = values.into_iter().skip(start_at).take(max).collect();
    let is_last = start_at + page.len() >= total;
    Reply::json(
        200,
        json!({"maxResults": max, "startAt": start_at, "total": total, "isLast": is_last, "values": page}),
    )
}

fn number_param(value: Option<&str>, default: usize, name: &str) -> Result<usize, Reply> {
    match value {
        None | Some("") => Ok(default),
        Some(text) => text.parse().map_err(|_| {
            Reply::error(
                400,
                &format!("The value '{text}' is not valid for the parameter '{name}'."),
            )
        }),
    }
}

// ---------------------------------------------------------------------------------------------
// The JQL subset.

#[derive(Debug, Clone, PartialEq)]
enum Clause {
    Project(String),
    /// `project not in (…)`.
    ProjectNotIn(Vec<String>),
    Labels(Vec<String>),
    /// `id`/`key`/`issue`/`issuekey` with `>`, `>=`, `<`, `<=`: one clause in Jira whatever
    /// the name. The literal (an id as a number, a key as text) names an issue; the clause
    /// matches the issues of *that issue's project* whose key number compares so (Jira Server's
    /// `IssueIdClauseQueryFactory.handleRelational`: a range on the key-number order field AND
    /// the referenced issue's project). Resolved against the state in `matching`.
    KeyCompare {
        field: String,
        operator: String,
        literal: String,
        numeric: bool,
    },
    CreatedSince(i64),
    UpdatedSince(i64),
    ReporterIsMe,
    /// `creator = currentUser()`: who created the issue, which no edit changes.
    CreatorIsMe,
    Keys(Vec<String>),
}

impl Clause {
    fn matches(&self, issue: &Issue) -> bool {
        match self {
            Clause::Project(key) => issue.project == *key,
            Clause::ProjectNotIn(keys) => !keys.contains(&issue.project),
            Clause::Labels(labels) => issue.labels.iter().any(|l| labels.contains(l)),
            // Resolved by `StateInner::matching`, which knows the referenced issue.
            Clause::KeyCompare { .. } => true,
            Clause::CreatedSince(ms) => issue.created_ms >= *ms,
            Clause::UpdatedSince(ms) => issue.updated_ms >= *ms,
            Clause::ReporterIsMe => {
                issue.fields["reporter"]["name"] == USER
                    || issue.fields["reporter"]["accountId"] == ACCOUNT_ID
            }
            Clause::CreatorIsMe => {
                issue.fields["creator"]["name"] == USER
                    || issue.fields["creator"]["accountId"] == ACCOUNT_ID
            }
            Clause::Keys(keys) => keys.contains(&issue.key),
        }
    }
}

#[derive(Debug, Default)]
struct Query {
    clauses: Vec<Clause>,
    /// `ORDER BY id|key|issuekey|issue`: Jira sorts all four by the issue key (project, then
    /// the key number), not by the numeric id (the issue clause is one field, see `KeyCompare`).
    by_key: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    Quoted(String),
    Symbol(&'static str),
}

fn jql_error(detail: &str) -> Reply {
    Reply::error(400, &format!("Error in the JQL Query: {detail}"))
}

fn tokenize(jql: &str) -> Result<Vec<Token>, Reply> {
    let mut tokens = Vec::new();
    let chars: Vec<char> = jql.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '"' || c == '\'' {
            let mut value = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => return Err(jql_error("The quoted string has not been completed.")),
                    Some('\\') => {
                        value.extend(chars.get(i + 1));
                        i += 2;
                    }
                    Some(q) if *q == c => {
                        i += 1;
                        break;
                    }
                    Some(other) => {
                        value.push(*other);
                        i += 1;
                    }
                }
            }
            tokens.push(Token::Quoted(value));
        } else if let Some(symbol) = [">=", "<=", "!=", "=", ">", "<", "(", ")", ","]
            .into_iter()
            .find(|s| chars[i..].iter().take(s.len()).copied().eq(s.chars()))
        {
            tokens.push(Token::Symbol(symbol));
            i += symbol.len();
        } else if c.is_alphanumeric() || matches!(c, '_' | '-' | '.') {
            let start = i;
            while i < chars.len()
                && (chars[i].is_alphanumeric() || matches!(chars[i], '_' | '-' | '.'))
            {
                i += 1;
            }
            tokens.push(Token::Word(chars[start..i].iter().collect()));
        } else {
            return Err(jql_error(&format!(
                "The character '{c}' is a reserved JQL character. (line 1, character {})",
                i + 1
            )));
        }
    }
    Ok(tokens)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        token
    }

    fn keyword(&self, word: &str) -> bool {
        matches!(self.peek(), Some(Token::Word(w)) if w.eq_ignore_ascii_case(word))
    }

    fn expect_symbol(&mut self, symbol: &str) -> Result<(), Reply> {
        match self.next() {
            Some(Token::Symbol(s)) if s == symbol => Ok(()),
            other => Err(jql_error(&format!(
                "Expecting '{symbol}' but got {}.",
                describe(other.as_ref())
            ))),
        }
    }

    fn value(&mut self) -> Result<String, Reply> {
        match self.next() {
            Some(Token::Word(w)) | Some(Token::Quoted(w)) => Ok(w),
            other => Err(jql_error(&format!(
                "Expecting either a value, list or function but got {}.",
                describe(other.as_ref())
            ))),
        }
    }

    fn list(&mut self) -> Result<Vec<String>, Reply> {
        self.expect_symbol("(")?;
        let mut values = vec![self.value()?];
        loop {
            match self.next() {
                Some(Token::Symbol(",")) => values.push(self.value()?),
                Some(Token::Symbol(")")) => return Ok(values),
                other => {
                    return Err(jql_error(&format!(
                        "Expecting ',' or ')' but got {}.",
                        describe(other.as_ref())
                    )));
                }
            }
        }
    }

    /// `term (AND term)*`
    fn expression(&mut self, clauses: &mut Vec<Clause>) -> Result<(), Reply> {
        self.term(clauses)?;
        while self.keyword("AND") {
            self.at += 1;
            self.term(clauses)?;
        }
        if self.keyword("OR") || self.keyword("NOT") {
            return Err(jql_error(
                "'OR' and 'NOT' are beyond what this Jira is simulated to parse.",
            ));
        }
        Ok(())
    }

    fn term(&mut self, clauses: &mut Vec<Clause>) -> Result<(), Reply> {
        if let Some(Token::Symbol("(")) = self.peek() {
            self.at += 1;
            self.expression(clauses)?;
            return self.expect_symbol(")");
        }
        let field = match self.next() {
            Some(Token::Word(w)) | Some(Token::Quoted(w)) => w,
            other => {
                return Err(jql_error(&format!(
                    "Expecting a field name but got {}.",
                    describe(other.as_ref())
                )));
            }
        };
        let operator = match self.next() {
            Some(Token::Symbol(s)) => s.to_string(),
            Some(Token::Word(w)) if w.eq_ignore_ascii_case("in") => "in".to_string(),
            Some(Token::Word(w)) if w.eq_ignore_ascii_case("not") => "not".to_string(),
            other => {
                return Err(jql_error(&format!(
                    "Expecting operator but got {}.",
                    describe(other.as_ref())
                )));
            }
        };
        let lower = field.to_ascii_lowercase();
        let unsupported = || {
            jql_error(&format!(
                "The operator '{operator}' is not supported by the '{field}' field."
            ))
        };
        let clause = match (lower.as_str(), operator.as_str()) {
            ("project", "=") => Clause::Project(self.value()?),
            ("labels", "=") => Clause::Labels(vec![self.value()?]),
            ("labels", "in") => Clause::Labels(self.list()?),
            ("id" | "key" | "issue" | "issuekey", ">" | ">=" | "<" | "<=") => {
                let (literal, numeric) = match self.next() {
                    Some(Token::Word(w)) => {
                        let numeric = w.bytes().all(|b| b.is_ascii_digit());
                        (w, numeric)
                    }
                    Some(Token::Quoted(w)) => (w, false),
                    other => {
                        return Err(jql_error(&format!(
                            "Expecting either a value, list or function but got {}.",
                            describe(other.as_ref())
                        )));
                    }
                };
                Clause::KeyCompare {
                    field: field.clone(),
                    operator: operator.clone(),
                    literal,
                    numeric,
                }
            }
            ("project", "not") => {
                if !self.keyword("in") {
                    return Err(unsupported());
                }
                self.at += 1;
                Clause::ProjectNotIn(self.list()?)
            }
            ("created" | "updated", ">=") => {
                let value = match self.next() {
                    Some(Token::Word(w)) => w,
                    other => {
                        return Err(jql_error(&format!(
                            "Date value {} for field '{field}' is invalid: this Jira takes epoch milliseconds only.",
                            describe(other.as_ref())
                        )));
                    }
                };
                let ms: i64 = value.parse().map_err(|_| {
                    jql_error(&format!(
                        "Date value '{value}' for field '{field}' is invalid."
                    ))
                })?;
                if lower == "created" {
                    Clause::CreatedSince(ms)
                } else {
                    Clause::UpdatedSince(ms)
                }
            }
            ("reporter", "=") => match self.next() {
                Some(Token::Word(w)) if w == "currentUser" => {
                    self.expect_symbol("(")?;
                    self.expect_symbol(")")?;
                    Clause::ReporterIsMe
                }
                other => {
                    return Err(jql_error(&format!(
                        "Only currentUser() is simulated for 'reporter', not {}.",
                        describe(other.as_ref())
                    )));
                }
            },
            ("creator", "=") => match self.next() {
                Some(Token::Word(w)) if w == "currentUser" => {
                    self.expect_symbol("(")?;
                    self.expect_symbol(")")?;
                    Clause::CreatorIsMe
                }
                other => {
                    return Err(jql_error(&format!(
                        "Only currentUser() is simulated for 'creator', not {}.",
                        describe(other.as_ref())
                    )));
                }
            },
            ("key" | "issuekey" | "issue", "=") => Clause::Keys(vec![self.value()?]),
            ("key" | "issuekey" | "issue", "in") => Clause::Keys(self.list()?),
            (
                "project" | "labels" | "id" | "created" | "updated" | "reporter" | "creator"
                | "key" | "issuekey" | "issue",
                _,
            ) => {
                return Err(unsupported());
            }
            _ => {
                return Err(jql_error(&format!(
                    "Field '{field}' does not exist or you do not have permission to view it."
                )));
            }
        };
        clauses.push(clause);
        Ok(())
    }
}

fn describe(token: Option<&Token>) -> String {
    match token {
        None => "the end of the query".to_string(),
        Some(Token::Word(w)) => format!("'{w}'"),
        Some(Token::Quoted(w)) => format!("'\"{w}\"'"),
        Some(Token::Symbol(s)) => format!("'{s}'"),
    }
}

fn parse_jql(jql: &str) -> Result<Query, Reply> {
    let mut parser = Parser {
        tokens: tokenize(jql)?,
        at: 0,
    };
    let mut clauses = Vec::new();
    let mut by_key = false;
    if parser.peek().is_some() && !parser.keyword("ORDER") {
        parser.expression(&mut clauses)?;
    }
    if parser.keyword("ORDER") {
        by_key = true;
        parser.at += 1;
        if !parser.keyword("BY") {
            return Err(jql_error("Expecting 'by' after 'order'."));
        }
        parser.at += 1;
        match parser.next() {
            Some(Token::Word(w))
                if ["id", "key", "issuekey", "issue"]
                    .contains(&w.to_ascii_lowercase().as_str()) => {}
            other => {
                return Err(jql_error(&format!(
                    "Only ORDER BY id ASC is simulated, not {}.",
                    describe(other.as_ref())
                )));
            }
        }
        if parser.keyword("ASC") {
            parser.at += 1;
        } else if parser.peek().is_some() {
            return Err(jql_error("Only ascending order is simulated."));
        }
    }
    if let Some(token) = parser.peek() {
        return Err(jql_error(&format!(
            "Expecting either 'OR' or 'AND' but got {}.",
            describe(Some(token))
        )));
    }
    Ok(Query { clauses, by_key })
}

/// What a reverse proxy answers when Jira takes longer than its read timeout (nginx's
/// `proxy_read_timeout`, 60 s by default: "504 Gateway Time-out", an HTML page).
fn gateway_timeout() -> Reply {
    Reply {
        status: 504,
        headers: Vec::new(),
        body: Body::Html(
            "<html><head><title>504 Gateway Time-out</title></head><body><center><h1>504 Gateway Time-out</h1></center><hr><center>nginx</center></body></html>"
                .to_string(),
        ),
    }
}

/// The number of an issue key (`AURORA-12` → 12).
fn key_number(key: &str) -> u64 {
    key.rsplit_once('-')
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// Times and encodings.

/// A REST v2 body as Jira Cloud gives it back: stored as ADF (paragraphs, hard breaks), then
/// converted to wiki markup again. Line endings become `\n`, whitespace at the end of a line
/// goes (cronn/jira-sync#15: "Cloud Jira started to remove trailing whitespace at line ends"),
/// blank lines between paragraphs become one, and the body loses leading and trailing blank
/// lines (an ADF document is a list of paragraph nodes: developer.atlassian.com/cloud/jira/
/// platform/apis/document/structure/).
fn through_adf(body: &str) -> String {
    let unified = body.replace("\r\n", "\n").replace('\r', "\n");
    let paragraphs: Vec<String> = unified
        .split("\n\n")
        .map(|p| {
            p.split('\n')
                .map(str::trim_end)
                .collect::<Vec<_>>()
                .join("\n")
                .trim_matches('\n')
                .to_string()
        })
        .filter(|p| !p.trim().is_empty())
        .collect();
    paragraphs.join("\n\n")
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn civil(ms: i64) -> (i64, u32, u32, u32, u32, u32, u32) {
    let local = ms + OFFSET_SECONDS * 1000;
    let millis = local.rem_euclid(1000) as u32;
    let seconds = local.div_euclid(1000);
    let days = seconds.div_euclid(86_400);
    let rest = seconds.rem_euclid(86_400) as u32;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        year,
        month,
        day,
        rest / 3600,
        rest / 60 % 60,
        rest % 60,
        millis,
    )
}

/// REST v2: `2026-03-05T10:15:30.000+0300`.
pub fn jira_time(ms: i64) -> String {
    let (y, mo, d, h, mi, s, ms) = civil(ms);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}+0300")
}

/// Agile: `2026-03-05T10:15:30.000+03:00`.
pub fn agile_time(ms: i64) -> String {
    let (y, mo, d, h, mi, s, ms) = civil(ms);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}+03:00")
}

pub fn base64(text: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = text.as_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `Authorization` header values the fake accepts.
pub fn basic_auth() -> String {
    format!("Basic {}", base64(&format!("{USER}:{PASSWORD}")))
}

pub fn bearer_auth() -> String {
    format!("Bearer {TOKEN}")
}

pub mod demo;

// ---------------------------------------------------------------------------------------------
// A tiny HTTP/1.1 client: one request per connection, for the fake's tests and the benchmark's
// baseline (no dependency beyond std).

#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// `%`-encodes a query value.
pub fn encode(value: &str) -> String {
    let mut out = String::new();
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Sends one request to `url` (`http://host:port`) + `path` (with its query); `Err` when the
/// connection ends without an answer or the timeout passes.
pub fn call(
    url: &str,
    method: &str,
    path: &str,
    auth: Option<&str>,
    body: Option<&Value>,
    timeout: Duration,
) -> std::io::Result<Answer> {
    use std::io::{Read, Write};
    let address = url.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = std::net::TcpStream::connect(address)?;
    stream.set_read_timeout(Some(timeout))?;
    let payload = body.map(|b| b.to_string()).unwrap_or_default();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nAccept: application/json\r\nContent-Length: {}\r\n",
        payload.len()
    );
    if let Some(auth) = auth {
        head.push_str(&format!("Authorization: {auth}\r\n"));
    }
    if body.is_some() {
        head.push_str("Content-Type: application/json\r\n");
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(payload.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "no answer"))?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut body = raw[split + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    let chunked = headers.iter().any(|(n, v)| {
        n.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    });
    if chunked {
        let mut out = Vec::new();
        let mut rest = &body[..];
        while let Some(end) = rest.windows(2).position(|w| w == b"\r\n") {
            let size = usize::from_str_radix(String::from_utf8_lossy(&rest[..end]).trim(), 16)
                .unwrap_or(0);
            if size == 0 || rest.len() < end + 2 + size {
                break;
            }
            out.extend_from_slice(&rest[end + 2..end + 2 + size]);
            rest = &rest[(end + 4 + size).min(rest.len())..];
        }
        body = out;
    }
    Ok(Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(10);

    fn get(fake: &FakeJira, path: &str) -> Answer {
        call(&fake.url(), "GET", path, Some(&basic_auth()), None, T).expect("answer")
    }

    fn post(fake: &FakeJira, path: &str, body: Value) -> Answer {
        call(
            &fake.url(),
            "POST",
            path,
            Some(&basic_auth()),
            Some(&body),
            T,
        )
        .expect("answer")
    }

    fn search(fake: &FakeJira, jql: &str, start_at: usize, max: usize) -> Answer {
        get(
            fake,
            &format!(
                "/rest/api/2/search?jql={}&startAt={start_at}&maxResults={max}&fields=summary,labels",
                encode(jql)
            ),
        )
    }

    fn keys(answer: &Answer) -> Vec<String> {
        answer.json()["issues"]
            .as_array()
            .expect("issues")
            .iter()
            .map(|i| i["key"].as_str().expect("key").to_string())
            .collect()
    }

    fn create(fake: &FakeJira, summary: &str, labels: &[&str]) -> String {
        let answer = post(
            fake,
            "/rest/api/2/issue",
            json!({"fields": {"project": {"key": PROJECT}, "issuetype": {"name": "Задача"},
                              "summary": summary, "labels": labels}}),
        );
        assert_eq!(answer.status, 201, "{answer:?}");
        answer.json()["key"].as_str().expect("key").to_string()
    }

    #[test]
    fn identity_and_auth() {
        let fake = FakeJira::start(Mode::DataCenter);
        let info = get(&fake, "/rest/api/2/serverInfo").json();
        assert_eq!(info["deploymentType"], "Server");
        let me = call(
            &fake.url(),
            "GET",
            "/rest/api/2/myself",
            Some(&bearer_auth()),
            None,
            T,
        )
        .unwrap();
        assert_eq!(me.status, 200);
        assert_eq!(me.json()["name"], USER);
        assert!(me.json()["accountId"].is_string() && me.json()["timeZone"].is_string());
        for auth in [None, Some("Basic YWdlbnQ6d3Jvbmc="), Some("Bearer nope")] {
            let answer = call(&fake.url(), "GET", "/rest/api/2/myself", auth, None, T).unwrap();
            assert_eq!(answer.status, 401);
            assert!(
                answer.json()["errorMessages"][0]
                    .as_str()
                    .unwrap()
                    .contains("not authenticated")
            );
        }
        let cloud = FakeJira::start(Mode::Cloud);
        assert_eq!(
            get(&cloud, "/rest/api/2/serverInfo").json()["deploymentType"],
            "Cloud"
        );
    }

    #[test]
    fn the_jql_subset() {
        let fake = FakeJira::start(Mode::DataCenter);
        let a = fake.seed_issues(PROJECT, "AWPCA", 3);
        let b = fake.seed_issues(PROJECT, "STOCKS", 2);
        fake.seed_issues("OTHER", "AWPCA", 2);
        let all = |jql: &str| keys(&search(&fake, jql, 0, 100));
        assert_eq!(all(r#"project = AURORA AND labels in ("AWPCA")"#), a);
        assert_eq!(
            all(r#"project = AURORA and labels in ("AWPCA", "STOCKS") ORDER BY id ASC"#),
            [a.clone(), b.clone()].concat()
        );
        assert_eq!(all("project = AURORA AND labels = STOCKS"), b);
        assert_eq!(
            all(r#"(project = AURORA AND labels = "AWPCA") AND key in (AURORA-2, AURORA-3)"#),
            a[1..]
        );
        let second: u64 = fake.issue(&a[1]).unwrap()["id"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(
            all(&format!(
                "project = AURORA AND id > {second} order by id asc"
            )),
            [a[2..].to_vec(), b.clone()].concat()
        );
        assert_eq!(all(&format!("key = {}", a[0])), a[..1]);
        // Seeded issues are from 2026-01-01, a minute apart; the created ones are new.
        let made = create(&fake, "новая", &["AWPCA"]);
        assert_eq!(
            all(&format!(
                "created >= {} AND reporter = currentUser()",
                now_ms() - 60_000
            )),
            std::slice::from_ref(&made)
        );
        assert_eq!(all(&format!("updated >= {}", now_ms() - 60_000)), [made]);
        for bad in [
            "project = AURORA OR labels = A",
            "project = AURORA AND",
            "summary ~ \"x\"",
            "labels in (\"A\"",
            "created >= \"2026/01/01\"",
            "project = AURORA ORDER BY updated DESC",
            "project = \"AURORA",
        ] {
            let answer = search(&fake, bad, 0, 10);
            assert_eq!(answer.status, 400, "{bad}");
            assert!(
                answer.json()["errorMessages"][0]
                    .as_str()
                    .unwrap()
                    .starts_with("Error in the JQL Query: "),
                "{bad}: {}",
                answer.body
            );
            assert_eq!(answer.json()["errors"], json!({}));
        }
        let answer = search(&fake, "project = NOPE", 0, 10);
        assert_eq!(answer.status, 400);
    }

    #[test]
    fn the_issue_key_clause_is_jiras() {
        let fake = FakeJira::start(Mode::DataCenter);
        let a = fake.seed_issues(PROJECT, "AWPCA", 3);
        let other = fake.seed_issues("OTHER", "AWPCA", 2);
        // OTHER-1 (an older id than AURORA-3? no: a newer id) moves in: it takes AURORA-4.
        let moved_in = fake.move_issue(&other[0], PROJECT);
        assert_eq!(moved_in, "AURORA-4");
        let id_of = |key: &str| fake.issue(key).unwrap()["id"].as_str().unwrap().to_string();
        let all = |jql: &str| keys(&search(&fake, jql, 0, 100));
        // `id > N`: N's project, key number above N's.
        assert_eq!(
            all(&format!("id > {} ORDER BY id ASC", id_of(&a[0]))),
            [&a[1..], std::slice::from_ref(&moved_in)].concat()
        );
        assert_eq!(
            all(r#"key > "AURORA-2" ORDER BY key ASC"#),
            [a[2].clone(), moved_in.clone()]
        );
        assert_eq!(
            all(r#"issuekey >= "AURORA-3" order by issuekey"#),
            [a[2].clone(), moved_in.clone()]
        );
        assert_eq!(all(r#"issue < "AURORA-2""#), a[..1]);
        assert_eq!(
            all(r#"labels = AWPCA AND project not in ("AURORA") ORDER BY key ASC"#),
            [other[1].clone()]
        );
        // ORDER BY key: by project, then key number (not by id).
        assert_eq!(
            all("labels = AWPCA ORDER BY key ASC"),
            [a.clone(), vec![moved_in.clone(), other[1].clone()]].concat()
        );
        // A gone key in a comparison is refused in Jira's words.
        let refused = |jql: &str| {
            let answer = search(&fake, jql, 0, 10);
            assert_eq!(answer.status, 400, "{jql}");
            answer.json()["errorMessages"][0]
                .as_str()
                .unwrap()
                .to_string()
        };
        assert_eq!(
            refused(r#"key > "OTHER-1""#),
            "Operator '>' cannot be applied to moved issue key 'OTHER-1'."
        );
        fake.delete_issue(&a[1]);
        assert_eq!(
            refused(r#"project = AURORA AND key > "AURORA-2" ORDER BY key ASC"#),
            "An issue with key 'AURORA-2' does not exist for field 'key'."
        );
        assert_eq!(
            refused("id > 99999"),
            "A value with ID '99999' does not exist for the field 'id'."
        );
        // The moved issue's old key still opens it (as its new key).
        let answer = get(&fake, "/rest/api/2/issue/OTHER-1");
        assert_eq!(answer.status, 200);
        assert_eq!(answer.json()["key"], "AURORA-4");
    }

    #[test]
    fn data_center_paging_clamps_and_stops_at_the_window() {
        let fake = FakeJira::start(Mode::DataCenter);
        fake.seed_issues(PROJECT, "AWPCA", 10_050);
        fake.set_max_results(700);
        let jql = "project = AURORA AND labels in (\"AWPCA\")";
        let first = search(&fake, jql, 0, 1000).json();
        assert_eq!(first["maxResults"], 700, "Jira gives fewer than asked");
        assert_eq!(first["total"], 10_050);
        assert_eq!(first["issues"].as_array().unwrap().len(), 700);
        let mut seen = 0;
        let mut start = 0;
        while start + 700 <= 10_000 {
            let page = search(&fake, jql, start, 700).json();
            seen += page["issues"].as_array().unwrap().len();
            start += 700;
        }
        assert_eq!(seen, 9_800);
        let beyond = search(&fake, jql, 9_800, 700);
        assert_eq!(beyond.status, 400);
        assert!(
            beyond.json()["errorMessages"][0]
                .as_str()
                .unwrap()
                .starts_with("Search limit exceeded")
        );
        // Keyset paging past the window works.
        let last: u64 = fake.issues()[9_999]["id"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let rest = search(
            &fake,
            &format!("{jql} AND id > {last} ORDER BY id ASC"),
            0,
            700,
        )
        .json();
        assert_eq!(rest["total"], 50);
        // maxResults=0 counts; the default page is 50.
        assert_eq!(search(&fake, jql, 0, 0).json()["issues"], json!([]));
        let default = get(&fake, &format!("/rest/api/2/search?jql={}", encode(jql))).json();
        assert_eq!(default["issues"].as_array().unwrap().len(), 50);
        let raw = &default["issues"][0];
        assert!(raw["id"].is_string() && raw["self"].is_string());
        let created = raw["fields"]["created"].as_str().unwrap();
        assert_eq!(created, "2026-01-01T03:00:00.000+0300");
        assert_eq!(raw["fields"]["status"]["name"], "Открыта");
        assert_eq!(raw["fields"]["comment"]["total"], 0);
        assert!(fake.calls(Endpoint::Search) > 10);
    }

    #[test]
    fn cloud_search_pages_by_token_and_lags() {
        let fake = FakeJira::start(Mode::Cloud);
        fake.seed_issues(PROJECT, "AWPCA", 2_500);
        let gone = search(&fake, "project = AURORA", 0, 10);
        assert_eq!(gone.status, 410);
        assert!(
            gone.json()["errorMessages"][0]
                .as_str()
                .unwrap()
                .contains("/search/jql")
        );
        let jql = encode("project = AURORA AND labels in (\"AWPCA\")");
        let ids_only = get(&fake, &format!("/rest/api/2/search/jql?jql={jql}")).json();
        assert_eq!(ids_only["issues"].as_array().unwrap().len(), 50);
        assert_eq!(
            ids_only["issues"][0],
            json!({"id": "10000"}),
            "Cloud's default fields: id"
        );
        assert!(ids_only.get("total").is_none());
        let mut token: Option<String> = None;
        let mut keys_seen = Vec::new();
        let mut pages = 0;
        loop {
            let mut path =
                format!("/rest/api/2/search/jql?jql={jql}&maxResults=1000&fields=summary");
            if let Some(token) = &token {
                path.push_str(&format!("&nextPageToken={}", encode(token)));
            }
            let page = get(&fake, &path).json();
            pages += 1;
            keys_seen.extend(keys(&Answer {
                status: 200,
                headers: vec![],
                body: page.to_string(),
            }));
            if page["isLast"] == true {
                assert!(page.get("nextPageToken").is_none());
                break;
            }
            token = Some(page["nextPageToken"].as_str().unwrap().to_string());
        }
        assert_eq!(pages, 3);
        assert_eq!(keys_seen.len(), 2_500);
        let bad = get(
            &fake,
            &format!("/rest/api/2/search/jql?jql={jql}&nextPageToken=garbage"),
        );
        assert_eq!(bad.status, 400);
        assert_eq!(
            bad.json()["errorMessages"][0],
            "The provided next page token is invalid or expired."
        );
        assert_eq!(
            get(
                &fake,
                &format!("/rest/api/2/search/jql?jql={jql}&maxResults=6000")
            )
            .status,
            400
        );
        assert_eq!(
            get(&fake, "/rest/api/2/search/jql?jql=").status,
            400,
            "unbounded"
        );

        fake.set_search_lag(Duration::from_millis(1500));
        let key = create(&fake, "свежая", &["FRESH"]);
        let fresh = encode("labels = FRESH");
        let path = format!("/rest/api/2/search/jql?jql={fresh}&fields=summary");
        assert_eq!(
            get(&fake, &path).json()["issues"],
            json!([]),
            "not yet indexed"
        );
        assert_eq!(
            get(&fake, &format!("/rest/api/2/issue/{key}")).status,
            200,
            "but readable by key"
        );
        std::thread::sleep(Duration::from_millis(1600));
        assert_eq!(get(&fake, &path).json()["issues"][0]["key"], key.as_str());
    }

    #[test]
    fn issues_transitions_and_comments() {
        let fake = FakeJira::start(Mode::DataCenter);
        let missing = get(&fake, "/rest/api/2/issue/AURORA-999");
        assert_eq!(missing.status, 404);
        assert_eq!(
            missing.json(),
            json!({"errorMessages": ["Issue does not exist or you do not have permission to see it."], "errors": {}})
        );
        let no_summary = post(
            &fake,
            "/rest/api/2/issue",
            json!({"fields": {"project": {"key": PROJECT}, "issuetype": {"name": "Задача"}}}),
        );
        assert_eq!(no_summary.status, 400);
        assert_eq!(
            no_summary.json(),
            json!({"errorMessages": [], "errors": {"summary": "You must specify a summary of the issue."}})
        );
        assert_eq!(
            post(&fake, "/rest/api/2/issue", json!({"fields": {}})).json()["errors"]["project"],
            "Specify a valid project ID or key"
        );
        let sprint_text = post(
            &fake,
            "/rest/api/2/issue",
            json!({"fields": {"project": {"key": PROJECT}, "issuetype": {"name": "Задача"}, "summary": "s", SPRINT_FIELD: "Sprint 5"}}),
        );
        assert_eq!(sprint_text.status, 400);

        let epic = create(&fake, "эпик", &["AWPCA"]);
        let answer = post(
            &fake,
            "/rest/api/2/issue",
            json!({"fields": {"project": {"key": PROJECT}, "issuetype": {"id": "10002"},
            "summary": "задача", "description": "d", "labels": ["AWPCA"], EPIC_LINK_FIELD: epic, "priority": {"name": "Высокий"}}}),
        );
        assert_eq!(answer.status, 201);
        let key = answer.json()["key"].as_str().unwrap().to_string();
        assert!(answer.json()["id"].is_string() && answer.json()["self"].is_string());
        assert_eq!(fake.creates_of("задача"), 1);
        let issue = get(
            &fake,
            &format!("/rest/api/2/issue/{key}?fields=summary,issuetype,reporter,{EPIC_LINK_FIELD}"),
        )
        .json();
        assert_eq!(issue["fields"]["issuetype"]["name"], "Задача");
        assert_eq!(issue["fields"]["reporter"]["name"], USER);
        assert_eq!(issue["fields"][EPIC_LINK_FIELD], epic.as_str());
        assert!(
            issue["fields"].get("description").is_none(),
            "fields= filters"
        );
        let created = fake.issue(&key).unwrap()["fields"]["created"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            created.ends_with("+0300") && created.len() == 28,
            "{created}"
        );

        let put = call(
            &fake.url(),
            "PUT",
            &format!("/rest/api/2/issue/{key}"),
            Some(&basic_auth()),
            Some(&json!({"fields": {"summary": "задача 2", "duedate": "2026-04-01"}})),
            T,
        )
        .unwrap();
        assert_eq!(put.status, 204);
        assert_eq!(fake.issue(&key).unwrap()["fields"]["duedate"], "2026-04-01");

        let offered = get(&fake, &format!("/rest/api/2/issue/{key}/transitions")).json();
        let ids: Vec<&str> = offered["transitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["11", "31"]);
        let wrong = post(
            &fake,
            &format!("/rest/api/2/issue/{key}/transitions"),
            json!({"transition": {"id": "21"}}),
        );
        assert_eq!(wrong.status, 400);
        assert!(wrong.json()["errorMessages"][0].as_str().unwrap().starts_with("It seems that you have tried to perform a workflow operation (21) that is not valid for the current state of this issue (AURORA-2)."));
        assert_eq!(
            post(
                &fake,
                &format!("/rest/api/2/issue/{key}/transitions"),
                json!({"transition": {"id": "11"}})
            )
            .status,
            204
        );
        assert_eq!(fake.status_of(&key).unwrap(), "В работе");
        assert_eq!(
            post(
                &fake,
                &format!("/rest/api/2/issue/{key}/transitions"),
                json!({})
            )
            .status,
            400
        );

        let comment = post(
            &fake,
            &format!("/rest/api/2/issue/{key}/comment"),
            json!({"body": "первый"}),
        );
        assert_eq!(comment.status, 201);
        assert_eq!(comment.json()["author"]["name"], USER);
        assert!(comment.json()["id"].is_string() && comment.json()["created"].is_string());
        post(
            &fake,
            &format!("/rest/api/2/issue/{key}/comment"),
            json!({"body": "второй"}),
        );
        let page = get(
            &fake,
            &format!("/rest/api/2/issue/{key}/comment?startAt=1&maxResults=1"),
        )
        .json();
        assert_eq!(page["total"], 2);
        assert_eq!(page["comments"][0]["body"], "второй");
        assert_eq!(fake.issue(&key).unwrap()["fields"]["comment"]["total"], 2);
        assert_eq!(
            post(
                &fake,
                &format!("/rest/api/2/issue/{key}/comment"),
                json!({"body": {"type": "doc"}})
            )
            .status,
            400
        );
    }

    #[test]
    fn links_are_made_from_the_inward_issue_and_duplicate() {
        let fake = FakeJira::start(Mode::DataCenter);
        let a = create(&fake, "a", &[]);
        let b = create(&fake, "b", &[]);
        let body = json!({"type": {"name": "Blocker"}, "inwardIssue": {"key": a}, "outwardIssue": {"key": b}});
        let answer = post(&fake, "/rest/api/2/issueLink", body.clone());
        assert_eq!(answer.status, 201);
        assert_eq!(answer.body, "", "Jira answers a link with an empty body");
        let links = fake.links();
        assert_eq!(
            links,
            [LinkView {
                id: links[0].id.clone(),
                type_name: "Blocker".into(),
                source: a.clone(),
                target: b.clone()
            }]
        );
        let on_a = &fake.issue(&a).unwrap()["fields"]["issuelinks"][0];
        assert_eq!(on_a["outwardIssue"]["key"], b.as_str());
        assert_eq!(
            on_a["type"],
            json!({"id": "10032", "name": "Blocker", "inward": "is blocked by", "outward": "blocks", "self": format!("{}/rest/api/2/issueLinkType/10032", fake.url())})
        );
        let on_b = &fake.issue(&b).unwrap()["fields"]["issuelinks"][0];
        assert_eq!(on_b["inwardIssue"]["key"], a.as_str());
        assert_eq!(on_a["id"], on_b["id"]);
        assert_eq!(post(&fake, "/rest/api/2/issueLink", body).status, 201);
        assert_eq!(
            fake.links().len(),
            2,
            "a duplicate POST makes a second link"
        );
        let unknown = post(
            &fake,
            "/rest/api/2/issueLink",
            json!({"type": {"name": "Haunts"}, "inwardIssue": {"key": a}, "outwardIssue": {"key": b}}),
        );
        assert_eq!(unknown.status, 404);
        assert_eq!(
            unknown.json()["errorMessages"][0],
            "No issue link type with name 'Haunts' found."
        );
    }

    #[test]
    fn agile_boards_and_sprints() {
        let fake = FakeJira::start(Mode::DataCenter);
        assert_eq!(
            get(&fake, "/rest/agile/1.0/board/4216").json()["type"],
            "scrum"
        );
        assert_eq!(
            get(&fake, "/rest/agile/1.0/board/4217").json()["type"],
            "kanban"
        );
        assert_eq!(get(&fake, "/rest/agile/1.0/board/1").status, 404);
        let boards = get(&fake, "/rest/agile/1.0/board?maxResults=1").json();
        assert_eq!(
            (boards["total"].as_u64(), boards["isLast"].as_bool()),
            (Some(2), Some(false))
        );
        let sprints = get(
            &fake,
            "/rest/agile/1.0/board/4216/sprint?state=active,future",
        )
        .json();
        let names: Vec<&str> = sprints["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Sprint 5", "Sprint 6"]);
        assert!(
            sprints["values"][0]["startDate"]
                .as_str()
                .unwrap()
                .ends_with("+03:00")
        );
        assert_eq!(get(&fake, "/rest/agile/1.0/board/4217/sprint").status, 400);
        let key = create(&fake, "в спринт", &[]);
        let answer = post(
            &fake,
            "/rest/agile/1.0/sprint/741/issue",
            json!({"issues": [key]}),
        );
        assert_eq!(answer.status, 204);
        let sprint = fake.issue(&key).unwrap()["fields"][SPRINT_FIELD][0]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            sprint.starts_with("com.atlassian.greenhopper.service.sprint.Sprint@")
                && sprint.contains("name=Sprint 5")
        );
    }

    #[test]
    fn faults_on_demand() {
        let fake = FakeJira::start(Mode::DataCenter);
        fake.fault(
            Endpoint::Myself,
            Fault::TooManyRequests {
                retry_after: Some(7),
                html: false,
            },
            1,
        );
        fake.fault(
            Endpoint::Myself,
            Fault::TooManyRequests {
                retry_after: None,
                html: true,
            },
            1,
        );
        fake.fault(Endpoint::Myself, Fault::Unavailable, 1);
        let first = get(&fake, "/rest/api/2/myself");
        assert_eq!(
            (first.status, first.header("retry-after")),
            (429, Some("7"))
        );
        assert!(first.json()["errorMessages"].is_array());
        let second = get(&fake, "/rest/api/2/myself");
        assert_eq!((second.status, second.header("retry-after")), (429, None));
        assert!(second.body.contains("Oops - an error has occurred"));
        assert!(
            second
                .header("content-type")
                .unwrap()
                .starts_with("text/html")
        );
        assert_eq!(get(&fake, "/rest/api/2/myself").status, 503);
        assert_eq!(get(&fake, "/rest/api/2/myself").status, 200);

        // A create applied, then the connection dropped: no answer, one issue.
        fake.fault(Endpoint::CreateIssue, Fault::DropAfterApply, 1);
        let body = json!({"fields": {"project": {"key": PROJECT}, "issuetype": {"name": "Задача"}, "summary": "упавшая"}});
        assert!(
            call(
                &fake.url(),
                "POST",
                "/rest/api/2/issue",
                Some(&basic_auth()),
                Some(&body),
                T
            )
            .is_err()
        );
        assert_eq!(fake.creates_of("упавшая"), 1);
        fake.fault(Endpoint::CreateIssue, Fault::DropBeforeApply, 1);
        let body = json!({"fields": {"project": {"key": PROJECT}, "issuetype": {"name": "Задача"}, "summary": "несделанная"}});
        assert!(
            call(
                &fake.url(),
                "POST",
                "/rest/api/2/issue",
                Some(&basic_auth()),
                Some(&body),
                T
            )
            .is_err()
        );
        assert_eq!(fake.creates_of("несделанная"), 0);

        // Slow: the client gives up, the write still lands.
        fake.fault(
            Endpoint::AddComment,
            Fault::Slow(Duration::from_millis(800)),
            1,
        );
        let key = create(&fake, "медленная", &[]);
        let started = Instant::now();
        let timed_out = call(
            &fake.url(),
            "POST",
            &format!("/rest/api/2/issue/{key}/comment"),
            Some(&basic_auth()),
            Some(&json!({"body": "поздний"})),
            Duration::from_millis(200),
        );
        assert!(timed_out.is_err());
        while fake.comments(&key).is_empty() {
            assert!(started.elapsed() < T, "the slow write never landed");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(fake.faults_pending(), 0);
        let seen = fake.requests();
        assert!(
            seen.iter()
                .any(|r| r.status == 0 && r.endpoint == Endpoint::CreateIssue)
        );
        assert!(seen.iter().all(|r| r.path.starts_with("/rest/")));
    }

    #[test]
    fn rate_limit_mode() {
        let fake = FakeJira::start(Mode::DataCenter);
        fake.rate_limit(Some(3));
        let statuses: Vec<u16> = (0..6)
            .map(|_| get(&fake, "/rest/api/2/myself").status)
            .collect();
        let limited = statuses.iter().filter(|s| **s == 429).count();
        assert!(limited >= 2, "{statuses:?}");
        let answer = get(&fake, "/rest/api/2/myself");
        if answer.status == 429 {
            assert_eq!(answer.header("retry-after"), Some("1"));
        }
        std::thread::sleep(Duration::from_millis(1100));
        assert_eq!(get(&fake, "/rest/api/2/myself").status, 200);
        fake.rate_limit(None);
        assert!((0..10).all(|_| get(&fake, "/rest/api/2/myself").status == 200));
    }

    #[test]
    fn times_are_jiras() {
        assert_eq!(jira_time(1_772_694_930_000), "2026-03-05T10:15:30.000+0300");
        assert_eq!(
            agile_time(1_772_694_930_000),
            "2026-03-05T10:15:30.000+03:00"
        );
        assert_eq!(base64("agent:secret"), "YWdlbnQ6c2VjcmV0");
        assert_eq!(base64("ab"), "YWI=");
    }

    fn put(fake: &FakeJira, path: &str, body: Value) -> Answer {
        call(
            &fake.url(),
            "PUT",
            path,
            Some(&basic_auth()),
            Some(&body),
            T,
        )
        .expect("answer")
    }

    #[test]
    fn labels_are_replaced_by_fields_and_added_by_update() {
        let fake = FakeJira::start(Mode::DataCenter);
        let key = create(&fake, "Метки", &["A", "B"]);
        let path = format!("/rest/api/2/issue/{key}");
        let answer = put(
            &fake,
            &path,
            json!({"update": {"labels": [{"add": "C"}, {"add": "A"}]}}),
        );
        assert_eq!(answer.status, 204, "{answer:?}");
        assert_eq!(fake.labels_of(&key), ["A", "B", "C"]);
        put(
            &fake,
            &path,
            json!({"update": {"labels": [{"remove": "B"}]}}),
        );
        assert_eq!(fake.labels_of(&key), ["A", "C"]);
        put(&fake, &path, json!({"fields": {"labels": ["D"]}}));
        assert_eq!(
            fake.labels_of(&key),
            ["D"],
            "fields.labels replaces the set"
        );
        let both = put(
            &fake,
            &path,
            json!({"fields": {"labels": ["E"]}, "update": {"labels": [{"add": "F"}]}}),
        );
        assert_eq!(both.status, 400, "{both:?}");
        assert_eq!(fake.labels_of(&key), ["D"]);
    }

    #[test]
    fn entity_properties_on_create_put_and_comments() {
        let fake = FakeJira::start(Mode::DataCenter);
        let answer = post(
            &fake,
            "/rest/api/2/issue",
            json!({"fields": {"project": {"key": PROJECT}, "issuetype": {"name": "Задача"},
                              "summary": "С меткой"},
                   "properties": [{"key": "jira-hub", "value": {"command": 7}}]}),
        );
        let key = answer.json()["key"].as_str().unwrap().to_string();
        let property = get(
            &fake,
            &format!("/rest/api/2/issue/{key}/properties/jira-hub"),
        );
        assert_eq!(property.status, 200);
        assert_eq!(property.json()["value"]["command"], 7);
        let missing = get(&fake, &format!("/rest/api/2/issue/{key}/properties/other"));
        assert_eq!(missing.status, 404);
        fake.set_create_properties(false);
        let old = post(
            &fake,
            "/rest/api/2/issue",
            json!({"fields": {"project": {"key": PROJECT}, "issuetype": {"name": "Задача"},
                              "summary": "Старый Jira"},
                   "properties": [{"key": "jira-hub", "value": {"command": 8}}]}),
        );
        let old_key = old.json()["key"].as_str().unwrap().to_string();
        assert!(fake.issue_properties(&old_key).is_empty(), "ignored");
        let path = format!("/rest/api/2/issue/{old_key}/properties/jira-hub");
        assert_eq!(put(&fake, &path, json!({"command": 8})).status, 201);
        assert_eq!(put(&fake, &path, json!({"command": 8})).status, 200);
        assert_eq!(fake.issue_properties(&old_key)["jira-hub"]["command"], 8);

        let comment = post(
            &fake,
            &format!("/rest/api/2/issue/{key}/comment"),
            json!({"body": "текст", "properties": [{"key": "jira-hub", "value": {"command": 9}}]}),
        );
        let id = comment.json()["id"].as_str().unwrap().to_string();
        let property = get(
            &fake,
            &format!("/rest/api/2/comment/{id}/properties/jira-hub"),
        );
        assert_eq!(property.json()["value"]["command"], 9);
        assert_eq!(
            get(&fake, "/rest/api/2/comment/1/properties/jira-hub").status,
            404
        );
    }

    #[test]
    fn creator_and_jiras_own_clock() {
        let fake = FakeJira::start(Mode::Cloud);
        fake.set_clock_skew_ms(-3_600_000);
        let before = now_ms();
        let key = create(&fake, "Чья", &[]);
        let info = get(&fake, "/rest/api/2/serverInfo").json();
        assert!(info["serverTime"].as_str().is_some());
        let created = fake.issue(&key).unwrap()["fields"]["created"].clone();
        assert!(created.as_str().is_some());
        let jql = format!(
            "project = {PROJECT} AND creator = currentUser() AND created >= {}",
            before - 3_600_000 - 1000
        );
        let found = get(
            &fake,
            &format!("/rest/api/2/search/jql?jql={}&fields=summary", encode(&jql)),
        );
        assert_eq!(keys(&found), [key]);
        let jql =
            format!("project = {PROJECT} AND creator = currentUser() AND created >= {before}");
        let found = get(
            &fake,
            &format!("/rest/api/2/search/jql?jql={}&fields=summary", encode(&jql)),
        );
        assert!(
            keys(&found).is_empty(),
            "an hour behind the host: {found:?}"
        );
        let me = get(&fake, "/rest/api/2/myself").json();
        assert!(
            me.get("name").is_none() && me["accountId"] == ACCOUNT_ID,
            "{me}"
        );
    }

    #[test]
    fn cloud_keeps_epics_in_parent_and_bodies_as_adf() {
        let cloud = FakeJira::start(Mode::Cloud);
        let epic = create(&cloud, "Эпик", &[]);
        let child = post(
            &cloud,
            "/rest/api/2/issue",
            json!({"fields": {"project": {"key": PROJECT}, "issuetype": {"name": "Задача"},
                              "summary": "В эпике", EPIC_LINK_FIELD: epic}}),
        );
        assert_eq!(child.status, 400, "{child:?}");
        let child = post(
            &cloud,
            "/rest/api/2/issue",
            json!({"fields": {"project": {"key": PROJECT}, "issuetype": {"name": "Задача"},
                              "summary": "В эпике", "parent": {"key": epic}}}),
        );
        assert_eq!(child.status, 201, "{child:?}");
        let comment = post(
            &cloud,
            &format!("/rest/api/2/issue/{epic}/comment"),
            json!({"body": "a  \r\nb\r\n\r\n\r\nc\n"}),
        );
        assert_eq!(comment.json()["body"], "a\nb\n\nc");

        let dc = FakeJira::start(Mode::DataCenter);
        let epic = create(&dc, "Эпик", &[]);
        let child = post(
            &dc,
            "/rest/api/2/issue",
            json!({"fields": {"project": {"key": PROJECT}, "issuetype": {"name": "Задача"},
                              "summary": "В эпике", "parent": {"key": epic}}}),
        );
        assert_eq!(child.status, 400, "parent is for sub-tasks: {child:?}");
    }

    #[test]
    fn a_proxy_answers_504_while_jira_goes_on() {
        let fake = FakeJira::start(Mode::DataCenter);
        fake.fault(
            Endpoint::CreateIssue,
            Fault::ProxyTimeout {
                apply_after: Duration::ZERO,
            },
            1,
        );
        let answer = post(
            &fake,
            "/rest/api/2/issue",
            json!({"fields": {"project": {"key": PROJECT}, "issuetype": {"name": "Задача"},
                              "summary": "Сразу"}}),
        );
        assert_eq!(answer.status, 504);
        assert_eq!(fake.keys_with_summary("Сразу").len(), 1, "applied at once");
        fake.fault(
            Endpoint::CreateIssue,
            Fault::ProxyTimeout {
                apply_after: Duration::from_millis(300),
            },
            1,
        );
        let answer = post(
            &fake,
            "/rest/api/2/issue",
            json!({"fields": {"project": {"key": PROJECT}, "issuetype": {"name": "Задача"},
                              "summary": "Позже"}}),
        );
        assert_eq!(answer.status, 504);
        fake.wait_applied(T);
        assert_eq!(fake.keys_with_summary("Позже").len(), 1, "applied later");
    }
}
