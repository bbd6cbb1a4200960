//! `relay inspect PATH`, `relay validate PATH` and `relay init DIR`.

use super::Outcome;
use super::open_read_only_hub;
use crate::protocol::TokenCheck;
use crate::relay::inspect::{collect, escape_for_terminal, format_table, inspect_file};
use crate::service::HubConnection;
use anyhow::Context;
use std::path::Path;

/// `relay init DIR`: the relay folder made ready, saying what was made, the group the share's
/// folders have (the hub's and the agent's users must both be in it) and any folder whose mode
/// keeps that group out. Folders it made, and folders of its own user with another mode, get
/// [`crate::relay::FOLDER_MODE`] (2770) whatever the umask.
pub(crate) fn init(path: &Path) -> anyhow::Result<Outcome> {
    use std::os::unix::fs::MetadataExt;
    let made = crate::relay::init_folder(path)
        .with_context(|| format!("не удалось подготовить папку обмена {}", path.display()))?;
    if made.is_empty() {
        outln!("{}: already a relay folder; nothing made", path.display());
    }
    for made in &made {
        outln!("made {}", made.display());
    }
    let me = rustix::process::geteuid().as_raw();
    let mut wrong = 0;
    // A share without POSIX modes (SMB without its POSIX extensions) shows every folder with one
    // fixed mode whatever a chmod says: there the modes are not judged, what the user can do is
    // (below).
    let modeless = crate::sharefs::modes_missing(path);
    if let Some(reason) = &modeless {
        outln!(
            "{}: {reason}; modes and setgid are not checked there, what this user can do in each folder is",
            path.display()
        );
    }
    for folder in std::iter::once(path.to_path_buf())
        .chain(crate::relay::FOLDERS.iter().map(|name| path.join(name)))
        .filter(|_| modeless.is_none())
    {
        let meta = std::fs::metadata(&folder)
            .with_context(|| format!("не удалось прочитать папку {}", folder.display()))?;
        let mode = meta.mode() & 0o7777;
        if mode == crate::relay::FOLDER_MODE {
            continue;
        }
        if meta.uid() == me && !made.contains(&folder) {
            crate::relay::set_shared_mode(&folder)
                .with_context(|| format!("не удалось сменить режим папки {}", folder.display()))?;
            let now = std::fs::metadata(&folder)?.mode() & 0o7777;
            outln!("mode of {}: {mode:04o} → {now:04o}", folder.display());
            if now == crate::relay::FOLDER_MODE {
                continue;
            }
        }
        wrong += 1;
        let now = std::fs::metadata(&folder)?.mode() & 0o7777;
        eprintln!(
            "jira-hub: у папки {} режим {now:04o}, а нужен {:04o} (группа читает и пишет, setgid, чтобы файлы оставались в группе): {}",
            folder.display(),
            crate::relay::FOLDER_MODE,
            if meta.uid() == me {
                // Our own folder, and the kernel dropped the setgid bit: we are not in its group.
                "пользователь, который запустил relay init, не входит в её группу; выполните chmod 2770 от имени root".to_string()
            } else {
                format!(
                    "её владелец — другой пользователь (uid {}); выполните chmod 2770 {} от его имени или от имени root",
                    meta.uid(),
                    folder.display()
                )
            }
        );
    }
    // Modes are what the file system says they are; what counts is what the users can do there
    // (SMB without POSIX extensions keeps no modes, an ACL may allow what a mode denies).
    let fstype = crate::sharefs::fs_type(path).unwrap_or_else(|| "?".into());
    outln!("file system of {}: {fstype}", path.display());
    for folder in crate::relay::FOLDERS {
        match crate::sharefs::probe_failure(&crate::sharefs::probe(&path.join(folder))) {
            None => outln!("in {folder}/ this user creates, renames over, reads and deletes files"),
            Some(failure) => {
                wrong += 1;
                eprintln!("jira-hub: в {}/: {failure}", path.join(folder).display());
            }
        }
    }
    // The relay's lock is judged on the file server's clock: how far this machine's is from it.
    match crate::sharefs::server_clock(&path.join("inbox")) {
        Ok((local, server)) => {
            let (ahead, by) = match server.duration_since(local) {
                Ok(by) => ("ahead of", by),
                Err(behind) => ("behind", behind.duration()),
            };
            outln!(
                "the file server's clock is {:.1} s {ahead} this machine's (the relay's lock is judged on the file server's clock)",
                by.as_secs_f64()
            );
        }
        Err(error) => {
            wrong += 1;
            eprintln!("jira-hub: не удалось узнать часы файлового сервера: «{error}»");
        }
    }
    if modeless.is_some() {
        outln!(
            "who may use {}: the file server's users and ACLs decide (the share's own settings), not a group here; the hub's and the agent's accounts must both be let in",
            path.display()
        );
    } else {
        let gid = std::fs::metadata(path)?.gid();
        let group = group_name(gid).unwrap_or_else(|| format!("gid {gid}"));
        outln!(
            "group of {}: {group}; its folders are {:04o}: the hub's and the agent's users must both be in {group}",
            path.display(),
            crate::relay::FOLDER_MODE
        );
    }
    Ok(if wrong == 0 {
        Outcome::Success
    } else {
        Outcome::Negative
    })
}

/// The name of group `gid` in the system's group database (`/etc/group`; a group known only to
/// a directory service shows by its number).
fn group_name(gid: u32) -> Option<String> {
    let groups = std::fs::read_to_string("/etc/group").ok()?;
    groups.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let id = fields.nth(1)?;
        (id.parse::<u32>().ok()? == gid).then(|| name.to_string())
    })
}

pub(crate) fn inspect(db: &Path, path: &Path) -> anyhow::Result<Outcome> {
    let files =
        collect(path).with_context(|| format!("не удалось прочитать {}", path.display()))?;
    // Whether the hub applied a request, and whether its token is the hub's, come from its
    // database, when there is one; the folder can be inspected without it (on the agent's side
    // of the share, say).
    let mut hub = if db.is_file() {
        Some(open_read_only_hub(db)?)
    } else {
        eprintln!(
            "jira-hub: базы {} нет: токены не проверены, применены ли запросы, не показано (укажите --db)",
            db.display()
        );
        None
    };
    let agent_token = agent_token(hub.as_ref())?;
    let mut rows = Vec::new();
    for file in &files {
        let report = inspect_file(file, token_check(agent_token.as_ref()));
        let applied = match (&mut hub, &report.request_key) {
            (Some(hub), Some((kind, id))) => Some(match hub.request_handled_at(kind, id)? {
                Some(at) => format!("applied {at}"),
                // A claim in inbox/ the hub has not answered is one waiting for work (the hub
                // holds it until a command or its wait ends), not a file the hub passed over.
                None if report.kind == "claim"
                    && report.valid.is_ok()
                    && file
                        .parent()
                        .and_then(Path::file_name)
                        .is_some_and(|p| p == "inbox") =>
                {
                    "waiting claim, not answered yet".to_string()
                }
                None => "not applied".to_string(),
            }),
            _ => None,
        };
        rows.push((report, applied));
    }
    if files.is_empty() {
        eprintln!("jira-hub: в {} нет файлов папки обмена", path.display());
    }
    let base = if path.is_dir() {
        path
    } else {
        path.parent().unwrap_or(path)
    };
    out!("{}", format_table(&rows, base));
    Ok(Outcome::Success)
}

/// The agent token of the hub's database (`None` inside: the hub has none, so no request is
/// authentic); `None` outside when there is no database.
fn agent_token(hub: Option<&HubConnection>) -> anyhow::Result<Option<Option<String>>> {
    Ok(match hub {
        Some(hub) => Some(hub.tokens()?.map(|tokens| tokens.agent)),
        None => None,
    })
}

fn token_check(agent_token: Option<&Option<String>>) -> TokenCheck<'_> {
    match agent_token {
        Some(token) => TokenCheck::Expect(token.as_deref()),
        None => TokenCheck::Skip,
    }
}

pub(crate) fn validate(db: &Path, path: &Path) -> anyhow::Result<Outcome> {
    let files =
        collect(path).with_context(|| format!("не удалось прочитать {}", path.display()))?;
    // The token is judged as the hub judges it when its database is at hand.
    let hub = if db.is_file() {
        Some(open_read_only_hub(db)?)
    } else {
        None
    };
    let agent_token = agent_token(hub.as_ref())?;
    let mut invalid = 0;
    for file in &files {
        let report = inspect_file(file, token_check(agent_token.as_ref()));
        match &report.valid {
            Ok(()) => outln!(
                "ok       {}",
                escape_for_terminal(&file.display().to_string())
            ),
            Err(why) => {
                invalid += 1;
                outln!(
                    "INVALID  {}: {}",
                    escape_for_terminal(&file.display().to_string()),
                    escape_for_terminal(why)
                );
            }
        }
    }
    outln!(
        "{}, {} invalid",
        crate::domain::words::count_en(files.len() as u64, "file"),
        invalid
    );
    Ok(if invalid == 0 {
        Outcome::Success
    } else {
        Outcome::Negative
    })
}
