//! Reading the files a configuration names (the probes file, `api_key_file`, TLS PEM files)
//! with limits: only regular files, a size cap, and a time limit.
//!
//! A FIFO, a device such as `/dev/zero`, a huge file or a hung network mount must give an
//! error that names the file, not freeze or exhaust the process. Each read runs on its own
//! thread and is waited for at most [`READ_TIME_LIMIT`]; a read that does not finish is
//! abandoned (its thread ends whenever the file system answers), and while
//! [`MAX_ABANDONED_READS`] such reads are still stuck, further reads fail at once rather than
//! pile up threads. Callers on the async runtime run the whole load on a blocking thread
//! ([`super::load_off_runtime`]).

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// Longest wait for one file to be read.
pub const READ_TIME_LIMIT: Duration = Duration::from_secs(5);
/// Largest probes file (32 MiB; 20,000 short targets take under 2 MiB).
pub const MAX_CONFIG_BYTES: u64 = 32 << 20;
/// Largest `api_key_file` or TLS PEM file (1 MiB).
pub const MAX_SMALL_FILE_BYTES: u64 = 1 << 20;
/// How many abandoned (timed-out, still stuck) reads there may be before new reads are refused.
pub const MAX_ABANDONED_READS: usize = 8;

static ABANDONED: AtomicUsize = AtomicUsize::new(0);

/// Why a file could not be read. `Display` gives the reason (never the contents);
/// [`ReadError::fix`] says what to do.
#[derive(Debug)]
pub enum ReadError {
    /// The path does not exist.
    NotFound,
    /// The process may not read it.
    PermissionDenied,
    /// A FIFO, device, directory or socket; the payload names which.
    NotRegular(&'static str),
    /// More bytes than the cap given.
    TooLarge(u64),
    /// The read did not finish within the time limit given.
    TimedOut(Duration),
    /// Earlier reads are still stuck (see [`MAX_ABANDONED_READS`]).
    Stuck(usize),
    /// Any other I/O error.
    Io(std::io::Error),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::NotFound => f.write_str("no such file"),
            ReadError::PermissionDenied => f.write_str("permission denied"),
            ReadError::NotRegular(kind) => write!(f, "not a regular file but {kind}"),
            ReadError::TooLarge(max) => write!(f, "larger than {}", fmt_bytes(*max)),
            ReadError::TimedOut(limit) => write!(
                f,
                "did not finish reading within {}",
                humantime::format_duration(*limit)
            ),
            ReadError::Stuck(n) => write!(
                f,
                "not read: {n} earlier file reads have not finished (a hung file system?)"
            ),
            ReadError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl ReadError {
    /// What to do about it, as a sentence fragment.
    pub fn fix(&self) -> &'static str {
        match self {
            ReadError::NotFound | ReadError::PermissionDenied | ReadError::Io(_) => {
                "check the path and that llm-probe may read it"
            }
            ReadError::NotRegular(_) => "give the path of a regular file",
            ReadError::TooLarge(_) => "check that the path names the right file",
            ReadError::TimedOut(_) | ReadError::Stuck(_) => {
                "check that the file system holding it answers (e.g. a hung network mount)"
            }
        }
    }
}

fn fmt_bytes(n: u64) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

/// Reads the regular file at `path`, at most `max_bytes` of it, within [`READ_TIME_LIMIT`].
///
/// Errors: see [`ReadError`].
pub fn read(path: &Path, max_bytes: u64) -> Result<Vec<u8>, ReadError> {
    read_with(path, max_bytes, READ_TIME_LIMIT, &ABANDONED, read_regular)
}

/// [`read`] with the time limit, the count of abandoned reads and the reading function given
/// (tests use their own count and a slow reader).
fn read_with(
    path: &Path,
    max_bytes: u64,
    limit: Duration,
    abandoned: &'static AtomicUsize,
    reader: fn(&Path, u64) -> Result<Vec<u8>, ReadError>,
) -> Result<Vec<u8>, ReadError> {
    let stuck = abandoned.load(Ordering::Acquire);
    if stuck >= MAX_ABANDONED_READS {
        return Err(ReadError::Stuck(stuck));
    }
    // 0: reading, 1: done, 2: abandoned by the waiter.
    let state = Arc::new(AtomicU8::new(0));
    let (tx, rx) = mpsc::sync_channel(1);
    let owned: PathBuf = path.to_path_buf();
    let st = state.clone();
    std::thread::Builder::new()
        .name("config-read".into())
        .spawn(move || {
            let _ = tx.send(reader(&owned, max_bytes));
            if st
                .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                abandoned.fetch_sub(1, Ordering::AcqRel);
            }
        })
        .map_err(ReadError::Io)?;
    match rx.recv_timeout(limit) {
        Ok(result) => result,
        Err(_) => {
            if state
                .compare_exchange(0, 2, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                abandoned.fetch_add(1, Ordering::AcqRel);
                Err(ReadError::TimedOut(limit))
            } else {
                // It finished just now.
                rx.recv().unwrap_or(Err(ReadError::TimedOut(limit)))
            }
        }
    }
}

/// Opens without blocking (a FIFO would block `open` until a writer came), checks the opened
/// file is regular, and reads at most `max_bytes`.
fn read_regular(path: &Path, max_bytes: u64) -> Result<Vec<u8>, ReadError> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = options.open(path).map_err(io_error)?;
    let meta = file.metadata().map_err(io_error)?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular(kind(&meta.file_type())));
    }
    if meta.len() > max_bytes {
        return Err(ReadError::TooLarge(max_bytes));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(io_error)?;
    if bytes.len() as u64 > max_bytes {
        return Err(ReadError::TooLarge(max_bytes));
    }
    Ok(bytes)
}

fn io_error(e: std::io::Error) -> ReadError {
    match e.kind() {
        std::io::ErrorKind::NotFound => ReadError::NotFound,
        std::io::ErrorKind::PermissionDenied => ReadError::PermissionDenied,
        _ => ReadError::Io(e),
    }
}

fn kind(t: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_are_read_and_capped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"0123456789").unwrap();
        assert_eq!(read(&p, 10).unwrap(), b"0123456789");
        let e = read(&p, 9).unwrap_err();
        assert_eq!(e.to_string(), "larger than 9 bytes");
        assert!(matches!(
            read(&dir.path().join("nope"), 10),
            Err(ReadError::NotFound)
        ));
        let e = read(dir.path(), 10).unwrap_err();
        assert_eq!(e.to_string(), "not a regular file but a directory");
        assert_eq!(fmt_bytes(MAX_CONFIG_BYTES), "32 MiB");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn devices_are_refused_without_reading() {
        let e = read(Path::new("/dev/zero"), MAX_CONFIG_BYTES).unwrap_err();
        assert_eq!(e.to_string(), "not a regular file but a character device");
    }

    fn slow(_: &Path, _: u64) -> Result<Vec<u8>, ReadError> {
        std::thread::sleep(Duration::from_millis(1500));
        Ok(Vec::new())
    }

    static STUCK: AtomicUsize = AtomicUsize::new(0);

    #[test]
    fn a_hanging_read_times_out_and_stuck_reads_are_bounded() {
        let limit = Duration::from_millis(50);
        let p = Path::new("/hung/mount/probes.yaml");
        let e = read_with(p, 10, limit, &STUCK, slow).unwrap_err();
        assert_eq!(e.to_string(), "did not finish reading within 50ms");
        assert!(e.fix().contains("hung network mount"));
        // Fill the allowance of abandoned reads; the next one is refused at once.
        while STUCK.load(Ordering::Acquire) < MAX_ABANDONED_READS {
            let _ = read_with(p, 10, limit, &STUCK, slow);
        }
        let t = std::time::Instant::now();
        assert!(matches!(
            read_with(p, 10, limit, &STUCK, slow),
            Err(ReadError::Stuck(_))
        ));
        assert!(t.elapsed() < Duration::from_millis(40));
        // When the stuck reads end, reading works again.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while STUCK.load(Ordering::Acquire) > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "abandoned reads never ended"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(read_with(p, 10, Duration::from_secs(5), &STUCK, slow).is_ok());
    }
}
