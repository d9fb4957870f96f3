//! A target's credentials that live outside the probes file: the API key (`api_key_env`,
//! `api_key_file`), the TLS PEM files (`tls.ca_file`, `tls.cert_file`, `tls.key_file`) and a
//! `bedrock` target's AWS shared credentials file ([`super::aws`]).
//!
//! Loading a config reads them once ([`super::load`]); a running prober re-reads the files when
//! they change ([`stamps`], [`reread`]), so a rotated Kubernetes Secret (rewritten in place, or
//! swapped through its `..data` symlink) is used by the next probe without a restart or reload.
//! Every message here names the variable or the file, never a value.

use std::path::{Path, PathBuf};

use reqwest::header::HeaderValue;

use super::aws::{AwsAuth, AwsSource};
use super::files::{self, ReadError};
use super::{Secret, Target, Tls};

/// The file an `api_key_file` names, re-read when it changes. `Debug` does not show a bare
/// name.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyFile {
    /// Resolved against the config file's directory.
    pub path: PathBuf,
    /// The configured value has neither `/` nor `.`: it may be the key itself pasted in the
    /// wrong field, so messages never quote it.
    pub bare: bool,
}

impl std::fmt::Debug for KeyFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.bare {
            true => f.write_str("KeyFile(<a bare name, not shown>)"),
            false => write!(f, "KeyFile({:?})", self.path),
        }
    }
}

/// The text of a file named by a credential field, or why it cannot be read.
fn read_text(path: &Path) -> Result<Vec<u8>, ReadError> {
    files::read(path, files::MAX_SMALL_FILE_BYTES)
}

/// Trims and checks an API key value read from `what` (`the environment variable X`, `the file
/// /p`) for the field `field`; the message names `what`, never the value. Leading UTF-8
/// byte-order marks (which Windows editors write; twice after two conversions) are stripped
/// as the surrounding whitespace and the trailing newline are.
///
/// Errors: the value is empty, or holds characters that cannot be sent in an HTTP header.
pub fn key_from_value(value: &str, what: &str, field: &str) -> Result<Secret, String> {
    let value = value.trim_start_matches('\u{feff}').trim();
    if value.is_empty() {
        return Err(format!("{what} named by {field} is empty; put the API key in it, or remove {field} if the endpoint needs no key."));
    }
    if HeaderValue::from_str(&format!("Bearer {value}")).is_err() {
        return Err(format!("the API key in {what} contains characters that cannot be sent in an HTTP header (control characters or non-ASCII); check its contents."));
    }
    Ok(Secret::new(value.to_string()))
}

/// The API key in the environment variable `var` (looked up with `env`).
///
/// Errors: the variable is unset or empty, or its value cannot be sent in a header.
pub fn key_from_env(var: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Secret, String> {
    match env(var) {
        None => Err(format!("api_key_env names the environment variable {var}, which is not set; export it before starting llm-probe, or remove api_key_env if the endpoint needs no key.")),
        Some(value) => key_from_value(&value, &format!("the environment variable {var}"), "api_key_env"),
    }
}

/// The API key in the file `path` (already resolved against the config file's directory).
/// `bare`: the configured value has neither `/` nor `.`, so it may be the key itself pasted in
/// the wrong field, and is never quoted.
///
/// Errors: the file cannot be read, is not UTF-8, is empty, or its key cannot be sent in a header.
pub fn key_from_file(path: &Path, bare: bool) -> Result<Secret, String> {
    let shown = path.display();
    let text = read_text(path).and_then(|b| {
        String::from_utf8(b).map_err(|_| {
            ReadError::Io(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "not UTF-8 text",
            ))
        })
    });
    match text {
        Err(e) if bare => Err(format!("api_key_file cannot be read ({e}); its value is not shown because, without a \"/\" or \".\", it may be the key itself. Give the path of a file that holds the key (e.g. ./vllm.key).")),
        Err(e) => Err(format!("api_key_file {shown} cannot be read ({e}); {}.", e.fix())),
        Ok(value) => key_from_value(&value, &format!("the file {shown}"), "api_key_file"),
    }
}

/// The PEM bytes of the file `path` named by `tls.<field>`.
///
/// Errors: the file cannot be read or has no `-----BEGIN` line.
pub fn read_pem(field: &str, path: &Path) -> Result<Vec<u8>, String> {
    match read_text(path) {
        Ok(bytes) if String::from_utf8_lossy(&bytes).contains("-----BEGIN ") => Ok(bytes),
        Ok(_) => Err(format!(
            "tls.{field} {} is not a PEM file (no \"-----BEGIN\" line); give the PEM form.",
            path.display()
        )),
        Err(e) => Err(format!(
            "tls.{field} {} cannot be read ({e}); {}.",
            path.display(),
            e.fix()
        )),
    }
}

/// The CA bundle of `tls.ca_file` `path`, checked to hold at least one certificate.
///
/// Errors: as [`read_pem`]; no usable certificate.
pub fn read_ca(path: &Path) -> Result<Vec<u8>, String> {
    let pem = read_pem("ca_file", path)?;
    if reqwest::Certificate::from_pem_bundle(&pem).map_or(true, |v| v.is_empty()) {
        return Err(format!(
            "tls.ca_file {} holds no usable certificate; give the CA certificate in PEM form.",
            path.display()
        ));
    }
    Ok(pem)
}

/// The client certificate chain of `cert` followed by the key of `key` (PEM), checked to form
/// a client identity.
///
/// Errors: either file as [`read_pem`]; the two do not form an identity. Both files' problems
/// are reported together.
pub fn read_identity(cert: &Path, key: &Path) -> Result<Vec<u8>, String> {
    let (c, k) = (read_pem("cert_file", cert), read_pem("key_file", key));
    let (mut pem, key_pem) = match (c, k) {
        (Ok(c), Ok(k)) => (c, k),
        (Err(a), Err(b)) => return Err(format!("{a} {b}")),
        (Err(e), _) | (_, Err(e)) => return Err(e),
    };
    pem.push(b'\n');
    pem.extend_from_slice(&key_pem);
    if reqwest::Identity::from_pem(&pem).is_err() {
        return Err(format!("tls.cert_file {} and tls.key_file {} do not form a client identity (a PEM certificate and its PEM private key); check both files.", cert.display(), key.display()));
    }
    Ok(pem)
}

/// The files a target's credentials are read from, in a fixed order: `api_key_file`,
/// `tls.ca_file`, the AWS shared credentials file (a `bedrock` target signing with a profile),
/// `tls.cert_file`, `tls.key_file` (those configured).
pub fn files(target: &Target) -> Vec<&Path> {
    let mut v: Vec<&Path> = target
        .api_key_file
        .iter()
        .map(|f| f.path.as_path())
        .collect();
    v.extend(target.tls.ca_file.as_deref());
    if let Some(super::aws::AwsSource::Profile { file, .. }) =
        target.aws.as_ref().map(|a| &a.source)
    {
        v.push(file.as_path());
    }
    if let Some((c, k)) = &target.tls.client_files {
        v.extend([c.as_path(), k.as_path()]);
    }
    v
}

/// What identifies one version of a file: device, inode, size, modification and change times
/// of the file a path resolves to (symlinks followed, so a Kubernetes `..data` swap, which
/// points the path at a new file, changes it; so does rewriting the file in place).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileStamp {
    dev: u64,
    ino: u64,
    len: u64,
    modified: Option<std::time::SystemTime>,
    changed: i64,
    changed_ns: i64,
}

/// The stamp of each of `paths` (`None`: missing or unreadable metadata). Blocking: call off
/// the async runtime.
pub fn stamps(paths: &[&Path]) -> Vec<Option<FileStamp>> {
    paths
        .iter()
        .map(|p| {
            let m = std::fs::metadata(p).ok()?;
            #[cfg(unix)]
            let (dev, ino, changed, changed_ns) = {
                use std::os::unix::fs::MetadataExt;
                (m.dev(), m.ino(), m.ctime(), m.ctime_nsec())
            };
            #[cfg(not(unix))]
            let (dev, ino, changed, changed_ns) = (0, 0, 0, 0);
            Some(FileStamp {
                dev,
                ino,
                len: m.len(),
                modified: m.modified().ok(),
                changed,
                changed_ns,
            })
        })
        .collect()
}

/// `pem` as one shared copy of equal bytes read before and still held (by a target, a client
/// key): each prober of a pool's replicas re-reads the files after a change, and 1,000 replicas
/// trusting a rewritten 200 KiB CA bundle must not keep 1,000 copies of it. Only weak
/// references are kept here.
pub fn shared_pem(pem: Vec<u8>) -> std::sync::Arc<[u8]> {
    use std::sync::{Arc, Mutex, Weak};
    static SEEN: Mutex<Vec<Weak<[u8]>>> = Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    seen.retain(|w| w.strong_count() > 0);
    if let Some(held) = (seen.iter())
        .filter_map(Weak::upgrade)
        .find(|held| **held == *pem)
    {
        return held;
    }
    let pem: Arc<[u8]> = pem.into();
    seen.push(Arc::downgrade(&pem));
    pem
}

/// What [`reread`] read: the API key, the TLS material and a `bedrock` target's AWS signing.
pub type Reread = (Option<Secret>, Tls, Option<AwsAuth>);

/// The target's API key, TLS material and AWS profile credentials read again from their files
/// (an `api_key_env` key and AWS credentials from the environment are kept as loaded: a
/// process's environment does not change). Blocking: call off the runtime.
///
/// Errors: a sentence per credential that cannot be read or checked, naming the file.
pub fn reread(target: &Target) -> Result<Reread, String> {
    let mut problems = Vec::new();
    let key = match &target.api_key_file {
        Some(f) => key_from_file(&f.path, f.bare)
            .map_err(|e| problems.push(e))
            .ok(),
        None => {
            // An api_key_env key that was missing at load stays missing: the process's
            // environment does not change (the target must not recover without its key).
            let env = target
                .api_key_source
                .as_deref()
                .and_then(|s| s.strip_prefix("env "));
            if let (Some(var), None) = (env, &target.api_key) {
                problems.push(format!("api_key_env names the environment variable {var}, which was not set (or was empty) when llm-probe started; set it and restart llm-probe, or use api_key_file, which is re-read when it changes."));
            }
            target.api_key.clone()
        }
    };
    let mut tls = target.tls.clone();
    if let Some(ca) = &tls.ca_file {
        tls.ca_pem = read_ca(ca)
            .map_err(|e| problems.push(e))
            .ok()
            .map(shared_pem);
    }
    if let Some((cert, key)) = &tls.client_files {
        tls.client_identity_pem =
            (read_identity(cert, key).map_err(|e| problems.push(e)).ok()).map(shared_pem);
    }
    let mut aws = target.aws.clone();
    if let Some(a) = aws.as_mut() {
        if let AwsSource::Profile { name, file } = &a.source {
            a.credentials = super::aws::read_profile(file, name)
                .map_err(|e| problems.push(e))
                .ok();
        }
    }
    if problems.is_empty() {
        Ok((key, tls, aws))
    } else {
        Err(problems.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_source_never_the_value() {
        let e = key_from_env("MY_KEY", &|_| None).unwrap_err();
        assert!(e.contains("MY_KEY") && e.contains("not set"), "{e}");
        let e = key_from_env("MY_KEY", &|_| Some("  ".into())).unwrap_err();
        assert!(e.contains("MY_KEY") && e.contains("empty"), "{e}");
        let e = key_from_env("MY_KEY", &|_| Some("sk-\u{7}secret".into())).unwrap_err();
        assert!(!e.contains("sk-"), "{e}");
        let e = key_from_file(Path::new("/nonexistent/dir/key.txt"), false).unwrap_err();
        assert!(
            e.contains("/nonexistent/dir/key.txt") && e.contains("no such file"),
            "{e}"
        );
        let e = key_from_file(Path::new("sk-pasted-key"), true).unwrap_err();
        assert!(!e.contains("sk-pasted-key"), "{e}");
    }

    /// A key file written by a Windows editor starts with a UTF-8 byte-order mark (and may end
    /// in CRLF): the mark is stripped as the line ending is, never sent as part of the key. Only
    /// one mark, and only at the start.
    #[test]
    fn a_byte_order_mark_before_the_key_is_stripped_like_the_newline() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("key.txt");
        for text in [
            "\u{feff}sk-abc\r\n",
            "\u{feff}sk-abc",
            "\u{feff} sk-abc \n",
            "\u{feff}\u{feff}sk-abc\n",
            "sk-abc\n",
        ] {
            std::fs::write(&f, text).unwrap();
            let key = key_from_file(&f, false).unwrap();
            assert_eq!(key.expose(), "sk-abc", "{text:?}");
        }
        let env = key_from_env("K", &|_| Some("\u{feff}sk-abc\n".into())).unwrap();
        assert_eq!(env.expose(), "sk-abc");
        // Nothing but the mark is an empty file.
        std::fs::write(&f, "\u{feff}\n").unwrap();
        let e = key_from_file(&f, false).unwrap_err();
        assert!(e.contains("is empty"), "{e}");
    }

    /// A target whose api_key_env was unset at load keeps failing when its TLS files are read
    /// again: it never probes without its key.
    #[test]
    fn a_missing_env_key_stays_missing_on_reread() {
        let yaml = "scenarios: [{name: s, messages: [{role: user, content: hi}], max_tokens: 1}]\ntargets:\n  - name: t\n    protocol: openai-chat\n    base_url: http://h/v1\n    model: m\n    api_key_env: UNSET_VAR_24\n";
        let cfg =
            crate::config::parse_with(yaml, "t.yaml", &|_| None, crate::config::Secrets::Isolate)
                .unwrap_or_else(|e| panic!("{e}"));
        let t = &cfg.targets[0];
        assert!(t
            .credentials_error
            .as_deref()
            .is_some_and(|e| e.contains("UNSET_VAR_24")));
        let e = reread(t).unwrap_err();
        assert!(e.contains("UNSET_VAR_24") && e.contains("restart"), "{e}");
    }

    #[test]
    fn a_rewritten_or_swapped_file_changes_its_stamp() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("a");
        std::fs::write(&real, "one").unwrap();
        let link = dir.path().join("key");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let first = stamps(&[&link]);
        assert!(first[0].is_some());
        assert_eq!(first, stamps(&[&link]), "unchanged");
        // Swapped: the link points at another file of the same size.
        let other = dir.path().join("b");
        std::fs::write(&other, "two").unwrap();
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(&other, &link).unwrap();
        let second = stamps(&[&link]);
        assert_ne!(first, second);
        std::fs::remove_file(&other).unwrap();
        assert_eq!(stamps(&[&link]), vec![None]);
    }
}
