//! Raw file → validated [`Config`]: defaults applied, references resolved, every
//! semantic problem collected as a full sentence.

use std::cell::OnceCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use serde_yaml::{Mapping, Value};

use super::locate::Locations;
use super::raw::{RawDefaults, RawFile, RawMessage, RawScenario, RawSlo, RawTarget, RawTls};
use super::schema_errors::{closest, entity_prefix, mapping_at, serde_error, unknown_key};
use super::yaml_features::yaml_features;
use super::{
    Config, ConfigError, ConnectionPolicy, Message, PrefixCache, Problem, Protocol, Scenario,
    Secret, Secrets, Slo, Target, Tls, DEFAULT_AZURE_API_VERSION, DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_INTERVAL, DEFAULT_TIMEOUT, MAX_MODEL_LEN, MAX_NAME_LEN,
};
use crate::sanitize::{is_unsafe_char, redact_url};

type JsonObject = serde_json::Map<String, serde_json::Value>;

const DURATION_HINT: &str = "use a duration like 15s or 300ms";
const NAME_RULE: &str = "letters, digits, \"_\", \".\", \":\" and \"-\"";
const ROLES: &[&str] = &["system", "developer", "user", "assistant"];
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
        env,
        secrets,
        base_dir: base_dir(source),
    };
    let config = v.file(raw, source);
    if v.problems.is_empty() && unknown.problems.is_empty() {
        if let Some(config) = config {
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
    env: &'a dyn Fn(&str) -> Option<String>,
    secrets: Secrets,
    base_dir: Option<PathBuf>,
}

impl Validator<'_> {
    fn problem(&mut self, path: impl Into<String>, message: String) {
        self.problems.push((path.into(), message));
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
        })
    }

    // ---- defaults -------------------------------------------------------------

    fn defaults(&mut self, raw: RawDefaults, target_headers: &[String]) -> Defaults {
        let mut d = Defaults::default();
        let p = "defaults";
        d.interval = raw
            .interval
            .as_ref()
            .and_then(|v| self.positive_duration(&format!("{p}.interval"), "", "interval", v));
        d.timeout = raw
            .timeout
            .as_ref()
            .and_then(|v| self.positive_duration(&format!("{p}.timeout"), "", "timeout", v));
        d.timing_invalid = (raw.interval.is_some() && d.interval.is_none())
            || (raw.timeout.is_some() && d.timeout.is_none());
        if let (Some(i), Some(t)) = (d.interval, d.timeout) {
            if t > i {
                self.problem(
                    format!("{p}.timeout"),
                    format!(
                        "defaults.timeout {} is longer than defaults.interval {}; a probe must finish before the next one starts, so lower the timeout or raise the interval.",
                        fmt_dur(t),
                        fmt_dur(i)
                    ),
                );
            }
        }
        d.temperature = raw
            .temperature
            .and_then(|t| self.temperature(&format!("{p}.temperature"), "", t));
        if let Some(h) = &raw.headers {
            d.headers = self.headers(&format!("{p}.headers"), "", h);
        }
        let set: Vec<&str> = (d.headers.iter().map(|(k, _)| k.as_str()))
            .chain(target_headers.iter().map(String::as_str))
            .collect();
        d.secret_headers = self.secret_headers(p, "", raw.secret_headers.as_deref(), &set);
        d.slo = self.slo(&format!("{p}.slo"), "", raw.slo.as_ref(), Slo::default());
        d
    }

    // ---- scenarios ------------------------------------------------------------

    fn scenario(
        &mut self,
        path: &str,
        i: usize,
        raw: RawScenario,
        seen: &HashMap<String, usize>,
    ) -> Option<Scenario> {
        let before = self.problems.len();
        let pre = entity_prefix("scenario", raw.name.as_deref(), i);
        let name = self.name(
            path,
            &pre,
            "scenario",
            raw.name.as_deref(),
            seen,
            "scenarios",
        );

        let mut messages = Vec::new();
        match raw.messages {
            None => self.problem(
                format!("{path}.messages"),
                format!("{pre}messages is required; add at least one message, e.g. [{{role: user, content: \"Hello\"}}]."),
            ),
            Some(list) if list.is_empty() => self.problem(
                format!("{path}.messages"),
                format!("{pre}messages is empty; add at least one message, e.g. [{{role: user, content: \"Hello\"}}]."),
            ),
            Some(list) => {
                for (j, m) in list.into_iter().enumerate() {
                    if let Some(m) = self.message(&format!("{path}.messages[{j}]"), &pre, j, m) {
                        messages.push(m);
                    }
                }
            }
        }

        let mp = format!("{path}.max_tokens");
        let max_tokens = match raw.max_tokens {
            None => {
                self.problem(
                    mp,
                    format!("{pre}max_tokens is required; set it to the number of output tokens each probe may generate, e.g. 64."),
                );
                None
            }
            Some(n) if n < 1 => {
                self.problem(
                    mp,
                    format!("{pre}max_tokens is {n}; set it to at least 1 (it caps the output tokens each probe generates, e.g. 64)."),
                );
                None
            }
            Some(n) => match u32::try_from(n) {
                Ok(n) => Some(n),
                Err(_) => {
                    self.problem(
                        mp,
                        format!(
                            "{pre}max_tokens {n} is too large; set it to at most {}.",
                            u32::MAX
                        ),
                    );
                    None
                }
            },
        };

        let temperature = raw
            .temperature
            .and_then(|t| self.temperature(&format!("{path}.temperature"), &pre, t));

        let prefix_cache = match raw.prefix_cache.as_deref() {
            None | Some("cold") => PrefixCache::Cold,
            Some("warm") => PrefixCache::Warm,
            Some(other) => {
                self.problem(
                    format!("{path}.prefix_cache"),
                    format!("{pre}prefix_cache \"{other}\" is not supported; use cold (a unique nonce starts every prompt so the server's prefix cache cannot serve it) or warm (the prompt is sent verbatim)."),
                );
                PrefixCache::Cold
            }
        };

        let extra_body = raw.extra_body.unwrap_or_default();
        self.extra_body(&format!("{path}.extra_body"), &pre, &extra_body);

        if self.problems.len() != before {
            return None;
        }
        Some(Scenario {
            name: name?,
            messages,
            max_tokens: max_tokens?,
            temperature,
            prefix_cache,
            extra_body,
        })
    }

    fn message(&mut self, path: &str, pre: &str, j: usize, raw: RawMessage) -> Option<Message> {
        let roles = ROLES.join(", ");
        let role = match raw.role {
            None => {
                self.problem(
                    format!("{path}.role"),
                    format!("{pre}messages[{j}] has no role; set role to one of: {roles}."),
                );
                None
            }
            Some(r) if !ROLES.contains(&r.as_str()) => {
                self.problem(
                    format!("{path}.role"),
                    format!(
                        "{pre}messages[{j}].role \"{r}\" is not supported; use one of: {roles}."
                    ),
                );
                None
            }
            Some(r) => Some(r),
        };
        let content = match raw.content {
            Some(c) if !c.trim().is_empty() => Some(c),
            _ => {
                self.problem(
                    format!("{path}.content"),
                    format!(
                        "{pre}messages[{j}] has no content; write the message text in content."
                    ),
                );
                None
            }
        };
        Some(Message {
            role: role?,
            content: content?,
        })
    }

    // ---- targets --------------------------------------------------------------

    #[allow(clippy::too_many_arguments)]
    fn target(
        &mut self,
        path: &str,
        i: usize,
        raw: RawTarget,
        d: &Defaults,
        seen: &HashMap<String, usize>,
        scenario_names: &[String],
        scenarios: &[Arc<Scenario>],
    ) -> Option<Target> {
        let before = self.problems.len();
        let pre = entity_prefix("target", raw.name.as_deref(), i);
        let name = self.name(path, &pre, "target", raw.name.as_deref(), seen, "targets");

        let protocols: Vec<&str> = Protocol::ALL.iter().map(|p| p.as_str()).collect();
        let protocols = protocols.join(", ");
        let protocol = match raw.protocol.as_deref() {
            None => {
                self.problem(
                    format!("{path}.protocol"),
                    format!("{pre}protocol is required; set it to one of: {protocols}."),
                );
                None
            }
            Some(p) => {
                let parsed = Protocol::from_name(p);
                if parsed.is_none() {
                    self.problem(
                        format!("{path}.protocol"),
                        format!("{pre}protocol \"{p}\" is not supported; use one of: {protocols}."),
                    );
                }
                parsed
            }
        };

        let base_url = self.base_url(&format!("{path}.base_url"), &pre, raw.base_url.as_deref());

        let model = match raw.model.clone() {
            Some(m) if m.chars().count() > MAX_MODEL_LEN => {
                self.problem(
                    format!("{path}.model"),
                    format!("{pre}model is {} characters long; shorten it to at most {MAX_MODEL_LEN}, because it becomes the \"model\" label of every series.", m.chars().count()),
                );
                None
            }
            Some(m) if m.chars().any(is_unsafe_char) => {
                self.problem(
                    format!("{path}.model"),
                    format!("{pre}model \"{m}\" contains control characters (such as a newline, a tab or an escape) or bidirectional controls; write the model name the endpoint serves, without them."),
                );
                None
            }
            Some(m) if !m.trim().is_empty() => Some(m),
            _ => {
                self.problem(
                    format!("{path}.model"),
                    format!("{pre}model is required; set it to the model name the endpoint serves (GET <base_url>/models lists them)."),
                );
                None
            }
        };

        let (api_key, api_key_source) = self.api_key(path, &pre, &raw);

        // Interval and timeout: target over defaults over built-ins. An unset timeout
        // is lowered to the interval when the interval is shorter than the default.
        let t_interval = raw
            .interval
            .as_ref()
            .and_then(|v| self.positive_duration(&format!("{path}.interval"), &pre, "interval", v));
        let t_timeout = raw
            .timeout
            .as_ref()
            .and_then(|v| self.positive_duration(&format!("{path}.timeout"), &pre, "timeout", v));
        let interval = t_interval.or(d.interval).unwrap_or(DEFAULT_INTERVAL);
        let timeout = t_timeout
            .or(d.timeout)
            .unwrap_or_else(|| DEFAULT_TIMEOUT.min(interval));
        let timeout_set_here = raw.timeout.is_some();
        let interval_set_here = raw.interval.is_some();
        // An invalid value was already reported; comparing the default that stands in for it
        // would only add a misleading second problem.
        let timing_valid = !d.timing_invalid
            && (t_interval.is_some() || !interval_set_here)
            && (t_timeout.is_some() || !timeout_set_here);
        if timing_valid && (timeout_set_here || interval_set_here) && timeout > interval {
            let origin = |here: bool, key: &str, d: Duration| {
                if here {
                    format!("{key} {}", fmt_dur(d))
                } else {
                    format!("{key} {} (from defaults.{key})", fmt_dur(d))
                }
            };
            self.problem(
                format!(
                    "{path}.{}",
                    if timeout_set_here { "timeout" } else { "interval" }
                ),
                format!(
                    "{pre}{} is longer than {}; a probe must finish before the next one starts, so lower the timeout or raise the interval.",
                    origin(timeout_set_here, "timeout", timeout),
                    origin(interval_set_here, "interval", interval),
                ),
            );
        }

        let temperature = match raw.temperature {
            Some(t) => self.temperature(&format!("{path}.temperature"), &pre, t),
            None => d.temperature,
        };

        let mut headers = d.headers.clone();
        if let Some(h) = &raw.headers {
            for (k, v) in self.headers(&format!("{path}.headers"), &pre, h) {
                match headers
                    .iter_mut()
                    .find(|(dk, _)| dk.eq_ignore_ascii_case(&k))
                {
                    Some(slot) => *slot = (k, v),
                    None => headers.push((k, v)),
                }
            }
        }
        let set: Vec<&str> = headers.iter().map(|(k, _)| k.as_str()).collect();
        let mut secret_headers = d.secret_headers.clone();
        for name in self.secret_headers(path, &pre, raw.secret_headers.as_deref(), &set) {
            if !secret_headers.contains(&name) {
                secret_headers.push(name);
            }
        }
        if raw.api_key_env.is_some() || raw.api_key_file.is_some() {
            let auth = protocol.map_or("authorization", Protocol::auth_header);
            if let Some((k, _)) = headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(auth)) {
                let key_field = if raw.api_key_env.is_some() {
                    "api_key_env"
                } else {
                    "api_key_file"
                };
                let shown = if auth == "authorization" {
                    "Authorization"
                } else {
                    auth
                };
                self.problem(
                    format!("{path}.{key_field}"),
                    format!("{pre}both {key_field} and an {k} header are set, and the API key is sent as the {shown} header; keep only one of them."),
                );
            }
        }

        let (deployment, api_version) = self.azure_fields(path, &pre, protocol, &raw);
        let version_path = self.version_path(path, &pre, raw.version_path.as_deref());
        let tls = self.tls(path, &pre, raw.tls.as_ref(), base_url.as_ref());
        let connect_timeout = raw
            .connect_timeout
            .as_ref()
            .and_then(|v| {
                self.positive_duration(
                    &format!("{path}.connect_timeout"),
                    &pre,
                    "connect_timeout",
                    v,
                )
            })
            .unwrap_or(DEFAULT_CONNECT_TIMEOUT)
            .min(timeout);
        let connection = match raw.connection.as_deref() {
            None | Some("fresh") => ConnectionPolicy::Fresh,
            Some("reuse") => ConnectionPolicy::Reuse,
            Some(other) => {
                self.problem(
                    format!("{path}.connection"),
                    format!("{pre}connection \"{other}\" is not a policy; use fresh (a new connection per probe, the default) or reuse."),
                );
                ConnectionPolicy::Fresh
            }
        };

        let extra_body = raw.extra_body.unwrap_or_default();
        self.extra_body(&format!("{path}.extra_body"), &pre, &extra_body);

        let resolved = self.target_scenarios(
            path,
            &pre,
            raw.scenarios.as_deref(),
            scenario_names,
            scenarios,
        );

        let slo = self.slo(&format!("{path}.slo"), &pre, raw.slo.as_ref(), d.slo);

        if self.problems.len() != before {
            return None;
        }
        Some(Target {
            name: name?,
            protocol: protocol?,
            base_url: base_url?,
            model: model?,
            api_key,
            api_key_source,
            headers,
            secret_headers,
            interval,
            timeout,
            temperature,
            extra_body,
            scenarios: resolved?,
            slo,
            deployment,
            api_version,
            version_path,
            tls,
            connect_timeout,
            connection,
        })
    }

    /// Reads and checks a PEM file named by `tls.<field>`; the message names the path, never
    /// the contents.
    fn pem_file(
        &mut self,
        path: &str,
        pre: &str,
        field: &str,
        file: &str,
    ) -> Option<(PathBuf, Vec<u8>)> {
        let mut resolved = PathBuf::from(file);
        if resolved.is_relative() {
            if let Some(dir) = &self.base_dir {
                resolved = dir.join(resolved);
            }
        }
        match super::files::read(&resolved, super::files::MAX_SMALL_FILE_BYTES) {
            Ok(bytes) if String::from_utf8_lossy(&bytes).contains("-----BEGIN ") => {
                Some((resolved, bytes))
            }
            Ok(_) => {
                self.problem(
                    format!("{path}.tls.{field}"),
                    format!("{pre}tls.{field} {} is not a PEM file (no \"-----BEGIN\" line); give the PEM form.", resolved.display()),
                );
                None
            }
            Err(e) => {
                self.problem(
                    format!("{path}.tls.{field}"),
                    format!(
                        "{pre}tls.{field} {} cannot be read ({e}); {}.",
                        resolved.display(),
                        e.fix()
                    ),
                );
                None
            }
        }
    }

    /// The `tls:` block: CA file, client certificate and key (both or neither), and
    /// `insecure_skip_verify`; only for `https` base URLs. The PEM is checked by the TLS library.
    fn tls(
        &mut self,
        path: &str,
        pre: &str,
        raw: Option<&RawTls>,
        base_url: Option<&reqwest::Url>,
    ) -> Tls {
        let Some(raw) = raw else {
            return Tls::default();
        };
        if base_url.is_some_and(|u| u.scheme() != "https") {
            self.problem(
                format!("{path}.tls"),
                format!("{pre}tls is set but base_url is not https; remove tls or use an https:// base_url."),
            );
        }
        let mut tls = Tls {
            insecure_skip_verify: raw.insecure_skip_verify.unwrap_or(false),
            ..Tls::default()
        };
        if let Some(file) = &raw.ca_file {
            if let Some((p, pem)) = self.pem_file(path, pre, "ca_file", file) {
                if reqwest::Certificate::from_pem_bundle(&pem).map_or(true, |v| v.is_empty()) {
                    self.problem(format!("{path}.tls.ca_file"), format!("{pre}tls.ca_file {} holds no usable certificate; give the CA certificate in PEM form.", p.display()));
                }
                tls.ca_file = Some(p);
                tls.ca_pem = Some(pem);
            }
        }
        match (&raw.cert_file, &raw.key_file) {
            (None, None) => {}
            (Some(_), None) | (None, Some(_)) => {
                let missing = if raw.cert_file.is_none() {
                    "cert_file"
                } else {
                    "key_file"
                };
                self.problem(
                    format!("{path}.tls.{missing}"),
                    format!("{pre}tls.cert_file and tls.key_file go together (the client certificate and its key, for mTLS); set tls.{missing} too."),
                );
            }
            (Some(cert), Some(key)) => {
                let cert = self.pem_file(path, pre, "cert_file", cert);
                let key = self.pem_file(path, pre, "key_file", key);
                if let (Some((cp, mut pem)), Some((kp, key_pem))) = (cert, key) {
                    pem.push(b'\n');
                    pem.extend_from_slice(&key_pem);
                    if reqwest::Identity::from_pem(&pem).is_err() {
                        self.problem(
                            format!("{path}.tls.key_file"),
                            format!("{pre}tls.cert_file {} and tls.key_file {} do not form a client identity (a PEM certificate and its PEM private key); check both files.", cp.display(), kp.display()),
                        );
                    }
                    tls.client_files = Some((cp, kp));
                    tls.client_identity_pem = Some(pem);
                }
            }
        }
        tls
    }

    /// `deployment` (required) and `api_version` (default [`DEFAULT_AZURE_API_VERSION`]) for
    /// `azure-openai`; for any other protocol both must be absent (the file is strict).
    fn azure_fields(
        &mut self,
        path: &str,
        pre: &str,
        protocol: Option<Protocol>,
        raw: &RawTarget,
    ) -> (Option<String>, Option<String>) {
        let Some(protocol) = protocol else {
            return (None, None);
        };
        if protocol != Protocol::AzureOpenAi {
            for (key, set) in [
                ("deployment", raw.deployment.is_some()),
                ("api_version", raw.api_version.is_some()),
            ] {
                if set {
                    self.problem(
                        format!("{path}.{key}"),
                        format!("{pre}{key} is only used with protocol azure-openai, and this target's protocol is {protocol}; remove it."),
                    );
                }
            }
            return (None, None);
        }
        // A URL path segment and a query value: keep them to characters that need no escaping.
        let plain = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        let deployment = match raw.deployment.as_deref() {
            None => {
                self.problem(
                    format!("{path}.deployment"),
                    format!("{pre}deployment is required with protocol azure-openai; set it to the deployment name from the Azure portal (the URL is {{base_url}}/openai/deployments/{{deployment}}/chat/completions)."),
                );
                None
            }
            Some(d) if !plain(d) => {
                self.problem(
                    format!("{path}.deployment"),
                    format!("{pre}deployment \"{}\" is not a valid Azure deployment name; use only letters, digits, \"-\", \"_\" and \".\".", redact_url(d)),
                );
                None
            }
            Some(d) => Some(d.to_string()),
        };
        let api_version = match raw.api_version.as_deref() {
            None => Some(DEFAULT_AZURE_API_VERSION.to_string()),
            Some(v) if !plain(v) => {
                self.problem(
                    format!("{path}.api_version"),
                    format!("{pre}api_version \"{}\" is not an Azure OpenAI API version; use a date like {DEFAULT_AZURE_API_VERSION} (optionally with -preview), or remove it for the default.", &redact_url(&format!("?{v}"))[1..]),
                );
                None
            }
            Some(v) => Some(v.to_string()),
        };
        (deployment, api_version)
    }

    /// `version_path`: absent, or a path starting with `/`, without query or fragment.
    fn version_path(&mut self, path: &str, pre: &str, raw: Option<&str>) -> Option<String> {
        let v = raw?;
        if !v.starts_with('/') || v.contains(['?', '#', ' ']) {
            self.problem(
                format!("{path}.version_path"),
                format!("{pre}version_path \"{}\" must be a path on the target's host starting with \"/\", without query or fragment, e.g. /version.", redact_url(v)),
            );
            return None;
        }
        Some(v.to_string())
    }

    fn base_url(&mut self, path: &str, pre: &str, raw: Option<&str>) -> Option<reqwest::Url> {
        const EXAMPLE: &str = "e.g. http://127.0.0.1:8000/v1";
        let Some(s) = raw else {
            self.problem(
                path,
                format!(
                    "{pre}base_url is required; set it to the API root of the endpoint, {EXAMPLE}."
                ),
            );
            return None;
        };
        // Quoted in messages only without user-info and query values.
        let shown = redact_url(s);
        let credentials = format!("base_url \"{shown}\" contains a user name or password, which would end up in logs; remove it and use api_key_env or api_key_file instead.");
        // Checked before parsing: a password with a character the URL parser rejects would
        // otherwise be reported as something else (a bad port).
        if s.split(['?', '#']).next().unwrap_or_default().contains('@') {
            self.problem(path, format!("{pre}{credentials}"));
            return None;
        }
        let url = match reqwest::Url::parse(s) {
            Ok(u) if u.port() == Some(0) => {
                self.problem(
                    path,
                    format!("{pre}base_url \"{shown}\" has port 0, which cannot be connected to; use a port from 1 to 65535."),
                );
                return None;
            }
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => u,
            Err(url::ParseError::InvalidPort) => {
                self.problem(
                    path,
                    format!("{pre}base_url \"{shown}\" has a port out of range; use a port from 1 to 65535."),
                );
                return None;
            }
            _ => {
                self.problem(
                    path,
                    format!("{pre}base_url \"{shown}\" is not an absolute http(s) URL; write the scheme and host, {EXAMPLE}."),
                );
                return None;
            }
        };
        if !url.username().is_empty() || url.password().is_some() {
            // Do not echo the URL: it holds a credential.
            self.problem(path, format!("{pre}{credentials}"));
            return None;
        }
        if url.query().is_some() || url.fragment().is_some() {
            self.problem(
                path,
                format!("{pre}base_url \"{shown}\" has a query string or fragment; remove it, because the protocol appends its own path (e.g. /chat/completions) to base_url."),
            );
            return None;
        }
        Some(url)
    }

    fn api_key(
        &mut self,
        path: &str,
        pre: &str,
        raw: &RawTarget,
    ) -> (Option<Secret>, Option<String>) {
        match (&raw.api_key_env, &raw.api_key_file) {
            (None, None) => (None, None),
            (Some(_), Some(_)) => {
                self.problem(
                    format!("{path}.api_key_file"),
                    format!(
                        "{pre}api_key_env and api_key_file are both set; keep only one of them."
                    ),
                );
                (None, None)
            }
            (Some(var), None) => {
                let p = format!("{path}.api_key_env");
                if var.trim().is_empty() {
                    self.problem(
                        p,
                        format!("{pre}api_key_env is empty; set it to the name of the environment variable that holds the API key, or remove it."),
                    );
                    return (None, None);
                }
                let is_identifier = var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && !var.starts_with(|c: char| c.is_ascii_digit());
                if !is_identifier {
                    // Not echoed: a value that is no variable name is most often the key itself.
                    self.problem(
                        p,
                        format!("{pre}api_key_env must be the name of an environment variable (letters, digits and \"_\"), not the key itself; put the key in a variable (e.g. export LOCAL_VLLM_KEY=...) and name that variable here."),
                    );
                    return (None, None);
                }
                let source = format!("env {var}");
                if self.secrets == Secrets::Skip {
                    return (None, Some(source));
                }
                match (self.env)(var) {
                    None => {
                        self.problem(
                            p,
                            format!("{pre}api_key_env names the environment variable {var}, which is not set; export it before starting llm-probe, or remove api_key_env if the endpoint needs no key."),
                        );
                        (None, None)
                    }
                    Some(value) => {
                        let key = self.key_value(&p, pre, &source, &value);
                        (key, Some(source))
                    }
                }
            }
            (None, Some(file)) => {
                let p = format!("{path}.api_key_file");
                let mut resolved = PathBuf::from(file);
                if resolved.is_relative() {
                    if let Some(dir) = &self.base_dir {
                        resolved = dir.join(resolved);
                    }
                }
                let shown = resolved.display().to_string();
                // A "path" with neither "/" nor "." that names no file is most often the key
                // pasted in the wrong field: it is never shown.
                let bare = !file.contains(['/', '.']);
                if self.secrets == Secrets::Skip {
                    let source = if bare && !resolved.exists() {
                        "file (a bare name that is no file here; not shown)".to_string()
                    } else {
                        format!("file {shown}")
                    };
                    return (None, Some(source));
                }
                let source = format!("file {shown}");
                let text = super::files::read(&resolved, super::files::MAX_SMALL_FILE_BYTES)
                    .and_then(|b| {
                        String::from_utf8(b).map_err(|_| {
                            super::files::ReadError::Io(std::io::Error::new(
                                std::io::ErrorKind::InvalidData,
                                "not UTF-8 text",
                            ))
                        })
                    });
                match text {
                    Err(e) if bare => {
                        self.problem(
                            p,
                            format!("{pre}api_key_file cannot be read ({e}); its value is not shown because, without a \"/\" or \".\", it may be the key itself. Give the path of a file that holds the key (e.g. ./vllm.key)."),
                        );
                        (None, None)
                    }
                    Err(e) => {
                        self.problem(
                            p,
                            format!(
                                "{pre}api_key_file {shown} cannot be read ({e}); {}.",
                                e.fix()
                            ),
                        );
                        (None, None)
                    }
                    Ok(value) => {
                        let key = self.key_value(&p, pre, &source, &value);
                        (key, Some(source))
                    }
                }
            }
        }
    }

    /// Trims and checks a key value; messages name where it came from, never the value.
    fn key_value(&mut self, path: &str, pre: &str, source: &str, value: &str) -> Option<Secret> {
        let value = value.trim();
        let (what, field) = match source.split_once(' ') {
            Some(("env", name)) => (format!("the environment variable {name}"), "api_key_env"),
            Some((_, file)) => (format!("the file {file}"), "api_key_file"),
            None => (source.to_string(), "api_key_env"),
        };
        if value.is_empty() {
            self.problem(
                path,
                format!("{pre}{what} named by {field} is empty; put the API key in it, or remove {field} if the endpoint needs no key."),
            );
            return None;
        }
        if HeaderValue::from_str(&format!("Bearer {value}")).is_err() {
            self.problem(
                path,
                format!("{pre}the API key in {what} contains characters that cannot be sent in an HTTP header (control characters or non-ASCII); check its contents."),
            );
            return None;
        }
        Some(Secret::new(value.to_string()))
    }

    fn target_scenarios(
        &mut self,
        path: &str,
        pre: &str,
        listed: Option<&[String]>,
        names: &[String],
        scenarios: &[Arc<Scenario>],
    ) -> Option<Vec<Arc<Scenario>>> {
        let by_name = |n: &str| scenarios.iter().find(|s| s.name == n).cloned();
        let Some(listed) = listed else {
            return Some(scenarios.to_vec());
        };
        if listed.is_empty() {
            self.problem(
                format!("{path}.scenarios"),
                format!("{pre}scenarios is an empty list; list at least one scenario name, or remove the key to run all scenarios."),
            );
            return None;
        }
        let mut out = Vec::new();
        let mut ok = true;
        for (j, n) in listed.iter().enumerate() {
            let p = format!("{path}.scenarios[{j}]");
            if !names.iter().any(|k| k == n) {
                let known = names.join(", ");
                let message = match closest(n, names.iter().map(String::as_str)) {
                    Some(c) => format!("{pre}scenario \"{n}\" is not defined; did you mean \"{c}\"? The defined scenarios are {known}."),
                    None => format!("{pre}scenario \"{n}\" is not defined; use one of the scenarios defined under scenarios: {known}."),
                };
                self.problem(p, message);
                ok = false;
            } else if listed[..j].contains(n) {
                self.problem(
                    p,
                    format!("{pre}scenario \"{n}\" is listed twice; remove the duplicate."),
                );
                ok = false;
            } else if let Some(s) = by_name(n) {
                out.push(s);
            } else {
                // Defined but invalid: already reported at the scenario.
                ok = false;
            }
        }
        ok.then_some(out)
    }

    // ---- shared field checks --------------------------------------------------

    fn name(
        &mut self,
        path: &str,
        pre: &str,
        kind: &str,
        name: Option<&str>,
        seen: &HashMap<String, usize>,
        list: &str,
    ) -> Option<String> {
        let p = format!("{path}.name");
        let label = if kind == "target" {
            "target"
        } else {
            "scenario"
        };
        let Some(name) = name else {
            self.problem(
                p,
                format!("{pre}name is required; give the {kind} a unique name made of {NAME_RULE} (it becomes the \"{label}\" metric label)."),
            );
            return None;
        };
        if name.is_empty() {
            self.problem(
                p,
                format!("{pre}name is empty; give the {kind} a unique name made of {NAME_RULE} (it becomes the \"{label}\" metric label)."),
            );
            return None;
        }
        let len = name.chars().count();
        if len > MAX_NAME_LEN {
            self.problem(
                p,
                format!("{pre}name is {len} characters long; shorten it to at most {MAX_NAME_LEN}, because it becomes the \"{label}\" label of every series."),
            );
            return None;
        }
        if !name.chars().all(is_name_char) {
            let suggestion: String = name
                .chars()
                .map(|c| if is_name_char(c) { c } else { '_' })
                .collect();
            self.problem(
                p,
                format!("{pre}name may only contain {NAME_RULE}, because it becomes the \"{label}\" metric label; rename it, e.g. \"{suggestion}\"."),
            );
            return None;
        }
        if let Some(first) = seen.get(name) {
            self.problem(
                p,
                format!("{pre}name is already used by {list}[{first}]; {kind} names must be unique, so rename one of them."),
            );
            return None;
        }
        Some(name.to_string())
    }

    fn positive_duration(
        &mut self,
        path: &str,
        pre: &str,
        field: &str,
        v: &Value,
    ) -> Option<Duration> {
        let d = match v {
            Value::String(s) => match humantime::parse_duration(s.trim()) {
                Ok(d) => d,
                Err(_) => {
                    self.problem(
                        path,
                        format!("{pre}{field} \"{s}\" is not a duration; {DURATION_HINT}."),
                    );
                    return None;
                }
            },
            Value::Number(n) => {
                self.problem(
                    path,
                    format!(
                        "{pre}{field} is the bare number {n}, which has no unit; {DURATION_HINT}."
                    ),
                );
                return None;
            }
            _ => {
                self.problem(
                    path,
                    format!("{pre}{field} must be a duration; {DURATION_HINT}."),
                );
                return None;
            }
        };
        if d.is_zero() {
            self.problem(
                path,
                format!("{pre}{field} is zero; it must be greater than zero, {DURATION_HINT}."),
            );
            return None;
        }
        let bounds = if field == "interval" {
            super::durations::INTERVAL
        } else {
            super::durations::CONFIG
        };
        if let Err(why) = bounds.check(d) {
            let shown = v.as_str().unwrap_or_default().trim();
            self.problem(
                path,
                format!(
                    "{pre}{field} \"{shown}\" {why}; set a value from {} to {}.",
                    fmt_dur(bounds.min),
                    fmt_dur(bounds.max)
                ),
            );
            return None;
        }
        Some(d)
    }

    fn temperature(&mut self, path: &str, pre: &str, t: f64) -> Option<f64> {
        if t.is_finite() && (0.0..=2.0).contains(&t) {
            Some(t)
        } else {
            self.problem(
                path,
                format!("{pre}temperature {t} is out of range; set it between 0 and 2 (0 makes output most repeatable)."),
            );
            None
        }
    }

    fn headers(&mut self, path: &str, pre: &str, raw: &Mapping) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for (k, v) in raw {
            let Some(name) = k.as_str() else {
                self.problem(
                    path,
                    format!("{pre}every header name must be a string; quote the header names under headers."),
                );
                continue;
            };
            // A name with ":" holds a value after it (see header_name_shown): not in the path.
            let p = format!("{path}.{}", header_name_shown(name));
            if HeaderName::from_bytes(name.as_bytes()).is_err() {
                self.problem(
                    p,
                    if name.contains(':') {
                        format!("{pre}header name \"{}\" is not a valid HTTP header name; write each header as a mapping entry, name then value (e.g. X-Team: sre), not as one string.", header_name_shown(name))
                    } else {
                        format!("{pre}header name \"{name}\" is not a valid HTTP header name; use only letters, digits and \"-\", e.g. X-Team.")
                    },
                );
                continue;
            }
            let Some(value) = v.as_str() else {
                self.problem(
                    p,
                    format!("{pre}the value of header \"{name}\" must be a string; quote it, e.g. \"1\"."),
                );
                continue;
            };
            if HeaderValue::from_str(value).is_err() {
                // Do not echo the value: headers may carry credentials.
                self.problem(
                    p,
                    format!("{pre}the value of header \"{name}\" is not a valid HTTP header value (it has control characters such as a newline, or non-ASCII); fix the value."),
                );
                continue;
            }
            if out.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
                self.problem(
                    p,
                    format!("{pre}header \"{name}\" is set twice (header names ignore case); keep only one."),
                );
                continue;
            }
            out.push((name.to_string(), value.to_string()));
        }
        out
    }

    /// `{path}.secret_headers`: header names whose values are credentials, lower-cased. Each
    /// must be a valid header name that `set` (the headers it may apply to) contains, so that a
    /// misspelt entry does not leave the real header unmarked.
    fn secret_headers(
        &mut self,
        path: &str,
        pre: &str,
        raw: Option<&[String]>,
        set: &[&str],
    ) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (j, name) in raw.unwrap_or_default().iter().enumerate() {
            let p = format!("{path}.secret_headers[{j}]");
            if HeaderName::from_bytes(name.as_bytes()).is_err() {
                self.problem(
                    p,
                    format!("{pre}secret_headers lists \"{}\", which is not a valid HTTP header name; list the names of headers set under headers, e.g. X-Tenant-Token.", header_name_shown(name)),
                );
                continue;
            }
            if !set.iter().any(|h| h.eq_ignore_ascii_case(name)) {
                let hint = match closest(name, set.iter().copied()) {
                    Some(c) => format!("did you mean \"{c}\"?"),
                    None => {
                        "list only headers set under headers (the target's or defaults.headers)."
                            .into()
                    }
                };
                self.problem(
                    p,
                    format!("{pre}secret_headers lists \"{name}\", but no header of that name is set, so nothing would be kept secret; {hint}"),
                );
                continue;
            }
            let lower = name.to_ascii_lowercase();
            if !out.contains(&lower) {
                out.push(lower);
            }
        }
        out
    }

    fn slo(&mut self, path: &str, pre: &str, raw: Option<&RawSlo>, base: Slo) -> Slo {
        let mut slo = base;
        let Some(raw) = raw else { return slo };
        if let Some(v) = &raw.ttft_p95 {
            if let Some(d) =
                self.positive_duration(&format!("{path}.ttft_p95"), pre, "slo.ttft_p95", v)
            {
                slo.ttft_p95 = d;
            }
        }
        if let Some(x) = raw.output_tokens_per_second_min {
            if x.is_finite() && x > 0.0 {
                slo.output_tokens_per_second_min = x;
            } else {
                self.problem(
                    format!("{path}.output_tokens_per_second_min"),
                    format!("{pre}slo.output_tokens_per_second_min is {x}; it must be a number greater than zero, e.g. 30."),
                );
            }
        }
        slo
    }

    fn extra_body(&mut self, path: &str, pre: &str, body: &JsonObject) {
        for key in body.keys() {
            if RESERVED_BODY_KEYS.contains(&key.as_str()) {
                let fix = match key.as_str() {
                    "max_tokens" => "use the scenario's max_tokens field instead",
                    "temperature" => "use the temperature field instead",
                    _ => "llm-probe sets it itself",
                };
                self.problem(
                    format!("{path}.{key}"),
                    format!("{pre}extra_body sets \"{key}\", which llm-probe controls; remove it ({fix})."),
                );
            }
        }
    }
}

/// A header name as a message may quote it: a name written as `Name: value` (a common slip)
/// is cut at its first `:`, since what follows is a header value and may be a credential.
fn header_name_shown(name: &str) -> String {
    match name.split_once(':') {
        Some((before, _)) => format!("{}: …", before.trim_end()),
        None => name.to_string(),
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-')
}

fn fmt_dur(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}
