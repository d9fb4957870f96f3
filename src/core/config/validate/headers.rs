//! `headers:` and `secret_headers:` (in `defaults:` and in a target).

use super::*;

impl Validator<'_> {
    pub(super) fn headers(
        &mut self,
        path: &str,
        pre: &str,
        raw: &Mapping,
    ) -> Vec<(String, String)> {
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
    pub(super) fn secret_headers(
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
}

/// A header name as a message may quote it: a name written as `Name: value` (a common slip)
/// is cut at its first `:`, since what follows is a header value and may be a credential.
fn header_name_shown(name: &str) -> String {
    match name.split_once(':') {
        Some((before, _)) => format!("{}: …", before.trim_end()),
        None => name.to_string(),
    }
}
