//! `Accept` negotiation for `/metrics` (RFC 9110 §12.5.1): media ranges with parameters and
//! q-values, case-insensitive type names, the most specific matching range deciding an
//! offer's weight, `q=0` meaning "not acceptable". The offers: the Prometheus text format
//! 0.0.4, OpenMetrics 1.0.0 and the Prometheus protobuf format (`application/vnd.google.protobuf;
//! proto=io.prometheus.client.MetricFamily; encoding=delimited`, asked for by a Prometheus with
//! native histograms enabled).
//!
//! A small parser of our own: the well-known crates either parse one media type without
//! q-values (`mime`) or no longer carry an `Accept` header type (`headers` 0.4).

use super::Exposition;

/// One media range of an `Accept` header, lower-cased, with its weight.
#[derive(Debug, PartialEq)]
struct Range {
    kind: String,
    subtype: String,
    /// The parameters before `q` (names lower-cased; values lower-cased, unquoted).
    params: Vec<(String, String)>,
    /// Weight in thousandths (0..=1000).
    q: u16,
}

/// A format `/metrics` can send: its media type and the parameters that identify it. A range
/// that gives one of these parameters another value does not match; parameters an offer does
/// not know (`charset`, `escaping`, …) are ignored. A `required` parameter must be given.
struct Offer {
    format: Exposition,
    kind: &'static str,
    subtype: &'static str,
    /// (name, value, required)
    params: &'static [(&'static str, &'static str, bool)],
}

/// The offers in order of preference on equal weight: the text format first (as Prometheus'
/// client libraries do).
const OFFERS: &[Offer] = &[
    Offer {
        format: Exposition::Text,
        kind: "text",
        subtype: "plain",
        params: &[("version", "0.0.4", false)],
    },
    Offer {
        format: Exposition::OpenMetrics,
        kind: "application",
        subtype: "openmetrics-text",
        params: &[("version", "1.0.0", false)],
    },
    // Like client_golang: the `proto` parameter names the message, so it must be there.
    Offer {
        format: Exposition::Protobuf,
        kind: "application",
        subtype: "vnd.google.protobuf",
        params: &[
            ("proto", "io.prometheus.client.metricfamily", true),
            ("encoding", "delimited", false),
        ],
    },
];

/// Splits `s` on `sep` outside double-quoted strings (a quoted parameter value may contain
/// commas and semicolons).
fn split_unquoted(s: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            c if c == sep && !quoted => {
                parts.push(&s[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

/// A q-value `0`, `0.5`, `1.000` (at most three decimals) in thousandths; `None` if invalid.
fn qvalue(s: &str) -> Option<u16> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac_value = format!("{frac:0<3}").parse::<u16>().ok()?;
    match int {
        "0" => Some(frac_value),
        "1" if frac_value == 0 => Some(1000),
        _ => None,
    }
}

/// Parses one element; `None` for a malformed one (ignored, as RFC 9110 allows).
fn range(element: &str) -> Option<Range> {
    let mut params = split_unquoted(element, ';').into_iter();
    let media = params.next()?.trim().to_ascii_lowercase();
    let (kind, subtype) = media.split_once('/')?;
    let token = |t: &str| !t.is_empty() && !t.contains(|c: char| c.is_whitespace() || c == '"');
    if !token(kind) || !token(subtype) || (kind == "*" && subtype != "*") {
        return None;
    }
    let mut r = Range {
        kind: kind.to_string(),
        subtype: subtype.to_string(),
        params: Vec::new(),
        q: 1000,
    };
    for p in params {
        let (name, value) = p.split_once('=')?;
        let name = name.trim().to_ascii_lowercase();
        let value = value.trim().trim_matches('"');
        if name == "q" {
            r.q = qvalue(value)?;
            // What follows `q` are accept-extensions, not media type parameters.
            break;
        }
        r.params.push((name, value.to_ascii_lowercase()));
    }
    Some(r)
}

/// How specifically `r` names `offer`: `None` if it does not match it at all, higher is more
/// specific (a type range < the exact type < the exact type with identifying parameters).
fn specificity(r: &Range, offer: &Offer) -> Option<u8> {
    match (r.kind.as_str(), r.subtype.as_str()) {
        ("*", "*") => Some(0),
        (k, "*") if k == offer.kind => Some(1),
        (k, s) if k == offer.kind && s == offer.subtype => {
            let mut named = 0;
            for &(name, value, required) in offer.params {
                match r.params.iter().find(|(n, _)| n == name) {
                    Some((_, v)) if v == value => named += 1,
                    Some(_) => return None,
                    None if required => return None,
                    None => {}
                }
            }
            Some(2 + u8::from(named > 0))
        }
        _ => None,
    }
}

/// The weight (thousandths) the header gives an offer: that of the most specific range that
/// matches it, 0 if none does.
fn weight(ranges: &[Range], offer: &Offer) -> u16 {
    ranges
        .iter()
        .filter_map(|r| specificity(r, offer).map(|s| (s, r.q)))
        .max_by_key(|&(s, q)| (s, q))
        .map_or(0, |(_, q)| q)
}

/// The offer among `formats` that `accept` weighs highest; the first of them on a tie, without
/// a header, or when the header accepts none (as Prometheus' client libraries do: a scraper
/// always gets a body).
fn negotiate_among(accept: Option<&str>, formats: &[Exposition]) -> Exposition {
    let Some(accept) = accept else {
        return formats[0];
    };
    let ranges: Vec<Range> = split_unquoted(accept, ',')
        .into_iter()
        .filter(|e| !e.trim().is_empty())
        .filter_map(range)
        .collect();
    let mut best = (formats[0], 0);
    for offer in formats
        .iter()
        .filter_map(|f| OFFERS.iter().find(|o| o.format == *f))
    {
        let w = weight(&ranges, offer);
        if w > best.1 {
            best = (offer.format, w);
        }
    }
    best.0
}

/// The exposition format `accept` prefers for `/metrics`: OpenMetrics 1.0.0 or the Prometheus
/// protobuf format when it weighs one higher than the Prometheus text format 0.0.4 (protobuf
/// only when weighed higher than OpenMetrics too, so `application/*` stays text); the text
/// format on a tie, without a header, or when the header accepts none.
pub fn negotiate(accept: Option<&str>) -> Exposition {
    use Exposition::*;
    negotiate_among(accept, &[Text, OpenMetrics, Protobuf])
}

/// [`negotiate`] between the two text formats only.
pub fn negotiate_text(accept: Option<&str>) -> Exposition {
    use Exposition::*;
    negotiate_among(accept, &[Text, OpenMetrics])
}

#[cfg(test)]
mod tests {
    use super::*;
    use Exposition::{OpenMetrics as OM, Protobuf as PB, Text};

    #[test]
    fn accept_table() {
        let prometheus_2_42 = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        let table: &[(Option<&str>, Exposition)] = &[
            (None, Text),
            (Some(""), Text),
            (Some("*/*"), Text),
            (Some("text/plain"), Text),
            (Some("application/openmetrics-text"), OM),
            (Some(prometheus_2_42), OM),
            // Weights decide, not the order or a substring.
            (
                Some("text/plain;q=1, application/openmetrics-text;q=0.1"),
                Text,
            ),
            (
                Some("text/plain;q=0.1, application/openmetrics-text;q=0.9"),
                OM,
            ),
            (Some("application/openmetrics-text;q=0"), Text),
            (Some("application/openmetrics-text;q=0.0, */*"), Text),
            // Media types are case-insensitive; so are parameter names.
            (Some("APPLICATION/OpenMetrics-Text"), OM),
            (
                Some("Application/OpenMetrics-Text; Version=1.0.0; Q=0.9"),
                OM,
            ),
            (
                Some("TEXT/PLAIN;Q=1, application/openmetrics-text;q=0.5"),
                Text,
            ),
            // A version we do not write does not match; the text format is left.
            (Some("application/openmetrics-text;version=2.0.0"), Text),
            (
                Some("application/openmetrics-text;version=2.0.0, text/plain;q=0.1"),
                Text,
            ),
            // The most specific range decides: openmetrics excluded by name, */* does not undo it.
            (Some("application/openmetrics-text;q=0, */*;q=1"), Text),
            (Some("application/*;q=0.9, text/*;q=0.2"), OM),
            (Some("text/plain;q=0, application/*"), OM),
            // Quoted parameters may hold commas and semicolons.
            (
                Some("text/plain;foo=\"a,b;c\";q=0.2, application/openmetrics-text;q=0.3"),
                OM,
            ),
            // Malformed elements and q-values are ignored, not fatal.
            (
                Some("application/openmetrics-text;q=1.5, text/plain;q=0.2"),
                Text,
            ),
            (Some("garbage, application/openmetrics-text;q=0.4"), OM),
            (Some("application/openmetrics-text;q=0.1234"), Text),
            (Some(",,, ;"), Text),
        ];
        for (header, want) in table {
            assert_eq!(negotiate(*header), *want, "Accept: {header:?}");
            assert_eq!(negotiate_text(*header), *want, "Accept: {header:?}");
        }
    }

    #[test]
    fn accept_table_protobuf() {
        // What Prometheus 2.42 sends with --enable-feature=native-histograms (from its binary).
        let prometheus_2_42_native = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        let pb = "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily";
        let table: &[(&str, Exposition)] = &[
            (prometheus_2_42_native, PB),
            (pb, PB),
            // Case-insensitive, quoted values, unknown parameters (Prometheus 3's `escaping`).
            (
                "Application/Vnd.Google.Protobuf;Proto=\"io.prometheus.client.MetricFamily\";encoding=delimited;escaping=underscores;q=0.5,text/plain;q=0.4",
                PB,
            ),
            // Without `proto` the message type is unknown: not our offer.
            ("application/vnd.google.protobuf", Text),
            ("application/vnd.google.protobuf;encoding=delimited", Text),
            // Another message, another framing: not ours either.
            ("application/vnd.google.protobuf;proto=io.prometheus.client.Other", Text),
            (
                "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text",
                Text,
            ),
            // Weights decide.
            (&format!("{pb};q=0.3, application/openmetrics-text;q=0.5"), OM),
            (&format!("{pb};q=0.5, application/openmetrics-text;q=0.5"), OM),
            (&format!("{pb};q=0.5, text/plain;q=0.5"), Text),
            (&format!("{pb};q=0, */*"), Text),
            // `application/*` matches OpenMetrics and protobuf alike: a binary format only
            // for a client that names it.
            ("application/*", OM),
        ];
        for (header, want) in table {
            assert_eq!(negotiate(Some(header)), *want, "Accept: {header:?}");
            assert_ne!(negotiate_text(Some(header)), PB, "Accept: {header:?}");
        }
        // The text-only negotiation falls to the text format the header weighs next.
        assert_eq!(negotiate_text(Some(prometheus_2_42_native)), OM);
    }

    #[test]
    fn qvalues() {
        assert_eq!(qvalue("1"), Some(1000));
        assert_eq!(qvalue("1.000"), Some(1000));
        assert_eq!(qvalue("0.5"), Some(500));
        assert_eq!(qvalue("0.001"), Some(1));
        assert_eq!(qvalue("0"), Some(0));
        assert_eq!(qvalue("1.001"), None);
        assert_eq!(qvalue("2"), None);
        assert_eq!(qvalue("-0.1"), None);
        assert_eq!(qvalue("0.5x"), None);
    }
}
