//! The request for a target's engine metrics (`server_metrics_url:`, [`crate::engine`]): one
//! `GET`, made before the probe's own request (by the schedule, in the idle time before the
//! probe's slot: [`crate::schedule`]) and outside every measurement, bounded in
//! time (the smaller of [`MAX_SCRAPE_TIME`] and the target's `timeout`) and in size
//! ([`MAX_BODY_BYTES`]). It never fails or delays the probe's measurement: whatever happens
//! becomes an [`EngineScrape`] on the probe's record.

use std::time::Duration;

use reqwest::header::{HeaderValue, ACCEPT, AUTHORIZATION};

use crate::config::{Secret, ServerMetrics};
use crate::engine::{
    self, EngineScrape, ScrapeFailure, ScrapeFailureReason, MAX_BODY_BYTES, MAX_SCRAPE_TIME,
};

/// The time budget of one scrape for a target whose probe `timeout` is `timeout`.
pub fn budget(timeout: Duration) -> Duration {
    timeout.min(MAX_SCRAPE_TIME)
}

/// `GET` the engine's metrics over `client` (the target's, with its TLS settings) within
/// `budget`, and read the three numbers with the configured adapter. The API key is sent only
/// when `server_metrics_send_api_key` is on. Failure details name no URL and no secret.
/// `route` points the request at a replica's port, and gives the `Host` header it keeps then.
pub async fn scrape(
    client: &reqwest::Client,
    sm: &ServerMetrics,
    api_key: Option<&Secret>,
    budget: Duration,
    route: impl FnOnce(&mut reqwest::Url) -> Option<HeaderValue>,
) -> EngineScrape {
    let mut url = sm.url.clone();
    let host = route(&mut url);
    let mut req = client.get(url).header(
        ACCEPT,
        "text/plain;version=0.0.4;q=1,text/plain;q=0.5,*/*;q=0.1",
    );
    if let Some(host) = host {
        req = req.header(reqwest::header::HOST, host);
    }
    if let (true, Some(key)) = (sm.send_api_key, api_key) {
        if let Ok(mut v) = HeaderValue::from_str(&format!("Bearer {}", key.expose())) {
            v.set_sensitive(true);
            req = req.header(AUTHORIZATION, v);
        }
    }
    let fetch = async {
        let mut resp = req.send().await.map_err(|e| {
            let reason = match (e.is_timeout(), unreadable_answer(&e)) {
                (true, _) => ScrapeFailureReason::Timeout,
                (false, Some(reason)) => reason,
                (false, None) => ScrapeFailureReason::Connect,
            };
            ScrapeFailure::new(reason, describe(e))
        })?;
        let status = resp.status();
        if !status.is_success() {
            let hint = if status == reqwest::StatusCode::NOT_FOUND {
                " (engines serve their metrics at the server's root, /metrics, not under the \
                 API's /v1; TensorRT-LLM at /prometheus/metrics)"
            } else {
                ""
            };
            return Err(ScrapeFailure::new(
                ScrapeFailureReason::HttpStatus,
                format!("HTTP {}{hint}", status.as_u16()),
            ));
        }
        let too_large = || {
            ScrapeFailure::new(
                ScrapeFailureReason::TooLarge,
                format!("the body is larger than {} MiB", MAX_BODY_BYTES >> 20),
            )
        };
        if resp
            .content_length()
            .is_some_and(|n| n > MAX_BODY_BYTES as u64)
        {
            return Err(too_large());
        }
        let mut body = Vec::new();
        loop {
            match resp.chunk().await {
                Ok(Some(b)) => {
                    if body.len() + b.len() > MAX_BODY_BYTES {
                        return Err(too_large());
                    }
                    body.extend_from_slice(&b);
                }
                Ok(None) => break,
                Err(e) => {
                    return Err(ScrapeFailure::new(
                        ScrapeFailureReason::Connect,
                        format!("the body was cut short: {}", describe(e)),
                    ))
                }
            }
        }
        let text = String::from_utf8(body).map_err(|_| {
            ScrapeFailure::new(ScrapeFailureReason::Malformed, "the body is not UTF-8 text")
        })?;
        engine::read(sm.adapter, &text)
    };
    match tokio::time::timeout(budget, fetch).await {
        Ok(scraped) => scraped,
        Err(_) => Err(ScrapeFailure::new(
            ScrapeFailureReason::Timeout,
            format!(
                "no complete answer within {}",
                humantime::format_duration(budget)
            ),
        )),
    }
}

/// When the engine did answer but its response head could not be read: `TooLarge` for a head
/// larger than the HTTP client reads (about 400 KiB), `Malformed` for an answer that is not
/// HTTP/1.1 or HTTP/2. `None` for every other error (no answer: a connect failure).
fn unreadable_answer(e: &reqwest::Error) -> Option<ScrapeFailureReason> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(h) = s.downcast_ref::<hyper::Error>() {
            if h.is_parse_too_large() {
                return Some(ScrapeFailureReason::TooLarge);
            }
            if h.is_parse() || h.is_parse_status() {
                return Some(ScrapeFailureReason::Malformed);
            }
        }
        source = s.source();
    }
    None
}

/// A reqwest error as a sentence without its URL: the error and its sources.
fn describe(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        text += &format!(": {s}");
        source = s.source();
    }
    text.chars().take(300).collect()
}
