//! The share's faults no real mount here makes on demand, met by the relay's own code through
//! the kernel: a rename whose reply was lost (it happened, and `rename(2)` said `ENOENT`), a file
//! server restarted in the middle of a write (half the bytes there, the write and every later
//! operation on that file failing with `EIO`), a file server whose clock is 200 s off this
//! machine's (every time in the share from it), removals leaving `.nfsXXXX` leftovers, and a
//! server that folds the case of names. The relay folder is a FUSE mount served by this process
//! (`support::faultfs`, which cites the behaviour it imitates beside each fault), and exactly
//! once must hold through each. Without `/dev/fuse` or `fusermount3` each test says it is
//! skipped and passes.

use crate::agent_e2e::{assert_landed_once, plan, set_fake_settings};
use crate::support::faultfs::FaultFs;
use crate::support::*;
use jira_hub::domain::command::BatchStatus;
use jira_hub::sim::jira::{FakeJira, Mode, PROJECT};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::time::{Duration, Instant};

/// Generous: debug builds on two cores, tests in parallel.
const WAIT: Duration = Duration::from_secs(150);

/// A hub whose relay folder is a new share mounted at `<dir>/relay`, its folders made through
/// the mount; `None` (the reason printed) when no FUSE mount can be had here. The share is
/// unmounted when dropped: keep it after the hub's and the agent's threads.
fn hub_on_share(
    dir: &TestDir,
) -> Option<(
    FaultFs,
    jira_hub::service::HubConnection,
    std::path::PathBuf,
    String,
)> {
    let relay = dir.path().join("relay");
    std::fs::create_dir(&relay).unwrap();
    let share = FaultFs::mount(&relay)?;
    let (hub, relay, token) = relay_hub_in(dir, relay);
    Some((share, hub, relay, token))
}

/// The file server itself, seen through its mount, does what each fault cites: the rename whose
/// reply is lost happened, the write cut by a restart left half its bytes and its open file fails
/// from then on, every time the server sets is on its clock, a name in another case is the same
/// file, and a removal leaves a leftover with the bytes.
#[test]
fn the_file_server_makes_each_fault_as_cited() {
    use std::io::{ErrorKind, Write};
    let dir = TestDir::new();
    let mount = dir.path().join("share");
    std::fs::create_dir(&mount).unwrap();
    let Some(share) = FaultFs::mount(&mount) else {
        return;
    };
    std::fs::create_dir(mount.join("d")).unwrap();
    let faults = share.faults("d");

    faults.lost_rename_replies.store(1, SeqCst);
    std::fs::write(mount.join("d/.a.tmp"), b"a").unwrap();
    let error = std::fs::rename(mount.join("d/.a.tmp"), mount.join("d/a")).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotFound, "{error}");
    assert_eq!(
        std::fs::read(mount.join("d/a")).unwrap(),
        b"a",
        "it happened"
    );
    assert!(!mount.join("d/.a.tmp").exists());
    std::fs::rename(mount.join("d/a"), mount.join("d/b")).unwrap();

    faults.restarts_mid_write.store(1, SeqCst);
    let mut file = std::fs::File::create_new(mount.join("d/c")).unwrap();
    let error = file.write_all(b"12345678").unwrap_err();
    assert_eq!(error.raw_os_error(), Some(libc::EIO), "{error}");
    assert_eq!(std::fs::read(share.backing().join("d/c")).unwrap(), b"1234");
    for later in [file.write_all(b"9"), file.sync_all()] {
        assert_eq!(later.unwrap_err().raw_os_error(), Some(libc::EIO));
    }
    drop(file);
    let mut again = std::fs::File::options()
        .append(true)
        .open(mount.join("d/c"))
        .unwrap();
    again.write_all(b"5678").unwrap();
    assert_eq!(
        std::fs::read(mount.join("d/c")).unwrap(),
        b"12345678",
        "a new open works"
    );

    share.set_skew_ms(-300_000);
    let off = |at: std::time::SystemTime| {
        std::time::SystemTime::now()
            .duration_since(at)
            .map(|behind| behind.as_secs())
            .unwrap_or(0)
    };
    std::fs::write(mount.join("d/e"), b"e").unwrap();
    let meta = std::fs::metadata(mount.join("d/e")).unwrap();
    let ctime = std::time::UNIX_EPOCH
        + Duration::from_secs(std::os::unix::fs::MetadataExt::ctime(&meta) as u64);
    for (what, at) in [("mtime", meta.modified().unwrap()), ("ctime", ctime)] {
        assert!(
            (290..=310).contains(&off(at)),
            "{what} {} s behind",
            off(at)
        );
    }
    std::fs::File::options()
        .write(true)
        .open(mount.join("d/b"))
        .unwrap()
        .set_times(std::fs::FileTimes::new().set_modified(std::time::SystemTime::now()))
        .unwrap();
    let given = std::fs::metadata(mount.join("d/b"))
        .unwrap()
        .modified()
        .unwrap();
    assert!(off(given) < 10, "a time the client gives is kept");
    rustix::fs::utimensat(
        rustix::fs::CWD,
        mount.join("d/b"),
        &rustix::fs::Timestamps {
            last_access: rustix::fs::Timespec {
                tv_sec: 0,
                tv_nsec: rustix::fs::UTIME_NOW,
            },
            last_modification: rustix::fs::Timespec {
                tv_sec: 0,
                tv_nsec: rustix::fs::UTIME_NOW,
            },
        },
        rustix::fs::AtFlags::empty(),
    )
    .unwrap();
    let now = std::fs::metadata(mount.join("d/b"))
        .unwrap()
        .modified()
        .unwrap();
    assert!(
        (290..=310).contains(&off(now)),
        "\"now\" is the server's: {} s",
        off(now)
    );
    share.set_skew_ms(0);

    share.fold_case();
    assert_eq!(std::fs::read(mount.join("D/B")).unwrap(), b"a");
    let error = std::fs::File::create_new(mount.join("d/B")).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::AlreadyExists, "{error}");
    std::fs::write(mount.join("d/B"), b"B").unwrap();
    assert_eq!(
        names_in(&share.backing().join("d")),
        ["b", "c", "e"],
        "the name kept its case"
    );
    assert_eq!(std::fs::read(share.backing().join("d/b")).unwrap(), b"B");
    assert!(share.folded() >= 3);

    faults.silly_renames.store(1, SeqCst);
    std::fs::remove_file(mount.join("d/e")).unwrap();
    assert!(!mount.join("d/e").exists());
    let left = names_in(&mount.join("d"));
    assert_eq!(left.len(), 3, "{left:?}");
    assert!(
        left[0].starts_with(".nfs") && left[0].len() == 4 + 16,
        "{left:?}"
    );
    assert_eq!(std::fs::read(mount.join("d").join(&left[0])).unwrap(), b"e");
    assert_eq!(faults.made(), (1, 1, 1));
}

/// The hub's side, pass by pass: the answer's write is cut by a restart, then its rename happens
/// but says `ENOENT`, then the request's move to `archive/` does the same. The request stays in
/// `inbox/` each time and is answered again from the record: its commands are handed out once,
/// the answer the agent reads is whole, nothing is archived twice.
#[test]
fn the_hub_answers_once_through_lost_rename_replies_and_a_write_cut_by_a_restart() {
    let dir = TestDir::new();
    let Some((share, mut hub, relay, token)) = hub_on_share(&dir) else {
        return;
    };
    let batch_id = hub
        .enqueue_batch(&batch(json!({"title": "t", "author": "a", "commands": [
        {"type": "comment", "params": {"key": "AURORA-1", "body": "один"}},
        {"type": "comment", "params": {"key": "AURORA-2", "body": "два"}}]})))
        .unwrap()
        .id;
    let mut worker = jira_hub::relay::Relay::new(
        hub.connect().unwrap(),
        jira_hub::relay::RelayOptions {
            notify: false,
            ..jira_hub::relay::RelayOptions::default()
        },
        jira_hub::shutdown::Shutdown::new(),
    );
    let outbox = share.faults("outbox");
    outbox.restarts_mid_write.store(1, SeqCst);
    outbox.lost_rename_replies.store(1, SeqCst);
    let archive = share.faults("archive");
    archive.lost_rename_replies.store(1, SeqCst);
    drop_file(
        &relay.join("inbox"),
        "claim-c1.json",
        &claim_file("c1", &token, 10),
    );
    let t0 = Instant::now();
    let mut passes = Vec::new();
    for n in 0..5 {
        let counts = worker.pass_at(t0 + Duration::from_millis(n)).unwrap();
        passes.push((counts.applied, counts.waiting));
    }
    assert_eq!(outbox.cut.load(SeqCst), 1, "the restart was made");
    assert_eq!(outbox.lost.load(SeqCst), 1, "the answer's lost reply");
    assert_eq!(
        archive.lost.load(SeqCst),
        1,
        "the archive move's lost reply"
    );
    assert_eq!(
        passes,
        [(0, 1), (0, 1), (0, 1), (0, 0), (0, 0)],
        "three passes found the request still in inbox/, then nothing was left"
    );
    let answer = read_json_file(&relay.join("outbox/claim-c1.json"));
    assert_eq!(answer["request_id"], "c1");
    assert_eq!(answer["commands"].as_array().unwrap().len(), 2, "{answer}");
    let view = hub.batch(batch_id).unwrap();
    assert!(
        view.commands.iter().all(|c| c.deliveries == 1),
        "handed out once: {:?}",
        view.commands
    );
    assert_eq!(names_in(&relay.join("inbox")), Vec::<String>::new());
    let days = names_in(&relay.join("archive"));
    assert_eq!(days.len(), 1, "{days:?}");
    assert_eq!(
        names_in(&relay.join("archive").join(&days[0])),
        ["claim-c1.json"],
        "archived once, under its own name"
    );
    assert_eq!(
        names_in(&relay.join("outbox")),
        ["claim-c1.json"],
        "one answer, and the cut write's temporary file is gone"
    );
}

/// The whole exchange with both sides in this process (the hub's relay worker and the agent's
/// loop, each on a thread), so that both write through the faults: the agent's requests meet
/// lost rename replies and restarts mid-write, the hub's answers, archive moves and lock too, and the
/// file server's clock is 200 s ahead, then 200 s behind. The batch lands in Jira once, and the
/// delay the hub measures is the share's, not the skew.
#[test]
fn a_batch_lands_once_through_every_fault_a_file_server_makes() {
    for skew_s in [200_i64, -200] {
        let dir = TestDir::in_memory_fs();
        let Some((share, mut hub, relay, agent_token)) = hub_on_share(&dir) else {
            return;
        };
        set_fake_settings(&mut hub, 2, 30);
        let fake = FakeJira::start(Mode::DataCenter);
        fake.seed_issues(PROJECT, "AWPCA", 1);
        let tag = format!("skew{skew_s}");
        let batch_id = hub.enqueue_batch(&batch(plan(&tag))).unwrap().id;
        share.set_skew_ms(skew_s * 1000);
        let inbox = share.faults("inbox");
        inbox.lost_rename_replies.store(2, SeqCst);
        inbox.restarts_mid_write.store(2, SeqCst);
        let outbox = share.faults("outbox");
        outbox.lost_rename_replies.store(2, SeqCst);
        outbox.restarts_mid_write.store(1, SeqCst);
        let archive = share.faults("archive");
        archive.lost_rename_replies.store(1, SeqCst);
        // The rest of the share: the hub's lock, whose first rename's reply is lost too.
        let rest = share.faults("");
        rest.lost_rename_replies.store(1, SeqCst);

        let view = exchange(&mut hub, &relay, &agent_token, &fake, batch_id);
        assert_eq!(view["status"], "completed", "skew {skew_s} s: {view:#}");
        assert_landed_once(&fake, &tag, &view);
        for (folder, faults, lost, cut) in [
            ("inbox", &inbox, 2, 2),
            ("outbox", &outbox, 2, 1),
            ("archive", &archive, 1, 0),
            ("the lock's folder", &rest, 1, 0),
        ] {
            assert_eq!(
                faults.made(),
                (lost, cut, 0),
                "skew {skew_s} s: the faults of {folder} were all made"
            );
        }
        // The file server's times are its own: the lock the hub wrote last is stamped off by
        // the skew.
        let stamped = std::fs::metadata(relay.join(".jira-hub-relay.lock"))
            .unwrap()
            .modified()
            .unwrap();
        let off = match stamped.duration_since(std::time::SystemTime::now()) {
            Ok(ahead) => ahead.as_secs_f64(),
            Err(behind) => -behind.duration().as_secs_f64(),
        };
        assert!(
            (off - skew_s as f64).abs() < 60.0,
            "skew {skew_s} s: the lock's mtime is {off} s off this machine's clock"
        );
        // Measured on the file server's clock at both ends: the skew is not a delay.
        let (delay, _) = hub
            .metrics()
            .relay_visibility()
            .expect("the hub measured how late it sees the agent's files");
        assert!(
            delay < Duration::from_secs(2),
            "skew {skew_s} s: the hub sees the agent's files {delay:?} late"
        );
    }
}

/// A share as a Windows or Samba file server gives it: names matched without regard to case, the
/// client's attribute and name caches at mount.cifs(8)'s default `actimeo=1` (1 s), and removals
/// that leave `.nfsXXXX` leftovers behind (a client that lost the server before its last close).
/// Another hub's old lock lies there under `.JIRA-HUB-RELAY.LOCK`, which on this server is the
/// hub's own lock name: the hub judges it stale on the server's clock and takes it over, the
/// agent finds the hub's lock under the name it asks for, the leftovers are `.`-names neither side
/// takes, and the batch lands once.
#[test]
fn a_batch_lands_once_on_a_server_that_folds_case_and_leaves_leftovers() {
    let dir = TestDir::in_memory_fs();
    let Some((share, mut hub, relay, agent_token)) = hub_on_share(&dir) else {
        return;
    };
    share.fold_case();
    share.set_timeouts(Duration::from_secs(1), Duration::from_secs(1));
    let planted = share.backing().join(".JIRA-HUB-RELAY.LOCK");
    std::fs::write(&planted, "old-host\n4242\n/var/lib/jira-hub/old.sqlite\n").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&planted)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - Duration::from_secs(3600))
        .unwrap();
    let outbox = share.faults("outbox");
    outbox.silly_renames.store(2, SeqCst);
    set_fake_settings(&mut hub, 2, 30);
    let fake = FakeJira::start(Mode::DataCenter);
    fake.seed_issues(PROJECT, "AWPCA", 1);
    let batch_id = hub.enqueue_batch(&batch(plan("smb"))).unwrap().id;
    let view = exchange(&mut hub, &relay, &agent_token, &fake, batch_id);
    assert_eq!(view["status"], "completed", "{view:#}");
    assert_landed_once(&fake, "smb", &view);
    assert_eq!(
        outbox.made(),
        (0, 0, 2),
        "two answers' removals left leftovers"
    );
    let leftovers: Vec<String> = names_in(&share.backing().join("outbox"))
        .into_iter()
        .filter(|name| name.starts_with(".nfs"))
        .collect();
    assert_eq!(leftovers.len(), 2, "{leftovers:?}");
    assert!(share.folded() > 0, "the lock's name met the planted one");
    let locks: Vec<String> = names_in(share.backing())
        .into_iter()
        .filter(|name| name.eq_ignore_ascii_case(".jira-hub-relay.lock"))
        .collect();
    assert_eq!(locks.len(), 1, "one lock, whatever its case: {locks:?}");
    let lock = std::fs::read_to_string(relay.join(".jira-hub-relay.lock")).unwrap();
    assert_eq!(
        lock.lines().nth(1),
        Some(std::process::id().to_string().as_str()),
        "the hub took the old lock over: {lock}"
    );
}

/// Runs the hub's relay worker and the agent's loop, each on a thread of this process, over
/// `relay` until the batch `batch_id` is completed (or [`WAIT`] is over), and returns the batch.
fn exchange(
    hub: &mut jira_hub::service::HubConnection,
    relay: &std::path::Path,
    agent_token: &str,
    fake: &FakeJira,
    batch_id: i64,
) -> serde_json::Value {
    let stop = Arc::new(AtomicBool::new(false));
    let worker_hub = hub.connect().unwrap();
    let hub_thread = std::thread::spawn({
        let stop = stop.clone();
        move || {
            let mut worker = jira_hub::relay::Relay::new(
                worker_hub,
                jira_hub::relay::RelayOptions {
                    notify: false,
                    ..jira_hub::relay::RelayOptions::default()
                },
                jira_hub::shutdown::Shutdown::new(),
            );
            while !stop.load(SeqCst) {
                if let Err(error) = worker.pass() {
                    eprintln!("relay pass: {error}");
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    });
    let config = json!({
        "jira_url": fake.url(), "jira_user": "agent", "jira_password": "secret",
        "agent_token": agent_token, "name": "agent-1", "idle_poll_ms": 100,
        "claim_wait_seconds": 1, "answer_timeout_seconds": 5,
        "request_timeout_seconds": 2, "search_lag_seconds": 3, "release_grace_seconds": 3,
        "relay_dir": relay.display().to_string(),
    })
    .to_string();
    let agent_thread = std::thread::spawn({
        let stop = stop.clone();
        move || {
            jira_hub::run_agent_for_test(
                &config,
                Arc::new(jira_hub::clock::SystemClock),
                None,
                stop,
                None,
            )
        }
    });
    let started = Instant::now();
    let view = loop {
        let view = hub.batch(batch_id).unwrap();
        if view.status == BatchStatus::Completed || started.elapsed() > WAIT {
            break view;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    stop.store(true, SeqCst);
    agent_thread.join().unwrap().unwrap();
    hub_thread.join().unwrap();
    serde_json::to_value(&view).unwrap()
}

fn read_json_file(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The names in a folder, sorted.
fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}
