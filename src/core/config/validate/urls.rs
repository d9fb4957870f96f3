//! A target's URLs: `base_url`, `version_path`, `server_metrics_url` (with its adapter) and
//! Azure's `deployment` / `api_version`.

use super::*;

impl Validator<'_> {
    /// `deployment` (required) and `api_version` (default [`DEFAULT_AZURE_API_VERSION`]) for
    /// `azure-openai`; for any other protocol both must be absent (the file is strict).
    pub(super) fn azure_fields(
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
    pub(super) fn version_path(
        &mut self,
        path: &str,
        pre: &str,
        raw: Option<&str>,
    ) -> Option<String> {
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

    /// `server_metrics_url` (absent, or an absolute http(s) URL without user-info or fragment),
    /// `server_metrics_adapter` (one of [`crate::engine::Adapter::VALUES`], default `auto`) and
    /// `server_metrics_send_api_key` (default false); the last two need the first.
    pub(super) fn server_metrics(
        &mut self,
        path: &str,
        pre: &str,
        raw: &RawTarget,
    ) -> Option<crate::config::ServerMetrics> {
        use crate::engine::Adapter;
        let adapter = match raw.server_metrics_adapter.as_deref() {
            None => Some(Adapter::Auto),
            Some(a) => match a.parse::<Adapter>() {
                Ok(a) => Some(a),
                Err(()) => {
                    self.problem(
                        format!("{path}.server_metrics_adapter"),
                        format!(
                            "{pre}server_metrics_adapter \"{}\" is not known; use one of: {} (auto picks the engine by its metric names).",
                            crate::sanitize::terminal_safe(a),
                            Adapter::VALUES.join(", ")
                        ),
                    );
                    None
                }
            },
        };
        let Some(s) = raw.server_metrics_url.as_deref() else {
            for (key, set) in [
                (
                    "server_metrics_adapter",
                    raw.server_metrics_adapter.is_some(),
                ),
                (
                    "server_metrics_send_api_key",
                    raw.server_metrics_send_api_key.is_some(),
                ),
            ] {
                if set {
                    self.problem(
                        format!("{path}.{key}"),
                        format!("{pre}{key} is set but server_metrics_url is not; add server_metrics_url (the engine's /metrics, e.g. http://127.0.0.1:8000/metrics) or remove {key}."),
                    );
                }
            }
            return None;
        };
        let at = format!("{path}.server_metrics_url");
        let shown = redact_url(s);
        let url = match reqwest::Url::parse(s) {
            Ok(u)
                if matches!(u.scheme(), "http" | "https")
                    && u.host_str().is_some()
                    && u.port() != Some(0) =>
            {
                u
            }
            _ => {
                self.problem(
                    at,
                    format!("{pre}server_metrics_url \"{shown}\" is not an absolute http(s) URL with a host and a port from 1 to 65535; write the engine's metrics URL, e.g. http://127.0.0.1:8000/metrics."),
                );
                return None;
            }
        };
        if !url.username().is_empty() || url.password().is_some() {
            self.problem(
                at,
                format!("{pre}server_metrics_url contains a user name or password, which would end up in logs; remove it (server_metrics_send_api_key: true sends the target's API key instead)."),
            );
            return None;
        }
        if url.fragment().is_some() {
            self.problem(
                at,
                format!("{pre}server_metrics_url \"{shown}\" has a fragment (#…), which is never sent; remove it."),
            );
            return None;
        }
        Some(crate::config::ServerMetrics {
            url,
            adapter: adapter?,
            send_api_key: raw.server_metrics_send_api_key.unwrap_or(false),
        })
    }

    pub(super) fn base_url(
        &mut self,
        path: &str,
        pre: &str,
        raw: Option<&str>,
    ) -> Option<reqwest::Url> {
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
}
