//! Memory over replica churn, read from the daemon's own RSS (the binary run as a child, so
//! nothing of the test is in the reading): a file_sd pool that goes
//! 3 → 8 → 2 replicas again and again, every round at addresses never seen before, returns to
//! its memory level once the departed replicas' grace has passed. A daemon that kept anything
//! per departed replica (a series, a schedule slot, a history ring, an interned label) would
//! grow by it for each of the 1,000-odd replicas named here.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common;
use common::fleet::{replicas_in, series_of, write_sd};

const BIN: &str = env!("CARGO_BIN_EXE_llm-probe");

/// The replicas of round `round`: 3, 8 or 2 of them, at addresses no other round uses (port 9,
/// where nothing listens on loopback: each probe fails at once, and has its series all the same).
fn set(round: usize) -> Vec<String> {
    let n = [3, 8, 2][round % 3];
    (0..n)
        .map(|i| {
            let k = round * 8 + i;
            format!(
                "127.{}.{}.{}:9",
                2 + k / 62_500,
                (k / 250) % 250,
                k % 250 + 1
            )
        })
        .collect()
}

/// Scrapes until `ok` holds for the exposition (at most 30 s); returns it.
async fn until(addr: SocketAddr, what: &str, ok: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = common::get(addr, "/metrics", None).await.2;
        if ok(&text) {
            return text;
        }
        assert!(Instant::now() < deadline, "{what} not seen within 30 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs rounds `rounds` (each: write the set, wait until each of its replicas has series).
async fn churn(addr: SocketAddr, sd: &Path, rounds: std::ops::Range<usize>) {
    for round in rounds {
        let now = set(round);
        write_sd(sd, &now);
        until(addr, "the new set's series", |t| {
            now.iter().all(|r| series_of(t, r))
        })
        .await;
    }
}

/// After the grace: the exposition holds the last round's replicas only.
async fn at_rest(addr: SocketAddr, last: usize) -> String {
    let want: BTreeSet<String> = set(last).into_iter().collect();
    until(addr, "only the last set's series", |t| {
        replicas_in(t) == want
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_returns_to_its_level_after_replica_churn() {
    const WARM: usize = 30;
    const MORE: usize = 240;
    let dir = tempfile::tempdir().unwrap();
    let sd = dir.path().join("pool.json");
    write_sd(&sd, &set(0));
    let cfg = dir.path().join("probes.yaml");
    std::fs::write(
        &cfg,
        format!(
            "defaults:\n  interval: 200ms\n  timeout: 200ms\nscenarios:\n{}targets:\n  - name: pool\n    protocol: openai-chat\n    base_url: http://pool.test:9/v1\n    model: m\n    replicas:\n      file_sd: {}\n      refresh: 100ms\n      max: 8\n      grace: 300ms\n",
            common::scenario("chat", 4),
            sd.display()
        ),
    )
    .unwrap();
    let (child, mut err) = common::spawn_logged(
        BIN,
        &["run", "--web.listen-address", "127.0.0.1:0"],
        &cfg,
        &[],
    );
    let addr: SocketAddr = err.served_addr().parse().unwrap();
    // Keep the pipe drained: a full one would block the daemon's logging.
    let log = std::thread::spawn(move || err.finish());
    let pid = child.0.id().to_string();

    // The level: after a warm-up of churn (allocator arenas, the HTTP client's pools, the
    // status page's rings at their size), with the departed replicas' grace over.
    churn(addr, &sd, 1..WARM).await;
    let rest = at_rest(addr, WARM - 1).await;
    let level = common::rss_kib_of(&pid);
    let named_before = (0..WARM).map(|r| set(r).len()).sum::<usize>();

    churn(addr, &sd, WARM..WARM + MORE).await;
    let rest_after = at_rest(addr, WARM + MORE - 1).await;
    let after = common::rss_kib_of(&pid);
    let named = (0..WARM + MORE).map(|r| set(r).len()).sum::<usize>();

    eprintln!(
        "replica churn: RSS {level} KiB after {WARM} rounds ({named_before} replicas named), {after} KiB after {} ({named} named); exposition {} bytes, then {} bytes",
        WARM + MORE,
        rest.len(),
        rest_after.len()
    );
    // Same number of replicas at rest (2 then 2: the rounds end on a set of 2 both times).
    assert_eq!(set(WARM - 1).len(), set(WARM + MORE - 1).len());
    assert!(
        rest_after.len() <= rest.len() + rest.len() / 10,
        "the exposition grew from {} to {} bytes at rest",
        rest.len(),
        rest_after.len()
    );
    // 1,000-odd more replicas named: a leak of even 4 KiB each would be 4 MiB.
    assert!(
        after <= level + 4 * 1024,
        "RSS grew from {level} KiB to {after} KiB over {MORE} rounds of churn"
    );
    common::interrupt(&child.0);
    let mut child = child;
    child.0.wait().unwrap();
    let log = log.join().unwrap();
    assert!(!log.contains("panicked"), "{log}");
}
