//! How exact the percentiles are:
//! 10,000 TTFTs drawn from a seeded lognormal distribution (median 250 ms, σ = 0.5; and median
//! 350 ms, σ = 0.15) are
//! observed into one pair's histograms; two real Prometheus 2.42 servers scrape them, one
//! classic (text), one with native histograms (protobuf), and compute P50, P95 and P99 with
//! `histogram_quantile`, next to the true sample percentiles. Native must be within 5 % of the
//! truth. The table is printed (`cargo test --test e2e prometheus::histogram_accuracy:: -- --nocapture`).
//!
//! The TTFTs are observed directly, not measured from a stream: the error shown is the
//! histograms' alone.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::prometheus::Prometheus;
use http_body_util::Full;
use hyper::body::Bytes;
use llm_probe::metrics::Metrics;
use tokio_util::sync::CancellationToken;

/// SplitMix64: a seeded, dependency-free generator (the sequence is fixed by the seed).
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }
    /// Standard normal (Box–Muller).
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit(), self.unit());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// The `q` quantile of sorted `xs` (linear between closest ranks).
fn percentile(xs: &[f64], q: f64) -> f64 {
    let pos = q * (xs.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    xs[lo] + (xs[hi] - xs[lo]) * (pos - lo as f64)
}

/// Serves `metrics` on a loopback port in the format each scraper negotiates.
async fn serve(metrics: Arc<Metrics>, shutdown: CancellationToken) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(llm_probe::server::serve(listener, shutdown, move |req| {
        let metrics = metrics.clone();
        async move {
            let accept = req.headers().get("accept").and_then(|v| v.to_str().ok());
            let format = llm_probe::server::negotiate(accept);
            let body = metrics.render_as(format).expect("render");
            hyper::Response::builder()
                .header("content-type", format.content_type())
                .body(Full::new(Bytes::from(body)))
                .unwrap()
        }
    }));
    addr
}

async fn first_value(prom: &Prometheus, promql: &str) -> f64 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let data = prom.api("/api/v1/query", &[("query", promql)]).await;
        let v = data["result"][0]["value"][1]
            .as_str()
            .and_then(|s| s.parse::<f64>().ok());
        if let Some(v) = v.filter(|v| v.is_finite()) {
            return v;
        }
        assert!(tokio::time::Instant::now() < deadline, "{promql}: {data}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_percentiles_are_within_5_percent_of_the_truth() {
    // The case, and one whose median and P95 fall inside wide classic buckets.
    compare(0.25, 0.5).await;
    compare(0.35, 0.15).await;
}

/// Observes 10,000 lognormal TTFTs (`median` seconds, `sigma`) and compares the percentiles.
async fn compare(median: f64, sigma: f64) {
    const N: usize = 10_000;
    let mut rng = Rng(20261130);
    let mut ttfts: Vec<f64> = (0..N)
        .map(|_| median * (sigma * rng.normal()).exp())
        .collect();
    let metrics = Arc::new(Metrics::new(&[]));
    for &t in &ttfts {
        metrics.observe(&common::synthetic::success(Duration::from_secs_f64(t)));
    }
    ttfts.sort_by(f64::total_cmp);

    let shutdown = CancellationToken::new();
    let addr = serve(metrics, shutdown.clone()).await;
    let (classic_dir, native_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let classic = Prometheus::start(classic_dir.path(), &[], addr).await;
    let native = Prometheus::start_with(
        native_dir.path(),
        &[],
        addr,
        &["--enable-feature=native-histograms"],
    )
    .await;

    println!("\nlognormal TTFT, median {median} s, σ {sigma}, n = {N}, seed 20261130:\n");
    println!("| percentile | true | classic | error | native | error |");
    println!("|---|---|---|---|---|---|");
    for q in [0.5, 0.95, 0.99] {
        let truth = percentile(&ttfts, q);
        let c = first_value(&classic, &format!("histogram_quantile({q}, sum by (le) (llm_probe_time_to_first_token_seconds_bucket))")).await;
        let n = first_value(
            &native,
            &format!("histogram_quantile({q}, sum(llm_probe_time_to_first_token_seconds))"),
        )
        .await;
        let err = |x: f64| (x - truth) / truth * 100.0;
        println!(
            "| P{} | {:.1} ms | {:.1} ms | {:+.1} % | {:.1} ms | {:+.1} % |",
            q * 100.0,
            truth * 1e3,
            c * 1e3,
            err(c),
            n * 1e3,
            err(n)
        );
        assert!(err(n).abs() <= 5.0, "native P{} {n} vs {truth}", q * 100.0);
        assert!(
            err(c).abs() <= 50.0,
            "classic P{} {c} vs {truth}: not the same data?",
            q * 100.0
        );
    }
    shutdown.cancel();
}
