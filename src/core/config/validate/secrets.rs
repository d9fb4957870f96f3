//! A target's API key (`api_key_env` / `api_key_file`): read, checked, never quoted.

use super::*;
use crate::config::credentials::KeyFile;

impl Validator<'_> {
    pub(super) fn api_key(
        &mut self,
        path: &str,
        pre: &str,
        raw: &RawTarget,
    ) -> (Option<Secret>, Option<String>, Option<KeyFile>) {
        match (&raw.api_key_env, &raw.api_key_file) {
            (None, None) => (None, None, None),
            (Some(_), Some(_)) => {
                self.problem(
                    format!("{path}.api_key_file"),
                    format!(
                        "{pre}api_key_env and api_key_file are both set; keep only one of them."
                    ),
                );
                (None, None, None)
            }
            (Some(var), None) => {
                let (key, source) = self.api_key_env(path, pre, var);
                (key, source, None)
            }
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
        match crate::config::credentials::key_from_env(var, self.env) {
            Ok(key) => (Some(key), Some(source)),
            Err(e) => {
                self.credential_problem(p, format!("{pre}{e}"));
                (None, Some(source))
            }
        }
    }

    /// `api_key_file`: a readable file holding a valid key (relative to the config file).
    /// Returns (key, where it came from, the file to re-read when it changes); a bare name that
    /// is no file is not quoted (it may be the key itself).
    fn api_key_file(
        &mut self,
        path: &str,
        pre: &str,
        file: &str,
    ) -> (Option<Secret>, Option<String>, Option<KeyFile>) {
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
            return (None, Some(source), None);
        }
        let source = format!("file {shown}");
        let watched = Some(KeyFile {
            path: resolved.clone(),
            bare,
        });
        match crate::config::credentials::key_from_file(&resolved, bare) {
            Ok(key) => (Some(key), Some(source), watched),
            // A bare name that names no file is most often the key pasted into the wrong
            // field: a mistake in the file, not a secret that is missing yet.
            Err(e) if bare && !resolved.exists() => {
                self.problem(p, format!("{pre}{e}"));
                (None, None, None)
            }
            Err(e) => {
                self.credential_problem(p, format!("{pre}{e}"));
                (None, Some(source), watched)
            }
        }
    }
}
