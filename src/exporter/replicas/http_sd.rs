//! Prometheus HTTP service discovery: a GET of the configured URL answers a JSON list of
//! `{"targets": ["host:port", …], "labels": {…}}` groups (the file_sd format), with HTTP 200
//! and a JSON content type. The answer is read up to [`MAX_FILE_SD_BYTES`]; redirects are not
//! followed; the URL is shown without its user-info and query values.

use std::time::Duration;

use super::{file_sd, Discovered, DiscoveryError, MAX_FILE_SD_BYTES};

/// The replicas the http_sd endpoint `url` (named `shown` in messages, without its secrets)
/// lists; `refresh` is sent in the `X-Prometheus-Refresh-Interval-Seconds` header, as
/// Prometheus does.
pub(super) async fn discover(
    url: &reqwest::Url,
    shown: &str,
    refresh: Duration,
    max: usize,
) -> Result<Discovered, DiscoveryError> {
    let failed = |detail: String| DiscoveryError::Read {
        path: shown.to_string(),
        detail,
    };
    // No timeout of its own: the whole discovery's (`DISCOVERY_TIMEOUT`) bounds it, a slow
    // answer included, and fails it with reason `timeout`.
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(crate::probe::USER_AGENT)
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
            path: shown.to_string(),
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
    file_sd::from_bytes(shown, false, &body, max).await
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use crate::config::replicas::{ReplicaSource, Replicas};
    use crate::replicas::{discover, DISCOVERY_TIMEOUT};

    fn spec(url: &str) -> Replicas {
        Replicas {
            source: ReplicaSource::HttpSd(url.parse().unwrap()),
            refresh: Duration::from_secs(30),
            max: 64,
            grace: Duration::from_secs(300),
        }
    }

    /// An endpoint that accepts and never answers, and one that sends its headers and then a
    /// byte a second: each discovery ends at the discovery's time limit, with reason timeout
    /// (the paused clock jumps to it; nothing waits 10 s).
    #[tokio::test(start_paused = true)]
    async fn a_silent_or_trickling_endpoint_ends_at_the_time_limit() {
        let base: reqwest::Url = "http://pool.test:8000/v1".parse().unwrap();
        for trickle in [false, true] {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}/sd", listener.local_addr().unwrap());
            let server = tokio::spawn(async move {
                let (mut tcp, _) = listener.accept().await.unwrap();
                // The request first (an answer before it is no answer to it).
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if tcp.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                if trickle {
                    let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n[";
                    let _ = tcp.write_all(head.as_bytes()).await;
                    loop {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        if tcp.write_all(b" ").await.is_err() {
                            return;
                        }
                    }
                }
                // Hold the connection open, silent.
                tokio::time::sleep(Duration::from_secs(3600)).await;
                drop(tcp);
            });
            let started = tokio::time::Instant::now();
            let err = discover(&spec(&url), &base).await.unwrap_err();
            assert_eq!(err.reason(), "timeout", "trickle {trickle}: {err}");
            assert!(
                err.to_string().contains(&format!("the http_sd URL {url}")),
                "{err}"
            );
            assert_eq!(started.elapsed(), DISCOVERY_TIMEOUT, "trickle {trickle}");
            server.abort();
        }
    }
}
