//! Writing files in directories others may write too: what a run
//! as root must never do is follow a symlink someone planted, or replace a device.
//!
//! - [`replace_file`] writes a file whole: a randomly named temporary in the same directory,
//!   created exclusively (`O_EXCL`, so a symlink planted at its name is never followed;
//!   the `tempfile` crate), renamed over the path; only a regular file (or nothing) at the path
//!   is replaced, never a symlink, a device, a FIFO or a directory.
//! - [`create_no_follow`] opens a file for writing without following a symlink at its name
//!   (`O_NOFOLLOW`) and without blocking on a FIFO (`O_NONBLOCK`), and refuses anything but a
//!   regular file with no other hard link (it is truncated only after these checks).

use std::fs::File;
use std::io::Write;
use std::path::Path;

/// What is at `path`, in words, when it is not a regular file (`None`: a regular file or
/// nothing). A symlink is named as such, not followed.
fn not_regular(path: &Path) -> Option<&'static str> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    let t = meta.file_type();
    if t.is_file() {
        return None;
    }
    use std::os::unix::fs::FileTypeExt;
    Some(if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    })
}

/// Writes `contents` to `path` whole: readers see the old file or the new one, never a part.
/// A regular file at `path` keeps its permissions; a new file gets `0644`.
///
/// Errors (the message names the path and the fix): `path` is a symlink, a device, a FIFO, a
/// socket or a directory (nothing is written); the directory cannot be written.
pub fn replace_file(path: &Path, contents: &[u8]) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(what) = not_regular(path) {
        return Err(format!(
            "{} is {what}, not a regular file: it is not replaced; give the path of a regular file (or a new one)",
            path.display()
        ));
    }
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let fail = |e: &dyn std::fmt::Display| {
        format!(
            "cannot write {}: {e}; check the directory exists and is writable",
            path.display()
        )
    };
    let mode = std::fs::metadata(path).map_or(0o644, |m| m.permissions().mode() & 0o7777);
    let mut tmp = tempfile::Builder::new()
        .prefix(".llm-probe-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(|e| fail(&e))?;
    tmp.write_all(contents)
        .and_then(|()| tmp.as_file().sync_all())
        .and_then(|()| {
            tmp.as_file()
                .set_permissions(std::fs::Permissions::from_mode(mode))
        })
        .map_err(|e| fail(&e))?;
    // The temporary is removed if the rename fails.
    tmp.persist(path).map_err(|e| fail(&e.error))?;
    Ok(())
}

/// Creates or truncates the regular file at `path` for writing, never through a symlink at
/// `path` and never blocking on a FIFO there.
///
/// Errors (the message names the path): a symlink, FIFO, device or directory at `path`, or a
/// file with other hard links; any I/O error.
pub fn create_no_follow(path: &Path) -> Result<File, String> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(what) = not_regular(path) {
        return Err(format!(
            "{} is {what}, not a regular file: it is not written; remove it or choose another directory",
            path.display()
        ));
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    // Checked again on what was opened: the path may have changed since.
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!(
            "{} is not a regular file: it is not written",
            path.display()
        ));
    }
    // A hard link planted at the name would make truncating it truncate someone else's file.
    use std::os::unix::fs::MetadataExt;
    if meta.nlink() > 1 {
        return Err(format!(
            "{} has other hard links ({} names): it is not written, as that would change the file under its other names; remove it or choose another directory",
            path.display(),
            meta.nlink()
        ));
    }
    file.set_len(0)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(file)
}
