//! `compare --prometheus.url` against a hostile Prometheus: a loopback responder that answers
//! every query of a comparison from a handler, with label values and sample values chosen to
//! break the comparison (huge counts, markup in label values).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::from_prometheus::{compare, Request, Windows};
use super::window::{Instant, Range};
use super::Options;

/// A loopback HTTP server answering every request with `200` and `answer(query)`; returns its
/// URL and the PromQL queries it received. Runs until the test's runtime ends.
async fn responder(
    answer: impl Fn(&str) -> String + Send + Sync + 'static,
) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (answer, log) = (Arc::new(answer), Arc::clone(&seen));
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let (answer, log) = (Arc::clone(&answer), Arc::clone(&log));
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&request);
                let target = text.split_whitespace().nth(1).unwrap_or("/");
                let url = url::Url::parse(&format!("http://x{target}")).unwrap();
                let query = url
                    .query_pairs()
                    .find(|(k, _)| k == "query")
                    .map(|(_, v)| v.into_owned())
                    .unwrap_or_default();
                let body = answer(&query);
                log.lock().unwrap().push(query);
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    (url, seen)
}

/// A Prometheus whose target `sim` has `count` TTFT observations in (0.1, 0.2] s in each of
/// BEFORE (1000, 2000] and AFTER (3000, 4000] (the counters restart in between), scenario
/// `scenario`, endpoint response model `model`.
fn answer(
    count: &'static str,
    scenario: &'static str,
    model: &'static str,
) -> impl Fn(&str) -> String {
    move |query: &str| {
        let series = |extra: &str, count: &str| {
            format!(
                r#"{{"metric":{{"target":"sim","scenario":{}{extra}}},"values":[[900,"0"],[2000,"{count}"],[3000,"0"],[4000,"{count}"]]}}"#,
                serde_json::to_string(scenario).unwrap()
            )
        };
        let matrix = |result: Vec<String>| {
            format!(
                r#"{{"status":"success","data":{{"resultType":"matrix","result":[{}]}}}}"#,
                result.join(",")
            )
        };
        if query.starts_with("llm_probe_time_to_first_token_seconds_bucket") {
            matrix(vec![
                series(r#","le":"0.1""#, "0"),
                series(r#","le":"0.2""#, count),
                series(r#","le":"+Inf""#, count),
            ])
        } else if query.starts_with("llm_probe_probes_total") {
            matrix(vec![series("", count)])
        } else if query.starts_with("llm_probe_endpoint_info") {
            matrix(vec![format!(
                r#"{{"metric":{{"target":"sim","response_model":{}}},"values":[[1500,"1"],[3500,"1"]]}}"#,
                serde_json::to_string(model).unwrap()
            )])
        } else if query.starts_with("max(") {
            r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#.into()
        } else {
            matrix(vec![])
        }
    }
}

fn request(url: &str) -> Request {
    let range = |s, e| Range {
        start: Instant::At(s),
        end: Instant::At(e),
    };
    Request {
        url: url.into(),
        target: "sim".into(),
        scenario: None,
        windows: Windows::Given {
            before: range(1000.0, 2000.0),
            after: range(3000.0, 4000.0),
        },
        slo: Some(0.15),
        timeout: Duration::from_secs(5),
    }
}

fn quick() -> Options {
    Options {
        resamples: 50,
        ..Options::default()
    }
}

#[tokio::test]
async fn a_plain_answer_is_compared() {
    let (url, queries) = responder(answer("50", "chat", "m1")).await;
    let c = compare(&request(&url), &quick()).await.unwrap();
    assert_eq!(c.scenarios.len(), 1);
    assert_eq!(c.scenarios[0].rows[0].n_before, 50);
    assert!(queries.lock().unwrap().len() >= 6);
}

/// The JSON report of a comparison validates against its checked-in JSON Schema
/// (docs/schemas/compare-prometheus.schema.json), and a report with a wrong field does not.
#[tokio::test]
async fn the_json_report_validates_against_its_schema() {
    let (url, _) = responder(answer("50", "chat", "m1")).await;
    let c = compare(&request(&url), &quick()).await.unwrap();
    let doc = super::buckets_report::to_json(&c);
    assert!(
        doc["identities"].is_object() && doc["scenarios"][0]["ttft_seconds"].is_object(),
        "{doc}"
    );
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/schemas/compare-prometheus.schema.json"
    );
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let v = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = v.iter_errors(&doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:#?}");
    let mut wrong = doc.clone();
    wrong["scenarios"][0]["ttft_seconds"]["n_before"] = "fifty".into();
    assert!(!v.is_valid(&wrong));
}

/// Counts far beyond any number of probes (a broken exporter or a hostile Prometheus) are
/// refused with the bucket named; they overflowed the U test's sums (a panic in a debug build,
/// a wrapped count in release).
#[tokio::test]
async fn counts_beyond_whole_observations_are_refused() {
    let (url, _) = responder(answer("1e30", "chat", "m1")).await;
    let e = compare(&request(&url), &quick())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("malformed") && e.contains("le=0.2") && e.contains("2^53"),
        "{e}"
    );
}

/// The probe counters are held to the same bound (the failure ratio's sums overflowed too).
#[tokio::test]
async fn probe_counts_beyond_whole_probes_are_refused() {
    let (url, _) = responder(move |q: &str| {
        let normal = answer("50", "chat", "m1");
        if q.starts_with("llm_probe_probe_failures_total") {
            normal("llm_probe_probes_total").replace("\"50\"", "\"1e300\"")
        } else {
            normal(q)
        }
    })
    .await;
    let e = compare(&request(&url), &quick())
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a number of probes"), "{e}");
}

/// Label values from Prometheus are shown in the Markdown report, never rendered: a scenario
/// or an endpoint identity with HTML, a link or a table pipe stays text (a PR comment would
/// have rendered the image and the link).
#[tokio::test]
async fn markup_in_label_values_is_shown_not_rendered_in_markdown() {
    let (url, _) = responder(answer(
        "50",
        "<img src=x onerror=alert(1)>|x",
        "[click](http://evil.example)",
    ))
    .await;
    let c = compare(&request(&url), &quick()).await.unwrap();
    let md = super::buckets_report::to_markdown(&c);
    assert!(!md.contains("<img"), "{md}");
    assert!(md.contains("&lt;img"), "{md}");
    assert!(!md.contains("[click](http"), "{md}");
    assert!(md.contains(r"\[click\]"), "{md}");
    // The text report shows them as they are (escaped for the terminal only).
    let text = super::buckets_report::to_text(&c);
    assert!(text.contains("[click](http://evil.example)"), "{text}");
}

/// Prometheus's error text is shown cut (a hostile or broken server's megabyte of text does not
/// flood the terminal or a CI log), terminal-safe.
#[tokio::test]
async fn a_huge_error_text_is_cut() {
    let (url, _) = responder(|_: &str| {
        let text = format!("\u{1b}[2J{}", "x".repeat(1 << 20));
        serde_json::json!({"status": "error", "errorType": "bad_data", "error": text}).to_string()
    })
    .await;
    let e = compare(&request(&url), &quick())
        .await
        .unwrap_err()
        .to_string();
    assert!(e.len() < 2000, "{} bytes", e.len());
    assert!(e.contains("bad_data") && e.contains("xxx…"), "{e}");
    assert!(!e.contains('\u{1b}'), "{e}");
}

/// A histogram with more buckets than any of the daemon's (a few dozen, with the SLO
/// thresholds) is refused: 20,000 buckets took 13 s per metric to bootstrap in a debug build,
/// and a hostile Prometheus could send any number.
#[test]
fn a_histogram_with_too_many_buckets_is_refused() {
    use super::stats::binned::{Histogram, HistogramError, MAX_BUCKETS};
    let layout = |k: usize| {
        let mut b: Vec<(f64, f64)> = (1..k).map(|i| (i as f64 * 0.001, i as f64)).collect();
        b.push((f64::INFINITY, k as f64));
        b
    };
    assert!(Histogram::from_cumulative(&layout(MAX_BUCKETS)).is_ok());
    let e = Histogram::from_cumulative(&layout(MAX_BUCKETS + 1)).unwrap_err();
    assert_eq!(e, HistogramError::TooManyBuckets(MAX_BUCKETS + 1));
    assert!(e.to_string().contains("1001 buckets"), "{e}");
}

/// An SLO gauge that is not a positive finite number (NaN, +Inf, negative, 0) is no objective:
/// the share rows are left out with the usual warning. A NaN objective made a share row
/// "beyond NaN", counted at an arbitrary bucket bound.
#[tokio::test]
async fn an_slo_gauge_that_is_not_a_positive_number_is_no_objective() {
    // 1e-300 s and 1e300: no daemon's objective either.
    for v in ["NaN", "+Inf", "-1", "0", "1e-300", "1e300"] {
        let (url, _) = responder(move |q: &str| {
            if q.starts_with("max(") {
                format!(
                    r#"{{"status":"success","data":{{"resultType":"vector","result":[{{"metric":{{}},"value":[4000,"{v}"]}}]}}}}"#
                )
            } else {
                answer("50", "chat", "m1")(q)
            }
        })
        .await;
        let mut req = request(&url);
        req.slo = None;
        let c = compare(&req, &quick()).await.unwrap();
        assert_eq!(c.slo, super::buckets::Slo::default(), "{v}");
        assert!(c.scenarios[0].slo.is_empty(), "{v}");
        assert!(
            c.warnings.iter().any(|w| w.contains("no TTFT objective")),
            "{v}: {:?}",
            c.warnings
        );
    }
}

/// An answer without end (a server streaming spaces) is cut at
/// [`super::prometheus::MAX_ANSWER_BYTES`] with a reason, not read whole into memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_answer_is_cut_at_the_size_limit() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let limit = super::prometheus::MAX_ANSWER_BYTES;
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n";
                if stream.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                // A little more than the limit (then the answer ends, so that the test ends
                // whatever the client does).
                let spaces = vec![b' '; 1 << 20];
                for _ in 0..(limit >> 20) + 8 {
                    if stream.write_all(&spaces).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let mut req = request(&url);
    req.timeout = Duration::from_secs(60);
    let e = compare(&req, &quick()).await.unwrap_err().to_string();
    assert!(e.contains("larger than"), "{e}");
}

/// A matrix answer for every bucket query with `values` as given (for the le="0.2" and +Inf
/// buckets and the probe counter), otherwise [`answer`]'s.
fn with_values(values: &'static str) -> impl Fn(&str) -> String {
    move |query: &str| {
        let normal = answer("50", "chat", "m1")(query);
        normal.replace(r#"[[900,"0"],[2000,"50"],[3000,"0"],[4000,"50"]]"#, values)
    }
}

/// Samples out of time order or repeated (a broken proxy) read as counter
/// resets and multiplied the counts; they are refused.
#[tokio::test]
async fn samples_out_of_order_or_repeated_are_refused() {
    for values in [
        r#"[[2000,"50"],[900,"0"],[4000,"50"],[3000,"0"]]"#,
        r#"[[900,"0"],[2000,"50"],[2000,"50"],[3000,"0"],[4000,"50"]]"#,
    ] {
        let (url, _) = responder(with_values(values)).await;
        let e = compare(&request(&url), &quick())
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("time order"), "{values}: {e}");
    }
}

/// A negative bucket bound is refused (latencies and rates are not
/// negative), and more failed probes than probes too.
#[tokio::test]
async fn negative_bounds_and_more_failures_than_probes_are_refused() {
    let (url, _) =
        responder(|q: &str| answer("50", "chat", "m1")(q).replace(r#""le":"0.1""#, r#""le":"-1""#))
            .await;
    let e = compare(&request(&url), &quick())
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("negative") && e.contains("-1"), "{e}");
    let (url, _) = responder(move |q: &str| {
        let normal = answer("50", "chat", "m1");
        if q.starts_with("llm_probe_probe_failures_total") {
            normal("llm_probe_probes_total").replace("\"50\"", "\"70\"")
        } else {
            normal(q)
        }
    })
    .await;
    let e = compare(&request(&url), &quick())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("failed") && e.contains("70") && e.contains("50"),
        "{e}"
    );
    // Observations with no probe counted (the issue's 239 beside 0).
    let (url, _) = responder(|q: &str| {
        if q.starts_with("llm_probe_probes_total") {
            r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#.into()
        } else {
            answer("50", "chat", "m1")(q)
        }
    })
    .await;
    let e = compare(&request(&url), &quick())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("50 observations") && e.contains("0 probes"),
        "{e}"
    );
}

/// The same exporter's series twice (an HA pair of Prometheus servers
/// queried without deduplication: the series differ only by a replica label) doubled every
/// count; they are refused with the label named.
#[tokio::test]
async fn an_ha_pair_without_deduplication_is_refused() {
    let (url, _) = responder(|q: &str| {
        let normal = answer("50", "chat", "m1")(q);
        let Some(start) = normal.find(r#"[{"metric""#) else {
            return normal;
        };
        let end = normal.rfind("]}}").unwrap();
        let list = &normal[start + 1..end];
        if list.is_empty() || !list.contains("\"target\":\"sim\"") {
            return normal;
        }
        let tag = |r: &str| {
            list.replace(
                "{\"target\":\"sim\"",
                &format!(
                    "{{\"instance\":\"exp:9464\",\"prometheus_replica\":\"{r}\",\"target\":\"sim\""
                ),
            )
        };
        format!("{}[{},{}]}}}}", &normal[..start], tag("a"), tag("b"))
    })
    .await;
    let e = compare(&request(&url), &quick())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("prometheus_replica") && e.contains("deduplicat"),
        "{e}"
    );
}
