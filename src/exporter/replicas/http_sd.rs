//! Prometheus HTTP service discovery: a GET of the configured URL answers a JSON list of
//! `{"targets": ["host:port", …], "labels": {…}}` groups (the file_sd format), with HTTP 200
//! and a JSON content type. The answer is read up to [`MAX_FILE_SD_BYTES`]; redirects are not
//! followed; the URL is shown without its user-info and query values.

use std::time::Duration;

use super::{file_sd, Discovered, DiscoveryError, DISCOVERY_TIMEOUT, MAX_FILE_SD_BYTES};

/// The replicas the http_sd endpoint `url` lists; `refresh` is sent in the
/// `X-Prometheus-Refresh-Interval-Seconds` header, as Prometheus does.
pub(super) async fn discover(
    url: &reqwest::Url,
    refresh: Duration,
    max: usize,
) -> Result<Discovered, DiscoveryError> {
    let shown = format!(
        "the http_sd URL {}",
        crate::sanitize::terminal_safe(&crate::sanitize::redact_url(url.as_str()))
    );
    let failed = |detail: String| DiscoveryError::Read {
        path: shown.clone(),
        detail,
    };
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(DISCOVERY_TIMEOUT)
        .build()
        .map_err(|e| failed(crate::sanitize::http_error(e)))?;
    let response = client
        .get(url.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .header(
            "X-Prometheus-Refresh-Interval-Seconds",
            refresh.as_secs().max(1).to_string(),
        )
        .send()
        .await
        .map_err(|e| failed(crate::sanitize::http_error(e)))?;
    let status = response.status();
    if status != reqwest::StatusCode::OK {
        return Err(failed(format!(
            "HTTP {status} (an http_sd endpoint answers 200 with a JSON list)"
        )));
    }
    let json = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
        });
    if !json {
        return Err(DiscoveryError::Format {
            path: shown.clone(),
            detail: "the answer is not application/json".into(),
        });
    }
    let mut body = Vec::new();
    let mut response = response;
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| failed(crate::sanitize::http_error(e)))?
    {
        if body.len() + chunk.len() > MAX_FILE_SD_BYTES as usize {
            return Err(failed(format!(
                "the answer is larger than {} MiB",
                MAX_FILE_SD_BYTES >> 20
            )));
        }
        body.extend_from_slice(&chunk);
    }
    file_sd::from_bytes(&shown, false, &body, max).await
}
