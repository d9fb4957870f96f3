//! Golden files: compare a normalized rendering with a committed file, or rewrite the file
//! when `LLM_PROBE_REGENERATE_GOLDEN` is set.

/// The variable that makes [`assert_golden`] write the file instead of comparing.
pub const REGENERATE: &str = "LLM_PROBE_REGENERATE_GOLDEN";

/// Panics with a line diff unless `got` equals the content of `path`; writes `got` there
/// instead when [`REGENERATE`] is set. `test` names the test binary for the hint.
pub fn assert_golden(path: &str, got: &str, test: &str) {
    if std::env::var_os(REGENERATE).is_some() {
        std::fs::create_dir_all(std::path::Path::new(path).parent().unwrap()).unwrap();
        std::fs::write(path, got).unwrap();
        eprintln!("wrote {path}");
        return;
    }
    let want = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!("{path}: {e}; create it with {REGENERATE}=1 cargo test --test fast {test}")
    });
    if got != want {
        let diff: Vec<String> = diff_lines(&want, got);
        panic!(
            "{path} differs from what the code makes ({} lines; `-` golden, `+` now). If the change is intended, regenerate with {REGENERATE}=1 cargo test --test fast {test} and review the diff.\n{}",
            diff.len(),
            diff.join("\n")
        );
    }
}

/// The lines only in `want` (`- …`) and only in `got` (`+ …`), in order.
fn diff_lines(want: &str, got: &str) -> Vec<String> {
    let w: Vec<&str> = want.lines().collect();
    let g: Vec<&str> = got.lines().collect();
    w.iter()
        .filter(|l| !g.contains(l))
        .map(|l| format!("- {l}"))
        .chain(
            g.iter()
                .filter(|l| !w.contains(l))
                .map(|l| format!("+ {l}")),
        )
        .collect()
}
