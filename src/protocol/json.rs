//! Lenient readers over `serde_json::Value`: absent, `null` or mistyped means unknown
//! (`None`), never 0 (PROTOCOLS.md §3, "Strict schemas vs real servers").

use serde_json::{Number, Value};

/// A non-negative integer at `v[key]` (integers, or floats with no fraction).
pub(crate) fn u64_at(v: &Value, key: &str) -> Option<u64> {
    match v.get(key)? {
        Value::Number(n) => number_u64(n),
        _ => None,
    }
}

/// `n` as a non-negative integer (integers, or floats with no fraction).
pub(crate) fn number_u64(n: &Number) -> Option<u64> {
    n.as_u64().or_else(|| {
        n.as_f64()
            .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < 9.0e15)
            .map(|f| f as u64)
    })
}

/// A finite number at `v[key]`.
pub(crate) fn f64_at(v: &Value, key: &str) -> Option<f64> {
    v.get(key)?.as_f64().filter(|f| f.is_finite())
}

/// A string at `v[key]`.
pub(crate) fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key)?.as_str()
}

/// True when `v[key]` is a non-empty string (`""` and `null` are treated alike: no text).
pub(crate) fn has_text(v: &Value, key: &str) -> bool {
    str_at(v, key).is_some_and(|s| !s.is_empty())
}

/// The human-readable message of an error payload: `error.message`, a string `error`, or the
/// JSON itself.
pub(crate) fn error_message(err: &Value) -> String {
    match err {
        Value::String(s) => s.clone(),
        Value::Object(_) => str_at(err, "message")
            .map(str::to_string)
            .unwrap_or_else(|| err.to_string()),
        other => other.to_string(),
    }
}

/// Whether a non-JSON payload looked like it was meant to be JSON (a broken object or array),
/// as opposed to a stray sentinel such as `: keepalive`.
pub(crate) fn looks_like_json(data: &str) -> bool {
    matches!(data.trim_start().as_bytes().first(), Some(b'{' | b'['))
}
