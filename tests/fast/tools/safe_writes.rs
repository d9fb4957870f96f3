//! Files llm-probe writes where others may write too: `baseline
//! save --out` replaces a regular file only, never a device, a symlink or a FIFO; temporaries
//! have random names and are created exclusively, so a planted symlink at a predictable name is
//! never followed; bench's reports are opened without following symlinks.

use crate::common;

use std::os::unix::fs::symlink;
use std::path::Path;

fn baseline() -> llm_probe::baseline::Baseline {
    llm_probe::baseline::parse(&common::baseline_json("sim", "chat", 0.25)).unwrap()
}

/// Every entry of `dir` (names), sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `--out` naming a symlink, a FIFO or a device is refused (and left as it
/// was); a regular file is replaced whole, keeping its permissions.
#[test]
fn baseline_out_replaces_only_a_regular_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious").unwrap();
    let link = dir.path().join("link.json");
    symlink(&victim, &link).unwrap();
    let fifo = dir.path().join("fifo.json");
    common::mkfifo(&fifo);
    for (out, what) in [
        (link.as_path(), "symbolic link"),
        (fifo.as_path(), "FIFO"),
        (Path::new("/dev/null"), "device"),
        (dir.path(), "directory"),
    ] {
        let e = llm_probe::baseline::save::write(&baseline(), out).unwrap_err();
        assert!(
            e.contains(&out.display().to_string()) && e.contains(what),
            "{out:?}: {e}"
        );
    }
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert!(Path::new("/dev/null").exists());
    // A baseline file saved before: replaced, its mode kept; a new one is made.
    let file = dir.path().join("b.json");
    llm_probe::baseline::save::write(&baseline(), &file).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    llm_probe::baseline::save::write(&baseline(), &file).unwrap();
    assert!(std::fs::read_to_string(&file)
        .unwrap()
        .contains("llm-probe.baseline/v1"));
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
    let new = dir.path().join("new.json");
    llm_probe::baseline::save::write(&baseline(), &new).unwrap();
    let mode = std::fs::metadata(&new).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        mode & 0o044,
        0o044,
        "readable by the daemon's user: {mode:o}"
    );
    assert_eq!(
        entries(dir.path()),
        ["b.json", "fifo.json", "link.json", "new.json", "victim"],
        "no temporary is left behind"
    );
}

/// Symlinks planted at the old fixed temporary names are never followed.
#[test]
fn planted_symlinks_at_temporary_names_are_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious").unwrap();
    let out = dir.path().join("reports");
    std::fs::create_dir(&out).unwrap();
    symlink(&victim, out.join(".llm-probe-bench-write-check")).unwrap();
    llm_probe::bench::command::writable_dir(&out).unwrap();
    symlink(&victim, dir.path().join(".b.json.tmp")).unwrap();
    llm_probe::baseline::save::write(&baseline(), &dir.path().join("b.json")).unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert!(std::fs::read_to_string(dir.path().join("b.json"))
        .unwrap()
        .contains("llm-probe.baseline/v1"));
}

/// A report file that is a symlink (or a FIFO) is refused, not followed
/// (or waited on).
#[test]
fn bench_reports_are_not_written_through_symlinks() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious").unwrap();
    let out = dir.path().join("reports");
    std::fs::create_dir(&out).unwrap();
    symlink(&victim, out.join("report.md")).unwrap();
    common::mkfifo(&out.join("report.txt"));
    let e = llm_probe::bench::command::create_report(&out.join("report.md")).unwrap_err();
    assert!(e.contains("report.md"), "{e}");
    let e = llm_probe::bench::command::create_report(&out.join("report.txt")).unwrap_err();
    assert!(
        e.contains("report.txt") && e.contains("regular file"),
        "{e}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    // A hard link planted at a report's name (to a file of someone else's) is not truncated.
    std::fs::hard_link(&victim, out.join("report.html")).unwrap();
    let e = llm_probe::bench::command::create_report(&out.join("report.html")).unwrap_err();
    assert!(e.contains("report.html") && e.contains("link"), "{e}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    let mut f = llm_probe::bench::command::create_report(&out.join("report.json")).unwrap();
    std::io::Write::write_all(&mut f, b"{}").unwrap();
    assert_eq!(
        std::fs::read_to_string(out.join("report.json")).unwrap(),
        "{}"
    );
}
