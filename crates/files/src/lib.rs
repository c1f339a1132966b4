//! Files secmem writes, by one rule (the same as `python/secmem/_files.py`):
//!
//! - A target that exists and is not a regular file is never replaced: a FIFO or a character
//!   device (`/dev/null`, a terminal) is written in place; anything else (a directory, a
//!   socket, a block device) is refused with one line.
//! - A regular file (or a new name) is written to a temporary file beside it, created
//!   exclusively (`O_EXCL | O_NOFOLLOW`: a planted file or symlink is never opened) with its
//!   final mode from the start, flushed to disk and renamed over the target: readers see the
//!   old file or the whole new one.
//! - Temporary files are named `.NAME.PID.RANDOM.part`; those a dead process left (killed
//!   mid-write) are removed on the next write to the same target.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Mode of ordinary outputs (the umask applies, as for any new file).
pub const PUBLIC: u32 = 0o666;
/// Mode of secrets (key files): the owner only.
pub const PRIVATE: u32 = 0o600;

/// An output being written: either a temporary file that [`Output::commit`] renames over the
/// target, or the target itself (a FIFO or character device). Dropped uncommitted, the
/// temporary file is removed.
pub struct Output {
    target: PathBuf,
    /// Where the bytes go: the temporary file, or the target when written in place.
    path: PathBuf,
    file: Option<File>,
    in_place: bool,
    done: bool,
}

impl Output {
    /// Check `target` and open where its bytes go (see the crate's rule). Errors are one line
    /// naming the target.
    pub fn create(target: &Path, mode: u32) -> io::Result<Output> {
        // A symlink is written through: the file it names is replaced, the link kept. Not
        // for a private file (keys): a link planted at its name is replaced, never followed.
        let resolved = if mode & 0o077 == 0 { target.to_path_buf() } else { through_links(target) };
        let target = resolved.as_path();
        let name = target.file_name().ok_or_else(|| err(target, "not a file name"))?.to_os_string();
        let dir = target.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        match std::fs::metadata(dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(err(target, &format!("{} is not a directory", dir.display()))),
            Err(_) => return Err(err(target, &format!("no such directory {}", dir.display()))),
        }
        // The target's kind, through a symlink (a link to /dev/null is written in place).
        if let Ok(m) = std::fs::metadata(target) {
            let t = m.file_type();
            if t.is_dir() {
                return Err(err(target, "is a directory, not a file name"));
            }
            if t.is_fifo() || t.is_char_device() {
                if mode & 0o077 == 0 {
                    return Err(err(target, "is a FIFO or a device: a private file (keys) is written only to a regular file"));
                }
                // Opened when written: a FIFO's open waits for its reader.
                return Ok(Output { target: target.into(), path: target.into(), file: None, in_place: true, done: false });
            }
            if !t.is_file() {
                return Err(err(target, "is not a regular file, a FIFO or a character device; not replaced"));
            }
        }
        remove_stale(dir, &name);
        let mut last = None;
        // A name taken (a planted file or link, or a live writer's) is never opened: try another.
        for _ in 0..16 {
            let mut tmp = OsString::from(".");
            tmp.push(&name);
            tmp.push(format!(".{}.{:016x}.part", std::process::id(), random()));
            let path = dir.join(tmp);
            match OpenOptions::new().write(true).create_new(true).mode(mode).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC).open(&path) {
                Ok(file) => return Ok(Output { target: target.into(), path, file: Some(file), in_place: false, done: false }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(with(target, e)),
            }
        }
        Err(with(target, last.unwrap_or_else(|| io::Error::other("no free temporary name"))))
    }

    /// The open file the bytes go to (a FIFO or device is opened now).
    pub fn file(&mut self) -> io::Result<&mut File> {
        if self.file.is_none() {
            if !self.in_place {
                return Err(err(&self.target, "output file already taken"));
            }
            let f = open_in_place(&self.path).map_err(|e| with(&self.target, e))?;
            self.file = Some(f);
        }
        Ok(self.file.as_mut().expect("opened above"))
    }

    /// Take the open file (for writers that own theirs); [`Output::commit`] still renames.
    pub fn take_file(&mut self) -> io::Result<File> {
        self.file()?;
        Ok(self.file.take().expect("opened above"))
    }

    /// Where the bytes go, for writers that open by path: the temporary file (created
    /// already; reopening it truncates it) or the target written in place.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the target is written in place (a FIFO or a device).
    pub fn in_place(&self) -> bool {
        self.in_place
    }

    /// Flush to disk and put the file in place (rename over the target).
    pub fn commit(mut self) -> io::Result<()> {
        self.done = true;
        if self.in_place {
            return Ok(());
        }
        let synced = match self.file.take() {
            Some(f) => f.sync_all(),
            None => File::open(&self.path).and_then(|f| f.sync_all()),
        };
        if let Err(e) = synced.and_then(|_| std::fs::rename(&self.path, &self.target)) {
            let _ = std::fs::remove_file(&self.path);
            return Err(with(&self.target, e));
        }
        // The rename itself durable (best effort: some filesystems refuse to sync directories).
        if let Ok(d) = File::open(self.target.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."))) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if !self.done && !self.in_place {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Write `bytes` to `target` by the rule, with `mode` ([`PUBLIC`] or [`PRIVATE`]).
pub fn write(target: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    use std::io::Write;
    let mut o = Output::create(target, mode)?;
    o.file()?.write_all(bytes).map_err(|e| with(target, e))?;
    o.commit()
}

/// Checked while waiting for a FIFO's reader: a process's stop request (Ctrl-C) ends the wait.
static STOP_CHECK: std::sync::OnceLock<fn() -> bool> = std::sync::OnceLock::new();

/// Set once per process by whoever catches SIGINT and SIGTERM (the Python glue).
pub fn set_stop_check(f: fn() -> bool) {
    let _ = STOP_CHECK.set(f);
}

/// `File::create` for a writer handed a path by [`Output`]: a FIFO or device (written in
/// place) is opened as [`Output::file`] opens it, so a wait for a reader still ends on a stop.
pub fn open_for_writing(p: &Path) -> io::Result<File> {
    match std::fs::metadata(p) {
        Ok(m) if m.file_type().is_fifo() || m.file_type().is_char_device() => open_in_place(p),
        _ => File::create(p),
    }
}

/// `File::open` for an input that may be a FIFO: a FIFO's blocking open waits in the kernel
/// for a writer, deaf to a stop request (Ctrl-C). It is opened non-blocking instead and
/// polled until a writer has sent something or hung up, or a stop is asked for
/// (ErrorKind::Interrupted), then made blocking for the reads. Anything else opens as usual.
pub fn open_for_reading(p: &Path) -> io::Result<File> {
    if !std::fs::metadata(p).is_ok_and(|m| m.file_type().is_fifo()) {
        return File::open(p);
    }
    use std::os::fd::AsRawFd;
    let f = OpenOptions::new().read(true).custom_flags(libc::O_CLOEXEC | libc::O_NONBLOCK).open(p)?;
    loop {
        let mut pfd = libc::pollfd { fd: f.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one pollfd for a descriptor this function owns. A FIFO that never had a
        // writer reports nothing (Linux), so the wait lasts until one comes.
        let n = unsafe { libc::poll(&mut pfd, 1, 50) };
        if n > 0 {
            break;
        }
        if n < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return Err(io::Error::last_os_error());
        }
        if STOP_CHECK.get().is_some_and(|stop| stop()) {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "interrupted while waiting for a writer"));
        }
    }
    // SAFETY: F_GETFL/F_SETFL on a descriptor this function owns.
    unsafe {
        let fl = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(f.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
    }
    Ok(f)
}

/// Open a FIFO or device in place. A FIFO's blocking open waits for a reader in the kernel,
/// deaf to a stop request (its EINTR is retried): opened non-blocking instead, polled until a
/// reader comes or a stop is asked for, then made blocking for the writes.
fn open_in_place(path: &Path) -> io::Result<File> {
    loop {
        match OpenOptions::new().write(true).custom_flags(libc::O_CLOEXEC | libc::O_NONBLOCK).open(path) {
            Ok(f) => {
                use std::os::fd::AsRawFd;
                // SAFETY: F_GETFL/F_SETFL on a descriptor this function owns.
                unsafe {
                    let fl = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
                    libc::fcntl(f.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
                }
                return Ok(f);
            }
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                if STOP_CHECK.get().is_some_and(|stop| stop()) {
                    return Err(io::Error::new(io::ErrorKind::Interrupted, "interrupted while waiting for a reader"));
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => return Err(e),
        }
    }
}

/// `p` with every symlink in its last component followed, dangling ones included (the
/// name a link points to is where the file goes); `p` itself if it is no link.
fn through_links(p: &Path) -> PathBuf {
    let mut p = p.to_path_buf();
    for _ in 0..40 {
        match std::fs::read_link(&p) {
            Ok(to) => {
                let base = p.parent().map(Path::to_path_buf).unwrap_or_default();
                p = if to.is_absolute() { to } else { base.join(to) };
            }
            Err(_) => break,
        }
    }
    p
}

/// Remove `.NAME.PID[.X].part` files in `dir` whose process is gone and that we own (a
/// writer killed mid-write left them; a live writer's file is left alone).
pub fn remove_stale(dir: &Path, name: &std::ffi::OsStr) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut prefix = b".".to_vec();
    prefix.extend_from_slice(name.as_bytes());
    prefix.push(b'.');
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    for e in entries.flatten() {
        let f = e.file_name();
        let b = f.as_bytes();
        let Some(mid) = b.strip_prefix(prefix.as_slice()).and_then(|r| r.strip_suffix(b".part")) else { continue };
        // Exactly PID or PID.RANDOM (16 hex digits): `.x.smt.9.1234.RANDOM.part` is target
        // `x.smt.9`'s file, not one of `x.smt` left by a process 9.
        let fields: Vec<&[u8]> = mid.split(|&c| c == b'.').collect();
        let ours = match fields.as_slice() {
            [_] => true,
            [_, r] => r.len() == 16 && r.iter().all(|c| c.is_ascii_hexdigit()),
            _ => false,
        };
        if !ours {
            continue;
        }
        let pid = std::str::from_utf8(fields[0]).ok().filter(|p| p.bytes().all(|c| c.is_ascii_digit())).and_then(|p| p.parse::<i32>().ok());
        let Some(pid) = pid.filter(|&p| p > 0) else { continue };
        if pid as u32 == std::process::id() || alive(pid) {
            continue;
        }
        match e.path().symlink_metadata() {
            Ok(m) if m.file_type().is_file() && m.uid() == me => {
                let _ = std::fs::remove_file(e.path());
            }
            _ => {}
        }
    }
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

fn random() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: getrandom writes at most b.len() bytes into b.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != b.len() as isize {
        // No kernel randomness: the name need not be secret (it is created exclusively).
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
        return t ^ (std::process::id() as u64) << 32;
    }
    u64::from_le_bytes(b)
}

fn err(target: &Path, what: &str) -> io::Error {
    io::Error::other(format!("{}: {what}", target.display()))
}

fn with(target: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {}", target.display(), e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("secmem-files-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn parts(d: &Path) -> Vec<String> {
        std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).filter(|n| n.ends_with(".part")).collect()
    }

    #[test]
    fn a_regular_file_is_replaced_whole_and_a_private_one_is_never_readable_by_others() {
        let d = dir("reg");
        let t = d.join("out");
        std::fs::write(&t, b"old").unwrap();
        write(&t, b"new", PRIVATE).unwrap();
        assert_eq!(std::fs::read(&t).unwrap(), b"new");
        assert_eq!(std::fs::metadata(&t).unwrap().permissions().mode() & 0o777, 0o600);
        // Uncommitted: the old file stays and no temporary is left.
        let mut o = Output::create(&t, PUBLIC).unwrap();
        assert_eq!(std::fs::metadata(o.path()).unwrap().permissions().mode() & 0o077 & !0o022, 0o044 & !0o022);
        use std::io::Write;
        o.file().unwrap().write_all(b"half").unwrap();
        drop(o);
        assert_eq!(std::fs::read(&t).unwrap(), b"new");
        assert!(parts(&d).is_empty());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_fifo_is_written_in_place_and_stays_a_fifo() {
        let d = dir("fifo");
        let t = d.join("pipe");
        let c = std::ffi::CString::new(t.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let reader = {
            let t = t.clone();
            std::thread::spawn(move || std::fs::read(t).unwrap())
        };
        write(&t, b"through the pipe", PUBLIC).unwrap();
        assert_eq!(reader.join().unwrap(), b"through the pipe");
        assert!(std::fs::metadata(&t).unwrap().file_type().is_fifo(), "the FIFO was replaced");
        assert!(parts(&d).is_empty());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_character_device_is_written_in_place_and_a_full_one_fails_without_being_replaced() {
        write(Path::new("/dev/null"), b"x", PUBLIC).unwrap();
        // A /dev/full of our own (mknod needs root; skipped without it), never the system's.
        let d = dir("dev");
        let full = d.join("full");
        let c = std::ffi::CString::new(full.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; (1, 7) is the full device.
        if unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 7)) } == 0 {
            let e = write(&full, b"x", PUBLIC).unwrap_err().to_string();
            assert!(e.starts_with(&format!("{}: ", full.display())) && !e.contains('\n'), "{e}");
            assert!(std::fs::metadata(&full).unwrap().file_type().is_char_device(), "the device was replaced");
            assert!(parts(&d).is_empty());
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn directories_and_sockets_are_refused_in_one_line() {
        let d = dir("kinds");
        let e = write(&d, b"x", PUBLIC).unwrap_err().to_string();
        assert!(e.contains("is a directory") && !e.contains('\n'), "{e}");
        let s = d.join("sock");
        let _l = std::os::unix::net::UnixListener::bind(&s).unwrap();
        let e = write(&s, b"x", PUBLIC).unwrap_err().to_string();
        assert!(e.contains("not replaced"), "{e}");
        assert!(std::fs::metadata(&s).unwrap().file_type().is_socket());
        let e = write(&d.join("no/such/file"), b"x", PUBLIC).unwrap_err().to_string();
        assert!(e.contains("no such directory"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_planted_symlink_is_never_followed() {
        let d = dir("link");
        let victim = d.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        // Plant links under every name of this process's possible temporaries is impossible
        // (random part); plant the old predictable names and the stale pattern instead, and
        // check the victim is untouched and the links are left as they were.
        for n in [format!(".key.{}.part", std::process::id()), format!(".key.tmp-{}", std::process::id())] {
            std::os::unix::fs::symlink(&victim, d.join(n)).unwrap();
        }
        write(&d.join("key"), b"secret key bytes", PRIVATE).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert_eq!(std::fs::read(d.join("key")).unwrap(), b"secret key bytes");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn stale_temporaries_of_dead_processes_are_removed_and_live_ones_kept() {
        let d = dir("stale");
        // A process that has exited: its pid is free (reused pids are alive and kept).
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let stale = d.join(format!(".x.smt.{dead}.part"));
        let stale2 = d.join(format!(".x.smt.{dead}.0123456789abcdef.part"));
        let live = d.join(format!(".x.smt.{}.part", std::process::id()));
        let other = d.join(format!(".y.smt.{dead}.part"));
        // A live writer of target `x.smt.{dead}`: its name starts like a dead one of `x.smt`.
        let longer = d.join(format!(".x.smt.{dead}.{}.0123456789abcdef.part", std::process::id()));
        for p in [&stale, &stale2, &live, &other, &longer] {
            std::fs::write(p, b"partial").unwrap();
        }
        write(&d.join("x.smt"), b"whole", PUBLIC).unwrap();
        assert!(!stale.exists() && !stale2.exists(), "a dead writer's temporary file was left");
        assert!(live.exists(), "a live writer's temporary file was removed");
        assert!(other.exists(), "another target's temporary file was removed");
        assert!(longer.exists(), "a live temporary file of target x.smt.PID was removed");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
