//! Raw file → validated [`Config`]: defaults applied, references resolved, every
//! semantic problem collected as a full sentence.

mod aws;
mod baseline;
mod defaults;
mod expect;
mod fields;
mod headers;
mod replicas;
mod scenario;
mod secrets;
mod target;
mod tls;
mod urls;

use std::cell::OnceCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use serde_yaml::{Mapping, Value};

use super::locate::Locations;
use super::long_prompt::LongPrompt;
use super::raw::{
    RawDefaults, RawDnsSrv, RawFile, RawMessage, RawReplicas, RawScenario, RawSlo, RawTarget,
    RawTls,
};
use super::schema_errors::{closest, entity_prefix, mapping_at, serde_error, unknown_key};
use super::yaml_features::yaml_features;
use super::{
    Config, ConfigError, ConnectionPolicy, Message, PrefixCache, Problem, Protocol, Scenario,
    Secret, Secrets, Slo, Target, Tls, ToolCallMessage, DEFAULT_AZURE_API_VERSION,
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_INTERVAL, DEFAULT_TIMEOUT, MAX_MODEL_LEN, MAX_NAME_LEN,
};
use crate::sanitize::{is_unsafe_char, redact_url};

type JsonObject = serde_json::Map<String, serde_json::Value>;

const DURATION_HINT: &str = "use a duration like 15s or 300ms";
const NAME_RULE: &str = "ASCII letters, digits, \"_\", \".\", \":\" and \"-\"";
const ROLES: &[&str] = &["system", "developer", "user", "assistant", "tool"];
/// Request keys the protocol layer sets itself; `extra_body` may not override them.
const RESERVED_BODY_KEYS: &[&str] = &[
    "model",
    "messages",
    "stream",
    "stream_options",
    "max_tokens",
    "temperature",
    "n",
];

pub(crate) fn parse(
    text: &str,
    source: &str,
    env: &dyn Fn(&str) -> Option<String>,
    secrets: Secrets,
) -> Result<Config, ConfigError> {
    // A UTF-8 byte-order mark (some Windows editors write one, a second conversion another) is
    // not part of the YAML.
    let text = text.trim_start_matches('\u{feff}');
    super::yaml_features::check_depth(text, source)?;
    // First pass: plain YAML, so syntax errors are told apart from schema errors.
    let mut doc: Value = serde_yaml::from_str(text).map_err(|e| serde_error(e, source, None))?;
    // Where each node is written: only needed, and so only built, when there is a problem.
    let locations = OnceCell::new();
    let merged = yaml_features(&mut doc, text, source, &locations)?;
    let (raw, unknown) = typed(text, source, &doc, merged, &locations)?;

    let mut v = Validator {
        problems: Vec::new(),
        credential_problems: Vec::new(),
        env,
        secrets,
        base_dir: base_dir(source),
    };
    let config = v.file(raw, source);
    if v.problems.is_empty() && unknown.problems.is_empty() {
        if let Some(mut config) = config {
            if !v.credential_problems.is_empty() {
                let locations = locations.get_or_init(|| Locations::build(text));
                config.credential_problems = located(locations, source, v.credential_problems);
            }
            return Ok(config);
        }
    }
    let semantic: Vec<(String, String)> = v
        .problems
        .into_iter()
        // A misspelt key also makes the key it stands for look missing: say it once.
        .filter(|(path, _)| !unknown.hidden.contains(path))
        .collect();
    let mut problems = unknown.problems;
    let locations = locations.get_or_init(|| Locations::build(text));
    problems.extend(located(locations, source, semantic));
    // Stable: problems on the same line keep validation order.
    problems.sort_by_key(|p| p.line.unwrap_or(usize::MAX));
    Err(ConfigError { problems })
}

/// `(field path, message)` problems with the line and column of their node in the text.
pub(super) fn located(
    locations: &Locations,
    source: &str,
    problems: Vec<(String, String)>,
) -> Vec<Problem> {
    problems
        .into_iter()
        .map(|(path, message)| Problem::new(source, locations.find(&path), &path, &message))
        .collect()
}

/// At most this many unknown keys are collected before the rest of the file is checked.
const MAX_UNKNOWN_KEYS: usize = 50;

/// The unknown keys of a file, as problems, and the paths of the keys they probably stand for
/// (their closest allowed key, where the mapping lacks it).
#[derive(Default)]
struct UnknownKeys {
    problems: Vec<Problem>,
    hidden: Vec<String>,
}

/// Reads `text` (already parsed as `doc`) into the typed [`RawFile`]. serde stops at the first
/// unknown key; so that every problem of a file is reported in one run, each unknown key is
/// reported, taken out of the document, and the document is read again. Any other schema error
/// (a wrong type, a missing key) ends the check there, with the unknown keys found before it.
///
/// `merged`: merge keys were applied to `doc`, so it is read from its own rewritten text and
/// every location is looked up in the file as written.
fn typed(
    text: &str,
    source: &str,
    doc: &Value,
    merged: bool,
    locations: &OnceCell<Locations>,
) -> Result<(RawFile, UnknownKeys), ConfigError> {
    let mut unknown = UnknownKeys::default();
    if doc.is_null() {
        return Ok((RawFile::default(), unknown));
    }
    let mut current = doc.clone();
    let mut current_text = if merged {
        serde_yaml::to_string(doc).unwrap_or_else(|_| text.to_string())
    } else {
        text.to_string()
    };
    loop {
        let err = match serde_yaml::from_str::<RawFile>(&current_text) {
            Ok(raw) => return Ok((raw, unknown)),
            Err(e) => e,
        };
        let found = unknown_key(&err).filter(|_| unknown.problems.len() < MAX_UNKNOWN_KEYS);
        let error = serde_error(err, source, Some(doc));
        // Taken out: Some(the path of the key it stands for, if that key is absent).
        let taken_out = found.and_then(|(mapping, key, suggestion)| {
            let m = mapping_at(&mut current, &mapping)?;
            m.remove(key.as_str())?;
            let stands_for = suggestion.filter(|s| !m.contains_key(s.as_str())).map(|s| {
                if mapping.is_empty() {
                    s
                } else {
                    format!("{mapping}.{s}")
                }
            });
            Some(stands_for)
        });
        if taken_out.is_none() && unknown.problems.is_empty() {
            // The first problem, and not an unknown key: exactly serde's location (in the
            // file as written unless merge keys were applied).
            let mut error = error;
            if merged {
                let locations = locations.get_or_init(|| Locations::build(text));
                for p in &mut error.problems {
                    let loc = locations.find(&p.path);
                    (p.line, p.column) = (loc.map(|l| l.0), loc.map(|l| l.1));
                }
            }
            return Err(error);
        }
        // After the first read, serde's locations are in the rewritten text: find the key in
        // the file as written.
        let locations = locations.get_or_init(|| Locations::build(text));
        for mut p in error.problems {
            if let Some(loc) = locations.find_key(&p.path) {
                (p.line, p.column) = (Some(loc.0), Some(loc.1));
            }
            unknown.problems.push(p);
        }
        // The document without the key, to read again; if it cannot be written back (it always
        // can for YAML read from text), report what was found so far.
        let rewritten = taken_out.and_then(|stands_for| {
            unknown.hidden.extend(stands_for);
            serde_yaml::to_string(&current).ok()
        });
        match rewritten {
            Some(text) => current_text = text,
            None => {
                unknown
                    .problems
                    .sort_by_key(|p| p.line.unwrap_or(usize::MAX));
                return Err(ConfigError {
                    problems: unknown.problems,
                });
            }
        }
    }
}

/// Directory that relative `api_key_file` paths are resolved against.
fn base_dir(source: &str) -> Option<PathBuf> {
    if source.starts_with('<') {
        return None;
    }
    Path::new(source)
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
}

/// Defaults after validation (unset where the file does not set them).
#[derive(Default)]
struct Defaults {
    interval: Option<Duration>,
    timeout: Option<Duration>,
    /// `defaults.interval` or `defaults.timeout` was given but invalid (already reported): no
    /// comparison may then be made against the built-in value that stands in for it.
    timing_invalid: bool,
    temperature: Option<f64>,
    headers: Vec<(String, String)>,
    /// `defaults.secret_headers`, lower case.
    secret_headers: Vec<String>,
    slo: Slo,
}

struct Validator<'a> {
    problems: Vec<(String, String)>,
    /// With [`Secrets::Isolate`]: the credentials that cannot be read (`(path, message)`); they
    /// do not make the file invalid.
    credential_problems: Vec<(String, String)>,
    env: &'a dyn Fn(&str) -> Option<String>,
    secrets: Secrets,
    base_dir: Option<PathBuf>,
}
impl Validator<'_> {
    fn problem(&mut self, path: impl Into<String>, message: String) {
        self.problems.push((path.into(), message));
    }

    /// A credential (API key, TLS file) that cannot be read: a problem of the file, except with
    /// [`Secrets::Isolate`], where it is recorded for its target ([`Target::credentials_error`])
    /// and in [`Config::credential_problems`].
    fn credential_problem(&mut self, path: impl Into<String>, message: String) {
        match self.secrets {
            Secrets::Isolate => self.credential_problems.push((path.into(), message)),
            Secrets::Read | Secrets::Skip => self.problem(path, message),
        }
    }

    /// A path a field names: relative ones are relative to the config file's directory.
    fn relative_to_config(&self, file: &str) -> PathBuf {
        let path = PathBuf::from(file);
        match &self.base_dir {
            Some(dir) if path.is_relative() => dir.join(path),
            _ => path,
        }
    }

    fn file(&mut self, raw: RawFile, source: &str) -> Option<Config> {
        // Every header name a target sets: `defaults.secret_headers` may name any of them.
        let target_headers: Vec<String> = (raw.targets.iter().flatten())
            .filter_map(|t| t.headers.as_ref())
            .flat_map(|h| h.keys().filter_map(Value::as_str).map(str::to_string))
            .collect();
        let defaults = self.defaults(raw.defaults.unwrap_or_default(), &target_headers);

        let raw_scenarios = raw.scenarios.unwrap_or_default();
        if raw_scenarios.is_empty() {
            self.problem(
                "scenarios",
                "no scenarios are defined; add at least one entry under scenarios: (see probes.example.yaml).".into(),
            );
        }
        let mut scenarios = Vec::new();
        let mut scenario_index: HashMap<String, usize> = HashMap::new();
        let mut scenario_names: Vec<String> = Vec::new();
        let mut ok = true;
        for (i, rs) in raw_scenarios.into_iter().enumerate() {
            let path = format!("scenarios[{i}]");
            let name = rs.name.clone();
            let built = self.scenario(&path, i, rs, &scenario_index);
            if let Some(n) = name {
                if !scenario_index.contains_key(&n) {
                    scenario_index.insert(n.clone(), i);
                    scenario_names.push(n);
                }
            }
            match built {
                Some(s) => scenarios.push(Arc::new(s)),
                None => ok = false,
            }
        }

        let raw_targets = raw.targets.unwrap_or_default();
        if raw_targets.is_empty() {
            self.problem(
                "targets",
                "no targets are defined; add at least one entry under targets: (see probes.example.yaml).".into(),
            );
        }
        let mut targets = Vec::new();
        let mut target_index: HashMap<String, usize> = HashMap::new();
        for (i, rt) in raw_targets.into_iter().enumerate() {
            let path = format!("targets[{i}]");
            let name = rt.name.clone();
            let built = self.target(
                &path,
                i,
                rt,
                &defaults,
                &target_index,
                &scenario_names,
                &scenarios,
            );
            if let Some(n) = name {
                target_index.entry(n).or_insert(i);
            }
            match built {
                Some(t) => targets.push(Arc::new(t)),
                None => ok = false,
            }
        }

        (ok && self.problems.is_empty()).then(|| Config {
            source: crate::sanitize::terminal_safe(source).into_owned(),
            scenarios,
            targets,
            credential_problems: Vec::new(),
        })
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-')
}

fn fmt_dur(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}
