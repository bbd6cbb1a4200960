//! A file server between the hub and the agent, made on purpose: a FUSE file system served by a
//! thread of the test's own process, mirroring a backing folder ("the file server's disk") at a
//! mount point ("the client's mount"), and doing there, when a test asks, what a network share
//! does and a local disk never does. Each behaviour cites what it imitates beside it. The relay's
//! production code meets it through the kernel, as it would meet NFS, SMB or sshfs: nothing in
//! `src/` knows it is there.
//!
//! Faults are set per folder of the share (the longest folder holding a file's path decides) with
//! atomics the test keeps; each fault made is counted here. The file server's clock is one for
//! the whole share. Attribute and entry timeouts are 0 by default (the kernel caches nothing, so
//! a test sees the faults and not a cache) and can be set.
//!
//! Needs `/dev/fuse` and `fusermount3` (the `fuser` crate mounts without libfuse: as root with
//! mount(2) itself, otherwise through the setuid `fusermount3`); [`FaultFs::mount`] says what is
//! missing and gives `None`, and the test prints `skipped: …` and passes.

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

/// The faults of one folder of the share (its files and those of its sub-folders without faults
/// of their own). Counts of faults still to make, and of faults made.
#[derive(Debug, Default)]
pub struct Faults {
    /// Renames into the folder whose reply is lost: the rename is done on the file server's
    /// disk, the client sends it again, and the file server, whose reply cache no longer holds
    /// it (restarted, or evicted), finds no source and answers "no such file": `rename(2)` fails
    /// with `ENOENT` although the file has its new name. NFS before 4.1 promises no better
    /// (RFC 5661 §2.10.6 introduced the exactly-once reply cache for that reason; Chris
    /// Siebenmann, "Why NFS servers generally have a 'reply cache'",
    /// utcc.utoronto.ca/~cks/space/blog/unix/NFSServerReplyCacheWhy; FreeBSD's NFS client
    /// commit of 2007 on LINK/MKDIR answered EEXIST on a retransmission).
    pub lost_rename_replies: AtomicU32,
    /// Writes into the folder during which the file server restarts: the first half of the
    /// write's bytes reach its disk, then the write fails with `EIO` (a soft NFS mount returns it
    /// once its retransmissions are spent, nfs(5) `soft`), and every later operation on that
    /// open file fails with `EIO` too: its session is gone (sshfs(1) `reconnect` makes a new
    /// session, and sshfs.c answers `EIO` for a handle of the old one, `sshfs_file_is_conn`; an
    /// NFSv4 open whose state the rebooted server no longer has fails the same way once the
    /// grace period is over, RFC 7530 §9.6.2). The half-written file stays under its name.
    pub restarts_mid_write: AtomicU32,
    /// Removals in the folder that leave a `.nfsXXXXXXXXXXXXXXXX` file behind: an NFS client
    /// removing a file that is still open renames it to such a name instead and removes it at
    /// the last close (the "silly rename", Linux `fs/nfs/unlink.c` `nfs_sillyrename`, NFS FAQ
    /// D2, nfs.sourceforge.net); when the client dies or loses the server first, the file stays
    /// in the folder for good, with the removed file's bytes.
    pub silly_renames: AtomicU32,
    /// Renames whose reply was lost, writes cut by a restart, silly-rename leftovers made.
    pub lost: AtomicU32,
    pub cut: AtomicU32,
    pub left: AtomicU32,
}

impl Faults {
    /// The counts of faults made: renames whose reply was lost, writes cut, leftovers.
    pub fn made(&self) -> (u32, u32, u32) {
        (
            self.lost.load(SeqCst),
            self.cut.load(SeqCst),
            self.left.load(SeqCst),
        )
    }
}

/// What the test sets and reads, shared with the file system's thread.
#[derive(Debug, Default)]
struct Server {
    /// The file server's clock against this machine's, in milliseconds (ahead when positive).
    /// Every time the file server sets is its own: a WRITE sets mtime and ctime on the server
    /// (RFC 1813 §3.3.7), a file made gets the server's time (RFC 1813 §3.3.8), a "now" from the
    /// client is sent as SET_TO_SERVER_TIME (RFC 1813 §2.6 `time_how`; the Linux client does so
    /// for `UTIME_NOW`), and SMB's LastWriteTime and ChangeTime are the server's too (MS-FSA
    /// §2.1.5.3, "the object store SHOULD update LastModificationTime"). getattr reports what
    /// the server has.
    skew_ms: AtomicI64,
    /// Names are matched without regard to case, as an SMB server does (MS-FSCC §2.1.5.1: file
    /// names are case-insensitive on the wire unless the client asks otherwise; Samba's
    /// smb.conf(5) `case sensitive = no`, the default for Windows clients, with `preserve case =
    /// yes`): a lookup folds case, and a create of a name that differs from an existing one only
    /// in case opens the existing file (and `O_EXCL` finds it taken).
    case_insensitive: AtomicBool,
    /// Names matched without regard to case that met an existing name of another case.
    folded: AtomicU32,
    attr_ttl_ms: AtomicU64,
    entry_ttl_ms: AtomicU64,
    folders: Mutex<Vec<(PathBuf, Arc<Faults>)>>,
}

impl Server {
    fn now(&self) -> SystemTime {
        shifted(SystemTime::now(), self.skew_ms.load(SeqCst))
    }

    /// The faults of the folder that holds `rel` (a path relative to the share's root): the
    /// longest folder with faults that `rel`'s folder is in.
    fn faults_of(&self, rel: &Path) -> Option<Arc<Faults>> {
        let folder = rel.parent().unwrap_or(Path::new(""));
        lock(&self.folders)
            .iter()
            .filter(|(dir, _)| folder.starts_with(dir))
            .max_by_key(|(dir, _)| dir.components().count())
            .map(|(_, faults)| faults.clone())
    }
}

fn shifted(at: SystemTime, skew_ms: i64) -> SystemTime {
    let by = Duration::from_millis(skew_ms.unsigned_abs());
    if skew_ms >= 0 { at + by } else { at - by }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Takes one from a count of faults still to make; whether there was one.
fn take(count: &AtomicU32) -> bool {
    count
        .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

/// A share mounted for a test; unmounted when dropped (lazily when something still holds it).
pub struct FaultFs {
    server: Arc<Server>,
    session: Option<fuser::BackgroundSession>,
    mount: PathBuf,
    backing: tempfile::TempDir,
}

impl FaultFs {
    /// Mounts a new, empty share at `at` (an empty folder the test made), or says why it cannot
    /// (no usable `/dev/fuse`, no `fusermount3`, a mount refused) and gives `None`.
    pub fn mount(at: &Path) -> Option<FaultFs> {
        if let Err(error) = File::options().read(true).write(true).open("/dev/fuse") {
            eprintln!("skipped: /dev/fuse cannot be opened here ({error})");
            return None;
        }
        let on_path = std::env::var_os("PATH").is_some_and(|path| {
            std::env::split_paths(&path).any(|dir| dir.join("fusermount3").is_file())
        });
        if !on_path {
            eprintln!("skipped: fusermount3 is not installed (Debian: fuse3)");
            return None;
        }
        let backing = tempfile::tempdir().expect("the file server's disk");
        let server = Arc::new(Server::default());
        let fs = Share {
            root: backing.path().to_path_buf(),
            server: server.clone(),
            nodes: Mutex::new(Nodes::default()),
            handles: Mutex::new(HashMap::new()),
            dirs: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
        };
        let mut config = fuser::Config::default();
        config.mount_options = vec![
            fuser::MountOption::FSName("jira-hub-faultfs".into()),
            fuser::MountOption::Subtype("faultfs".into()),
            // The kernel checks modes, as a client of a POSIX share does.
            fuser::MountOption::DefaultPermissions,
        ];
        match fuser::spawn_mount(fs, at, &config) {
            Ok(session) => Some(FaultFs {
                server,
                session: Some(session),
                mount: at.to_path_buf(),
                backing,
            }),
            Err(error) => {
                eprintln!(
                    "skipped: a FUSE mount at {} was refused ({error})",
                    at.display()
                );
                None
            }
        }
    }

    /// The file server's disk, as the server itself sees it.
    pub fn backing(&self) -> &Path {
        self.backing.path()
    }

    /// The faults of `folder` (relative to the share's root; `""` for the root itself), made
    /// when first asked for.
    pub fn faults(&self, folder: &str) -> Arc<Faults> {
        let mut folders = lock(&self.server.folders);
        if let Some((_, faults)) = folders.iter().find(|(dir, _)| dir == Path::new(folder)) {
            return faults.clone();
        }
        let faults = Arc::new(Faults::default());
        folders.push((PathBuf::from(folder), faults.clone()));
        faults
    }

    /// Sets the file server's clock `skew_ms` milliseconds ahead of this machine's (behind when
    /// negative).
    pub fn set_skew_ms(&self, skew_ms: i64) {
        self.server.skew_ms.store(skew_ms, SeqCst);
    }

    /// Makes the file server match names without regard to case (SMB).
    pub fn fold_case(&self) {
        self.server.case_insensitive.store(true, SeqCst);
    }

    /// How many names met an existing name of another case.
    pub fn folded(&self) -> u32 {
        self.server.folded.load(SeqCst)
    }

    /// How long the kernel may keep attributes and names it was given (0, the default: not at
    /// all).
    pub fn set_timeouts(&self, attr: Duration, entry: Duration) {
        self.server
            .attr_ttl_ms
            .store(attr.as_millis() as u64, SeqCst);
        self.server
            .entry_ttl_ms
            .store(entry.as_millis() as u64, SeqCst);
    }
}

impl Drop for FaultFs {
    fn drop(&mut self) {
        let Some(session) = self.session.take() else {
            return;
        };
        if session.umount_and_join().is_err() {
            // Busy (a thread of a failed test still in it): detached now, gone when released;
            // the session's thread ends with it.
            let lazily = std::process::Command::new("fusermount3")
                .args(["-u", "-z", "-q", "--"])
                .arg(&self.mount)
                .status();
            if !lazily.is_ok_and(|status| status.success()) {
                let _ = std::process::Command::new("umount")
                    .arg("-l")
                    .arg(&self.mount)
                    .status();
            }
        }
    }
}

/// Inode numbers and the paths (relative to the share's root) they stand for. The root is 1.
#[derive(Default)]
struct Nodes {
    paths: HashMap<u64, PathBuf>,
    inos: HashMap<PathBuf, u64>,
    next: u64,
}

impl Nodes {
    fn path(&self, ino: INodeNo) -> Option<PathBuf> {
        if ino.0 == 1 {
            return Some(PathBuf::new());
        }
        self.paths.get(&ino.0).cloned()
    }

    fn ino(&mut self, rel: &Path) -> u64 {
        if rel.as_os_str().is_empty() {
            return 1;
        }
        if let Some(ino) = self.inos.get(rel) {
            return *ino;
        }
        self.next = self.next.max(1) + 1;
        self.paths.insert(self.next, rel.to_path_buf());
        self.inos.insert(rel.to_path_buf(), self.next);
        self.next
    }

    /// The paths known at or under `rel`.
    fn under(&self, rel: &Path) -> Vec<PathBuf> {
        self.inos
            .keys()
            .filter(|path| path.starts_with(rel))
            .cloned()
            .collect()
    }

    fn removed(&mut self, rel: &Path) {
        for path in self.under(rel) {
            if let Some(ino) = self.inos.remove(&path) {
                self.paths.remove(&ino);
            }
        }
    }

    fn moved(&mut self, from: &Path, to: &Path) {
        self.removed(to);
        for old in self.under(from) {
            // `to.join("")` would end in a slash, which names only a folder.
            let under = old.strip_prefix(from).expect("under from");
            let new = if under.as_os_str().is_empty() {
                to.to_path_buf()
            } else {
                to.join(under)
            };
            if let Some(ino) = self.inos.remove(&old) {
                self.paths.insert(ino, new.clone());
                self.inos.insert(new, ino);
            }
        }
    }
}

/// An open file on the file server.
struct Handle {
    file: File,
    /// Where it was opened, should its name go meanwhile.
    rel: PathBuf,
    /// Its session ended with a restart: every operation on it fails with `EIO`.
    stale: AtomicBool,
}

struct Share {
    root: PathBuf,
    server: Arc<Server>,
    nodes: Mutex<Nodes>,
    handles: Mutex<HashMap<u64, Arc<Handle>>>,
    /// Listings taken at `opendir`, served in parts.
    dirs: Mutex<HashMap<u64, Listing>>,
    next_fh: AtomicU64,
}

type Answer<T> = Result<T, Errno>;

/// A folder's entries as `opendir` found them: inode, type, name.
type Listing = Vec<(u64, FileType, OsString)>;

impl Share {
    fn rel(&self, ino: INodeNo) -> Answer<PathBuf> {
        lock(&self.nodes).path(ino).ok_or(Errno::ENOENT)
    }

    fn full(&self, rel: &Path) -> PathBuf {
        self.root.join(rel)
    }

    /// The path of `name` in the folder `parent`: on a case-insensitive server, an existing
    /// name that differs only in case is that name.
    fn child(&self, parent: INodeNo, name: &OsStr) -> Answer<PathBuf> {
        let dir = self.rel(parent)?;
        let exact = dir.join(name);
        if !self.server.case_insensitive.load(SeqCst)
            || self.full(&exact).symlink_metadata().is_ok()
        {
            return Ok(exact);
        }
        let wanted = name.to_string_lossy().to_lowercase();
        let found = std::fs::read_dir(self.full(&dir))
            .map_err(Errno::from)?
            .filter_map(Result::ok)
            .map(|entry| entry.file_name())
            .find(|existing| existing.to_string_lossy().to_lowercase() == wanted);
        Ok(match found {
            Some(existing) => {
                self.server.folded.fetch_add(1, SeqCst);
                dir.join(existing)
            }
            None => exact,
        })
    }

    fn attr(&self, rel: &Path, meta: &std::fs::Metadata) -> FileAttr {
        let ino = lock(&self.nodes).ino(rel);
        attr_of(ino, meta, self.server.skew_ms.load(SeqCst))
    }

    fn ttl(&self, entry: bool) -> Duration {
        Duration::from_millis(if entry {
            self.server.entry_ttl_ms.load(SeqCst)
        } else {
            self.server.attr_ttl_ms.load(SeqCst)
        })
    }

    fn entry(&self, rel: &Path, reply: ReplyEntry) {
        match self.full(rel).symlink_metadata() {
            Ok(meta) => reply.entry(&self.ttl(true), &self.attr(rel, &meta), Generation(0)),
            Err(error) => reply.error(error.into()),
        }
    }

    fn handle(&self, fh: FileHandle) -> Answer<Arc<Handle>> {
        let handle = lock(&self.handles)
            .get(&fh.0)
            .cloned()
            .ok_or(Errno::EBADF)?;
        if handle.stale.load(SeqCst) {
            return Err(Errno::EIO);
        }
        Ok(handle)
    }

    fn opened(&self, file: File, rel: PathBuf) -> FileHandle {
        let fh = self.next_fh.fetch_add(1, SeqCst);
        let handle = Handle {
            file,
            rel,
            stale: AtomicBool::new(false),
        };
        lock(&self.handles).insert(fh, Arc::new(handle));
        FileHandle(fh)
    }

    /// Gives what the server just made or changed at `path` the server's time.
    fn stamp(&self, path: &Path, created: bool) -> std::io::Result<()> {
        if self.server.skew_ms.load(SeqCst) == 0 {
            return Ok(());
        }
        let now = timespec(self.server.now());
        let omit = rustix::fs::Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_OMIT,
        };
        let times = rustix::fs::Timestamps {
            last_access: if created { now } else { omit },
            last_modification: now,
        };
        rustix::fs::utimensat(
            rustix::fs::CWD,
            path,
            &times,
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )?;
        Ok(())
    }

    /// A change in the folder `dir`: the server stamps the folder's mtime.
    fn changed(&self, dir: &Path) {
        let _ = self.stamp(&self.full(dir), false);
    }

    fn setattr_answer(
        &self,
        ino: INodeNo,
        mode: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        fh: Option<FileHandle>,
    ) -> Answer<FileAttr> {
        let rel = self.rel(ino)?;
        let path = self.full(&rel);
        let handle = fh.map(|fh| self.handle(fh)).transpose()?;
        if let Some(mode) = mode {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & 0o7777))?;
        }
        if let Some(size) = size {
            match &handle {
                Some(handle) => handle.file.set_len(size)?,
                None => File::options().write(true).open(&path)?.set_len(size)?,
            }
            self.stamp(&path, false)?;
        }
        if atime.is_some() || mtime.is_some() {
            let server_time = |time: Option<TimeOrNow>| match time {
                None => rustix::fs::Timespec {
                    tv_sec: 0,
                    tv_nsec: rustix::fs::UTIME_OMIT,
                },
                Some(TimeOrNow::Now) => timespec(self.server.now()),
                Some(TimeOrNow::SpecificTime(at)) => timespec(at),
            };
            let times = rustix::fs::Timestamps {
                last_access: server_time(atime),
                last_modification: server_time(mtime),
            };
            rustix::fs::utimensat(
                rustix::fs::CWD,
                &path,
                &times,
                rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            )
            .map_err(std::io::Error::from)?;
        }
        let meta = match &handle {
            Some(handle) => handle.file.metadata()?,
            None => path.symlink_metadata()?,
        };
        Ok(self.attr(&rel, &meta))
    }

    fn write_answer(&self, fh: FileHandle, offset: u64, data: &[u8]) -> Answer<u32> {
        let handle = self.handle(fh)?;
        let faults = self.server.faults_of(&handle.rel);
        if let Some(faults) = faults.filter(|faults| take(&faults.restarts_mid_write)) {
            handle.file.write_all_at(&data[..data.len() / 2], offset)?;
            handle.file.sync_all()?;
            handle.stale.store(true, SeqCst);
            faults.cut.fetch_add(1, SeqCst);
            return Err(Errno::EIO);
        }
        handle.file.write_all_at(data, offset)?;
        if self.server.skew_ms.load(SeqCst) != 0 {
            handle.file.set_modified(self.server.now())?;
        }
        Ok(data.len() as u32)
    }

    fn create_answer(
        &self,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
    ) -> Answer<(FileAttr, FileHandle)> {
        let rel = self.child(parent, name)?;
        let path = self.full(&rel);
        let mut options = File::options();
        options.read(true).write(true).mode(mode & !umask & 0o7777);
        if flags & libc::O_EXCL != 0 {
            options.create_new(true);
        } else {
            options.create(true);
        }
        if flags & libc::O_TRUNC != 0 {
            options.truncate(true);
        }
        let existed = path.symlink_metadata().is_ok();
        let file = options.custom_flags(libc::O_NOFOLLOW).open(&path)?;
        if !existed {
            self.stamp(&path, true)?;
            self.changed(rel.parent().unwrap_or(Path::new("")));
        }
        let meta = file.metadata()?;
        let attr = self.attr(&rel, &meta);
        Ok((attr, self.opened(file, rel)))
    }

    fn rename_answer(
        &self,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
    ) -> Answer<()> {
        // NFS has no RENAME_NOREPLACE or RENAME_EXCHANGE: the Linux client refuses any flag with
        // EINVAL (fs/nfs/dir.c, `nfs_rename`).
        if !flags.is_empty() {
            return Err(Errno::EINVAL);
        }
        let from = self.child(parent, name)?;
        let to = self.child(newparent, newname)?;
        std::fs::rename(self.full(&from), self.full(&to))?;
        lock(&self.nodes).moved(&from, &to);
        self.changed(from.parent().unwrap_or(Path::new("")));
        self.changed(to.parent().unwrap_or(Path::new("")));
        if let Some(faults) = self
            .server
            .faults_of(&to)
            .filter(|faults| take(&faults.lost_rename_replies))
        {
            faults.lost.fetch_add(1, SeqCst);
            return Err(Errno::ENOENT);
        }
        Ok(())
    }

    fn unlink_answer(&self, parent: INodeNo, name: &OsStr) -> Answer<()> {
        let rel = self.child(parent, name)?;
        let dir = rel.parent().unwrap_or(Path::new("")).to_path_buf();
        match self
            .server
            .faults_of(&rel)
            .filter(|faults| take(&faults.silly_renames))
        {
            Some(faults) => {
                let mut bytes = [0u8; 8];
                getrandom::fill(&mut bytes).map_err(|_| Errno::EIO)?;
                let silly = dir.join(format!(".nfs{:016x}", u64::from_le_bytes(bytes)));
                std::fs::rename(self.full(&rel), self.full(&silly))?;
                lock(&self.nodes).moved(&rel, &silly);
                faults.left.fetch_add(1, SeqCst);
            }
            None => {
                std::fs::remove_file(self.full(&rel))?;
                lock(&self.nodes).removed(&rel);
            }
        }
        self.changed(&dir);
        Ok(())
    }

    fn mkdir_answer(
        &self,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
    ) -> Answer<PathBuf> {
        let rel = self.child(parent, name)?;
        let path = self.full(&rel);
        std::fs::create_dir(&path)?;
        std::fs::set_permissions(
            &path,
            std::fs::Permissions::from_mode(mode & !umask & 0o7777),
        )?;
        self.stamp(&path, true)?;
        self.changed(rel.parent().unwrap_or(Path::new("")));
        Ok(rel)
    }

    fn listing(&self, ino: INodeNo) -> Answer<Listing> {
        let rel = self.rel(ino)?;
        let mut entries = vec![
            (ino.0, FileType::Directory, OsString::from(".")),
            (1, FileType::Directory, OsString::from("..")),
        ];
        for entry in std::fs::read_dir(self.full(&rel))? {
            let entry = entry?;
            let kind = entry
                .file_type()
                .ok()
                .and_then(FileType::from_std)
                .unwrap_or(FileType::RegularFile);
            let ino = lock(&self.nodes).ino(&rel.join(entry.file_name()));
            entries.push((ino, kind, entry.file_name()));
        }
        Ok(entries)
    }
}

fn timespec(at: SystemTime) -> rustix::fs::Timespec {
    let since = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    rustix::fs::Timespec {
        tv_sec: since.as_secs() as i64,
        tv_nsec: i64::from(since.subsec_nanos()),
    }
}

fn attr_of(ino: u64, meta: &std::fs::Metadata, skew_ms: i64) -> FileAttr {
    let time = |secs: i64, nanos: i64| {
        SystemTime::UNIX_EPOCH
            + Duration::new(secs.max(0) as u64, nanos.clamp(0, 999_999_999) as u32)
    };
    let mtime = time(meta.mtime(), meta.mtime_nsec());
    FileAttr {
        ino: INodeNo(ino),
        size: meta.len(),
        blocks: meta.blocks(),
        atime: time(meta.atime(), meta.atime_nsec()),
        mtime,
        // The server's disk sets ctime by this machine's clock: the server's clock is that plus
        // the skew.
        ctime: shifted(time(meta.ctime(), meta.ctime_nsec()), skew_ms),
        crtime: mtime,
        kind: FileType::from_std(meta.file_type()).unwrap_or(FileType::RegularFile),
        perm: (meta.mode() & 0o7777) as u16,
        nlink: meta.nlink() as u32,
        uid: meta.uid(),
        gid: meta.gid(),
        rdev: meta.rdev() as u32,
        blksize: meta.blksize() as u32,
        flags: 0,
    }
}

impl Filesystem for Share {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.child(parent, name) {
            Ok(rel) => self.entry(&rel, reply),
            Err(errno) => reply.error(errno),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let answer = (|| -> Answer<FileAttr> {
            let meta = match fh {
                Some(fh) => self.handle(fh)?.file.metadata()?,
                None => self.full(&self.rel(ino)?).symlink_metadata()?,
            };
            let skew = self.server.skew_ms.load(SeqCst);
            Ok(attr_of(ino.0, &meta, skew))
        })();
        match answer {
            Ok(attr) => reply.attr(&self.ttl(false), &attr),
            Err(errno) => reply.error(errno),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        match self.setattr_answer(ino, mode, size, atime, mtime, fh) {
            Ok(attr) => reply.attr(&self.ttl(false), &attr),
            Err(errno) => reply.error(errno),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self
            .rel(ino)
            .and_then(|rel| Ok(std::fs::read_link(self.full(&rel))?))
        {
            Ok(target) => reply.data(target.as_os_str().as_encoded_bytes()),
            Err(errno) => reply.error(errno),
        }
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        match self.mkdir_answer(parent, name, mode, umask) {
            Ok(rel) => self.entry(&rel, reply),
            Err(errno) => reply.error(errno),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.unlink_answer(parent, name) {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let answer = self.child(parent, name).and_then(|rel| {
            std::fs::remove_dir(self.full(&rel))?;
            lock(&self.nodes).removed(&rel);
            self.changed(rel.parent().unwrap_or(Path::new("")));
            Ok(())
        });
        match answer {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    fn symlink(
        &self,
        _req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        match self.child(parent, link_name).and_then(|rel| {
            std::os::unix::fs::symlink(target, self.full(&rel))?;
            Ok(rel)
        }) {
            Ok(rel) => self.entry(&rel, reply),
            Err(errno) => reply.error(errno),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        match self.rename_answer(parent, name, newparent, newname, flags) {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let answer = self.rel(ino).and_then(|rel| {
            let access = flags.0 & libc::O_ACCMODE;
            let file = File::options()
                .read(access != libc::O_WRONLY)
                .write(access != libc::O_RDONLY)
                .custom_flags(libc::O_NOFOLLOW)
                .open(self.full(&rel))?;
            Ok(self.opened(file, rel))
        });
        match answer {
            Ok(fh) => reply.opened(fh, FopenFlags::empty()),
            Err(errno) => reply.error(errno),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let answer = self.handle(fh).and_then(|handle| {
            let mut buffer = vec![0u8; size as usize];
            let mut filled = 0;
            while filled < buffer.len() {
                match handle
                    .file
                    .read_at(&mut buffer[filled..], offset + filled as u64)?
                {
                    0 => break,
                    n => filled += n,
                }
            }
            buffer.truncate(filled);
            Ok(buffer)
        });
        match answer {
            Ok(bytes) => reply.data(&bytes),
            Err(errno) => reply.error(errno),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.write_answer(fh, offset, data) {
            Ok(n) => reply.written(n),
            Err(errno) => reply.error(errno),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        match self.handle(fh) {
            Ok(_) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        lock(&self.handles).remove(&fh.0);
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self
            .handle(fh)
            .and_then(|handle| Ok(handle.file.sync_all()?))
        {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.listing(ino) {
            Ok(entries) => {
                let fh = self.next_fh.fetch_add(1, SeqCst);
                lock(&self.dirs).insert(fh, entries);
                reply.opened(FileHandle(fh), FopenFlags::empty());
            }
            Err(errno) => reply.error(errno),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let dirs = lock(&self.dirs);
        let Some(entries) = dirs.get(&fh.0) else {
            return reply.error(Errno::EBADF);
        };
        for (n, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*ino), n as u64 + 1, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        lock(&self.dirs).remove(&fh.0);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        match self.create_answer(parent, name, mode, umask, flags) {
            Ok((attr, fh)) => reply.created(
                &self.ttl(true),
                &attr,
                Generation(0),
                fh,
                FopenFlags::empty(),
            ),
            Err(errno) => reply.error(errno),
        }
    }
}
