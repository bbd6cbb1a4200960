//! A hub at rest writes nothing, waiting agents are one claim per name, and an agent's liveness
//! is its own acts. Commits are counted with SQLite's
//! `PRAGMA data_version` on a connection of the test's own: it moves whenever another
//! connection commits, and never otherwise. Time is the hub's `ManualClock` and the relay's
//! instants; nothing sleeps.

use crate::support::*;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use jira_hub::clock::ManualClock;
use jira_hub::service::HubConnection;
use rusqlite::Connection;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tower::ServiceExt;

/// Counts other connections' commits.
struct Commits(Connection);

impl Commits {
    fn watch(db: &Path) -> Commits {
        Commits(Connection::open(db).unwrap())
    }

    fn version(&self) -> i64 {
        self.0
            .pragma_query_value(None, "data_version", |row| row.get(0))
            .unwrap()
    }
}

/// A hub on the test's clock with a relay folder, and the agent token.
pub(crate) fn relay_hub_on(
    dir: &TestDir,
    clock: &Arc<ManualClock>,
) -> (HubConnection, PathBuf, String) {
    let mut hub = ready_hub(dir, clock);
    let relay = dir.path().join("relay");
    for folder in ["inbox", "outbox", "archive", "rejected"] {
        std::fs::create_dir_all(relay.join(folder)).unwrap();
    }
    set_settings(
        &mut hub,
        json!({"relay_dir": relay.display().to_string(), "auto_refresh_minutes": 0}),
    );
    let token = hub.tokens().unwrap().unwrap().agent;
    (hub, relay, token)
}

pub(crate) fn worker(hub: &HubConnection) -> jira_hub::relay::Relay {
    jira_hub::relay::Relay::new(
        hub.connect().unwrap(),
        jira_hub::relay::RelayOptions {
            grace: Duration::ZERO,
            notify: false,
            ..jira_hub::relay::RelayOptions::default()
        },
        jira_hub::shutdown::Shutdown::new(),
    )
}

pub(crate) fn at(clock: &ManualClock) -> String {
    use jira_hub::clock::Clock;
    clock
        .now()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

fn heartbeat(id: &str, agent: &str, sent_at: &str, jira_ok: bool) -> Value {
    json!({"kind": "heartbeat", "id": id, "agent": agent, "sent_at": sent_at,
           "agent_version": "1.4.0", "jira_ok": jira_ok, "heartbeat_seconds": 10})
}

fn waiting_claim(id: &str, agent: &str, sent_at: &str, version: i64) -> Value {
    json!({"kind": "claim", "id": id, "agent": agent, "sent_at": sent_at,
           "agent_version": "1.4.0", "settings_version": version, "max_commands": 5,
           "wait_seconds": 600})
}

pub(crate) fn with_token(mut request: Value, token: &str) -> Value {
    request["token"] = json!(token);
    request
}

/// What the daemon's timers do on their ticks, on a connection of their own.
fn timers_tick(timers: &mut HubConnection) {
    timers.notice_other_writers().unwrap();
    timers.flush_presence().unwrap();
    timers.expire_claims().unwrap();
    timers.checkpoint_when_idle().unwrap();
}

fn wal_bytes(db: &Path) -> u64 {
    std::fs::metadata(format!("{}-wal", db.display())).map_or(0, |m| m.len())
}

fn last_seen_in_database(db: &Path, agent: &str) -> String {
    Connection::open(db)
        .unwrap()
        .query_row(
            "SELECT last_seen_at FROM agent_status WHERE agent = ?1",
            [agent],
            |row| row.get(0),
        )
        .unwrap()
}

/// An idle agent over the relay (a heartbeat every 10 s, a claim waiting for work) and the
/// timers' ticks commit nothing; its last-seen time is written once a minute, and a real change
/// of its status (Jira down) at once. Its heartbeats announce a period of a minute: an agent
/// that announces a shorter one is written once a period (before the written time
/// would make it look silent, see `agent_truth`).
#[test]
fn an_idle_relay_agent_makes_no_commit_but_one_a_minute() {
    let dir = TestDir::new();
    let clock = clock();
    let (hub, relay, token) = relay_hub_on(&dir, &clock);
    let version = hub.settings().unwrap().settings_version;
    let mut relay_worker = worker(&hub);
    let mut timers = hub.connect().unwrap();
    let inbox = relay.join("inbox");
    let t0 = Instant::now();
    drop_file(
        &inbox,
        "heartbeat-h0.json",
        &with_token(minute_heartbeat("h0", "idle", &at(&clock), true), &token),
    );
    drop_file(
        &inbox,
        "claim-c0.json",
        &with_token(waiting_claim("c0", "idle", &at(&clock), version), &token),
    );
    let counts = relay_worker.pass_at(t0).unwrap();
    assert_eq!((counts.applied, counts.parked), (1, 1), "{counts:?}");
    timers_tick(&mut timers);
    timers_tick(&mut timers);

    let commits = Commits::watch(&dir.db());
    let before = commits.version();
    let mut last_sent = String::new();
    for i in 1..=5u64 {
        clock.advance(time::Duration::seconds(10));
        last_sent = at(&clock);
        drop_file(
            &inbox,
            &format!("heartbeat-h{i}.json"),
            &with_token(
                minute_heartbeat(&format!("h{i}"), "idle", &last_sent, true),
                &token,
            ),
        );
        relay_worker
            .pass_at(t0 + Duration::from_secs(10 * i))
            .unwrap();
        timers_tick(&mut timers);
        // The parked claim looked at again (as after a bump), still nothing for it.
        relay_worker
            .pass_at(t0 + Duration::from_secs(10 * i + 1))
            .unwrap();
    }
    assert_eq!(
        commits.version(),
        before,
        "50 s of heartbeats, a waiting claim and the timers: no commit"
    );
    assert!(
        inbox.join("claim-c0.json").exists(),
        "the claim still waits"
    );
    assert_eq!(
        last_seen_in_database(&dir.db(), "idle"),
        "2026-11-29T10:00:00.000000Z"
    );

    // A minute after the first write, the timers write the last-seen time: one commit.
    clock.advance(time::Duration::seconds(15));
    assert_eq!(timers.flush_presence().unwrap(), 1);
    let after_minute = commits.version();
    assert_ne!(after_minute, before, "written once a minute");
    assert_eq!(last_sent, "2026-11-29T10:00:50Z");
    assert_eq!(
        last_seen_in_database(&dir.db(), "idle"),
        "2026-11-29T10:00:50.000000Z",
        "the agent's latest act"
    );
    assert_eq!(timers.flush_presence().unwrap(), 0, "nothing more is due");
    timers_tick(&mut timers);
    assert_eq!(commits.version(), after_minute, "nothing more is written");

    // A WAL of a megabyte or more is emptied once nothing was committed for a sweep.
    commits
        .0
        .execute_batch("CREATE TABLE filler (b); INSERT INTO filler VALUES (zeroblob(2000000));")
        .unwrap();
    assert!(wal_bytes(&dir.db()) >= 2_000_000);
    timers_tick(&mut timers);
    assert!(
        wal_bytes(&dir.db()) > 0,
        "a commit since the last sweep: not idle"
    );
    timers_tick(&mut timers);
    assert_eq!(wal_bytes(&dir.db()), 0, "the idle sweep emptied the WAL");
    let after_minute = commits.version();

    // Jira goes down: a real change of status is written by its own request, at once.
    drop_file(
        &inbox,
        "heartbeat-down.json",
        &with_token(minute_heartbeat("down", "idle", &at(&clock), false), &token),
    );
    relay_worker.pass_at(t0 + Duration::from_secs(100)).unwrap();
    assert_ne!(
        commits.version(),
        after_minute,
        "a change is written at once"
    );
    let jira_ok: bool = Connection::open(dir.db())
        .unwrap()
        .query_row(
            "SELECT jira_ok FROM agent_status WHERE agent = 'idle'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert!(!jira_ok);
}

/// A heartbeat announcing a period of a minute (silent after two).
fn minute_heartbeat(id: &str, agent: &str, sent_at: &str, jira_ok: bool) -> Value {
    let mut request = heartbeat(id, agent, sent_at, jira_ok);
    request["heartbeat_seconds"] = json!(60);
    request
}

/// The router over `hub`'s database (sharing its process state: work signal, presence).
fn router_of(hub: &HubConnection) -> axum::Router {
    jira_hub::http::router(jira_hub::http::AppState {
        pool: Arc::new(jira_hub::http::HubPool::new(hub.connect().unwrap())),
        options: jira_hub::http::HttpOptions::default(),
    })
}

pub(crate) async fn send(
    router: &axum::Router,
    method: Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("Authorization", format!("Bearer {token}"))
        .header("Content-Type", "application/json")
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, value)
}

/// An idle agent over HTTP: its heartbeats that change nothing and its claims that wait and end
/// empty commit nothing.
#[tokio::test(start_paused = true)]
async fn an_idle_http_agent_makes_no_commit() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(&mut hub, json!({"auto_refresh_minutes": 0}));
    let tokens = hub.tokens().unwrap().unwrap();
    let version = hub.settings().unwrap().settings_version;
    let router = router_of(&hub);
    let first = heartbeat("h0", "idle", &at(&clock), true);
    let (status, _) = send(
        &router,
        Method::POST,
        "/agent/heartbeat",
        &tokens.agent,
        Some(first),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let commits = Commits::watch(&dir.db());
    let before = commits.version();
    for i in 1..=3 {
        let (status, _) = send(
            &router,
            Method::POST,
            "/agent/heartbeat",
            &tokens.agent,
            Some(heartbeat(&format!("h{i}"), "idle", &at(&clock), true)),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        let mut claim = waiting_claim(&format!("c{i}"), "idle", &at(&clock), version);
        claim["wait_seconds"] = json!(60);
        let (status, answer) = send(
            &router,
            Method::POST,
            "/agent/claim",
            &tokens.agent,
            Some(claim),
        )
        .await;
        assert_eq!((status, &answer["commands"]), (StatusCode::OK, &json!([])));
    }
    assert_eq!(
        commits.version(),
        before,
        "heartbeats that change nothing and empty claims: no commit"
    );
}

/// One agent name has one waiting claim: a newer claim of the same agent answers the older at
/// once, over HTTP and across the transports (an HTTP claim answers the agent's relay claim).
#[tokio::test(start_paused = true)]
async fn an_agent_has_one_waiting_claim() {
    let dir = TestDir::new();
    let clock = clock();
    let (hub, relay, token) = relay_hub_on(&dir, &clock);
    let version = hub.settings().unwrap().settings_version;
    let router = Arc::new(router_of(&hub));
    let older = tokio::spawn({
        let router = router.clone();
        let token = token.clone();
        let claim = waiting_claim("old", "twice", "2026-11-29T10:00:00Z", version);
        async move { send(&router, Method::POST, "/agent/claim", &token, Some(claim)).await }
    });
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!older.is_finished(), "nothing to hand out: it waits");
    let newer = tokio::spawn({
        let router = router.clone();
        let token = token.clone();
        let claim = waiting_claim("new", "twice", "2026-11-29T10:00:01Z", version);
        async move { send(&router, Method::POST, "/agent/claim", &token, Some(claim)).await }
    });
    // The older one is answered at once (in tokio's paused time, long before its wait ends).
    let (status, answer) = tokio::time::timeout(Duration::from_secs(60), older)
        .await
        .expect("the older claim is answered at once")
        .unwrap();
    assert_eq!((status, &answer["commands"]), (StatusCode::OK, &json!([])));
    assert_eq!(answer["request_id"], "old");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!newer.is_finished(), "the newer one still waits");

    // Another agent's relay claim waits beside it; then that agent claims over HTTP too.
    let mut relay_worker = worker(&hub);
    let t0 = Instant::now();
    drop_file(
        &relay.join("inbox"),
        "claim-r1.json",
        &with_token(
            waiting_claim("r1", "both", "2026-11-29T10:00:00Z", version),
            &token,
        ),
    );
    let counts = relay_worker.pass_at(t0).unwrap();
    assert_eq!(counts.parked, 1, "{counts:?}");
    let over_http = tokio::spawn({
        let router = router.clone();
        let token = token.clone();
        let claim = waiting_claim("h1", "both", "2026-11-29T10:00:02Z", version);
        async move { send(&router, Method::POST, "/agent/claim", &token, Some(claim)).await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    let counts = relay_worker.pass_at(t0 + Duration::from_secs(1)).unwrap();
    assert_eq!((counts.applied, counts.parked), (1, 0), "{counts:?}");
    let answered: Value =
        serde_json::from_slice(&std::fs::read(relay.join("outbox/claim-r1.json")).unwrap())
            .unwrap();
    assert_eq!(answered["commands"], json!([]));
    assert!(
        !over_http.is_finished(),
        "the HTTP claim holds the name now"
    );
    over_http.abort();
    newer.abort();
}

/// An agent that told its period is flagged silent once two periods pass without a request of
/// its own, on `GET /agents` and `/metrics`; one that never told it, after the fixed threshold.
#[tokio::test]
async fn an_agent_is_silent_after_two_heartbeat_periods() {
    let dir = TestDir::new();
    let clock = clock();
    let mut hub = ready_hub(&dir, &clock);
    set_settings(&mut hub, json!({"auto_refresh_minutes": 0}));
    let tokens = hub.tokens().unwrap().unwrap();
    let router = router_of(&hub);
    let told = heartbeat("h1", "told", &at(&clock), true);
    let mut untold = heartbeat("h2", "untold", &at(&clock), true);
    untold.as_object_mut().unwrap().remove("heartbeat_seconds");
    for body in [told, untold] {
        let (status, _) = send(
            &router,
            Method::POST,
            "/agent/heartbeat",
            &tokens.agent,
            Some(body),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
    }
    let agents = |router: axum::Router| {
        let client = tokens.client.clone();
        async move {
            let (_, agents) = send(&router, Method::GET, "/agents", &client, None).await;
            let (_, metrics) = send(&router, Method::GET, "/metrics", &client, None).await;
            let silent = |name: &str| {
                let agent = agents
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|a| a["agent"] == name)
                    .unwrap()
                    .clone();
                let metric = metrics
                    .as_str()
                    .unwrap()
                    .lines()
                    .find_map(|l| {
                        l.strip_prefix(&format!("jira_hub_agent_silent{{agent=\"{name}\"}} "))
                    })
                    .unwrap()
                    .to_string();
                (agent["silent"].as_bool().unwrap(), metric, agent)
            };
            (silent("told"), silent("untold"))
        }
    };
    clock.advance(time::Duration::seconds(20));
    let ((told, told_metric, view), (untold, _, _)) = agents(router.clone()).await;
    assert_eq!((told, told_metric.as_str(), untold), (false, "0", false));
    assert_eq!(view["heartbeat_seconds"], 10);
    assert_eq!(view["silent_after_seconds"], 20);
    clock.advance(time::Duration::seconds(1));
    let ((told, told_metric, view), (untold, untold_metric, _)) = agents(router.clone()).await;
    assert_eq!(
        (told, told_metric.as_str(), untold, untold_metric.as_str()),
        (true, "1", false, "0"),
        "two missed periods of 10 s"
    );
    assert_eq!(
        view["last_seen_at"], "2026-11-29T10:00:00.000000Z",
        "silent since"
    );
    clock.advance(time::Duration::minutes(20));
    let (_, (untold, untold_metric, _)) = agents(router).await;
    assert_eq!(
        (untold, untold_metric.as_str()),
        (true, "1"),
        "the fixed threshold"
    );
}

/// A claim file's liveness is its `sent_at`: an old file read (and looked at again) does not
/// make its agent seen now.
#[test]
fn a_stale_claim_file_does_not_refresh_liveness() {
    let dir = TestDir::new();
    let clock = clock();
    let (mut hub, relay, token) = relay_hub_on(&dir, &clock);
    let version = hub.settings().unwrap().settings_version;
    let mut relay_worker = worker(&hub);
    let t0 = Instant::now();
    // Written by an agent an hour before the hub reads it (frozen since).
    drop_file(
        &relay.join("inbox"),
        "claim-old.json",
        &with_token(
            waiting_claim("old", "frozen", "2026-11-29T09:00:00Z", version),
            &token,
        ),
    );
    relay_worker.pass_at(t0).unwrap();
    for i in 1..=3u64 {
        clock.advance(time::Duration::seconds(30));
        // Past the safety look: the parked claim is looked at again.
        relay_worker
            .pass_at(t0 + Duration::from_secs(30 * i))
            .unwrap();
    }
    let agents = hub.agents().unwrap();
    let frozen = agents.iter().find(|a| a.agent == "frozen").unwrap();
    assert_eq!(frozen.last_seen_at.as_str(), "2026-11-29T09:00:00.000000Z");
    assert!(frozen.silent, "an hour without an act of its own: silent");
}

/// Exchanges that change nothing (heartbeats of an agent whose status stays) bring no checkpoint
/// either: 40 of them through the running daemon's relay leave the database file as it was, the
/// first heartbeat's write still only in the WAL. Before, the relay counted four pages for every
/// request it applied and checkpointed after 32 of them, copying pages no request had changed
/// (at rest, a checkpoint every 16 minutes of an idle agent; in the demo, every 8).
#[test]
fn exchanges_that_change_nothing_bring_no_checkpoint() {
    let dir = TestDir::new();
    let (hub, relay, token) = relay_hub(&dir);
    drop(hub);
    // The WAL emptied first, so that the daemon's idle sweep has nothing to truncate.
    Connection::open(dir.db())
        .unwrap()
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    let _daemon = Daemon::start(&dir.db(), &[]);
    // The start's periodic backup (which checkpoints) made before anything is measured.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !dir.backups().iter().any(|name| name.contains("periodic")) {
        assert!(Instant::now() < deadline, "no periodic backup at the start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let inbox = relay.join("inbox");
    let outbox = relay.join("outbox");
    let sent_at = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let exchange = |i: usize| {
        let name = format!("heartbeat-h{i}.json");
        drop_file(
            &inbox,
            &name,
            &with_token(
                heartbeat(&format!("h{i}"), "steady", &sent_at, true),
                &token,
            ),
        );
        wait_for_json(&outbox.join(&name), Duration::from_secs(20));
    };
    // A new agent: written at once, into the WAL.
    exchange(0);
    assert!(
        wal_bytes(&dir.db()) > 0,
        "the new agent's write is in the WAL"
    );
    let database = std::fs::read(dir.db()).unwrap();
    for i in 1..=40 {
        exchange(i);
    }
    assert!(
        std::fs::read(dir.db()).unwrap() == database,
        "40 heartbeats that changed nothing checkpointed the WAL into the database file"
    );
}
