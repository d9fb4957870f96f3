//! A small, strict reader of the Prometheus text exposition format (0.0.4, and the sample lines
//! of OpenMetrics 1.0), enough to read an inference engine's own `/metrics`: every sample line
//! `name{label="value",…} value [timestamp]` is checked (a malformed line fails the whole
//! exposition, as it fails a Prometheus scrape), comment, `# HELP`, `# TYPE` and blank lines are
//! skipped, and only the samples whose metric name the caller wants are returned. Sans-IO: works
//! on a `&str` already read and bounded by the caller.
//!
//! A series (metric name and label set, labels in any order) written more than once breaks the
//! format ("each line must have a unique combination of a metric name and labels"); it is read
//! as Prometheus ingests it: the first sample counts, the later ones are dropped as duplicates
//! (so an engine that repeats its `waiting 3` line three times still says 3, not 9).
//!
//! Reference: <https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format>.
//! Label values may hold the escapes `\\`, `\"` and `\n`; values are Go-style floats (`NaN`,
//! `+Inf`, `-Inf`, `1e3`, …); OpenMetrics exemplars (`# {…} v`) after the value are ignored.

use std::collections::HashSet;

/// One sample line whose name was wanted: its metric name and value, the first of its series.
/// Labels are checked and tell series apart, but are not kept: every adapter aggregates over
/// them (see [`crate::engine::adapters`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample<'a> {
    /// Metric name as written (`vllm:num_requests_waiting`).
    pub name: &'a str,
    /// Sample value as written; may be NaN or infinite (the caller decides).
    pub value: f64,
}

/// Why an exposition could not be read: the 1-based line number and what was wrong there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {what}")]
pub struct ExpositionError {
    /// 1-based line number.
    pub line: usize,
    /// What was wrong, e.g. `"a label value is not closed"`. Never quotes the line (it may be
    /// long or hostile).
    pub what: &'static str,
}

/// The samples of `text` whose metric name satisfies `wanted`, in order, each series once (its
/// first sample; see the module's documentation).
///
/// Errors: the first malformed sample line (see [`ExpositionError`]).
pub fn parse<'a>(
    text: &'a str,
    mut wanted: impl FnMut(&str) -> bool,
) -> Result<Vec<Sample<'a>>, ExpositionError> {
    let mut out = Vec::new();
    // Every wanted series seen: its name and label pairs (raw, escapes and all; sorted).
    let mut seen: HashSet<(&str, Vec<(&str, &str)>)> = HashSet::new();
    for (i, raw) in text.split('\n').enumerate() {
        let line = raw
            .strip_suffix('\r')
            .unwrap_or(raw)
            .trim_start_matches([' ', '\t']);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let err = |what| ExpositionError { line: i + 1, what };
        let (name, labels, value) = sample_line(line).map_err(err)?;
        if wanted(name) {
            let mut pairs = Vec::new();
            if let Some(labels) = labels {
                skip_labels(labels, Some(&mut pairs)).map_err(err)?;
            }
            pairs.sort_unstable();
            if seen.insert((name, pairs)) {
                out.push(Sample { name, value });
            }
        }
    }
    Ok(out)
}

fn is_name_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b':'
}

fn is_name_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b':'
}

/// `name{labels} value [timestamp]` → (name, the text after `{` if there are labels, value).
fn sample_line(line: &str) -> Result<(&str, Option<&str>, f64), &'static str> {
    let b = line.as_bytes();
    if !is_name_start(b[0]) {
        return Err("a sample line does not start with a metric name");
    }
    let end = b.iter().position(|&c| !is_name_char(c)).unwrap_or(b.len());
    let name = &line[..end];
    let mut rest = &line[end..];
    let labels = rest.strip_prefix('{');
    if let Some(labels) = labels {
        rest = skip_labels(labels, None)?;
    } else if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return Err("a metric name is followed by an unexpected character");
    }
    let rest = rest.trim_start_matches([' ', '\t']);
    let mut fields = rest.split([' ', '\t']).filter(|f| !f.is_empty());
    let value = fields.next().ok_or("a sample has no value")?;
    let value = parse_float(value).ok_or("a sample value is not a number")?;
    match fields.next() {
        None => {}
        // An OpenMetrics exemplar: ignored.
        Some("#") => return Ok((name, labels, value)),
        Some(ts) => {
            if ts.parse::<f64>().is_err() {
                return Err("a sample's timestamp is not a number");
            }
            match fields.next() {
                None | Some("#") => {}
                Some(_) => return Err("a sample line has more than a value and a timestamp"),
            }
        }
    }
    Ok((name, labels, value))
}

/// Skips `label="value",…}` (the part after `{`), returning what follows the `}`; with `pairs`,
/// pushes each label's name and value (as written, escapes and all) onto it.
fn skip_labels<'a>(
    mut s: &'a str,
    mut pairs: Option<&mut Vec<(&'a str, &'a str)>>,
) -> Result<&'a str, &'static str> {
    loop {
        s = s.trim_start_matches([' ', '\t']);
        if let Some(after) = s.strip_prefix('}') {
            return Ok(after);
        }
        let b = s.as_bytes();
        if b.is_empty() || !(b[0].is_ascii_alphabetic() || b[0] == b'_') {
            return Err("a label name is missing or invalid");
        }
        let end = b
            .iter()
            .position(|&c| !(c.is_ascii_alphanumeric() || c == b'_'))
            .unwrap_or(b.len());
        let label = &s[..end];
        s = s[end..].trim_start_matches([' ', '\t']);
        s = s.strip_prefix('=').ok_or("a label has no '='")?;
        s = s.trim_start_matches([' ', '\t']);
        s = s.strip_prefix('"').ok_or("a label value is not quoted")?;
        // The closing quote: the first `"` not escaped by a backslash.
        let mut chars = s.char_indices();
        let close = loop {
            match chars.next() {
                None => return Err("a label value is not closed"),
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\' | '"' | 'n')) => {}
                    _ => return Err("a label value has an invalid escape"),
                },
                Some((i, '"')) => break i,
                Some(_) => {}
            }
        };
        if let Some(pairs) = pairs.as_deref_mut() {
            pairs.push((label, &s[..close]));
        }
        s = s[close + 1..].trim_start_matches([' ', '\t']);
        if let Some(after) = s.strip_prefix(',') {
            s = after;
        } else if !s.starts_with('}') {
            return Err("labels are not separated by ','");
        }
    }
}

/// A Go `ParseFloat`-style number as the exposition writes it: decimal or exponent notation,
/// `NaN`, `+Inf`, `-Inf` (any case). Rust's parser accepts these and also `infinity`; it
/// rejects hexadecimal and `_` separators, which the format does not use either.
fn parse_float(s: &str) -> Option<f64> {
    s.parse::<f64>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &str) -> Result<Vec<(String, f64)>, ExpositionError> {
        parse(text, |_| true).map(|v| v.iter().map(|s| (s.name.to_string(), s.value)).collect())
    }

    #[test]
    fn reads_names_labels_values_and_timestamps() {
        let text = "# HELP a_total help text\n# TYPE a_total counter\na_total 3\n\
                    b{x=\"1\",y=\"q\\\"uote\\\\ \\n {}\",} 2.5 1700000000000\r\n\
                    vllm:num_requests_waiting{model_name=\"m\"} 0.0\n\n   \n\
                    c +Inf\nd -Inf\ne NaN\nf 1e-3 # {trace_id=\"t\"} 1.0\n";
        let v = all(text).unwrap();
        assert_eq!(v[0], ("a_total".into(), 3.0));
        assert_eq!(v[1], ("b".into(), 2.5));
        assert_eq!(v[2], ("vllm:num_requests_waiting".into(), 0.0));
        assert_eq!(v[3].1, f64::INFINITY);
        assert_eq!(v[4].1, f64::NEG_INFINITY);
        assert!(v[5].1.is_nan());
        assert_eq!(v[6], ("f".into(), 0.001));
        assert_eq!(v.len(), 7);
    }

    #[test]
    fn a_repeated_series_is_read_once_the_first_sample() {
        let text =
            "a{x=\"1\",y=\"2\"} 3\na{y=\"2\", x=\"1\",} 9\na{x=\"1\"} 4\nb 1\nb 2 1700000000000\n\
                    a{x=\"1\",y=\"2\\\"\"} 5\n";
        let v = all(text).unwrap();
        assert_eq!(
            v,
            [
                ("a".into(), 3.0),
                ("a".into(), 4.0),
                ("b".into(), 1.0),
                ("a".into(), 5.0)
            ]
        );
    }

    #[test]
    fn keeps_only_wanted_names() {
        let v = parse("a 1\nb 2\na{l=\"x\"} 3\n", |n| n == "a").unwrap();
        assert_eq!(v.iter().map(|s| s.value).collect::<Vec<_>>(), [1.0, 3.0]);
    }

    #[test]
    fn malformed_lines_name_their_line() {
        for (text, line, what) in [
            (
                "ok 1\n{x=\"1\"} 2\n",
                2,
                "a sample line does not start with a metric name",
            ),
            ("a{x=\"1} 2\n", 1, "a label value is not closed"),
            ("a{x=1} 2\n", 1, "a label value is not quoted"),
            ("a{x} 2\n", 1, "a label has no '='"),
            ("a{x=\"\\q\"} 2\n", 1, "a label value has an invalid escape"),
            (
                "a{x=\"1\" y=\"2\"} 2\n",
                1,
                "labels are not separated by ','",
            ),
            ("a{=\"1\"} 2\n", 1, "a label name is missing or invalid"),
            ("a\n", 1, "a sample has no value"),
            ("a{} \n", 1, "a sample has no value"),
            ("a twelve\n", 1, "a sample value is not a number"),
            ("a 1 soon\n", 1, "a sample's timestamp is not a number"),
            (
                "a 1 2 3\n",
                1,
                "a sample line has more than a value and a timestamp",
            ),
            (
                "a-b 1\n",
                1,
                "a metric name is followed by an unexpected character",
            ),
            (
                "\u{1F600} 1\n",
                1,
                "a sample line does not start with a metric name",
            ),
        ] {
            assert_eq!(all(text), Err(ExpositionError { line, what }), "{text:?}");
        }
    }

    #[test]
    fn never_panics_on_any_cut_of_a_real_line() {
        let line = "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m \\\"x\\\"\"} 0.25 # {a=\"b\"} 1\n";
        for i in 0..=line.len() {
            if line.is_char_boundary(i) {
                let _ = all(&line[..i]);
            }
        }
    }
}
