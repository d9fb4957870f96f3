//! A target's API key (`api_key_env` / `api_key_file`): read, checked, never quoted.

use super::*;

impl Validator<'_> {
    pub(super) fn api_key(
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
            (Some(var), None) => self.api_key_env(path, pre, var),
            (None, Some(file)) => self.api_key_file(path, pre, file),
        }
    }

    /// `api_key_env`: the name of a set environment variable holding a valid key. Returns
    /// (key, where it came from); the name is quoted, the value never.
    fn api_key_env(
        &mut self,
        path: &str,
        pre: &str,
        var: &str,
    ) -> (Option<Secret>, Option<String>) {
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

    /// `api_key_file`: a readable file holding a valid key (relative to the config file).
    /// Returns (key, where it came from); a bare name that is no file is not quoted (it may be
    /// the key itself).
    fn api_key_file(
        &mut self,
        path: &str,
        pre: &str,
        file: &str,
    ) -> (Option<Secret>, Option<String>) {
        let p = format!("{path}.api_key_file");
        let resolved = self.relative_to_config(file);
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
        let text =
            crate::config::files::read(&resolved, crate::config::files::MAX_SMALL_FILE_BYTES)
                .and_then(|b| {
                    String::from_utf8(b).map_err(|_| {
                        crate::config::files::ReadError::Io(std::io::Error::new(
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

    /// Trims and checks a key value; messages name where it came from, never the value.
    pub(super) fn key_value(
        &mut self,
        path: &str,
        pre: &str,
        source: &str,
        value: &str,
    ) -> Option<Secret> {
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
}
