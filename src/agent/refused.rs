//! Credentials Jira's login refused, remembered across restarts and `--check` (design:
//! docs/design/agent-credentials.md). Each failed login counts toward Data Center's CAPTCHA
//! (after 3) and the directory's lockout (docs/jira-field-notes.md, "Failed logins count"), so
//! a refused secret is never sent again until its source gives another one: not after an hour,
//! not after a restart, not by root's `--check`.
//!
//! Only a keyed hash of the refused `Authorization` value is kept (HMAC-SHA-256 under a random
//! key of the state folder's own), never the secret: the file tells whether the secret in use is
//! the refused one, and nothing about either to whoever reads it.

use ring::hmac;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The file of the refused fingerprint, in the state folder.
const REFUSED_FILE: &str = "refused-credentials.json";
/// The key of the fingerprints, in the state folder (32 random bytes, 0600).
const KEY_FILE: &str = "fingerprint.key";

/// A refusal remembered: when and why (Jira's words, never the secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Remembered {
    pub refused_at: String,
    pub reason: String,
}

/// The agent's state folder, where refusals are kept (`None`: none is known; a refusal is then
/// remembered only while the process runs).
#[derive(Debug, Clone)]
pub(crate) struct RefusedStore {
    dir: Option<PathBuf>,
}

impl RefusedStore {
    pub(crate) fn new(dir: Option<PathBuf>) -> RefusedStore {
        RefusedStore { dir }
    }

    /// The refusal remembered for this `Authorization` value, when it is the refused one.
    pub(crate) fn refused(&self, authorization: &str) -> Option<Remembered> {
        let dir = self.dir.as_deref()?;
        let text = std::fs::read_to_string(dir.join(REFUSED_FILE)).ok()?;
        let value: Value = serde_json::from_str(&text).ok()?;
        let key = read_key(dir)?;
        let expected = hex(&fingerprint(&key, authorization));
        let stored = value["fingerprint"].as_str()?;
        if !crate::domain::constant_time_eq(stored.as_bytes(), expected.as_bytes()) {
            return None;
        }
        Some(Remembered {
            refused_at: value["refused_at"].as_str().unwrap_or_default().to_string(),
            reason: value["reason"].as_str().unwrap_or_default().to_string(),
        })
    }

    /// Remembers that Jira refused this `Authorization` value (replacing any earlier refusal:
    /// only the secret in use matters). A state folder that cannot be written is logged: the
    /// refusal then lasts as long as the process.
    pub(crate) fn remember(&self, authorization: &str, refused_at: &str, reason: &str) {
        let Some(dir) = self.dir.as_deref() else {
            return;
        };
        let written = key_of(dir).and_then(|key| {
            let record = json!({
                "fingerprint": hex(&fingerprint(&key, authorization)),
                "refused_at": refused_at,
                "reason": reason,
            });
            write_private(dir, REFUSED_FILE, record.to_string().as_bytes())
        });
        if let Err(error) = written {
            tracing::warn!(dir = %dir.display(), %error, "the refusal of the credentials could not be kept in the state folder: a restart would send them again");
        }
    }

    /// The credentials in use were accepted: no refusal is remembered any more.
    pub(crate) fn forget(&self) {
        if let Some(dir) = self.dir.as_deref() {
            let _ = std::fs::remove_file(dir.join(REFUSED_FILE));
        }
    }
}

fn fingerprint(key: &[u8], authorization: &str) -> Vec<u8> {
    let key = hmac::Key::new(hmac::HMAC_SHA256, key);
    hmac::sign(&key, authorization.as_bytes()).as_ref().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn read_key(dir: &Path) -> Option<Vec<u8>> {
    std::fs::read(dir.join(KEY_FILE))
        .ok()
        .filter(|key| key.len() == 32)
}

/// The folder's key, made (32 random bytes) when there is none yet.
fn key_of(dir: &Path) -> std::io::Result<Vec<u8>> {
    if let Some(key) = read_key(dir) {
        return Ok(key);
    }
    let mut key = vec![0u8; 32];
    getrandom::fill(&mut key).map_err(|e| std::io::Error::other(e.to_string()))?;
    write_private(dir, KEY_FILE, &key)?;
    Ok(key)
}

/// Writes `name` in `dir` whole (a temporary file renamed over it), readable by its owner only;
/// owned by the folder's owner, so that root's `--check` leaves files the service can read.
fn write_private(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    std::fs::create_dir_all(dir)?;
    let temporary = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    let folder = std::fs::metadata(dir)?;
    if rustix::process::geteuid().is_root() && folder.uid() != 0 {
        rustix::fs::fchown(
            &file,
            Some(rustix::fs::Uid::from_raw(folder.uid())),
            Some(rustix::fs::Gid::from_raw(folder.gid())),
        )
        .map_err(std::io::Error::from)?;
    }
    drop(file);
    std::fs::rename(&temporary, dir.join(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_kept_by_fingerprint_never_by_secret() {
        let dir = tempfile::tempdir().unwrap();
        let store = RefusedStore::new(Some(dir.path().to_path_buf()));
        assert_eq!(store.refused("Basic b2xk"), None);
        store.remember("Basic b2xk", "2026-12-05T09:00:00Z", "HTTP 401");
        let again = RefusedStore::new(Some(dir.path().to_path_buf()));
        assert_eq!(
            again.refused("Basic b2xk"),
            Some(Remembered {
                refused_at: "2026-12-05T09:00:00Z".into(),
                reason: "HTTP 401".into()
            })
        );
        assert_eq!(again.refused("Basic bmV3"), None, "another secret is tried");
        let text = std::fs::read_to_string(dir.path().join(REFUSED_FILE)).unwrap();
        assert!(!text.contains("b2xk"), "{text}");
        use std::os::unix::fs::PermissionsExt;
        for file in [REFUSED_FILE, KEY_FILE] {
            let mode = std::fs::metadata(dir.path().join(file))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{file}");
        }
        again.forget();
        assert_eq!(store.refused("Basic b2xk"), None);
        // Without a state folder nothing is kept, and nothing fails.
        let none = RefusedStore::new(None);
        none.remember("Basic b2xk", "t", "r");
        assert_eq!(none.refused("Basic b2xk"), None);
    }
}
