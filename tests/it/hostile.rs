//! The share as an attacker with write access to it would use it: FIFOs swapped in for
//! files, files far larger than they claim to be, files that never complete, links where folders
//! should be, names that almost match, two requests with one id, control characters for the
//! operator's terminal. The daemon stays responsive, bounded in memory, and loses nothing.

use crate::support::*;
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

/// A bound on each poll, never a figure: generous for a debug build on two busy cores (a 30 s
/// bound was not enough under a load of 10).
const WAIT: Duration = Duration::from_secs(120);

fn vm_hwm_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

/// A heartbeat round trip through the relay, proving the daemon still answers.
fn heartbeat(relay: &Path, token: &str, id: &str) -> serde_json::Value {
    let value = json!({"kind": "heartbeat", "id": id, "agent": "agent-1", "sent_at": "2026-11-29T10:00:00Z",
        "token": token, "agent_version": "1", "jira_ok": true});
    drop_file(
        &relay.join("inbox"),
        &format!("heartbeat-{id}.json"),
        &value,
    );
    wait_for_json(&relay.join(format!("outbox/heartbeat-{id}.json")), WAIT)
}

/// A FIFO renamed over a request file, again and again while the relay works: the relay never
/// blocks in `open` (it opens without blocking and checks what it opened), refuses what is not
/// a regular file, keeps answering, and stops on SIGTERM. A hostile file with a wrong token and a
/// large member costs a small multiple of its size.
#[test]
fn fifos_and_big_hostile_files_do_not_hang_or_bloat_the_relay() {
    let dir = TestDir::new();
    let (_hub, relay, token) = relay_hub(&dir);
    let mut daemon = Daemon::start(&dir.db(), &["--relay-grace-seconds", "2"]);
    let inbox = relay.join("inbox");
    heartbeat(&relay, &token, "before");

    // Swap FIFOs and half-written files over one name for a while.
    let swapper = {
        let inbox = inbox.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            let mut n = 0;
            while started.elapsed() < Duration::from_secs(3) {
                let fifo = inbox.join(format!(".fifo-{n}"));
                mkfifo(&fifo);
                let _ = std::fs::rename(&fifo, inbox.join("claim-swap.json"));
                let half = inbox.join(format!(".half-{n}"));
                std::fs::write(&half, br#"{"kind": "claim", "id": "sw"#).unwrap();
                let _ = std::fs::rename(&half, inbox.join("claim-swap.json"));
                n += 1;
            }
            n
        })
    };
    let swaps = swapper.join().unwrap();
    assert!(swaps > 10, "{swaps} swaps");
    heartbeat(&relay, &token, "during");
    let ready = http(&daemon.address, "GET", "/ready", None, None);
    assert_eq!(ready.0, 200, "{ready:?}");

    // 32 MiB with a wrong token and a big array member.
    let before = vm_hwm_kib(daemon.child_id());
    let mut hostile = br#"{"kind": "report", "id": "big", "agent": "a", "sent_at": "2026-11-29T10:00:00Z", "token": "wrong", "x": ["#.to_vec();
    while hostile.len() < 32 << 20 {
        hostile.extend_from_slice(br#"{"a":[1,2,3,{"b":"cccccccc"}]},"#);
    }
    hostile.extend_from_slice(br#"0], "results": []}"#);
    let size_kib = hostile.len() as u64 / 1024;
    std::fs::write(inbox.join(".big"), &hostile).unwrap();
    std::fs::rename(inbox.join(".big"), inbox.join("report-big.json")).unwrap();
    let reason = wait_for_json(&relay.join("rejected/report-big.json.error.json"), WAIT);
    assert_eq!(reason["code"], "bad_token", "{reason}");
    let grew = vm_hwm_kib(daemon.child_id()).saturating_sub(before);
    assert!(
        grew < 4 * size_kib,
        "peak memory grew by {grew} KiB for a {size_kib} KiB file"
    );
    heartbeat(&relay, &token, "after");

    daemon.signal("TERM");
    let status = daemon.wait();
    assert_eq!(status.code(), Some(0), "SIGTERM stops it");
}

/// A large file that is still arriving does not hold up small requests, and is not read again
/// until it changes; complete JSON that breaks the protocol is refused at once, a byte-order mark
/// is accepted.
#[test]
fn small_requests_overtake_big_incomplete_ones() {
    let dir = TestDir::new();
    let (_hub, relay, token) = relay_hub(&dir);
    let _daemon = Daemon::start(&dir.db(), &["--relay-grace-seconds", "600"]);
    let inbox = relay.join("inbox");
    for n in 0..3 {
        let mut big = br#"{"kind": "report", "id": "x", "agent": "a", "sent_at": "2026-11-29T10:00:00Z", "results": [], "pad": ""#.to_vec();
        big.resize(big.len() + (40 << 20), b'a');
        std::fs::write(inbox.join(format!("report-arriving{n}.json")), &big).unwrap();
    }
    for n in 0..5 {
        heartbeat(&relay, &token, &format!("small{n}"));
    }
    for n in 0..3 {
        assert!(
            inbox.join(format!("report-arriving{n}.json")).exists(),
            "still waiting for the rest of it"
        );
    }
    // What growing cannot cure is refused without waiting out the 600 s grace period.
    for (name, text) in [
        ("claim-array.json", "[1,2]".to_string()),
        ("claim-null.json", "null".to_string()),
        ("claim-number.json", "42".to_string()),
        (
            "claim-deep.json",
            format!("{}{}", "[".repeat(300), "]".repeat(300)),
        ),
        (
            "claim-surrogate.json",
            format!(r#"{{"token": "{token}", "kind": "claim", "id": "\udc00"}}"#),
        ),
    ] {
        std::fs::write(inbox.join(name), text).unwrap();
        let reason = wait_for_json(&relay.join(format!("rejected/{name}.error.json")), WAIT);
        assert_ne!(reason["code"], "bad_token", "{name}: {reason}");
    }
    // Windows PowerShell 5.1 writes a byte-order mark.
    let mut with_bom = b"\xEF\xBB\xBF".to_vec();
    with_bom.extend(serde_json::to_vec(&claim_file("bom", &token, 1)).unwrap());
    std::fs::write(inbox.join(".bom"), with_bom).unwrap();
    std::fs::rename(inbox.join(".bom"), inbox.join("claim-bom.json")).unwrap();
    let answer = wait_for_json(&relay.join("outbox/claim-bom.json"), WAIT);
    assert_eq!(answer["request_id"], "bom");
}

/// A folder of the share replaced by a link is never used: nothing is written through it, the
/// hub says so in `/ready` and `status`, and goes back to work when the folder is real again.
#[test]
fn folders_of_the_share_that_are_links_are_not_followed() {
    let dir = TestDir::new();
    let (_hub, relay, token) = relay_hub(&dir);
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::remove_dir(relay.join("rejected")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, relay.join("rejected")).unwrap();
    let daemon = Daemon::start(&dir.db(), &[]);
    drop_file(
        &relay.join("inbox"),
        "claim-bad.json",
        &claim_file("bad", "wrong-token", 1),
    );
    let started = Instant::now();
    loop {
        let (status, body) = http(&daemon.address, "GET", "/ready", None, None);
        if body["relay"] == "unusable" {
            assert_eq!(status, 200);
            assert!(
                body["relay_problem"].as_str().unwrap().contains("rejected"),
                "{body}"
            );
            break;
        }
        assert!(started.elapsed() < WAIT, "{body}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = run_ok(&dir.db(), &["status"]);
    assert!(
        status.stdout.contains("NOT A REAL FOLDER"),
        "{}",
        status.stdout
    );
    assert!(
        std::fs::read_dir(&elsewhere).unwrap().next().is_none(),
        "nothing was written through the link"
    );
    assert!(relay.join("inbox/claim-bad.json").exists());

    std::fs::remove_file(relay.join("rejected")).unwrap();
    std::fs::create_dir(relay.join("rejected")).unwrap();
    wait_for_json(&relay.join("rejected/claim-bad.json.error.json"), WAIT);
    heartbeat(&relay, &token, "back");
    assert!(std::fs::read_dir(&elsewhere).unwrap().next().is_none());
}

/// Two refused requests with one id each get their own answer; names that almost match are
/// refused with their reason, never left in `inbox/`; names clearly not ours are left alone.
#[test]
fn refusals_are_answered_per_file_and_near_misses_refused() {
    let dir = TestDir::new();
    let (_hub, relay, _token) = relay_hub(&dir);
    let _daemon = Daemon::start(&dir.db(), &[]);
    let inbox = relay.join("inbox");
    drop_file(&inbox, "claim-X.json", &claim_file("X", "wrong", 1));
    drop_file(
        &inbox,
        "heartbeat-X.json",
        &json!({"kind": "heartbeat", "id": "X", "agent": "a", "sent_at": "2026-11-29T10:00:00Z", "token": "wrong", "agent_version": "1", "jira_ok": true}),
    );
    let claim = wait_for_json(&relay.join("outbox/error-claim-X.json"), WAIT);
    let heartbeat = wait_for_json(&relay.join("outbox/error-heartbeat-X.json"), WAIT);
    assert_eq!(claim["file"], "claim-X.json");
    assert_eq!(heartbeat["file"], "heartbeat-X.json");
    assert_eq!(claim["request_id"], "X");

    let long = format!("claim-{}.json", "x".repeat(65));
    for name in ["CLAIM-x.json", "claim-ид.json", long.as_str(), "claim.json"] {
        std::fs::write(inbox.join(name), "{}").unwrap();
        let reason = wait_for_json(&relay.join(format!("rejected/{name}.error.json")), WAIT);
        assert_eq!(reason["code"], "bad_name", "{name}: {reason}");
    }
    for name in [".nfs000123", "notes.txt", "claim-1.json.part"] {
        std::fs::write(inbox.join(name), "x").unwrap();
    }
    drop_file(&inbox, "claim-later.json", &claim_file("later", "wrong", 1));
    wait_for_json(&relay.join("outbox/error-claim-later.json"), WAIT);
    for name in [".nfs000123", "notes.txt", "claim-1.json.part"] {
        assert!(inbox.join(name).exists(), "{name} is left alone");
    }
}

/// What the share holds is shown to the operator, never obeyed: `relay inspect` escapes control
/// characters; an agent name with control characters is refused.
#[test]
fn inspect_escapes_and_control_characters_in_names_are_refused() {
    let dir = TestDir::new();
    let (_hub, relay, token) = relay_hub(&dir);
    let mut evil = claim_file("evil", &token, 1);
    evil["agent"] = json!("agent\u{1b}[2J\u{1b}]0;pwned\u{7}");
    drop_file(&relay.join("inbox"), "claim-evil.json", &evil);
    // A heartbeat's last error may hold anything Jira said; inspect shows it escaped.
    drop_file(
        &relay.join("inbox"),
        "heartbeat-shown.json",
        &json!({"kind": "heartbeat", "id": "shown", "agent": "agent-1", "sent_at": "2026-11-29T10:00:00Z",
                "token": token, "agent_version": "1", "jira_ok": false, "last_error": "boom\u{1b}[31m\rred"}),
    );
    let out = run_ok(
        &dir.db(),
        &["relay", "inspect", relay.join("inbox").to_str().unwrap()],
    );
    assert!(!out.stdout.contains('\u{1b}'), "{:?}", out.stdout);
    assert!(!out.stdout.contains('\r'), "{:?}", out.stdout);
    assert!(
        out.stdout.contains("boom\\u{1b}[31m\\u{d}red"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("управляющие символы"), "{}", out.stdout);

    let _daemon = Daemon::start(&dir.db(), &[]);
    let reason = wait_for_json(&relay.join("rejected/claim-evil.json.error.json"), WAIT);
    assert_eq!(
        (reason["code"].as_str(), reason["field"].as_str()),
        (Some("invalid"), Some("agent")),
        "{reason}"
    );
    let agents = run_ok(&dir.db(), &["status"]).stdout;
    assert!(!agents.contains('\u{1b}'));
}

/// A corpus of hostile files, generated from valid requests by truncating, flipping and
/// inserting bytes, swapping members for other JSON, nesting deeply, adding byte-order marks and
/// zero bytes, under valid and almost-valid names, dropped at once while another thread keeps
/// swapping FIFOs, folders and links over names: every file ends answered or refused with its
/// reason, nothing stays in `inbox/`, the daemon answers throughout, and its memory stays bounded.
#[test]
fn a_corpus_of_hostile_files_is_decided_with_bounded_memory() {
    use proptest::prelude::*;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    let dir = TestDir::new();
    let (_hub, relay, token) = relay_hub(&dir);
    let inbox = relay.join("inbox");
    let valid = |kind: &str, id: &str| -> Vec<u8> {
        let value = match kind {
            "claim" => claim_file(id, &token, 3),
            "report" => report_file(
                id,
                &token,
                json!([{"command_id": 1, "delivery": 1, "status": "progress",
                        "page": {"start_at": 0, "total": null, "issues": [{"id": "1", "key": "AURORA-1", "fields": {"summary": "x", "labels": ["AWPCA"]}}]}}]),
            ),
            _ => {
                json!({"kind": "heartbeat", "id": id, "agent": "agent-1", "sent_at": "2026-11-29T10:00:00Z",
                        "token": token, "agent_version": "1", "jira_ok": true})
            }
        };
        serde_json::to_vec(&value).unwrap()
    };
    #[derive(Debug, Clone)]
    enum Mutation {
        Keep,
        Truncate(usize),
        Flip(usize, u8),
        Insert(usize, Vec<u8>),
        Member(String, serde_json::Value),
        Deep(usize),
        Bom,
        Zeros(usize),
    }
    let json_value = prop_oneof![
        Just(json!(null)),
        any::<i64>().prop_map(|n| json!(n)),
        ".{0,20}".prop_map(|s| json!(s)),
        prop::collection::vec(any::<u8>(), 0..10).prop_map(|v| json!(v)),
        Just(json!({"nested": {"deeper": [1, 2, {"x": "y"}]}})),
        Just(json!("a".repeat(100_000))),
    ];
    let member = prop_oneof![
        Just("kind"),
        Just("id"),
        Just("agent"),
        Just("sent_at"),
        Just("token"),
        Just("max_commands"),
        Just("results"),
        Just("settings_version"),
        Just("extra"),
    ];
    let mutation = prop_oneof![
        Just(Mutation::Keep),
        (0usize..400).prop_map(Mutation::Truncate),
        (0usize..400, any::<u8>()).prop_map(|(at, b)| Mutation::Flip(at, b)),
        (0usize..400, prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(at, b)| Mutation::Insert(at, b)),
        (member, json_value).prop_map(|(m, v)| Mutation::Member(m.to_string(), v)),
        (100usize..5000).prop_map(Mutation::Deep),
        Just(Mutation::Bom),
        (1usize..100).prop_map(Mutation::Zeros),
    ];
    let kind = prop_oneof![Just("claim"), Just("report"), Just("heartbeat")];
    let name_style = prop_oneof![
        4 => Just(0u8), // kind-id.json
        1 => Just(1u8), // upper case kind
        1 => Just(2u8), // id too long
        1 => Just(3u8), // unknown kind
    ];
    let case = (kind, mutation, name_style);
    let mut runner = TestRunner::deterministic();
    let mut names = Vec::new();
    let mut total_bytes = 0usize;
    for n in 0..240 {
        let (kind, mutation, style) = case.new_tree(&mut runner).unwrap().current();
        let id = format!("f{n}");
        let mut bytes = valid(kind, &id);
        match mutation {
            Mutation::Keep => {}
            Mutation::Truncate(at) => bytes.truncate(at.min(bytes.len())),
            Mutation::Flip(at, b) => {
                let at = at % bytes.len();
                bytes[at] ^= b | 1;
            }
            Mutation::Insert(at, inserted) => {
                let at = at % bytes.len();
                bytes.splice(at..at, inserted);
            }
            Mutation::Member(member, value) => {
                let mut parsed: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                parsed[member.as_str()] = value;
                bytes = serde_json::to_vec(&parsed).unwrap();
            }
            Mutation::Deep(depth) => {
                let mut parsed: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                parsed["extra"] = json!(0);
                let text = serde_json::to_string(&parsed).unwrap().replace(
                    "\"extra\":0",
                    &format!("\"extra\":{}{}", "[".repeat(depth), "]".repeat(depth)),
                );
                bytes = text.into_bytes();
            }
            Mutation::Bom => {
                bytes.splice(0..0, *b"\xEF\xBB\xBF");
            }
            Mutation::Zeros(count) => {
                let at = bytes.len() / 2;
                bytes.splice(at..at, std::iter::repeat_n(0u8, count));
            }
        }
        let name = match style {
            0 => format!("{kind}-{id}.json"),
            1 => format!("{}-{id}.json", kind.to_uppercase()),
            2 => format!("{kind}-{}{id}.json", "x".repeat(64)),
            _ => format!("{kind}z-{id}.json"),
        };
        total_bytes += bytes.len();
        std::fs::write(inbox.join(format!(".{name}")), &bytes).unwrap();
        std::fs::rename(inbox.join(format!(".{name}")), inbox.join(&name)).unwrap();
        names.push(name);
    }
    let daemon = Daemon::start(
        &dir.db(),
        &[
            "--relay-grace-seconds",
            "1",
            "--relay-arrival-limit-seconds",
            "3",
        ],
    );
    let baseline = vm_hwm_kib(daemon.child_id());
    // Types swapped under the relay's feet while it works through the corpus.
    let swapper = {
        let inbox = inbox.clone();
        std::thread::spawn(move || {
            for n in 0..60 {
                let name = format!("claim-swap{n}.json");
                std::fs::write(inbox.join(&name), b"{\"kind\": \"claim\"").unwrap();
                let fifo = inbox.join(format!(".swapfifo{n}"));
                mkfifo(&fifo);
                let _ = std::fs::rename(&fifo, inbox.join(&name));
                let folder = inbox.join(format!(".swapdir{n}"));
                std::fs::create_dir(&folder).unwrap();
                let _ = std::fs::rename(&folder, inbox.join(format!("report-swap{n}.json")));
                let _ = std::os::unix::fs::symlink(
                    "/dev/zero",
                    inbox.join(format!("heartbeat-swap{n}.json")),
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    heartbeat(&relay, &token, "amid");
    swapper.join().unwrap();
    // Everything of ours leaves inbox/: answered into archive/ or refused into rejected/.
    let started = Instant::now();
    loop {
        let left: Vec<String> = std::fs::read_dir(&inbox)
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with('.'))
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "stuck in inbox/: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for name in &names {
        let refused = relay.join(format!("rejected/{name}.error.json")).exists();
        let answered = relay.join(format!("outbox/{name}")).exists();
        assert!(
            refused || answered,
            "{name} was neither answered nor refused"
        );
    }
    heartbeat(&relay, &token, "after-corpus");
    let grew = vm_hwm_kib(daemon.child_id()).saturating_sub(baseline);
    assert!(
        grew < 64 * 1024,
        "peak memory grew by {grew} KiB for a corpus of {} KiB",
        total_bytes / 1024
    );
    let ready = http(&daemon.address, "GET", "/ready", None, None);
    assert_eq!(ready.0, 200, "{ready:?}");
    run_ok(&dir.db(), &["status"]);
}

/// 16 agent reports of 60 MB each sent over HTTP at once: their bodies share one memory budget
/// (`--report-budget-mb`, 128 here), so the daemon's peak memory grows by a small multiple of the
/// budget, not of the 960 MB sent (796 MB before). Every report is answered (waiting
/// for its share, or 503 with Retry-After), and the daemon still serves.
#[test]
fn concurrent_large_reports_share_one_memory_budget() {
    use std::io::{Read, Write};
    let dir = TestDir::new();
    let hub = ready_hub(&dir, &clock());
    let token = hub.tokens().unwrap().unwrap().agent;
    drop(hub);
    let daemon = Daemon::start(
        &dir.db(),
        // Bodies of 60 MB waiting for their share on a loaded machine: the 30 s body deadline
        // would answer some 408 before their turn.
        &[
            "--report-budget-mb",
            "128",
            "--http-timeout-seconds",
            "120",
            "--http-body-timeout-seconds",
            "120",
        ],
    );
    let pid = daemon.child_id();
    heartbeat_http(&daemon.address, &token);
    let before = vm_hwm_kib(pid);
    // 60 results of 1,000,000 bytes each (a result may hold up to 1 MiB), for commands the hub
    // does not know (answered `ignored`): 60 MB a report.
    let mut results = Vec::new();
    for n in 0..60 {
        if n > 0 {
            results.push(b',');
        }
        results.extend_from_slice(
            format!(
                r#"{{"command_id": {}, "delivery": 1, "status": "done", "result": {{"pad": ""#,
                1_000_000 + n
            )
            .as_bytes(),
        );
        results.resize(results.len() + 1_000_000, b'a');
        results.extend_from_slice(br#""}}"#);
    }
    let pad = std::sync::Arc::new(results);
    let senders: Vec<_> = (0..16)
        .map(|n| {
            let (address, token, pad) = (daemon.address.clone(), token.clone(), pad.clone());
            std::thread::spawn(move || {
                let head = format!(
                    r#"{{"kind": "report", "id": "big-{n}", "agent": "agent-1", "sent_at": "2026-11-29T10:00:00Z", "results": ["#
                );
                let tail = "]}";
                let length = head.len() + pad.len() + tail.len();
                let mut stream = std::net::TcpStream::connect(&address).unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_secs(180)))
                    .unwrap();
                write!(
                    stream,
                    "POST /agent/report HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n{head}"
                )
                .unwrap();
                // A body the hub is not reading yet (its share is taken) may be cut off when it
                // answers 503 first: the answer is read all the same.
                let _ = stream
                    .write_all(&pad)
                    .and_then(|()| stream.write_all(tail.as_bytes()));
                let mut answer = Vec::new();
                let _ = stream.read_to_end(&mut answer);
                String::from_utf8_lossy(&answer).into_owned()
            })
        })
        .collect();
    let answers: Vec<String> = senders.into_iter().map(|s| s.join().unwrap()).collect();
    let grew_mib = vm_hwm_kib(pid).saturating_sub(before) / 1024;
    for answer in &answers {
        let status = answer.split_whitespace().nth(1).unwrap_or_default();
        assert!(
            status == "200"
                || (status == "503" && answer.to_ascii_lowercase().contains("retry-after: 5")),
            "{}",
            &answer[..answer.len().min(800)]
        );
    }
    assert!(
        answers.iter().any(|a| a.starts_with("HTTP/1.1 200")),
        "some reports were handled"
    );
    // The budget and at most half of it again (a report is held once, its results kept as its
    // text; 251 MiB before, when each body was copied and its results parsed):
    // far under the 16 × 60 MB sent.
    println!(
        "16 reports of 60 MB: the daemon's peak grew by {grew_mib} MiB ({} answered 200)",
        answers
            .iter()
            .filter(|a| a.starts_with("HTTP/1.1 200"))
            .count()
    );
    assert!(
        grew_mib <= 128 + 64,
        "peak memory grew by {grew_mib} MiB for 16 reports of 60 MB under a 128 MiB budget"
    );
    heartbeat_http(&daemon.address, &token);
}

fn heartbeat_http(address: &str, token: &str) {
    let (status, body) = http(
        address,
        "POST",
        "/agent/heartbeat",
        Some(token),
        Some(
            &json!({"kind": "heartbeat", "id": format!("hb-{}", std::process::id()), "agent": "agent-1",
            "sent_at": "2026-11-29T10:00:00Z", "agent_version": "1", "jira_ok": true}),
        ),
    );
    assert_eq!(status, 200, "{body}");
}

/// Request files named up to the file system's limit (255 bytes: a 240-character id) or near it
/// are refused with the reason and moved to `rejected/` under a
/// shortened name, their reason naming them as they were; before, the reason's file name was
/// too long to write, and the file stayed in `inbox/` for good.
#[test]
fn files_with_ids_longer_than_the_limit_are_refused_into_rejected() {
    let dir = TestDir::new();
    let (_hub, relay, token) = relay_hub(&dir);
    let _daemon = Daemon::start(&dir.db(), &["--relay-grace-seconds", "1"]);
    let inbox = relay.join("inbox");
    let names = [
        format!("heartbeat-{}.json", "a".repeat(240)),
        format!("claim-{}.json", "b".repeat(244)),
        format!("report-{}.json", "c".repeat(200)),
    ];
    for name in &names {
        assert!(name.len() <= 255);
        std::fs::write(inbox.join(name), b"{}").unwrap();
    }
    let deadline = Instant::now() + WAIT;
    let reasons = loop {
        let reasons: Vec<serde_json::Value> = std::fs::read_dir(relay.join("rejected"))
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(".error.json"))
            .map(|e| serde_json::from_slice(&std::fs::read(e.path()).unwrap()).unwrap())
            .collect();
        // The reason and the answer are written before the file leaves `inbox/` (a crash
        // between them leaves the file to be refused again), so the end state is both.
        let moved = names.iter().all(|name| !inbox.join(name).exists());
        if (reasons.len() == names.len() && moved) || Instant::now() > deadline {
            break reasons;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    for name in &names {
        let reason = reasons
            .iter()
            .find(|r| r["file"] == json!(name))
            .unwrap_or_else(|| panic!("no reason for {name}: {reasons:?}"));
        assert_eq!(reason["code"], "bad_name", "{reason}");
        assert!(!inbox.join(name).exists(), "{name} left in inbox/");
    }
    let bad_name = reasons.iter().find(|r| r["code"] == "bad_name").unwrap();
    assert!(
        bad_name["message"].as_str().unwrap().contains("от 1 до 64"),
        "{bad_name}"
    );
    heartbeat(&relay, &token, "after");
}

/// Two hubs (two databases) set to one relay folder: the second leaves it alone, and its
/// `/ready` says which hub has it (host, process id, database); the first answers the agent.
/// Once the first stops (its lock file removed), the second takes the folder.
#[test]
fn a_second_hub_on_one_relay_folder_is_refused_with_the_first_ones_name() {
    let first_dir = TestDir::new();
    let (_hub, relay, token) = relay_hub(&first_dir);
    let mut first = Daemon::start(&first_dir.db(), &[]);
    heartbeat(&relay, &token, "first");
    let second_dir = TestDir::new();
    let (mut second_hub, _, _) = relay_hub(&second_dir);
    set_settings(
        &mut second_hub,
        json!({"relay_dir": relay.display().to_string()}),
    );
    drop(second_hub);
    let second = Daemon::start(&second_dir.db(), &[]);
    let deadline = Instant::now() + WAIT;
    let ready = loop {
        let (status, ready) = http(&second.address, "GET", "/ready", None, None);
        assert_eq!(status, 200, "{ready}");
        if ready["relay"] == "unusable" || Instant::now() > deadline {
            break ready;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let problem = ready["relay_problem"].as_str().unwrap_or_default();
    assert!(
        problem.contains("обслуживает другой хаб")
            && problem.contains(&format!("pid {}", first.child_id()))
            && problem.contains(&first_dir.db().display().to_string()),
        "{ready}"
    );
    // The first hub still serves the agent.
    heartbeat(&relay, &token, "still-first");
    let (_, first_ready) = http(&first.address, "GET", "/ready", None, None);
    assert_eq!(first_ready["relay"], "ok", "{first_ready}");

    first.signal("TERM");
    assert!(first.wait().success());
    let deadline = Instant::now() + WAIT;
    loop {
        let (_, ready) = http(&second.address, "GET", "/ready", None, None);
        if ready["relay"] == "ok" {
            break;
        }
        assert!(Instant::now() < deadline, "{ready}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let second_token = {
        let hub = jira_hub::service::HubConnection::open(
            &second_dir.db(),
            std::sync::Arc::new(jira_hub::clock::SystemClock),
        )
        .unwrap()
        .0;
        hub.tokens().unwrap().unwrap().agent
    };
    heartbeat(&relay, &second_token, "second");
}
