//! The status pages' percentiles are bench's: one recorded sample set, through the history and
//! the state every page, the API and the badges show (`server::status::state::judge`), and
//! through bench's statistics (`bench::stats::Summary`), gives the same P50, P95 and P5 — type 7,
//! `llm_probe::stats` (`docs/measurement.md`, "Which percentile").

use std::time::{Duration, SystemTime};

use llm_probe::bench::stats::Summary;
use llm_probe::config::Slo;
use llm_probe::history::{History, HistoryLimits, RecentProbe};
use llm_probe::server::status::state::judge;

/// 20 TTFTs in whole microseconds (what the history keeps), in the order they were probed.
const TTFT_US: [u64; 20] = [
    212_400, 198_700, 205_100, 230_900, 199_300, 215_600, 205_250, 220_800, 202_150, 240_300,
    211_700, 207_050, 245_600, 231_200, 252_400, 260_900, 238_100, 229_400, 251_800, 270_500,
];

/// Output tokens/s of probe `i`: 35 to 58.75 in steps of 1.25, shuffled (7 significant digits or
/// fewer, which the history keeps exactly).
fn tokens_per_second(i: usize) -> f64 {
    35.0 + ((i * 7) % 20) as f64 * 1.25
}

fn close(a: f64, b: f64) {
    assert!((a - b).abs() <= 1e-9 * b.abs(), "{a} vs {b}");
}

#[test]
fn the_status_pages_percentiles_are_benchs_of_the_same_samples() {
    let now = SystemTime::now();
    let history = History::new(HistoryLimits::default());
    for (i, &us) in TTFT_US.iter().enumerate() {
        history.push_probe(RecentProbe {
            target: "t".into(),
            scenario: "s".into(),
            replica: "".into(),
            started_at: now - Duration::from_secs(300 - 10 * i as u64),
            ttft: Some(Duration::from_micros(us)),
            output_tokens_per_second: Some(tokens_per_second(i)),
            tpot: None,
            itl: None,
            e2e: None,
            output_tokens: None,
            failure: None,
            identity: None,
            trace_id: None,
        });
    }
    let kept = history.probes("t", "s");
    assert_eq!(kept.len(), TTFT_US.len());
    let status = judge(&kept.iter().collect::<Vec<_>>(), Slo::default(), now);
    assert_eq!(status.window_probes, TTFT_US.len());

    // bench's path: seconds, as its records hold them.
    let ttft = Summary::of(&TTFT_US.map(|us| us as f64 / 1e6));
    let tps = Summary::of(
        &(0..TTFT_US.len())
            .map(tokens_per_second)
            .collect::<Vec<_>>(),
    );
    close(status.ttft_p95_ms.unwrap(), ttft.p95.unwrap() * 1e3);
    close(status.ttft_p50_ms.unwrap(), ttft.p50.unwrap() * 1e3);
    close(status.tokens_per_second_p5.unwrap(), tps.p5.unwrap());
    close(status.tokens_per_second_p50.unwrap(), tps.p50.unwrap());

    // And both are numpy's `percentile` (type 7), not an order statistic: nearest rank gave the
    // page a P95 of 260.9 ms, a P50 of 220.8 ms and a P5 of 35 tokens/s.
    close(status.ttft_p95_ms.unwrap(), 260.9 + 0.05 * (270.5 - 260.9));
    close(status.ttft_p50_ms.unwrap(), (220.8 + 229.4) / 2.0);
    close(status.tokens_per_second_p5.unwrap(), 35.0 + 0.95 * 1.25);
}
