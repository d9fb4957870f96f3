//! Prometheus file_sd files: a JSON (or, named `.yml`/`.yaml`, YAML) list of groups
//! `{"targets": ["host:port", …], "labels": {…}}`. Each target is one replica, labelled as
//! written; a host name is resolved by the system (its first address). The labels of a group
//! are read but not used.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use serde::Deserialize;

use super::{Discovered, DiscoveryError, Replica, MAX_FILE_SD_BYTES};

/// One group of a file_sd file.
#[derive(Debug, Deserialize)]
struct Group {
    targets: Vec<String>,
    #[serde(default)]
    #[allow(dead_code)]
    labels: BTreeMap<String, String>,
}

/// The replicas listed in the file at `path` (named `shown` in messages): entries sorted
/// (`Entry::order`), deduplicated, the first `max` resolved.
pub(super) async fn discover(
    path: &Path,
    shown: &str,
    max: usize,
) -> Result<Discovered, DiscoveryError> {
    let owned = path.to_path_buf();
    let bytes =
        tokio::task::spawn_blocking(move || crate::config::files::read(&owned, MAX_FILE_SD_BYTES))
            .await
            .map_err(|e| DiscoveryError::Read {
                path: shown.to_string(),
                detail: e.to_string(),
            })?
            .map_err(|e| DiscoveryError::Read {
                path: shown.to_string(),
                detail: format!("{e}; {}", e.fix()),
            })?;
    let yaml = matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yml" | "yaml")
    );
    from_bytes(shown, yaml, &bytes, max).await
}

/// The replicas of a file_sd document (JSON, or YAML when `yaml`) read from `shown` ("the
/// file_sd file PATH", "the http_sd URL URL" without its secrets): entries sorted
/// (`Entry::order`), deduplicated, the first `max` resolved. Shared by file_sd and http_sd.
pub(super) async fn from_bytes(
    shown: &str,
    yaml: bool,
    bytes: &[u8],
    max: usize,
) -> Result<Discovered, DiscoveryError> {
    let entries = parse(yaml, bytes).map_err(|detail| DiscoveryError::Format {
        path: shown.to_string(),
        detail,
    })?;
    if entries.is_empty() {
        return Err(DiscoveryError::Empty(shown.to_string()));
    }
    let mut written: Vec<Entry> = entries;
    written.sort_by_cached_key(Entry::order);
    // One replica per entry, and per address among the IP entries (`[::1]:80` and
    // `[0:0::1]:80` are one): sorted by address, so equal ones are neighbours. Names are only
    // known apart after a lookup, which the cap saves for the first `max`.
    written.dedup_by(|a, b| a.label == b.label || a.ip().is_some_and(|ip| Some(ip) == b.ip()));
    let found = written.len();
    written.truncate(max);
    let mut replicas = Vec::with_capacity(written.len());
    for e in written {
        let addr = match e.ip() {
            Some(addr) => addr,
            None => {
                // The entry is never quoted (it may be huge or hold a secret): the message
                // names the list it came from.
                let unresolved = |detail: String| DiscoveryError::Resolve {
                    host: format!("a host name of {shown}"),
                    detail,
                };
                let mut addrs = tokio::net::lookup_host((e.host.as_str(), e.port))
                    .await
                    .map_err(|err| unresolved(err.to_string()))?
                    .collect::<Vec<_>>();
                addrs.sort();
                addrs
                    .into_iter()
                    .next()
                    .ok_or_else(|| unresolved("no address".into()))?
            }
        };
        replicas.push(Replica {
            label: e.label.into(),
            addr,
        });
    }
    // Two entries for one address are one replica (the first, as sorted, names it).
    super::one_per_address(&mut replicas);
    // Found: the distinct replicas among the entries looked at, and the entries the cap left
    // out (not looked up, so not known apart).
    let found = replicas.len() + found.saturating_sub(max);
    Ok(Discovered {
        replicas,
        found,
        ttl: None,
    })
}

/// One `host:port` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    label: String,
    host: String,
    port: u16,
}

impl Entry {
    /// The address of an IP entry (`None` for a host name).
    /// The entry's address when its host is an IP address; an IPv4-mapped IPv6 address
    /// (`[::ffff:127.0.0.2]`) is its IPv4 address, so the two spellings are one replica.
    fn ip(&self) -> Option<SocketAddr> {
        let ip = self.host.parse::<IpAddr>().ok()?;
        Some(SocketAddr::new(ip.to_canonical(), self.port))
    }

    /// The order of entries: IP addresses first, by address and port (127.0.0.2 before
    /// 127.0.0.10), then host names by their text.
    fn order(&self) -> (bool, Option<SocketAddr>, String) {
        let addr = self.ip();
        (addr.is_none(), addr, self.label.clone())
    }
}

/// The entries of a file_sd file, or what is wrong with it (never an entry's text).
fn parse(yaml: bool, bytes: &[u8]) -> Result<Vec<Entry>, String> {
    let groups: Vec<Group> = if yaml {
        serde_yaml::from_slice(bytes).map_err(|e| {
            format!(
                "not a YAML list of {{targets, labels}} groups ({}); write it as Prometheus file_sd does",
                location(e.location().map(|l| (l.line(), l.column())))
            )
        })?
    } else {
        serde_json::from_slice(bytes).map_err(|e| {
            format!(
                "not a JSON list of {{\"targets\", \"labels\"}} groups ({}, {}); write it as Prometheus file_sd does, or name a YAML file .yml",
                classify(&e),
                location(Some((e.line(), e.column())))
            )
        })?
    };
    let mut out = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        for (t, target) in group.targets.iter().enumerate() {
            out.push(entry(target).ok_or_else(|| {
                format!("entry {t} of group {g} is not host:port with a port from 1 to 65535 (a host name of at most 253 letters, digits, '-', '_' and dots, or an IP address; no user name, password, scheme or path)")
            })?);
        }
    }
    Ok(out)
}

fn classify(e: &serde_json::Error) -> &'static str {
    use serde_json::error::Category;
    match e.classify() {
        Category::Eof => "it ends early: half written?",
        Category::Syntax => "a syntax error",
        Category::Data => "a value of the wrong type",
        Category::Io => "a read error",
    }
}

fn location(at: Option<(usize, usize)>) -> String {
    match at {
        Some((line, column)) => format!("at line {line}, column {column}"),
        None => "at an unknown place".into(),
    }
}

/// `host:port` or `[v6]:port`: no user-info, scheme or path, a port from 1 to 65535.
fn entry(written: &str) -> Option<Entry> {
    let s = written.trim();
    if s.is_empty() || s.contains(['@', '/', '?', '#']) || s.chars().any(|c| c.is_whitespace()) {
        return None;
    }
    let (host, port) = s.rsplit_once(':')?;
    let port: u16 = port.parse().ok().filter(|p| *p != 0)?;
    let host = match host.strip_prefix('[') {
        Some(v6) => {
            let v6 = v6.strip_suffix(']')?;
            v6.parse::<std::net::Ipv6Addr>().ok()?;
            v6.to_string()
        }
        None if host.contains(':') || host.is_empty() => return None,
        None if !super::is_host_name(host) => return None,
        None => host.to_string(),
    };
    Some(Entry {
        label: s.to_string(),
        host,
        port,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, body: &str) -> std::path::PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        p
    }

    #[test]
    fn entries_as_prometheus_writes_them() {
        assert_eq!(
            entry("10.0.0.1:8000"),
            Some(Entry {
                label: "10.0.0.1:8000".into(),
                host: "10.0.0.1".into(),
                port: 8000
            })
        );
        assert_eq!(entry("[::1]:80").unwrap().host, "::1");
        assert_eq!(entry("vllm-0.vllm:8000").unwrap().host, "vllm-0.vllm");
        for bad in [
            "",
            "host",
            "host:0",
            "host:70000",
            "user:secret@host:80",
            "http://host:80",
            "host:80/v1",
            "::1:80",
            "[nope]:80",
            ":80",
            "h\u{1b}[31m:80",
            "ho st:80",
            "h%41:80",
        ] {
            assert_eq!(entry(bad), None, "{bad}");
        }
        assert_eq!(entry(&format!("{}:80", "a".repeat(3_000_000))), None);
        assert!(entry(&format!("{}:80", "a".repeat(253))).is_some());
    }

    #[tokio::test]
    async fn json_and_yaml_files_give_sorted_capped_sets() {
        let dir = tempfile::tempdir().unwrap();
        let json = write(
            dir.path(),
            "sd.json",
            r#"[{"targets": ["127.0.0.3:9000", "127.0.0.2:9000"], "labels": {"pool": "a"}},
                {"targets": ["127.0.0.2:9000", "localhost:9001"]}]"#,
        );
        let set = discover(&json, "the test file", 64).await.unwrap();
        let labels: Vec<&str> = set.replicas.iter().map(|r| &*r.label).collect();
        assert_eq!(
            labels,
            ["127.0.0.2:9000", "127.0.0.3:9000", "localhost:9001"]
        );
        assert_eq!(set.replicas[2].addr.port(), 9001);
        assert_eq!(set.found, 3);
        // Addresses in address order (127.0.0.9 before 127.0.0.10), then names; the cap is
        // applied before any name is resolved.
        let ordered = write(
            dir.path(),
            "order.json",
            r#"[{"targets": ["b.invalid:1", "127.0.0.10:1", "a.invalid:1", "127.0.0.9:2", "127.0.0.9:1"]}]"#,
        );
        let set = discover(&ordered, "the test file", 3).await.unwrap();
        let labels: Vec<&str> = set.replicas.iter().map(|r| &*r.label).collect();
        assert_eq!(labels, ["127.0.0.9:1", "127.0.0.9:2", "127.0.0.10:1"]);
        assert_eq!(set.found, 5);
        let yaml = write(
            dir.path(),
            "sd.yml",
            "- targets: ['127.0.0.9:1', '127.0.0.8:1']\n",
        );
        let set = discover(&yaml, "the test file", 1).await.unwrap();
        assert_eq!(&*set.replicas[0].label, "127.0.0.8:1");
        assert!(set.capped());
    }

    #[tokio::test]
    async fn two_spellings_of_one_address_are_one_replica_before_the_cap() {
        let set = from_bytes(
            "the test list",
            false,
            br#"[{"targets": ["[::1]:80", "[0:0::1]:80", "[::2]:80"]}]"#,
            2,
        )
        .await
        .unwrap();
        let labels: Vec<&str> = set.replicas.iter().map(|r| &*r.label).collect();
        // The first spelling as sorted names it.
        assert_eq!(labels, ["[0:0::1]:80", "[::2]:80"]);
        assert_eq!(set.found, 2, "no cap warning: two distinct replicas");
        // An IPv4-mapped IPv6 address is its IPv4 address.
        let set = from_bytes(
            "the test list",
            false,
            br#"[{"targets": ["[::ffff:127.0.0.2]:80", "127.0.0.2:80", "127.0.0.3:80"]}]"#,
            2,
        )
        .await
        .unwrap();
        let addrs: Vec<String> = set.replicas.iter().map(|r| r.addr.to_string()).collect();
        assert_eq!(addrs, ["127.0.0.2:80", "127.0.0.3:80"]);
        assert_eq!(set.found, 2);
    }

    #[tokio::test]
    async fn bad_files_are_typed_errors_that_never_echo_an_entry() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            ("half.json", r#"[{"targets": ["127.0.0.2:1""#, "format"),
            ("text.json", "not json at all", "format"),
            ("empty.json", "", "format"),
            ("none.json", "[]", "empty"),
            ("object.json", r#"{"targets": []}"#, "format"),
            (
                "secret.json",
                r#"[{"targets": ["admin:hunter2@127.0.0.2:80"]}]"#,
                "format",
            ),
        ];
        for (name, body, reason) in cases {
            let p = write(dir.path(), name, body);
            let err = discover(&p, "the test file", 64).await.unwrap_err();
            assert_eq!(err.reason(), reason, "{name}: {err}");
            assert!(!err.to_string().contains("hunter2"), "{err}");
        }
        let missing = discover(&dir.path().join("missing.json"), "the test file", 64)
            .await
            .unwrap_err();
        assert_eq!(missing.reason(), "read");
        let big = write(
            dir.path(),
            "big.json",
            &" ".repeat(MAX_FILE_SD_BYTES as usize + 1),
        );
        assert_eq!(
            discover(&big, "the test file", 64)
                .await
                .unwrap_err()
                .reason(),
            "read"
        );
    }
}
