//! The install's layout as the binary sees it: `relay init` makes the share's
//! folders 2770 with setgid whatever the umask and names their group; the agent says in Russian
//! why it cannot read its config, with the path, the system's words and the layout; `jira-hub
//! man` opens man on a terminal and is roff when piped. The whole install, as the README says
//! it, is `scripts/install-test.sh` (run by `.ci/run`).

use crate::support::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::Command;

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().mode() & 0o7777
}

/// Under the hub's unit (`UMask=0077`) or a root shell (0022), `mkdir` alone gave 0700 or 0755:
/// the other side of the share could not write. Every folder made is 2770, the group named.
#[test]
fn relay_init_makes_group_folders_whatever_the_umask() {
    let dir = TestDir::new();
    let relay = dir.path().join("relay");
    let out = Command::new("sh")
        .arg("-c")
        .arg("umask 077 && exec \"$0\" relay init \"$1\"")
        .arg(env!("CARGO_BIN_EXE_jira-hub"))
        .arg(&relay)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    for folder in ["", "inbox", "outbox", "archive", "rejected"] {
        assert_eq!(
            mode(&relay.join(folder)),
            0o2770,
            "{folder}: {:o}",
            mode(&relay.join(folder))
        );
    }
    let gid = std::fs::metadata(&relay).unwrap().gid();
    let group = std::fs::read_to_string("/etc/group")
        .unwrap()
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            (fields.get(2) == Some(&gid.to_string().as_str())).then(|| fields[0].to_string())
        })
        .unwrap_or_else(|| format!("gid {gid}"));
    assert!(
        stdout.contains(&format!("group of {}: {group};", relay.display())),
        "{stdout}"
    );
    // The share itself, not only its modes: what this user can do in each folder, and the file
    // server's clock (on which the relay's lock is judged) against this machine's.
    for folder in ["inbox", "outbox", "archive", "rejected"] {
        assert!(
            stdout.contains(&format!(
                "in {folder}/ this user creates, renames over, reads and deletes files"
            )),
            "{stdout}"
        );
    }
    assert!(stdout.contains("file system of "), "{stdout}");
    assert!(stdout.contains("the file server's clock is "), "{stdout}");
    // A folder of its own user made earlier with another mode is put right, and said so.
    std::fs::set_permissions(relay.join("outbox"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = run_ok(&dir.db(), &["relay", "init", relay.to_str().unwrap()]);
    assert_eq!(mode(&relay.join("outbox")), 0o2770);
    assert!(
        out.stdout.contains(&format!(
            "mode of {}: 0755 → 2770",
            relay.join("outbox").display()
        )),
        "{out:?}"
    );
}

/// The agent's config it cannot read: one Russian line with the path, the system's words
/// quoted, and (for a permission) the layout the unit expects.
#[test]
fn the_agent_says_why_it_cannot_read_its_config() {
    let dir = TestDir::new();
    let missing = dir.path().join("agent.json");
    let out = Command::new(env!("CARGO_BIN_EXE_jira-hub"))
        .args(["agent", "--check", "--config"])
        .arg(&missing)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "Нет файла конфигурации агента {}: «No such file or directory (os error 2)»",
            missing.display()
        )),
        "{stderr}"
    );
    // A file the agent's user may not read: as root, the run drops to nobody (setpriv).
    std::fs::write(&missing, "{}").unwrap();
    std::fs::set_permissions(&missing, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let root = rustix::process::geteuid().is_root();
    let mut command = if root {
        if Command::new("setpriv").arg("--version").output().is_err() {
            eprintln!("skipped: the permission case needs setpriv (util-linux) when run as root");
            return;
        }
        let mut command = Command::new("setpriv");
        command
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(env!("CARGO_BIN_EXE_jira-hub"));
        command
    } else {
        Command::new(env!("CARGO_BIN_EXE_jira-hub"))
    };
    let out = command
        .args(["agent", "--check", "--config"])
        .arg(&missing)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if root && stderr.contains("Permission denied") && !stderr.contains("конфигурации")
    {
        // The binary itself is out of nobody's reach (a private target folder).
        eprintln!(
            "skipped: nobody cannot run {}: {stderr}",
            env!("CARGO_BIN_EXE_jira-hub")
        );
        return;
    }
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "Нет доступа на чтение к конфигурации агента {}: «Permission denied (os error 13)». Пользователь службы должен её читать: владелец root, группа jira-hub-agent, режим 0640",
            missing.display()
        )),
        "{stderr}"
    );
}

/// `jira-hub man` piped is the roff page; on a terminal (a pseudo-terminal from script(1)) it
/// opens in man, which formats it.
#[test]
fn man_is_roff_when_piped_and_opens_man_on_a_terminal() {
    let out = Command::new(env!("CARGO_BIN_EXE_jira-hub"))
        .arg("man")
        .output()
        .unwrap();
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        page.contains(".TH jira-hub 1"),
        "{}",
        &page[..page.len().min(400)]
    );
    let tools = ["script", "man"]
        .iter()
        .all(|tool| Command::new(tool).arg("--version").output().is_ok());
    if !tools {
        eprintln!("skipped: the terminal case needs script(1) and man(1)");
        return;
    }
    let out = Command::new("script")
        .args(["-qec"])
        .arg(format!("{} man", env!("CARGO_BIN_EXE_jira-hub")))
        .arg("/dev/null")
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .env("MANWIDTH", "100")
        .env("TERM", "dumb")
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(!shown.contains(".TH "), "roff on a terminal:\n{shown}");
    // man's header and footer line, which roff is not (bold headings may come overstruck).
    assert!(
        shown.contains("jira-hub(1)"),
        "not a formatted page:\n{shown}"
    );
}
