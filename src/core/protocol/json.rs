//! Lenient readers over `serde_json::Value`: absent, `null` or mistyped means unknown
//! (`None`), never 0 (docs/protocols.md, "Stream faults the probe gets right", "Strict schemas vs real servers").

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

/// `data` (JSON text) with every lone UTF-16 surrogate escape — a `\uD800`–`\uDBFF` not followed
/// by a `\uDC00`–`\uDFFF` escape, or a `\uDC00`–`\uDFFF` not preceded by one — replaced by
/// `\ufffd` (U+FFFD, the same length, so an error's column still points at the same byte), or
/// `None` when there is none. Such an escape is valid JSON (Python's `json.dumps` writes one for
/// a string holding half a pair) but no Unicode character, and `serde_json` refuses it. An
/// escaped backslash (`\\ud800`) is no escape and is left alone.
pub(crate) fn replace_lone_surrogates(data: &str) -> Option<String> {
    let b = data.as_bytes();
    let hex4 = |at: usize| -> Option<u16> {
        let digits = std::str::from_utf8(b.get(at..at + 4)?).ok()?;
        digits
            .bytes()
            .all(|c| c.is_ascii_hexdigit())
            .then(|| u16::from_str_radix(digits, 16).ok())?
    };
    let escape =
        |at: usize| -> Option<u16> { (b.get(at..at + 2)? == b"\\u").then(|| hex4(at + 2))? };
    let mut out: Option<String> = None;
    let (mut copied, mut i) = (0, 0);
    while let Some(off) = memchr::memchr(b'\\', &b[i..]) {
        let at = i + off;
        i = match escape(at) {
            Some(0xD800..=0xDBFF) if matches!(escape(at + 6), Some(0xDC00..=0xDFFF)) => at + 12,
            Some(0xD800..=0xDFFF) => {
                let o = out.get_or_insert_with(|| String::with_capacity(data.len()));
                o.push_str(&data[copied..at]);
                o.push_str("\\ufffd");
                copied = at + 6;
                at + 6
            }
            Some(_) => at + 6,
            // Any other escape, `\\` included: skip the backslash and the byte it escapes.
            None => at + 2,
        };
        if i >= b.len() {
            break;
        }
    }
    let mut out = out?;
    out.push_str(&data[copied..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lone_surrogate_escapes_become_replacement_characters() {
        let r = |s: &str| replace_lone_surrogates(s);
        assert_eq!(r(r#""\ud800 lone""#).as_deref(), Some(r#""\ufffd lone""#));
        assert_eq!(r(r#""\uDFFF""#).as_deref(), Some(r#""\ufffd""#));
        // A leading surrogate before something that is no trailing one, twice in a row.
        assert_eq!(
            r(r#""\ud800\ud800\u0041é\udc00""#).as_deref(),
            Some(r#""\ufffd\ufffd\u0041é\ufffd""#)
        );
        // At the very end of the text, and cut short.
        assert_eq!(r(r"\ud800").as_deref(), Some(r"\ufffd"));
        assert_eq!(r(r#""\ud80"#), None);
        // A pair, other escapes, an escaped backslash before `ud800`: nothing to replace.
        assert_eq!(r(r#""\ud83d\ude00 \n \" \\ud800 é""#), None);
        assert_eq!(r(r#""\\\ud800""#).as_deref(), Some(r#""\\\ufffd""#));
        assert_eq!(r("plain"), None);
        assert_eq!(r("\\"), None);
        let v: Value = serde_json::from_str(&r(r#"{"a":"x\ud800y"}"#).unwrap()).unwrap();
        assert_eq!(v["a"], "x\u{fffd}y");
    }
}
