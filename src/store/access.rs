//! Whether this process may open a database file at all, asked of the kernel before SQLite is:
//! SQLite answers a file it may not open with `SQLITE_CANTOPEN` (or an I/O error on the first
//! read), which says nothing of permissions, and the operator read «ошибка ввода-вывода базы,
//! запись не сделана» for a root-owned 0600 backup. access(2) with `AT_EACCESS` asks with the
//! effective user, as `open` will.

use std::path::{Path, PathBuf};

use rustix::fs::{Access, CWD};

use super::{Result, StoreError};

/// What an open needs of the database's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// Reading the file (and its WAL when there is one): `status`, a backup being restored.
    Read,
    /// Reading and writing the file, its WAL and shared memory, and making them in the folder.
    Write,
}

/// Refuses, naming EACCES, the file, its owner, the user we are and the `runuser` line to type,
/// when this process may not read (or write, as `need` says) the database at `path`, the
/// journals beside it, or its folder. A path that does not exist is not this check's to refuse.
pub(crate) fn check(path: &Path, need: Need) -> Result<()> {
    let mut files: Vec<(PathBuf, Access)> = Vec::new();
    let (file_access, journal_access) = match need {
        Need::Read => (Access::READ_OK, Access::READ_OK),
        Need::Write => (
            Access::READ_OK | Access::WRITE_OK,
            Access::READ_OK | Access::WRITE_OK,
        ),
    };
    files.push((path.to_path_buf(), file_access));
    for suffix in ["-wal", "-shm"] {
        if need == Need::Read && suffix == "-shm" {
            // A reader that cannot write the shared memory reads the file as immutable.
            continue;
        }
        let mut journal = path.as_os_str().to_owned();
        journal.push(suffix);
        files.push((PathBuf::from(journal), journal_access));
    }
    if need == Need::Write {
        // The WAL and the shared memory are made in the folder, and the backups beside it.
        files.push((super::data_dir_of(path), Access::WRITE_OK | Access::EXEC_OK));
    }
    for (file, access) in files {
        // Only EACCES: a missing file, an immutable one (EPERM) or a read-only file system
        // (EROFS) are faults of the file, not of who we are, and SQLite's own answer says them.
        if let Err(rustix::io::Errno::ACCESS) =
            rustix::fs::accessat(CWD, &file, access, rustix::fs::AtFlags::EACCESS)
        {
            return Err(denied(&file, access));
        }
    }
    Ok(())
}

/// The refusal for `file`, which this process may not use as `access` asks.
fn denied(file: &Path, access: Access) -> StoreError {
    use std::os::unix::fs::MetadataExt;
    let what = if access.contains(Access::WRITE_OK) {
        "чтение и запись"
    } else {
        "чтение"
    };
    let me = rustix::process::geteuid().as_raw();
    let me = user_name(me).unwrap_or_else(|| format!("uid {me}"));
    let owner = std::fs::metadata(file).map(|meta| meta.uid());
    let (owner_words, runuser) = match owner {
        Ok(uid) => {
            let name = user_name(uid).unwrap_or_else(|| uid.to_string());
            let typed: Vec<String> = std::env::args().skip(1).collect();
            (
                format!("владелец {name}, права {:04o}", mode_of(file)),
                format!(
                    "; запустите команду от имени владельца: runuser -u {name} -- {} {}",
                    crate::program(),
                    typed.join(" ")
                ),
            )
        }
        Err(_) => ("владельца не узнать".to_string(), String::new()),
    };
    StoreError::Denied(format!(
        "нет прав на {what} {} (EACCES, отказано в доступе): {owner_words}, а команда запущена от пользователя {me}; ничего не сделано{runuser}",
        file.display()
    ))
}

fn mode_of(file: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(file).map_or(0, |meta| meta.permissions().mode() & 0o7777)
}

/// The name of the user `uid` in `/etc/passwd` (name:password:uid:…), if there is one.
pub(crate) fn user_name(uid: u32) -> Option<String> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let _password = fields.next()?;
        (fields.next()?.parse::<u32>().ok()? == uid).then(|| name.to_string())
    })
}

/// Whether a new open of the database at `path` for writing would succeed now: the file, its
/// `-wal` and `-shm` (those that exist) and its folder, asked of the kernel without opening
/// anything (another descriptor of the file, closed, would drop the process's POSIX locks).
/// EPERM (an immutable file), EROFS (a read-only mount) and EACCES all say no.
pub(crate) fn writable(path: &Path) -> bool {
    let ask = |file: &Path, access: Access| {
        rustix::fs::accessat(CWD, file, access, rustix::fs::AtFlags::EACCESS)
    };
    let read_write = Access::READ_OK | Access::WRITE_OK;
    ask(path, read_write).is_ok()
        && ["-wal", "-shm"].iter().all(|suffix| {
            let mut journal = path.as_os_str().to_owned();
            journal.push(suffix);
            matches!(
                ask(Path::new(&journal), read_write),
                Ok(()) | Err(rustix::io::Errno::NOENT)
            )
        })
        && ask(
            &super::data_dir_of(path),
            Access::WRITE_OK | Access::EXEC_OK,
        )
        .is_ok()
}
