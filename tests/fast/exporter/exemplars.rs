//! Exemplars and the probe-record URL: the TTFT, TPOT and E2E
//! observations carry `# {trace_id="…",request_id="…"} VALUE TIMESTAMP` on the bucket they
//! fell in (OpenMetrics), `Bucket.exemplar` and the native `Histogram.exemplars` (protobuf),
//! nothing in the Prometheus text 0.0.4; `/probes/{trace_id}` serves the kept probe (HTML or
//! JSON), 404s once it is gone and 400s for anything but a trace id. (A real Prometheus
//! returning the exemplars is in the end-to-end tier, `prometheus::exemplars`.)

use crate::common;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use llm_probe::measure::ProbeOutcome;
use llm_probe::metrics::{Exposition, HistogramKinds, HistogramOptions, Metrics};
use llm_probe::simulate::Script;
use prometheus_client::encoding::prometheus_protobuf::prometheus_data_model::{
    Histogram, MetricFamily,
};
use prost::Message;

const TTFT: &str = "llm_probe_time_to_first_token_seconds";
const TPOT: &str = "llm_probe_time_per_output_token_seconds";
const E2E: &str = "llm_probe_request_duration_seconds";

/// A synthetic success (TTFT `ttft_ms`, TPOT 20 ms, E2E TTFT + 60 ms) that sent trace id
/// `n` repeated and the request id `req-n`, started at `at_ms` after the epoch.
fn traced(ttft_ms: u64, n: char, at_ms: u64) -> (ProbeOutcome, String) {
    let mut o = common::synthetic::success(Duration::from_millis(ttft_ms));
    let id: String = std::iter::repeat_n(n, 32).collect();
    o.observations.traceparent = Some(format!("00-{id}-00f067aa0ba902b7-01"));
    o.observations.request_id = Some(format!("req-{n}"));
    o.started_at = SystemTime::UNIX_EPOCH + Duration::from_millis(at_ms);
    (o, id)
}

fn metrics(kinds: HistogramKinds) -> Metrics {
    Metrics::with_histograms(
        &[],
        HistogramOptions {
            kinds,
            ..HistogramOptions::default()
        },
    )
}

/// The `_bucket` lines of `family` in `text` that carry an exemplar.
fn exemplar_lines<'a>(text: &'a str, family: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}_bucket{{")) && l.contains(" # {"))
        .collect()
}

#[test]
fn openmetrics_buckets_carry_the_exemplar_of_the_observation_that_fell_in_them() {
    let m = metrics(HistogramKinds::Both);
    let (a, id_a) = traced(310, 'a', 1_700_000_000_123);
    m.observe(&a);
    let (_, om) = m.render(Some("application/openmetrics-text; version=1.0.0"));
    let labels = r#"target="local",model="m",scenario="chat""#;
    let expect = |family: &str, le: &str, value: &str| {
        format!(
            "{family}_bucket{{le=\"{le}\",{labels}}} 1 # {{trace_id=\"{id_a}\",request_id=\"req-a\"}} {value} 1700000000.123"
        )
    };
    // TTFT 0.31 s falls in (0.3, 0.4]; TPOT 0.02 in (0.015, 0.02]; E2E 0.37 in (0.25, 0.5].
    assert_eq!(
        exemplar_lines(&om, TTFT),
        vec![expect(TTFT, "0.4", "0.31")],
        "{om}"
    );
    assert_eq!(
        exemplar_lines(&om, TPOT),
        vec![expect(TPOT, "0.02", "0.02")]
    );
    assert_eq!(exemplar_lines(&om, E2E), vec![expect(E2E, "0.5", "0.37")]);
    // Other histograms carry none; the Prometheus text 0.0.4 has no exemplar syntax.
    assert_eq!(om.matches(" # {").count(), 3, "{om}");
    let (_, text) = m.render(None);
    assert!(!text.contains(" # {"), "{text}");
    assert!(om.ends_with("# EOF\n"));

    // A later probe in the same bucket replaces it; one in another bucket adds one.
    let (b, id_b) = traced(350, 'b', 1_700_000_001_000);
    let (c, id_c) = traced(1_700, 'c', 1_700_000_002_000);
    m.observe(&b);
    m.observe(&c);
    let (_, om) = m.render(Some("application/openmetrics-text"));
    let ttft = exemplar_lines(&om, TTFT);
    assert_eq!(ttft.len(), 2, "{ttft:?}");
    assert!(
        ttft[0].contains("{le=\"0.4\",")
            && ttft[0].contains(&format!("}} 2 # {{trace_id=\"{id_b}"))
    );
    assert!(
        ttft[1].contains("{le=\"2.0\",")
            && ttft[1].contains(&format!("}} 3 # {{trace_id=\"{id_c}"))
    );
    assert!(!om.contains(&id_a), "a's exemplar was replaced");
}

#[test]
fn hostile_label_values_keep_exemplars_on_their_own_series() {
    let m = metrics(HistogramKinds::Classic);
    let (mut a, id_a) = traced(310, 'a', 1_700_000_000_000);
    a.target = Arc::from("we\"ird\\tar,get=\"x\"}\nle=\"0.4");
    let (b, id_b) = traced(40, 'b', 1_700_000_000_500);
    m.observe(&a);
    m.observe(&b);
    let (_, om) = m.render(Some("application/openmetrics-text"));
    let ttft = exemplar_lines(&om, TTFT);
    assert_eq!(ttft.len(), 2, "{om}");
    let of = |id: &str| ttft.iter().find(|l| l.contains(id)).copied().unwrap();
    assert!(
        of(&id_a).starts_with(&format!("{TTFT}_bucket{{le=\"0.4\",target=\"we\\\"ird")),
        "{}",
        of(&id_a)
    );
    assert!(of(&id_b).starts_with(&format!("{TTFT}_bucket{{le=\"0.05\",target=\"local\"")));
}

#[test]
fn a_probe_without_a_w3c_trace_id_has_no_exemplar_and_a_long_request_id_is_left_out() {
    let m = metrics(HistogramKinds::Both);
    let mut none = common::synthetic::success(Duration::from_millis(100));
    none.observations.traceparent = Some("not-a-traceparent".into());
    m.observe(&none);
    let (_, om) = m.render(Some("application/openmetrics-text"));
    assert!(!om.contains(" # {"), "{om}");
    // W3C Trace Context: version ff is invalid, hex is lower-case, no all-zero parent id. A
    // target's own such value gives no exemplar and no trace id in the JSON.
    for tp in [
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
    ] {
        let mut bad = common::synthetic::success(Duration::from_millis(100));
        bad.observations.traceparent = Some(tp.into());
        m.observe(&bad);
        let (_, om) = m.render(Some("application/openmetrics-text"));
        assert!(!om.contains(" # {"), "{tp}: {om}");
        assert_eq!(bad.observations.trace_id(), None, "{tp}");
        assert!(
            llm_probe::report::to_json(&bad)["trace_id"].is_null(),
            "{tp}"
        );
    }
    let (mut long, id) = traced(100, 'd', 1_700_000_000_000);
    long.observations.request_id = Some("x".repeat(100));
    m.observe(&long);
    let (_, om) = m.render(Some("application/openmetrics-text"));
    let line = exemplar_lines(&om, TTFT)[0];
    assert!(
        line.ends_with(&format!(" # {{trace_id=\"{id}\"}} 0.1 1700000000.000")),
        "{line}"
    );
}

fn decode(mut body: &[u8]) -> Vec<MetricFamily> {
    let mut families = Vec::new();
    while !body.is_empty() {
        families.push(MetricFamily::decode_length_delimited(&mut body).expect("a MetricFamily"));
    }
    families
}

fn histogram(families: &[MetricFamily], name: &str) -> Histogram {
    let f = families.iter().find(|f| f.name == name).expect(name);
    f.metric[0].histogram.clone().unwrap()
}

#[test]
fn protobuf_carries_the_exemplars_on_classic_buckets_and_native_histograms() {
    let (a, id_a) = traced(310, 'a', 1_700_000_000_123);
    let (b, id_b) = traced(1_700, 'b', 1_700_000_001_000);
    for kinds in [
        HistogramKinds::Both,
        HistogramKinds::Classic,
        HistogramKinds::Native,
    ] {
        let m = metrics(kinds);
        m.observe(&a);
        m.observe(&b);
        let families = decode(&m.render_as(Exposition::Protobuf).unwrap());
        for name in [TTFT, TPOT, E2E] {
            let h = histogram(&families, name);
            let with: Vec<(f64, String, f64)> = h
                .bucket
                .iter()
                .filter_map(|bk| {
                    let e = bk.exemplar.as_ref()?;
                    Some((bk.upper_bound, e.label[0].value.clone(), e.value))
                })
                .collect();
            let native = !h.positive_span.is_empty();
            assert_eq!(native, kinds != HistogramKinds::Classic, "{kinds:?} {name}");
            match (kinds, name) {
                (HistogramKinds::Native, _) => {
                    assert_eq!(with.len(), 1, "{kinds:?} {name}: {with:?}");
                    assert_eq!((with[0].0, &with[0].1), (f64::INFINITY, &id_b));
                }
                (_, TTFT) => assert_eq!(
                    with,
                    vec![(0.4, id_a.clone(), 0.31), (2.0, id_b.clone(), 1.7)]
                ),
                (_, TPOT) => assert_eq!(with, vec![(0.02, id_b.clone(), 0.02)]),
                _ => assert_eq!(with.len(), 2, "{name}: {with:?}"),
            }
            if native {
                let ids: Vec<&str> = h
                    .exemplars
                    .iter()
                    .map(|e| e.label[0].value.as_str())
                    .collect();
                let want: Vec<&str> = if name == TPOT {
                    vec![&id_b]
                } else {
                    vec![&id_a, &id_b]
                };
                assert_eq!(ids, want, "{kinds:?} {name}: oldest first");
                let e = &h.exemplars[0];
                assert_eq!(e.label[1].name, "request_id");
                let ts = e
                    .timestamp
                    .as_ref()
                    .expect("native exemplars need a timestamp");
                if name != TPOT {
                    assert_eq!((ts.seconds, ts.nanos), (1_700_000_000, 123_000_000));
                }
            } else {
                assert!(h.exemplars.is_empty());
            }
        }
    }
}

async fn fetch(url: &str, accept: &str) -> (u16, String, String) {
    let r = reqwest::Client::new()
        .get(url)
        .header("accept", accept)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let ct = r
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, ct, r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_record_url_serves_kept_probes_and_refuses_everything_else() {
    let sim = common::simulator(Script {
        ttft: Duration::from_millis(20),
        tokens: 3,
        ..Script::default()
    })
    .await;
    let cfg = common::parse(&common::yaml(
        &sim.base_url(),
        "500ms",
        &common::scenario("chat", 8),
        "",
    ));
    let d = common::daemon(cfg).await;
    let mut rx = d.subscribe();
    let o = common::outcomes(&mut rx, 1, Duration::from_secs(20)).await;
    let id = o[0]
        .observations
        .trace_id()
        .expect("a W3C trace id")
        .to_string();
    let base = format!("http://{}", d.addr);
    let (status, ct, body) = fetch(&format!("{base}/probes/{id}"), "application/json").await;
    assert_eq!((status, ct.as_str()), (200, "application/json"), "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["trace_id"], id);
    assert_eq!(
        (v["target"].as_str(), v["scenario"].as_str()),
        (Some("sim"), Some("chat"))
    );
    let ttft_ms = o[0].result.as_ref().unwrap().ttft.as_secs_f64() * 1e3;
    assert!(
        (v["ttft_ms"].as_f64().unwrap() - ttft_ms).abs() < 1e-3,
        "{v}"
    );
    // Upper-case hex is the same id; a browser gets the page.
    let (status, ct, page) = fetch(
        &format!("{base}/probes/{}", id.to_uppercase()),
        "text/html,application/xhtml+xml,*/*;q=0.8",
    )
    .await;
    assert_eq!(status, 200, "{page}");
    assert!(ct.starts_with("text/html"), "{ct}");
    assert!(page.contains(&id) && page.contains("Probe of"), "{page}");
    let (_, _, json) = fetch(&format!("{base}/probes/{id}?format=json"), "text/html").await;
    assert!(json.starts_with('{'), "{json}");
    // The listing names each probe's trace id.
    let (_, _, list) = common::get(d.addr, "/api/v1/probes?limit=1000", None).await;
    assert!(list.contains(&format!("\"trace_id\":\"{id}\"")), "{list}");

    // A well-formed id no probe here sent: 404 saying why.
    let unknown = "4bf92f3577b34da6a3ce929d0e0e4736";
    let (status, _, body) = fetch(&format!("{base}/probes/{unknown}"), "application/json").await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("rolled out of the history"), "{body}");
    let (status, _, body) = fetch(&format!("{base}/probes/{unknown}"), "text/html").await;
    assert_eq!(status, 404);
    assert!(
        body.contains(unknown) && body.contains("rolled out"),
        "{body}"
    );
    // Hostile ids: 400 (or 404 for an empty segment), never a panic, never echoed whole.
    let huge = "f".repeat(100_000);
    for path in [
        "/probes/zz".to_string(),
        "/probes/00000000000000000000000000000000".into(),
        format!("/probes/{id}0"),
        format!("/probes/{id}/x"),
        "/probes/%2e%2e%2fmetrics".into(),
        "/probes/..%2F..%2Fetc%2Fpasswd".into(),
        format!("/probes/{}", &huge[..4000]),
        "/probes/%00%ff%3Cscript%3E".into(),
        format!("/probes/{}", "é".repeat(16)),
    ] {
        let (status, _, body) = fetch(&format!("{base}{path}"), "application/json").await;
        assert_eq!(status, 400, "{path}: {body}");
        assert!(body.contains("not a trace id"), "{path}: {body}");
        assert!(body.len() < 600 && !body.contains('<'), "{path}: {body}");
    }
    let (status, _, _) = fetch(&format!("{base}/probes/"), "application/json").await;
    assert!(status == 400 || status == 404, "{status}");
    // The exporter is still up.
    let (status, _, _) = common::get(d.addr, "/-/healthy", None).await;
    assert_eq!(status, 200);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_record_url_honours_the_route_prefix() {
    let sim = common::simulator(Script {
        tokens: 2,
        ..Script::default()
    })
    .await;
    let cfg = common::parse(&common::yaml(
        &sim.base_url(),
        "500ms",
        &common::scenario("chat", 8),
        "",
    ));
    let options = llm_probe::server::ServerOptions {
        urls: llm_probe::server::WebUrls::new(Some("https://probe.example/llm/"), None).unwrap(),
        ..Default::default()
    };
    let d =
        llm_probe::daemon::Daemon::start_with(cfg, "127.0.0.1:0".parse().unwrap(), None, options)
            .await
            .unwrap();
    let mut rx = d.subscribe();
    let o = common::outcomes(&mut rx, 1, Duration::from_secs(20)).await;
    let id = o[0].observations.trace_id().unwrap().to_string();
    let (status, _, page) = fetch(&format!("http://{}/llm/probes/{id}", d.addr), "text/html").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("href=\"/llm/targets/sim#chat\""), "{page}");
    let (status, _, _) = fetch(&format!("http://{}/probes/{id}", d.addr), "text/html").await;
    assert_eq!(status, 404, "outside the prefix");
    // A kept failure's start on the target page links to its record, under the prefix.
    let failed_id = "0af7651916cd43dd8448eb211c80319c";
    d.history.push_probe(llm_probe::history::RecentProbe {
        target: Arc::from("sim"),
        scenario: Arc::from("chat"),
        replica: "".into(),
        started_at: SystemTime::now(),
        ttft: None,
        output_tokens_per_second: None,
        tpot: None,
        itl: None,
        e2e: None,
        output_tokens: None,
        failure: Some((
            llm_probe::measure::FailureReason::Timeout,
            "no token in 30 s".into(),
        )),
        identity: None,
        trace_id: llm_probe::measure::TraceId::parse(failed_id),
    });
    let (status, _, target) =
        fetch(&format!("http://{}/llm/targets/sim", d.addr), "text/html").await;
    assert_eq!(status, 200);
    let link = format!("href=\"/llm/probes/{failed_id}\"");
    assert!(target.contains(&link), "{target}");
    let (status, _, record) = fetch(
        &format!("http://{}/llm/probes/{failed_id}", d.addr),
        "text/html",
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        record.contains("timeout") && record.contains("no token in 30 s"),
        "{record}"
    );
    d.stop().await;
}

/// Every dashboard graph titled TTFT that shows the TTFT distribution from the histogram
/// itself (quantiles or a heatmap, not only recorded series) asks Grafana for exemplars on exactly one target, and that target reads the raw
/// series (a recorded series has none). A table (instant values, no time axis) shows no
/// exemplars and asks for none.
#[test]
fn dashboards_enable_exemplars_on_the_ttft_panels() {
    let mut enabled = 0;
    for file in common::dashboards::dashboard_files() {
        let dash = common::dashboards::read_json(&file);
        for panel in dash["panels"].as_array().unwrap() {
            let title = panel["title"].as_str().unwrap_or("");
            let targets = panel["targets"].as_array().cloned().unwrap_or_default();
            // A TTFT distribution (quantiles or heatmap) read from the histogram itself.
            let raw = |t: &serde_json::Value| {
                let e = t["expr"].as_str().unwrap_or("");
                let distribution = e.contains("histogram_quantile") || t["format"] == "heatmap";
                distribution && e.contains(TTFT) && !e.contains(&format!(":{TTFT}"))
            };
            let with: Vec<&serde_json::Value> =
                targets.iter().filter(|t| t["exemplar"] == true).collect();
            for t in &with {
                assert!(
                    raw(t),
                    "{}: {title}: exemplars from {}",
                    file.display(),
                    t["expr"]
                );
            }
            if panel["type"] == "table" {
                assert!(with.is_empty(), "{}: {title}: a table", file.display());
                continue;
            }
            if title.starts_with("TTFT") && targets.iter().any(raw) {
                assert_eq!(with.len(), 1, "{}: {title}", file.display());
                enabled += 1;
            }
        }
    }
    // Fleet: the per-scenario TTFT panel; target detail: TTFT quantiles, heatmap, P95 by
    // location and P95 by replica; each in the classic and the native variant.
    assert_eq!(enabled, 10);
}
