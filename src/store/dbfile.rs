//! The database file as bytes on disk, below both the backups and the health checks: the file
//! opened once for the life of the process (for a plain copy, for reading the header's mark),
//! and where in the header the hub's mark lies.

use super::{Result, StoreError, io_error};
use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;
use std::sync::Mutex;

/// Where SQLite keeps the `application_id` in the database header (sqlite.org/fileformat.html,
/// 1.3: "68 4 The Application ID set by PRAGMA application_id").
pub(super) const MARK_OFFSET: u64 = 68;

/// The database files this process opened with `std::fs` to copy them, by device and inode.
/// Never closed: closing any descriptor of a file drops every POSIX lock the process holds on it,
/// SQLite's included (sqlite.org, "How To Corrupt An SQLite Database File", 2.2), so a descriptor
/// opened here lives as long as the process, as SQLite keeps its own. (An inode held open is
/// never reused, so a key names one file for good.)
static DATABASE_FILES: Mutex<BTreeMap<(u64, u64), &'static File>> = Mutex::new(BTreeMap::new());

/// The database file at `db_path`, opened once for the life of the process.
pub(super) fn database_file(db_path: &Path) -> Result<&'static File> {
    use std::os::unix::fs::MetadataExt;
    let failed = |what: &str| io_error(format!("{what} {}", db_path.display()));
    let metadata = std::fs::metadata(db_path).map_err(failed("не удалось прочитать"))?;
    let key = (metadata.dev(), metadata.ino());
    let mut files = DATABASE_FILES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(file) = files.get(&key) {
        return Ok(file);
    }
    let file: &'static File = Box::leak(Box::new(
        File::open(db_path).map_err(failed("не удалось открыть"))?,
    ));
    let opened = file.metadata().map_err(failed("не удалось прочитать"))?;
    files.insert((opened.dev(), opened.ino()), file);
    if (opened.dev(), opened.ino()) != key {
        return Err(StoreError::Io {
            context: format!("{} заменён во время копирования", db_path.display()),
            source: std::io::Error::other("другой файл"),
        });
    }
    Ok(file)
}
