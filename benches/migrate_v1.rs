//! Migration of a large v1 database against `cp` of the same file, measured in one run.
//!
//! `cargo bench --bench migrate_v1` builds a v1 database of about 1 GiB from
//! `tests/fixtures/history/schema-v1.sql` (issues with realistic `fields` JSON, links, notes,
//! batches and commands), then times, alternately and three times each, `cp` of the file, `cp`
//! followed by an fsync of the copy (the migration's backup is durable), and `jira-hub migrate` on a fresh copy of it (the real binary: the durable backup, v1→v4 steps,
//! commit with `synchronous=FULL`). It prints the medians, the ratios and the target
//! (migrate ≤ 1.3 × (cp + fsync)).
//!
//! `MIGRATE_BENCH_MB` sets the size (default 1024); `MIGRATE_BENCH_DIR` keeps the files in that
//! folder instead of a temp dir.

use rusqlite::{Connection, params};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let megabytes: u64 = std::env::var("MIGRATE_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024);
    let temp = tempfile::tempdir()?;
    let dir = std::env::var_os("MIGRATE_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| temp.path().to_path_buf());
    std::fs::create_dir_all(&dir)?;
    let source = dir.join("v1.sqlite");

    let started = Instant::now();
    build_v1(&source, megabytes)?;
    let size = std::fs::metadata(&source)?.len();
    println!(
        "built a v1 database of {:.0} MiB in {:.1} s",
        size as f64 / 1048576.0,
        started.elapsed().as_secs_f64()
    );

    let mut cp_times = Vec::new();
    let mut cp_sync_times = Vec::new();
    let mut migrate_times = Vec::new();
    for round in 0..3 {
        let cp_target = dir.join(format!("cp-{round}.sqlite"));
        settle()?;
        let t = Instant::now();
        let status = Command::new("cp").arg(&source).arg(&cp_target).status()?;
        cp_times.push(t.elapsed());
        assert!(status.success(), "cp failed");
        std::fs::remove_file(&cp_target)?;

        settle()?;
        let t = Instant::now();
        let status = Command::new("cp").arg(&source).arg(&cp_target).status()?;
        std::fs::File::open(&cp_target)?.sync_all()?;
        cp_sync_times.push(t.elapsed());
        assert!(status.success(), "cp failed");
        std::fs::remove_file(&cp_target)?;

        let data = dir.join(format!("migrate-{round}"));
        std::fs::create_dir_all(&data)?;
        let db = data.join("hub.sqlite");
        std::fs::copy(&source, &db)?;
        settle()?;
        let t = Instant::now();
        let output = Command::new(env!("CARGO_BIN_EXE_jira-hub"))
            .arg("--db")
            .arg(&db)
            .arg("migrate")
            .env("RUST_LOG", "warn")
            .output()?;
        migrate_times.push(t.elapsed());
        assert!(output.status.success(), "migrate failed: {output:?}");
        check_migrated(&db, &data)?;
        std::fs::remove_dir_all(&data)?;
    }
    let cp = median(&mut cp_times);
    let cp_sync = median(&mut cp_sync_times);
    let migrate = median(&mut migrate_times);
    let line = |label: &str, median: Duration, runs: &[Duration]| {
        println!(
            "{label:<28} median {:.2} s  (runs {:?})",
            median.as_secs_f64(),
            secs(runs)
        );
    };
    line("cp of the file", cp, &cp_times);
    line("cp + fsync of the copy", cp_sync, &cp_sync_times);
    line("jira-hub migrate v1 -> v4", migrate, &migrate_times);
    let ratio = |baseline: Duration| migrate.as_secs_f64() / baseline.as_secs_f64();
    println!("ratio migrate / cp:          {:.2}", ratio(cp));
    println!("ratio migrate / (cp + fsync): {:.2}", ratio(cp_sync));
    println!(
        "migrate / (cp + fsync) / target 1.30 = {:.2} (target <= 1.00)",
        ratio(cp_sync) / 1.3
    );
    Ok(())
}

/// Writes back whatever earlier steps left dirty, then gives the kernel a moment to refill its
/// free memory (a gigabyte just copied leaves it short, and whichever timed operation came next
/// would reclaim it), so that no timed operation pays for another.
fn settle() -> Result<(), Box<dyn std::error::Error>> {
    let status = Command::new("sync").status()?;
    assert!(status.success(), "sync failed");
    std::thread::sleep(Duration::from_secs(2));
    Ok(())
}

fn secs(times: &[Duration]) -> Vec<String> {
    times
        .iter()
        .map(|t| format!("{:.2}", t.as_secs_f64()))
        .collect()
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn check_migrated(db: &Path, data: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let conn = Connection::open(db)?;
    let version: String = conn.query_row(
        "SELECT value FROM setting WHERE key = 'schema_version'",
        [],
        |r| r.get(0),
    )?;
    assert_eq!(version, "4");
    let backups = std::fs::read_dir(data.join("backups"))?.count();
    assert_eq!(backups, 1, "one backup");
    Ok(())
}

/// A deterministic stream of words, so that the JSON does not compress to nothing.
struct Words(u64);

impl Words {
    fn next_word(&mut self) -> &'static str {
        const WORDS: [&str; 16] = [
            "задача",
            "эпик",
            "спринт",
            "отчёт",
            "склад",
            "проверка",
            "release",
            "deploy",
            "интеграция",
            "документ",
            "аудит",
            "схема",
            "данные",
            "клиент",
            "сервис",
            "модуль",
        ];
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        WORDS[(self.0 >> 60) as usize]
    }

    fn sentence(&mut self, words: usize) -> String {
        (0..words)
            .map(|_| self.next_word())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn build_v1(path: &Path, megabytes: u64) -> Result<(), Box<dyn std::error::Error>> {
    let _ = std::fs::remove_file(path);
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/history/schema-v1.sql");
    let conn = Connection::open(path)?;
    conn.execute_batch(&std::fs::read_to_string(schema)?)?;
    conn.pragma_update(None, "synchronous", "OFF")?;
    let mut words = Words(7);
    let target = megabytes * 1024 * 1024;
    let mut n: u64 = 0;
    let database_bytes = |conn: &Connection| -> rusqlite::Result<u64> {
        conn.query_row(
            "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()",
            [],
            |r| r.get(0),
        )
    };
    while database_bytes(&conn)? < target {
        let tx = conn.unchecked_transaction()?;
        {
            let mut issue = tx.prepare(
                "INSERT INTO issue (key, jira_id, issue_type, summary, description, status, priority, assignee,
                    reporter, labels, epic_key, sprint, duedate, created_at, updated_at, fields, synced_at)
                 VALUES (?1, ?2, 'Задача', ?3, ?4, 'В работе', 'Средний', 'ivanov', 'petrov', '[\"AWPCA\"]',
                    ?5, 'Sprint 5', '2026-04-01', '2026-01-01T00:00:00Z', '2026-02-01T00:00:00Z', ?6, '2026-03-01T00:00:00Z')",
            )?;
            let mut note = tx.prepare(
                "INSERT INTO issue_note (issue_key, author, body, created_at) VALUES (?1, 'ivanov', ?2, '2026-03-01T00:00:00Z')",
            )?;
            let mut link = tx.prepare(
                "INSERT OR IGNORE INTO issue_link (jira_id, source_key, target_key, link_type) VALUES (?1, ?2, ?3, 'Blocks')",
            )?;
            for _ in 0..5000 {
                n += 1;
                let key = format!("AURORA-{n}");
                let description = words.sentence(60);
                let fields = serde_json::json!({
                    "summary": words.sentence(8),
                    "description": description,
                    "labels": ["AWPCA"],
                    "status": {"name": "В работе", "id": "3"},
                    "customfield_10101": format!("AURORA-{}", n / 50 + 1),
                    "customfield_10105": [format!("com.atlassian.greenhopper.service.sprint.Sprint@1a2b[id=5,rapidViewId=4216,state=ACTIVE,name=Sprint 5,startDate=2026-03-01T10:00:00.000+03:00,endDate=2026-03-15T10:00:00.000+03:00,completeDate=<null>,sequence=5]")],
                    "comment": {"comments": [{"id": n.to_string(), "body": words.sentence(40), "author": {"name": "ivanov"}}]},
                    "history": words.sentence(200),
                });
                issue.execute(params![
                    key,
                    n.to_string(),
                    words.sentence(8),
                    description,
                    format!("AURORA-{}", n / 50 + 1),
                    fields.to_string()
                ])?;
                if n.is_multiple_of(4) {
                    note.execute(params![key, words.sentence(30)])?;
                }
                if n > 1 {
                    link.execute(params![n.to_string(), key, format!("AURORA-{}", n - 1)])?;
                }
            }
        }
        let batch = n / 5000;
        tx.execute("INSERT INTO batch (id, title, author, created_at) VALUES (?1, 'план', 'ivanov', '2026-03-01T00:00:00Z')", [batch])?;
        for seq in 1..=100 {
            let status = match seq % 4 {
                0 => "claimed",
                1 => "queued",
                _ => "done",
            };
            tx.execute(
                "INSERT INTO command (batch_id, seq, type, params, status) VALUES (?1, ?2, 'comment', ?3, ?4)",
                params![batch, seq, serde_json::json!({"key": format!("AURORA-{seq}"), "body": "текст"}).to_string(), status],
            )?;
        }
        tx.commit()?;
    }
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    drop(conn);
    println!("{n} issues");
    Ok(())
}
