//! Item 3 (the looks' leftovers): comments are looked for newest first, only among
//! those created since the POST on Jira's clock, their markers read in one `POST /comment/list`
//! on Cloud; a look never makes the agent look silent, nor lets the rest of its claim lapse. The
//! real agent loop and the real hub share one `ManualClock` ([`crate::agent_waits::Hub`]): the
//! calls are counted through the simulated Jira's request log and the command's `jira_calls`.

use crate::agent_waits::{Hub, seed};
use crate::classify::{all_ended, run_until};
use jira_hub::clock::{Clock, ManualClock};
use jira_hub::domain::command::CommandStatus;
use jira_hub::sim::jira::{Endpoint, FakeJira, Fault, Mode, basic_auth, call};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A lease of 10 s.
fn settings() -> Value {
    json!({"pacing": {"min_interval_ms": 0, "claim_timeout_seconds": 10, "max_deliveries": 3}})
}

fn comment(key: &str, body: &str) -> Value {
    json!({"type": "comment", "params": {"key": key, "body": body}})
}

/// Posts `n` comments of the agent's own account on `key`, each marked for another command (as
/// an earlier batch leaves them), `minutes_ago` on Jira's clock.
fn own_comments(fake: &FakeJira, key: &str, n: usize, minutes_ago: i64) {
    fake.set_clock_skew_ms(-minutes_ago * 60_000);
    for i in 0..n {
        let answer = call(
            &fake.url(),
            "POST",
            &format!("/rest/api/2/issue/{key}/comment"),
            Some(&basic_auth()),
            Some(&json!({"body": format!("Своё {i}"),
                "properties": [{"key": "jira-hub", "value": {"command": 10_000 + i, "batch": 99}}]})),
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(answer.status, 201, "{}", answer.body);
    }
    fake.set_clock_skew_ms(0);
}

/// What the agent asked after the seeding, for the failure messages.
fn asked_since(fake: &FakeJira, seeded: usize) -> Vec<String> {
    fake.requests()
        .iter()
        .skip(seeded)
        .map(|s| format!("{} {}?{} → {}", s.method, s.path, s.query, s.status))
        .collect()
}

/// Item 3's target for comments: a comment whose answer is lost (Jira applied it, the connection
/// dropped) on an issue with 250 comments of the agent's own costs at most 3 calls on both
/// deployments: the POST, one page of comments newest first, and one marker read (Cloud: one
/// `POST /comment/list?expand=properties` for the page's candidates; Data Center: the newest
/// candidate's property). Whether the 250 were made minutes before (outside the window: the look
/// stops at the first of them) or just before (inside it), the write looked for is the newest.
/// Before, the look read every page oldest first and every marker of the account's comments
/// one by one: 255 calls here.
#[test]
fn a_lost_comment_among_250_own_costs_at_most_three_calls() {
    for mode in [Mode::Cloud, Mode::DataCenter] {
        for minutes_ago in [10, 0] {
            let fake = FakeJira::start(mode);
            let key = seed(&fake);
            own_comments(&fake, &key, 250, minutes_ago);
            let seeded = fake.requests().len();
            fake.fault(Endpoint::AddComment, Fault::DropAfterApply, 1);
            let hub = Hub::start(settings(), json!([comment(&key, "потерянный ответ")]));
            let config = hub.agent_config(&fake.url(), json!({}));
            let from = hub.clock.monotonic();
            assert!(run_until(&hub, &config, || all_ended(&hub)), "{mode:?}");
            assert!(hub.clock.monotonic() - from < Duration::from_secs(60));
            let command = &hub.commands()[0];
            let case = format!("{mode:?}, the 250 made {minutes_ago} min before");
            assert_eq!(
                (command.status, command.deliveries),
                (CommandStatus::Done, 1),
                "{case}: {command:?}"
            );
            assert_eq!(fake.comments(&key).len(), 251, "{case}: one comment made");
            assert!(
                command.jira_calls <= 3,
                "{case}: {} calls: {:?}",
                command.jira_calls,
                asked_since(&fake, seeded)
            );
            let per_comment = fake.calls(Endpoint::GetCommentProperty);
            match mode {
                Mode::Cloud => {
                    assert_eq!(fake.calls(Endpoint::CommentsByIds), 1, "{case}");
                    assert_eq!(per_comment, 0, "{case}");
                }
                Mode::DataCenter => assert_eq!(per_comment, 1, "{case}"),
            }
            eprintln!("{case}: {} calls", command.jira_calls);
        }
    }
}

/// A 503 with `Retry-After` on a comment that Jira did not apply: never sent again in its
/// delivery (a write answered 503 is given back, docs/design/agent-exactly-once.md); each look
/// reads one page (the account's 250 earlier comments are older than the POST: no marker is
/// read at all), and the next delivery, finding none, posts it: one comment.
#[test]
fn a_comment_refused_with_503_is_given_back_and_posted_once_by_the_next_delivery() {
    for mode in [Mode::Cloud, Mode::DataCenter] {
        let fake = FakeJira::start(mode);
        let key = seed(&fake);
        // Older than the later delivery's window too (the batch's start less 15 minutes).
        own_comments(&fake, &key, 250, 30);
        let seeded = fake.requests().len();
        fake.fault(Endpoint::AddComment, Fault::UnavailableFor(2), 1);
        let hub = Hub::start(settings(), json!([comment(&key, "после 503")]));
        let config = hub.agent_config(&fake.url(), json!({}));
        assert!(run_until(&hub, &config, || all_ended(&hub)), "{mode:?}");
        let command = &hub.commands()[0];
        assert_eq!(
            (command.status, command.deliveries),
            (CommandStatus::Done, 2),
            "{mode:?}: {command:?}"
        );
        assert_eq!(fake.comments(&key).len(), 251, "{mode:?}: one comment");
        let posts = fake
            .requests()
            .iter()
            .skip(seeded)
            .filter(|s| s.method == "POST" && s.path.ends_with("/comment"))
            .count();
        assert_eq!(posts, 2, "{mode:?}: {:?}", asked_since(&fake, seeded));
        // No marker of the 250 is read; on Data Center the posted comment's own is read back,
        // once a run (a proxy may drop it).
        let read_back = usize::from(mode == Mode::DataCenter);
        assert_eq!(
            fake.calls(Endpoint::GetCommentProperty),
            read_back,
            "{mode:?}"
        );
        assert_eq!(fake.calls(Endpoint::CommentsByIds), 0, "{mode:?}");
    }
}

/// The hub's clock seen by the agent, with a look at the hub's view of the agent (`GET /agents`
/// over HTTP, as a client sees it) after every second of the clock the agent sleeps through:
/// every «Молчит» the hub would show is kept, with the time.
struct Watched {
    clock: Arc<ManualClock>,
    hub_url: String,
    client_token: String,
    /// The last whole second looked at.
    looked: Mutex<u64>,
    /// Seconds (from the start) at which the hub called the agent silent.
    silent_at: Mutex<Vec<u64>>,
    /// How many looks were made.
    looks: Mutex<u64>,
}

impl Watched {
    fn look(&self) {
        let second = self.clock.monotonic().as_secs();
        {
            let mut looked = self.looked.lock().unwrap();
            if *looked == second {
                return;
            }
            *looked = second;
        }
        let answer = call(
            &self.hub_url,
            "GET",
            "/agents",
            Some(&format!("Bearer {}", self.client_token)),
            None,
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(answer.status, 200, "{}", answer.body);
        *self.looks.lock().unwrap() += 1;
        let agents = answer.json();
        if agents
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["silent"] == json!(true))
        {
            self.silent_at.lock().unwrap().push(second);
        }
    }
}

impl Clock for Watched {
    fn now(&self) -> time::OffsetDateTime {
        self.clock.now()
    }

    fn monotonic(&self) -> Duration {
        self.clock.monotonic()
    }

    fn sleep(&self, duration: Duration, stop: &AtomicBool) -> bool {
        let slept = self.clock.sleep(duration, stop);
        self.look();
        slept
    }
}

/// Item 3: while the agent looks for a lost comment through a grace of 5 minutes (the comment's
/// connection dropped before Jira applied it), with a heartbeat of 30 s (the hub calls it silent
/// after 60 s without a request of its own) and a lease of 10 minutes (renewed every 5), the
/// hub never shows it «Молчит»: `GET /agents`, looked at after every second of the clock the
/// agent sleeps, never says `silent`. The rest of the claim does not lapse meanwhile: the next
/// comment runs in the same claim, in its first delivery, never given back.
#[test]
fn an_agent_is_never_shown_silent_during_a_long_look() {
    let fake = FakeJira::start(Mode::DataCenter);
    let key = seed(&fake);
    fake.fault(Endpoint::AddComment, Fault::DropBeforeApply, 1);
    let hub = Hub::start(
        json!({"pacing": {"min_interval_ms": 0, "claim_timeout_seconds": 600, "max_deliveries": 3}}),
        json!([
            comment(&key, "потерянный ответ"),
            comment(&key, "следующий")
        ]),
    );
    let mut config: Value = serde_json::from_str(&hub.agent_config(
        &fake.url(),
        json!({"release_grace_seconds": 300, "heartbeat_seconds": 30}),
    ))
    .unwrap();
    config["claim_wait_seconds"] = json!(0);
    let watched = Arc::new(Watched {
        clock: hub.clock.clone(),
        hub_url: config["hub_url"].as_str().unwrap().to_string(),
        client_token: hub.read().tokens().unwrap().unwrap().client,
        looked: Mutex::new(u64::MAX),
        silent_at: Mutex::new(Vec::new()),
        looks: Mutex::new(0),
    });
    let from = hub.clock.monotonic();
    let stop = Arc::new(AtomicBool::new(false));
    let agent = {
        let (clock, stop, config) = (watched.clone(), stop.clone(), config.to_string());
        std::thread::spawn(move || {
            jira_hub::run_agent_for_test(&config, clock, None, stop, None).unwrap()
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !all_ended(&hub) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::SeqCst);
    agent.join().unwrap();
    let spent = hub.clock.monotonic() - from;
    let commands = hub.commands();
    assert!(all_ended(&hub), "{commands:?}");
    assert!(
        spent >= Duration::from_secs(300),
        "the look lasted the grace: {spent:?}"
    );
    // The lost comment: done in its second delivery (the first was released, counted); the
    // next: done in the same claim, never given back.
    let states: Vec<_> = commands
        .iter()
        .map(|c| (c.status, c.deliveries, c.uncounted_releases))
        .collect();
    assert_eq!(
        states,
        [(CommandStatus::Done, 2, 0), (CommandStatus::Done, 1, 0)],
        "{commands:?}"
    );
    let looks = *watched.looks.lock().unwrap();
    assert!(looks >= 300, "the hub was looked at every second: {looks}");
    let silent_at = watched.silent_at.lock().unwrap().clone();
    assert!(
        silent_at.is_empty(),
        "the hub showed the agent silent at {} of {looks} looks, first at second {:?} of {}",
        silent_at.len(),
        silent_at.first(),
        spent.as_secs()
    );
}

/// Three creates on Data Center, each issue's marker as Jira kept it, and the property calls the
/// agent made: (reads, writes).
fn three_creates(keeps_create_properties: bool) -> (FakeJira, Vec<String>, usize, usize) {
    let fake = FakeJira::start(Mode::DataCenter);
    fake.set_create_properties(keeps_create_properties);
    let hub = Hub::start(
        settings(),
        json!([
            {"type": "ensure_issue", "params": {"issue_type": "task", "summary": "Первая"}},
            {"type": "ensure_issue", "params": {"issue_type": "task", "summary": "Вторая"}},
            {"type": "ensure_issue", "params": {"issue_type": "task", "summary": "Третья"}}
        ]),
    );
    let config = hub.agent_config(&fake.url(), json!({}));
    assert!(run_until(&hub, &config, || all_ended(&hub)));
    let commands = hub.commands();
    let states: Vec<_> = commands.iter().map(|c| (c.status, c.deliveries)).collect();
    assert_eq!(states, [(CommandStatus::Done, 1); 3], "{commands:?}");
    let keys: Vec<String> = commands
        .iter()
        .map(|c| {
            c.result.as_ref().unwrap()["key"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    for (command, key) in commands.iter().zip(&keys) {
        assert_eq!(
            fake.issue_properties(key)["jira-hub"]["command"],
            json!(command.id),
            "{key} carries its command's marker"
        );
    }
    let (reads, writes) = (
        fake.calls(Endpoint::GetIssueProperty),
        fake.calls(Endpoint::SetIssueProperty),
    );
    (fake, keys, reads, writes)
}

/// Item 6 (the DC create marker): a Data Center that says 9.12 documents create-time
/// `properties`, but the version does not prove them kept. The agent reads the first create's
/// marker back, once in the run: kept, it trusts the creates after it (one read, no write for
/// three creates); dropped (the simulated Jira ignores them while still naming 9.12), it is
/// detected and the marker is PUT after that create and every create after it, with no second
/// read (docs/design/agent-and-jira.md, "Markers and looks": "a server seen to drop it gets the marker
/// PUT after every create"). Every issue carries its command's marker either way.
#[test]
fn a_data_center_create_marker_is_read_back_once_and_a_dropped_one_is_set() {
    let (_fake, _, reads, writes) = three_creates(true);
    assert_eq!((reads, writes), (1, 0), "kept: one read in the run");
    let (fake, keys, reads, writes) = three_creates(false);
    assert_eq!(
        (reads, writes),
        (1, 3),
        "dropped: one read, a PUT per create"
    );
    let first_put = fake
        .requests()
        .iter()
        .position(|s| s.endpoint == Endpoint::SetIssueProperty)
        .unwrap();
    let read = fake
        .requests()
        .iter()
        .position(|s| s.endpoint == Endpoint::GetIssueProperty)
        .unwrap();
    assert!(read < first_put, "read back before the first PUT");
    assert!(
        fake.requests()[read].path.contains(&keys[0]),
        "the first create's marker is the one read"
    );
}
