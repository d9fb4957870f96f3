//! A scrape flood while 20 pairs probe: renders are shared between concurrent scrapes and the
//! probes' TTFT stays within its bound of the simulator's actual send instants.

use crate::common;
use llm_probe::server::ServerOptions;
use llm_probe::simulate::Script;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_flood_shares_renders_and_keeps_ttft_accurate() {
    let sim = common::simulator(Script {
        ttft: Duration::from_millis(200),
        itl: Duration::from_millis(5),
        tokens: 8,
        ..Script::default()
    })
    .await;
    let d = common::daemon_with(
        common::parse(&common::many_targets(&sim.base_url(), 20, "1s")),
        ServerOptions::default(),
    )
    .await;
    let mut rx = d.subscribe();
    // 150 scrapers in a loop, on their own thread at the probes' priority (as scrapers on the
    // same machine would be), half of them asking for OpenMetrics.
    let stop = Arc::new(AtomicBool::new(false));
    let (scrapes, failures, bytes) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let flood = {
        let (stop, scrapes, failures, bytes, addr) = (
            stop.clone(),
            scrapes.clone(),
            failures.clone(),
            bytes.clone(),
            d.addr,
        );
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .on_thread_start(lowest_priority)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let client = reqwest::Client::new();
                let tasks: Vec<_> = (0..150)
                    .map(|i| {
                        let (client, stop, scrapes, failures, bytes) = (
                            client.clone(),
                            stop.clone(),
                            scrapes.clone(),
                            failures.clone(),
                            bytes.clone(),
                        );
                        let accept = if i % 2 == 0 {
                            "text/plain"
                        } else {
                            "application/openmetrics-text"
                        };
                        tokio::spawn(async move {
                            while !stop.load(Ordering::Relaxed) {
                                let r = client
                                    .get(format!("http://{addr}/metrics"))
                                    .header("accept", accept)
                                    .send()
                                    .await;
                                match r {
                                    Ok(r) if r.status() == 200 => {
                                        let body = r.bytes().await.map(|b| b.len()).unwrap_or(0);
                                        bytes.fetch_add(body as u64, Ordering::Relaxed);
                                        scrapes.fetch_add(1, Ordering::Relaxed);
                                    }
                                    _ => {
                                        failures.fetch_add(1, Ordering::Relaxed);
                                    }
                                }
                            }
                        })
                    })
                    .collect();
                for t in tasks {
                    let _ = t.await;
                }
            })
        })
    };
    // Every target probed about 4 times while the flood runs.
    let outcomes = common::outcomes(&mut rx, 80, Duration::from_secs(30)).await;
    stop.store(true, Ordering::Relaxed);
    flood.join().unwrap();
    let (scrapes, renders) = (scrapes.load(Ordering::Relaxed), d.server.scrapes.renders());
    let mut errors_ms: Vec<f64> = outcomes
        .iter()
        .map(|o| {
            let m = o.result.as_ref().expect("probe succeeded");
            (m.ttft.as_secs_f64() - 0.200) * 1e3
        })
        .collect();
    errors_ms.sort_by(f64::total_cmp);
    let quantile = |q: f64| errors_ms[((errors_ms.len() - 1) as f64 * q) as usize];
    eprintln!(
        "{scrapes} scrapes ({} MB), {renders} renders; TTFT error ms: min {:.2} median {:.2} p90 {:.2} max {:.2}",
        bytes.load(Ordering::Relaxed) / 1_000_000,
        quantile(0.0),
        quantile(0.5),
        quantile(0.9),
        quantile(1.0),
    );
    assert_eq!(failures.load(Ordering::Relaxed), 0, "every scrape answered");
    assert!(scrapes >= 300, "the flood ran: {scrapes} scrapes");
    // Scrapes that arrive while a render runs share it, so the ratio falls as renders get
    // faster: 5× with prometheus-client's encoder, 3.4× with ours. Half is the
    // bound: one render per scrape would mean no sharing at all.
    assert!(
        renders * 2 <= scrapes,
        "concurrent scrapes share renders: {renders} renders for {scrapes} scrapes"
    );
    // The accuracy tests' tolerance (tests/fidelity/accuracy.rs: TTFT within 5 ms of the script) for
    // the typical probe, nine in ten within 50 ms, and no false timeout. Measured on a
    // 2-core machine under a load of 7 from other work: with a render per scrape on the
    // probes' runtime (before), 750 scrapes in the time, false timeouts, median error 65 ms,
    // p90 394 ms, max 619 ms; with shared renders on the server's own lower-priority threads,
    // 3,000–5,000 scrapes and ~100–300 renders, median 1.3–2.4 ms, p90 7–18 ms (a single
    // probe was once 300 ms late: the machine is shared, so the maximum is not asserted).
    assert!(quantile(0.0) >= 0.0, "TTFT below the script: {errors_ms:?}");
    assert!(
        quantile(0.5) <= 5.0,
        "median TTFT within 5 ms of 200 ms while /metrics is flooded: {errors_ms:?}"
    );
    assert!(
        quantile(0.9) <= 50.0,
        "nine in ten TTFTs within 50 ms of 200 ms: {errors_ms:?}"
    );
    d.stop().await;
}

/// The calling thread at nice 19: the flood's clients stand for other machines' Prometheus
/// servers, whose CPU is not the exporter's to protect the probes from (on a 2-core test
/// machine their parsing of a gigabyte of bodies would compete like any other load).
fn lowest_priority() {
    // SAFETY: plain integers, no memory of ours.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 19);
    }
}
