//! Files in a folder that others write too: the relay's shared folder, where the hub's and the
//! agent's service users, and whoever else the file server lets in, make and replace names. Every
//! name there may have been planted, so:
//!
//! - a file is written only as a new one (`O_CREAT|O_EXCL|O_NOFOLLOW`) under a name nobody can
//!   guess in advance ([`temp_name`]), then renamed: a link planted at a predictable temporary
//!   name would otherwise have the write truncate whatever it points to;
//! - a file is read without following a link and without blocking (`O_NOFOLLOW|O_NONBLOCK`: a
//!   FIFO put in its place must not hang the reader), only when `fstat` of what was opened says
//!   it is a regular file, and only up to a size given by the caller (a sparse file of many
//!   gigabytes, or a link to `/dev/zero`, must not be read into memory).
//!
//! Used by the relay (hub side) and by the agent's relay transport; it depends on nothing else
//! of the crate.

use std::fs::File;
use std::io::{Error, ErrorKind, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// A temporary name in `dir` for a file about to become `stem`: `.{stem}.{16 random hex}.tmp`.
/// Random, not the process id or a counter: a name another user of the share can predict is a
/// name they can plant a link at first.
pub(crate) fn temp_name(dir: &Path, stem: &str) -> PathBuf {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_err() {
        // No kernel randomness (never seen on Linux): the clock's nanoseconds are still not a
        // name anyone can write in advance, and `O_EXCL` refuses a name that is taken anyway.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or_default();
        bytes = (nanos ^ u64::from(std::process::id()).rotate_left(32)).to_le_bytes();
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    dir.join(format!(".{stem}.{hex}.tmp"))
}

/// Creates `path` as a new file for writing, with `mode`: fails when anything (a file, a link, a
/// FIFO) already has that name, and never follows a link.
pub(crate) fn create_new(path: &Path, mode: u32) -> std::io::Result<File> {
    use std::os::unix::fs::PermissionsExt;
    let file = File::options()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NOCTTY)
        .mode(mode)
        .open(path)?;
    // The daemon's umask (0077 under systemd) must not take the share's group's access away.
    file.set_permissions(std::fs::Permissions::from_mode(mode))?;
    Ok(file)
}

/// Opens `path` without following a link and without blocking, for reading (and writing when
/// `write`), and returns it with what `fstat` of the opened file says: the type checked is the
/// type of what was opened, not of what a name pointed to a moment before.
pub(crate) fn open(path: &Path, write: bool) -> std::io::Result<(File, std::fs::Metadata)> {
    let file = File::options()
        .read(true)
        .write(write)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|error| {
            if error.raw_os_error() == Some(libc::ELOOP) {
                Error::new(
                    ErrorKind::InvalidData,
                    "это ссылка, а по ссылкам в папке обмена не ходим",
                )
            } else {
                error
            }
        })?;
    let meta = file.metadata()?;
    Ok((file, meta))
}

/// Opens `path` as [`open`] does and checks that it is a regular file of at most `limit` bytes.
pub(crate) fn open_regular(
    path: &Path,
    write: bool,
    limit: u64,
) -> std::io::Result<(File, std::fs::Metadata)> {
    let (file, meta) = open(path, write)?;
    if !meta.is_file() {
        return Err(Error::new(
            ErrorKind::InvalidData,
            "не обычный файл (FIFO, устройство или папка)",
        ));
    }
    if meta.len() > limit {
        return Err(Error::new(
            ErrorKind::InvalidData,
            format!("{} байт, больше предела в {limit}", meta.len()),
        ));
    }
    Ok((file, meta))
}

/// Reads `path` whole when it is a regular file of at most `limit` bytes (and never more than
/// `limit` bytes, should it grow while read). `NotFound` when it is not there.
pub(crate) fn read(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let (mut file, meta) = open_regular(path, false, limit)?;
    read_limited(&mut file, limit, meta.len(), &|| {})
}

/// Reads at most `limit` bytes of `file`, calling `beat` between chunks (a slow share must not
/// look like a stuck reader). `expected`, the size `fstat` gave, is room made at once: a buffer
/// grown by doubling would, at its last doubling, hold a large file's bytes twice.
pub(crate) fn read_limited(
    file: &mut File,
    limit: u64,
    expected: u64,
    beat: &dyn Fn(),
) -> std::io::Result<Vec<u8>> {
    // One byte more, to see the end without growing.
    let mut bytes = Vec::with_capacity(expected.min(limit).saturating_add(1) as usize);
    let mut chunk = vec![0u8; (1 << 20).min(limit.saturating_add(1)) as usize];
    loop {
        let room = limit
            .saturating_sub(bytes.len() as u64)
            .min(chunk.len() as u64) as usize;
        if room == 0 {
            break;
        }
        let n = match file.read(&mut chunk[..room]) {
            Ok(n) => n,
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        if n == 0 {
            break;
        }
        bytes.extend_from_slice(&chunk[..n]);
        beat();
    }
    Ok(bytes)
}

/// The file system `dir` is on, as `/proc/self/mountinfo` names it (`fuse.sshfs`, `cifs`, `nfs4`,
/// `fuse.rclone`, `ext4`…): the mount whose point is the longest prefix of `dir`.
pub(crate) fn fs_type(dir: &Path) -> Option<String> {
    let dir = std::fs::canonicalize(dir).ok()?;
    let table = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    table
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let point = unescape_mount(left.split(' ').nth(4)?);
            let fstype = right.split(' ').next()?.to_string();
            dir.starts_with(&point).then_some((point.len(), fstype))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, fstype)| fstype)
}

/// A mount point as mountinfo writes it: space, tab, newline and backslash as `\ooo`.
fn unescape_mount(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|digits| {
            std::str::from_utf8(digits)
                .ok()
                .and_then(|d| u8::from_str_radix(d, 8).ok())
        });
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mount option that makes a share's client show another machine's new files at once, for
/// the file system `dir` is on, in one line. The caches and their defaults: sshfs(1) (`dir_cache`,
/// `cache_timeout`, 20 s), mount.cifs(8) (`actimeo`, 1 s; `cache=`), nfs(5) (`lookupcache`,
/// `actimeo`; `acdirmin` 30 s, `acdirmax` 60 s), rclone mount (`--dir-cache-time`, 5 min).
pub(crate) fn cache_advice(dir: &Path) -> String {
    advice_for(fs_type(dir).as_deref())
}

/// [`cache_advice`] for a file system named by its type (as another machine's mountinfo says).
pub(crate) fn advice_for(fstype: Option<&str>) -> String {
    match fstype {
        Some("fuse.sshfs") => {
            "это sshfs: смонтируйте с -o dir_cache=no (или -o cache_timeout=1)".to_string()
        }
        Some("cifs" | "smb3") => {
            "это CIFS/SMB: смонтируйте с actimeo=1 (или cache=none)".to_string()
        }
        Some(nfs) if nfs.starts_with("nfs") => {
            "это NFS: смонтируйте с lookupcache=positive,actimeo=1 (или noac)".to_string()
        }
        Some("fuse.rclone") => {
            "это rclone mount: запускайте с --dir-cache-time 0s --vfs-cache-mode off".to_string()
        }
        Some(other) => format!(
            "файловая система {other}: уменьшите кеш каталогов и атрибутов её клиента до 1 с (параметры монтирования)"
        ),
        None => "уменьшите кеш каталогов и атрибутов клиента общей папки до 1 с (параметры монтирования)"
            .to_string(),
    }
}

/// Why the file system `dir` is on keeps no POSIX modes, in words, or `None` when it keeps them.
/// SMB without the POSIX extensions has none: the kernel's client shows every file with the
/// mount's `file_mode`/`dir_mode` and a chmod changes nothing (mount.cifs(8), `file_mode`,
/// `dynperm`), rclone's mount shows its fixed `--file-perms`/`--dir-perms` and ignores a chmod
/// (rclone mount, "Permissions"), smbnetfs likewise. Tried rather than assumed from the type:
/// a new file here is given two modes in turn, each read back (a server with the POSIX
/// extensions keeps both, whatever the client's name); only when the try itself fails is the
/// type taken as the answer.
pub(crate) fn modes_missing(dir: &Path) -> Option<String> {
    modes_missing_for(fs_type(dir).as_deref(), chmod_sticks(dir))
}

/// [`modes_missing`] from the file system's type and what the try gave (`Ok(true)`: both modes
/// stuck).
pub(crate) fn modes_missing_for(
    fstype: Option<&str>,
    sticks: std::io::Result<bool>,
) -> Option<String> {
    let named = fstype.unwrap_or("?");
    match sticks {
        Ok(true) => None,
        Ok(false) => Some(format!(
            "файловая система {named} не хранит режимы POSIX (chmod нового файла не меняет его режим)"
        )),
        Err(error) => matches!(
            fstype,
            Some("cifs" | "smb3" | "fuse.rclone" | "fuse.smbnetfs" | "smbnetfs")
        )
        .then(|| {
            format!(
                "файловая система {named} — SMB без расширений POSIX, режимов у неё нет (chmod не проверен: «{error}»)"
            )
        }),
    }
}

/// Whether a new file in `dir` keeps the modes it is given: 0660 when made, 0640 after a chmod.
/// The file (a `.`-name with random parts) is removed.
fn chmod_sticks(dir: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::PermissionsExt;
    let path = temp_name(dir, "jira-hub-modes");
    let result = (|| {
        let file = create_new(&path, 0o660)?;
        let made = file.metadata()?.permissions().mode() & 0o777;
        file.set_permissions(std::fs::Permissions::from_mode(0o640))?;
        let changed = std::fs::symlink_metadata(&path)?.permissions().mode() & 0o777;
        Ok(made == 0o660 && changed == 0o640)
    })();
    let _ = std::fs::remove_file(&path);
    result
}

/// How long the probe waits before it tries again a step refused while its file is still open.
const OPEN_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);

/// Runs `op` again, up to ten times `pause` apart, while it fails with `EIO` or `EBUSY`: an SMB
/// server refuses to rename over or delete a file another handle still holds
/// (`STATUS_SHARING_VIOLATION`; the kernel's cifs client maps it to `EBUSY`, rclone's mount
/// passes it on as `EIO`: its log here said "A file cannot be opened because the share access
/// flags are incompatible" for the probe's own file), and a FUSE client closes a file on the
/// server only after `close(2)` has returned (the kernel sends FUSE's RELEASE asynchronously), so
/// the file the probe has just written and closed may still be open there for a moment. A
/// refusal that lasts is told as it is.
fn while_open(
    mut op: impl FnMut() -> std::io::Result<()>,
    pause: std::time::Duration,
) -> std::io::Result<()> {
    let mut tries = 0;
    loop {
        match op() {
            Err(error)
                if matches!(error.raw_os_error(), Some(libc::EIO | libc::EBUSY)) && tries < 10 =>
            {
                tries += 1;
                std::thread::sleep(pause);
            }
            other => return other,
        }
    }
}

/// What this process can actually do in `dir`, a folder of the share, whatever its modes say
/// (SMB without POSIX extensions has none, or maps them; an ACL may allow what a mode denies):
/// create a file, rename one over another of its own, read it back, delete both. Each step's
/// name and its failure, in order; the steps after a failure are not tried. Nothing is left
/// behind: the files are `.`-names (which the relay never takes) with random parts.
pub(crate) fn probe(dir: &Path) -> Vec<(&'static str, std::io::Result<()>)> {
    use std::io::Write;
    let first = temp_name(dir, "jira-hub-probe");
    let second = temp_name(dir, "jira-hub-probe");
    let mut steps: Vec<(&'static str, std::io::Result<()>)> = Vec::new();
    let mut step = |name: &'static str, result: std::io::Result<()>| {
        let ok = result.is_ok();
        steps.push((name, result));
        ok
    };
    let body = b"jira-hub probe\n";
    let written = |path: &Path| -> std::io::Result<()> {
        let mut file = create_new(path, 0o660)?;
        file.write_all(body)?;
        file.sync_all()
    };
    let _ = step("создать файл", written(&first))
        && step("создать второй", written(&second))
        && step(
            "переименовать поверх существующего",
            while_open(|| std::fs::rename(&first, &second), OPEN_PAUSE),
        )
        && step(
            "прочитать",
            read(&second, 4096).and_then(|read| {
                if read == body {
                    Ok(())
                } else {
                    Err(Error::new(
                        ErrorKind::InvalidData,
                        "прочитано не то, что записано",
                    ))
                }
            }),
        )
        && step(
            "удалить",
            while_open(|| std::fs::remove_file(&second), OPEN_PAUSE),
        );
    let _ = std::fs::remove_file(&first);
    let _ = std::fs::remove_file(&second);
    steps
}

/// This machine's clock and the file server's: a new file written in `dir` (then removed) and its
/// modification time, which the file server sets.
pub(crate) fn server_clock(
    dir: &Path,
) -> std::io::Result<(std::time::SystemTime, std::time::SystemTime)> {
    use std::io::Write;
    let path = temp_name(dir, "jira-hub-clock");
    let result = (|| {
        let mut file = create_new(&path, 0o660)?;
        let local = std::time::SystemTime::now();
        file.write_all(b"clock\n")?;
        file.sync_all()?;
        Ok((local, file.metadata()?.modified()?))
    })();
    let _ = std::fs::remove_file(&path);
    result
}

/// The steps of [`probe`] in one line: `None` when all passed, else the first that failed, its
/// error, and the steps that passed before it.
pub(crate) fn probe_failure(steps: &[(&'static str, std::io::Result<()>)]) -> Option<String> {
    let failed = steps.iter().position(|(_, result)| result.is_err())?;
    let (name, result) = &steps[failed];
    let error = result
        .as_ref()
        .err()
        .map(ToString::to_string)
        .unwrap_or_default();
    let before: Vec<&str> = steps[..failed].iter().map(|(name, _)| *name).collect();
    Some(if before.is_empty() {
        format!("не удаётся {name}: «{error}»")
    } else {
        format!(
            "не удаётся {name}: «{error}» (удалось: {})",
            before.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn temporary_names_cannot_be_guessed() {
        let dir = Path::new("/share");
        let a = temp_name(dir, "x.json");
        let b = temp_name(dir, "x.json");
        assert_ne!(a, b);
        let name = a.file_name().unwrap().to_str().unwrap();
        assert!(
            name.starts_with(".x.json.") && name.ends_with(".tmp"),
            "{name}"
        );
        assert_eq!(name.len(), ".x.json.".len() + 16 + ".tmp".len());
    }

    #[test]
    fn a_new_file_is_never_made_through_a_planted_name() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let planted = dir.path().join("planted");
        symlink(&victim, &planted).unwrap();
        let error = create_new(&planted, 0o660).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::AlreadyExists);
        symlink(dir.path().join("nothing-yet"), dir.path().join("dangling")).unwrap();
        assert!(create_new(&dir.path().join("dangling"), 0o660).is_err());
        assert!(!dir.path().join("nothing-yet").exists());
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    }

    #[test]
    fn reads_refuse_links_fifos_devices_and_huge_files() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        std::fs::write(&plain, b"hello").unwrap();
        assert_eq!(read(&plain, 5).unwrap(), b"hello");
        assert!(read(&plain, 4).is_err(), "over the limit");
        symlink(&plain, dir.path().join("link")).unwrap();
        assert!(read(&dir.path().join("link"), 100).is_err());
        symlink("/dev/zero", dir.path().join("zero")).unwrap();
        assert!(read(&dir.path().join("zero"), 100).is_err());
        let fifo = dir.path().join("fifo");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        let error = read(&fifo, 100).unwrap_err();
        assert!(error.to_string().contains("FIFO"), "{error}");
        let sparse = dir.path().join("sparse");
        File::create(&sparse).unwrap().set_len(20 << 30).unwrap();
        let error = read(&sparse, 4096).unwrap_err();
        assert!(error.to_string().contains("21474836480"), "{error}");
        assert_eq!(
            read(&dir.path().join("absent"), 100).unwrap_err().kind(),
            ErrorKind::NotFound
        );
    }

    #[test]
    fn each_share_gets_the_option_that_removes_its_cache() {
        assert!(advice_for(Some("fuse.sshfs")).contains("dir_cache=no"));
        assert!(advice_for(Some("cifs")).contains("actimeo"));
        assert!(advice_for(Some("nfs4")).contains("lookupcache"));
        assert!(advice_for(Some("fuse.rclone")).contains("--dir-cache-time"));
        assert!(advice_for(Some("ext4")).contains("ext4"));
        assert_eq!(unescape_mount("/mnt/my\\040share"), "/mnt/my share");
        assert!(fs_type(Path::new("/proc/self")).as_deref() == Some("proc"));
    }

    #[test]
    fn a_share_whose_chmod_does_not_stick_keeps_no_modes() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            modes_missing(dir.path()),
            None,
            "a local folder keeps modes"
        );
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "nothing left"
        );
        // rclone's SMB mount: the chmod succeeds and changes nothing.
        let said = modes_missing_for(Some("fuse.rclone"), Ok(false)).unwrap();
        assert!(
            said.contains("fuse.rclone") && said.contains("chmod"),
            "{said}"
        );
        // A Samba server with the POSIX extensions keeps modes through the kernel's client.
        assert_eq!(modes_missing_for(Some("cifs"), Ok(true)), None);
        // The try failed: the type decides.
        let refused = || Err(Error::from(ErrorKind::PermissionDenied));
        assert!(modes_missing_for(Some("cifs"), refused()).is_some());
        assert!(modes_missing_for(Some("fuse.smbnetfs"), refused()).is_some());
        assert_eq!(modes_missing_for(Some("ext4"), refused()), None);
        assert_eq!(modes_missing_for(None, refused()), None);
    }

    #[test]
    fn a_step_refused_while_its_file_is_still_open_is_tried_again() {
        let pause = std::time::Duration::from_millis(1);
        let mut left = 2;
        let result = while_open(
            || {
                if left == 0 {
                    return Ok(());
                }
                left -= 1;
                Err(Error::from_raw_os_error(libc::EIO))
            },
            pause,
        );
        assert!(result.is_ok(), "{result:?}");
        assert_eq!(left, 0);
        // Any other refusal is the answer at once; one that lasts is told.
        for (errno, expected) in [(libc::EACCES, 1), (libc::EBUSY, 11)] {
            let mut calls = 0;
            let result = while_open(
                || {
                    calls += 1;
                    Err(Error::from_raw_os_error(errno))
                },
                pause,
            );
            assert_eq!(result.unwrap_err().raw_os_error(), Some(errno));
            assert_eq!(calls, expected, "errno {errno}");
        }
    }

    #[test]
    fn a_probe_says_which_step_the_share_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let steps = probe(dir.path());
        assert_eq!(steps.len(), 5);
        assert_eq!(probe_failure(&steps), None);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "nothing left"
        );
        let gone = dir.path().join("not-there");
        let failure = probe_failure(&probe(&gone)).unwrap();
        assert!(failure.starts_with("не удаётся создать файл"), "{failure}");
    }
}
