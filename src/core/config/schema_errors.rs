//! serde_yaml's errors (unknown key, wrong type, missing field, syntax) rewritten as full
//! sentences with the file, line, field path and a fix.

use serde_yaml::Value;

use super::{ConfigError, Problem};

/// `target "NAME": `, or `target #N: ` when the name is missing.
/// A name longer than [`super::MAX_NAME_LEN`] is cut (it is reported on its own).
pub(super) fn entity_prefix(kind: &str, name: Option<&str>, i: usize) -> String {
    match name {
        Some(n) if n.chars().count() > super::MAX_NAME_LEN => {
            let head: String = n.chars().take(32).collect();
            format!("{kind} \"{head}…\": ")
        }
        Some(n) => format!("{kind} \"{n}\": "),
        None => format!("{kind} #{}: ", i + 1),
    }
}

/// The candidate within edit distance 2 (or a third of the word) of `word`, if any.
pub(super) fn closest<'a>(
    word: &str,
    candidates: impl Iterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).clamp(1, 3);
    candidates
        .map(|c| (edit_distance(word, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Edits (insert, delete, substitute, swap two neighbours) from `a` to `b`: "modle" is one
/// swap from "model".
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    // d[i][j]: distance between the first i chars of a and the first j of b.
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let sub = d[i - 1][j - 1] + usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = sub.min(d[i - 1][j] + 1).min(d[i][j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

// ---- serde_yaml errors ---------------------------------------------------------

/// Turns a serde_yaml error into a single problem with a rewritten, full-sentence
/// message. `doc` is the parsed document when the YAML itself was valid (schema
/// error), used to name the target or scenario the error is in.
pub(super) fn serde_error(
    err: serde_yaml::Error,
    source: &str,
    doc: Option<&Value>,
) -> ConfigError {
    let loc = err.location().map(|l| (l.line(), l.column()));
    let mut text = err.to_string();
    if let Some((line, col)) = loc {
        let at = format!(" at line {line} column {col}");
        if let Some(i) = text.find(&at) {
            text.replace_range(i..i + at.len(), "");
        }
    }
    // serde_yaml prefixes schema errors with the path: "targets[0]: unknown field …".
    let (mut path, msg) = match text.split_once(": ") {
        Some((p, m)) if !p.is_empty() && !p.contains([' ', '`', '"']) => {
            (p.to_string(), m.to_string())
        }
        _ => (String::new(), text.clone()),
    };
    // Point the path at the offending key itself, not at its mapping.
    let key = if msg.starts_with("duplicate entry with key") {
        msg.split('"').nth(1)
    } else if msg.starts_with("unknown field") || msg.starts_with("duplicate field") {
        ticked(&msg).first().copied()
    } else {
        None
    };
    if let Some(key) = key {
        path = if path.is_empty() {
            key.to_string()
        } else {
            format!("{path}.{key}")
        };
    }
    let message = match doc {
        None if msg.starts_with("duplicate entry with key") => {
            let key = msg.trim_start_matches("duplicate entry with key").trim();
            format!("the key {key} appears twice in the same mapping; keep only one of them.")
        }
        None => syntax_message(&path, &msg, loc.is_some()),
        Some(doc) => format!("{}{}", doc_prefix(doc, &path), schema_message(&path, &msg)),
    };
    ConfigError {
        problems: vec![Problem::new(source, loc, &path, &message)],
    }
}

/// The message for an error of the YAML itself (before any schema check). `located`: the
/// error has a line, so the message may point at "this line".
fn syntax_message(path: &str, msg: &str, located: bool) -> String {
    let field = path.rsplit('.').next().filter(|f| !f.is_empty());
    // serde_yaml reads every integer as 64 bits; a larger one fails before any schema check.
    if let Some(number) = msg
        .strip_prefix("invalid type: integer `")
        .and_then(|r| r.split_once('`'))
        .filter(|(_, rest)| rest.starts_with(" as u128") || rest.starts_with(" as i128"))
        .map(|(n, _)| n)
    {
        return out_of_range(field, number);
    }
    if msg.contains("more than one document") {
        return "the file holds more than one YAML document (a line \"---\" starts another); keep a single document.".into();
    }
    if located {
        format!("the file is not valid YAML: {msg}; check the indentation and quoting on this line and the lines just above it.")
    } else {
        format!("the file is not valid YAML: {msg}; check its indentation and quoting.")
    }
}

/// `max_tokens 99999999999999999999 is out of range; set it between 1 and 4294967295.`
fn out_of_range(field: Option<&str>, number: &str) -> String {
    let what = field.map_or("this number".to_string(), |f| format!("{f} {number}"));
    let limit = match field {
        Some("max_tokens") => format!("set it between 1 and {}", u32::MAX),
        _ => "use a smaller value (see probes.example.yaml)".to_string(),
    };
    format!("{what} is out of range; {limit}.")
}

/// For an "unknown field" error: the path of the mapping it is in (`""` for the top level),
/// the unknown key, and the allowed key it is closest to, if any.
pub(super) fn unknown_key(err: &serde_yaml::Error) -> Option<(String, String, Option<String>)> {
    let text = err.to_string();
    let (mapping, msg) = match text.split_once(": ") {
        Some((p, m)) if !p.is_empty() && !p.contains([' ', '`', '"']) => (p.to_string(), m),
        _ => (String::new(), text.as_str()),
    };
    if !msg.starts_with("unknown field") {
        return None;
    }
    let words = ticked(msg);
    let key = words.first()?.to_string();
    let suggestion = closest(&key, words.get(1..).unwrap_or_default().iter().copied());
    Some((mapping, key, suggestion.map(str::to_string)))
}

/// The mapping at `path` (`targets[0].tls`, `defaults`, `""` for the root) inside `doc`.
pub(super) fn mapping_at<'a>(
    doc: &'a mut Value,
    path: &str,
) -> Option<&'a mut serde_yaml::Mapping> {
    let mut v = doc;
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (key, index) = match part.split_once('[') {
            Some((k, rest)) => (k, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        v = v.get_mut(key)?;
        if let Some(i) = index {
            v = v.get_mut(i)?;
        }
    }
    v.as_mapping_mut()
}

/// `target "NAME": ` / `scenario "NAME": ` for paths inside `targets[i]` / `scenarios[i]`.
pub(super) fn doc_prefix(doc: &Value, path: &str) -> String {
    for (list, kind) in [("targets", "target"), ("scenarios", "scenario")] {
        let Some(rest) = path.strip_prefix(list).and_then(|r| r.strip_prefix('[')) else {
            continue;
        };
        let Some(i) = rest.split(']').next().and_then(|n| n.parse::<usize>().ok()) else {
            continue;
        };
        let name = doc
            .get(list)
            .and_then(|l| l.get(i))
            .and_then(|e| e.get("name"))
            .and_then(Value::as_str);
        return entity_prefix(kind, name, i);
    }
    String::new()
}

/// Backtick-quoted words in a serde message, in order.
fn ticked(msg: &str) -> Vec<&str> {
    msg.split('`').skip(1).step_by(2).collect()
}

/// Fields whose value a type error may quote: numbers, durations and names, never a field that
/// can hold a secret (URLs, headers, keys, files, request bodies).
const ECHOED_FIELDS: &[&str] = &[
    "max_tokens",
    "temperature",
    "interval",
    "timeout",
    "connect_timeout",
    "ttft_p95",
    "output_tokens_per_second_min",
    "rate_limit_headroom_min",
    "prefill_tokens_per_second_min",
    "prompt_tokens",
    "needle",
    "turns",
    "prefix_cache",
    "protocol",
    "connection",
    "role",
    "name",
    "model",
    "insecure_skip_verify",
];

fn schema_message(path: &str, msg: &str) -> String {
    let field = path
        .rsplit('.')
        .next()
        .filter(|f| !f.is_empty())
        .unwrap_or("the file");
    let key = ticked(msg).first().copied().unwrap_or("?");
    if msg.starts_with("unknown field") {
        let words = ticked(msg);
        let allowed = words.get(1..).unwrap_or_default();
        let allowed_list = allowed.join(", ");
        return match closest(key, allowed.iter().copied()) {
            _ if allowed.is_empty() => format!("unknown key \"{key}\"; no keys are allowed here, so remove it."),
            Some(c) => format!("unknown key \"{key}\"; did you mean \"{c}\"? The keys allowed here are: {allowed_list}."),
            None => format!("unknown key \"{key}\"; remove it or use one of the keys allowed here: {allowed_list}."),
        };
    }
    if msg.starts_with("missing field") {
        return format!("the required key \"{key}\" is missing; add it.");
    }
    if msg.starts_with("duplicate field") {
        return format!(
            "the key \"{key}\" appears twice in the same mapping; keep only one of them."
        );
    }
    if let Some(rest) = msg.strip_prefix("invalid type: ") {
        if let Some((found, expected)) = rest.split_once(", expected ") {
            let expected = match expected {
                "i64" | "u32" | "u64" | "i32" => "an integer",
                "f64" | "f32" => "a number",
                "a sequence" => "a list",
                e if e.starts_with("struct ") || e == "a map" => "a mapping",
                e => e,
            };
            // The kind ("string", "integer", "floating point", …) and the value as written.
            let (kind, value) = match found.find(['`', '"']) {
                Some(i) => (found[..i].trim(), Some(found[i..].trim())),
                None => (found, None),
            };
            let kind = kind.replace("sequence", "list").replace("map", "mapping");
            // `!!int "8"`: serde_yaml reads a tagged, quoted scalar as the right kind and still
            // refuses it.
            let same_kind = matches!(
                (kind.as_str(), expected),
                ("integer", "an integer") | ("integer" | "floating point", "a number")
            );
            // A complex key (`? [a]` or `{a: b}: c`) where a key name goes.
            if expected == "field identifier" {
                return format!("{field} has a key that is a {kind} (written with \"? \" or as {{…}}: …); the keys here are plain names such as model, so write the key as a word.");
            }
            let plain = value.unwrap_or("").trim_matches(['`', '"']);
            // serde_yaml says the same of an integer beyond 64-bit signed range.
            if same_kind && kind == "integer" && plain.parse::<i64>().is_err() {
                return out_of_range(Some(field), plain);
            }
            if same_kind {
                let tag = if kind == "integer" {
                    "!!int"
                } else {
                    "!!float"
                };
                return format!("{field} is written with a YAML tag on a quoted value (such as {tag} \"{plain}\"); write the plain value without tag or quotes, e.g. {field}: {plain}.");
            }
            // Only fields that cannot hold a secret have their value echoed.
            let found = match value {
                Some(v) if ECHOED_FIELDS.contains(&field) => format!("{kind} {v}"),
                _ => format!("a {kind}"),
            };
            return format!("{field} must be {expected}, but it is {found}; fix the value (see probes.example.yaml).");
        }
    }
    if msg.starts_with("invalid value") && !ECHOED_FIELDS.contains(&field) {
        return format!(
            "{field} has a value of the wrong form; fix the value (see probes.example.yaml)."
        );
    }
    format!("{msg}; fix the value (see probes.example.yaml).")
}
