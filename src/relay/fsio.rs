//! File operations of the relay, safe on a shared folder: a new file is written under a name
//! starting with `.`, synced, then renamed to its final name (which must not exist: nothing is
//! ever overwritten), and the folder is synced; moves never replace a file either.
//!
//! Only the hub writes into `outbox/`, `archive/` and `rejected/` (one daemon per database), so
//! "check, then rename" cannot race with another writer there.

use std::path::{Path, PathBuf};

/// The mode of files the hub writes into the relay folder: read and write for the owner and the
/// share's group, nothing for others.
pub(crate) const RELAY_FILE_MODE: u32 = 0o660;

/// Writes `bytes` as `dir/name` unless that file exists. Returns whether it wrote.
pub(crate) fn write_new(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<bool> {
    let target = dir.join(name);
    if target.exists() {
        return Ok(false);
    }
    // A name nobody can plant a link at first, created new: the share is writable by others.
    let temp = crate::sharefs::temp_name(dir, name);
    let written = (|| {
        // The agent reads these across the share, often as another user of a shared group.
        let mut file = crate::sharefs::create_new(&temp, RELAY_FILE_MODE)?;
        std::io::Write::write_all(&mut file, bytes)?;
        file.sync_all()?;
        drop(file);
        if target.exists() {
            return Ok(false);
        }
        std::fs::rename(&temp, &target)?;
        sync_dir(dir)?;
        Ok(true)
    })();
    if !matches!(written, Ok(true)) {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

/// A name in `dir` that no file has: `name`, else `name.1`, `name.2`, …
pub(crate) fn free_name(dir: &Path, name: &str) -> PathBuf {
    let first = dir.join(name);
    if !first.exists() && first.symlink_metadata().is_err() {
        return first;
    }
    (1..)
        .map(|n| dir.join(format!("{name}.{n}")))
        .find(|p| p.symlink_metadata().is_err())
        .unwrap_or(first)
}

/// Moves `from` into `dir` under `name` (or a free variant of it) and syncs both folders;
/// returns where it went.
pub(crate) fn move_into(from: &Path, dir: &Path, name: &str) -> std::io::Result<PathBuf> {
    let target = move_into_unsynced(from, dir, name)?;
    sync_dir(dir)?;
    if let Some(parent) = from.parent() {
        sync_dir(parent)?;
    }
    Ok(target)
}

/// Moves `from` into `dir` under `name` (or a free variant of it) without syncing the folders:
/// the caller makes the move durable later.
pub(crate) fn move_into_unsynced(from: &Path, dir: &Path, name: &str) -> std::io::Result<PathBuf> {
    let target = free_name(dir, name);
    std::fs::rename(from, &target)?;
    Ok(target)
}

/// Opens a request file for reading without following a link and without blocking (a FIFO
/// swapped in for the file must not hang the relay), and returns it with what `fstat` of the
/// opened file says: the type checked is the type of what was opened.
pub(crate) fn open_request(
    path: &Path,
) -> std::io::Result<(std::fs::File, super::decide::FileFacts)> {
    let (file, meta) = crate::sharefs::open(path, false)?;
    Ok((
        file,
        super::decide::FileFacts {
            regular: meta.is_file(),
            len: meta.len(),
            modified: meta.modified().ok(),
        },
    ))
}

pub(crate) use crate::sharefs::read_limited;

/// What `lstat` says of a name (a link is not regular, whatever it points to).
pub(crate) fn lstat_facts(path: &Path) -> Option<super::decide::FileFacts> {
    let meta = path.symlink_metadata().ok()?;
    Some(super::decide::FileFacts {
        regular: meta.file_type().is_file(),
        len: meta.len(),
        modified: meta.modified().ok(),
    })
}

/// Removes whatever `path` names (a file, a link, a FIFO, a whole folder), without following
/// links.
pub(crate) fn remove_any(path: &Path) -> std::io::Result<()> {
    match path.symlink_metadata() {
        Ok(meta) if meta.file_type().is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error),
    }
}

pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        assert!(write_new(dir.path(), "a.json", b"one").unwrap());
        let mode = std::fs::metadata(dir.path().join("a.json"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(
            mode, RELAY_FILE_MODE,
            "readable by the share's group whatever the umask"
        );
        assert!(!write_new(dir.path(), "a.json", b"two").unwrap());
        assert_eq!(std::fs::read(dir.path().join("a.json")).unwrap(), b"one");
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
            .collect();
        assert!(leftovers.is_empty(), "no temporary file is left");

        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join("a.json"), b"x").unwrap();
        let moved = move_into(&other.path().join("a.json"), dir.path(), "a.json").unwrap();
        assert_eq!(moved, dir.path().join("a.json.1"));
        assert_eq!(std::fs::read(dir.path().join("a.json")).unwrap(), b"one");
    }
}
