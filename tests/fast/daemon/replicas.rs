//! Targets with `replicas:`: one pair per (target, replica, scenario), each replica probed at
//! its own address with the target's host name, a `replica` label on its series, discovery
//! churn with a grace period, and bad discovery input that keeps the last good set.
//!
//! The simulators listen on different loopback addresses (Linux routes all of 127.0.0.0/8 to
//! the loopback interface) and a file_sd file lists them.

use crate::common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use llm_probe::daemon::Daemon;
use llm_probe::simulate::Simulator;

use common::fleet::{
    addrs, gauge, host_header, pool_yaml, pool_yaml_at, reloadable, scrape, series_of,
    simulator_at, ttft, until, write_sd, write_whole,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_replica_is_probed_at_its_address_with_the_target_host_and_its_own_series() {
    let fast = [
        simulator_at("127.0.0.2", 0, common::stream(20, 2, 4)).await,
        simulator_at("127.0.0.3", 0, common::stream(20, 2, 4)).await,
    ];
    let slow = simulator_at("127.0.0.4", 0, common::stream(150, 2, 4)).await;
    let dir = tempfile::tempdir().unwrap();
    let sd = dir.path().join("pool.json");
    write_sd(&sd, &addrs(&[&fast[0], &fast[1], &slow]));
    let cfg = common::parse(&pool_yaml(
        &format!("      file_sd: {}\n      refresh: 200ms\n", sd.display()),
        "600ms",
        "",
    ));
    let d = common::daemon(cfg).await;
    let all = [&fast[0], &fast[1], &slow];
    let text = until(
        &d,
        "two successes per replica",
        Duration::from_secs(30),
        |t| all.iter().all(|s| ttft(t, &s.addr.to_string()).1 >= 2.0),
    )
    .await;
    assert_eq!(gauge(&text, "llm_probe_replicas", "pool"), Some(3.0));
    assert_eq!(
        gauge(&text, "llm_probe_replicas_discovered", "pool"),
        Some(3.0)
    );
    // The slow replica is named by its series: its mean TTFT is above every other's.
    let mean = |s: &Simulator| {
        let (sum, count) = ttft(&text, &s.addr.to_string());
        sum / count
    };
    for f in &fast {
        assert!(
            mean(&slow) > mean(f),
            "slow {} vs fast {}",
            mean(&slow),
            mean(f)
        );
    }
    // Each request went to its replica's own address with the target's Host header.
    for s in all {
        let received = s.received();
        assert!(!received.is_empty(), "{} was never probed", s.addr);
        for r in received {
            assert_eq!(host_header(&r).as_deref(), Some("pool.test:8000"));
        }
    }
    // Per-pair families carry the label after `scenario`; the discovery failures start at zero.
    assert!(text.contains(&format!(
        "llm_probe_probes_total{{target=\"pool\",model=\"m\",scenario=\"chat\",replica=\"{}\"}}",
        slow.addr
    )));
    assert_eq!(
        common::sample(
            &text,
            "llm_probe_replica_discovery_failures_total",
            &[("target", "pool"), ("reason", "format")]
        ),
        Some(0.0)
    );
    d.stop().await;
}

/// A replica's engine metrics are read at its own address too, over its own client (built
/// when first needed, pinned like its stream's): the target's host name does not resolve, and
/// each replica listens on a port of its own, not `base_url`'s (as an SRV record or a file_sd
/// entry may say).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_replica_s_engine_metrics_are_read_at_its_own_address() {
    engine_metrics_read_at_each_replica("pool.test").await;
}

/// A `base_url` on an IP address is never resolved: its engine reads still go to each
/// replica's address, not to `base_url`'s with the replica's port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_on_an_ip_address_reads_each_replica_s_engine_metrics() {
    engine_metrics_read_at_each_replica("127.0.0.1").await;
}

/// A pool whose `base_url` and `server_metrics_url` are on `host` (a name that does not
/// resolve, or an address nothing listens on), its two replicas elsewhere: every engine read
/// succeeds, and each replica has gauges of its own.
async fn engine_metrics_read_at_each_replica(host: &str) {
    let sims = [
        simulator_at("127.0.0.2", 0, common::stream(20, 2, 4)).await,
        simulator_at("127.0.0.3", 0, common::stream(20, 2, 4)).await,
    ];
    let port = 9;
    let dir = tempfile::tempdir().unwrap();
    let sd = dir.path().join("pool.json");
    write_sd(&sd, &addrs(&[&sims[0], &sims[1]]));
    let cfg = common::parse(
        &pool_yaml_at(
            port,
            &format!("      file_sd: {}\n      refresh: 200ms\n", sd.display()),
            "400ms",
            &format!("    server_metrics_url: http://pool.test:{port}/metrics\n"),
        )
        .replace("pool.test", host),
    );
    let d = common::daemon(cfg).await;
    // Each replica's engine has its own gauges: two reads never overwrite each other. (A read
    // that failed leaves none until the next one: waited for, not sampled once.)
    let text = until(
        &d,
        "three successes and engine gauges per replica",
        Duration::from_secs(30),
        |t| {
            sims.iter().all(|s| {
                let replica = s.addr.to_string();
                ttft(t, &replica).1 >= 3.0 && has_load(t, &replica)
            })
        },
    )
    .await;
    // A read sent to the wrong address fails as `connect` (or reads something that is not
    // this engine: `http_status`, `malformed` …).
    let failures = engine_read_failures(&text);
    assert!(failures.is_empty(), "{failures:#?}");
    d.stop().await;
}

/// A `server_metrics_url` on another port than `base_url`'s (Triton's metrics port, an
/// exporter beside the engine) is read at each replica's address at that port: the replica's
/// own port stands for `base_url`'s, not for every port of its host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_metrics_port_of_its_own_is_kept_for_each_replica() {
    engine_metrics_port_kept("pool.test").await;
}

/// [`an_engine_metrics_port_of_its_own_is_kept_for_each_replica`] for a pool on an IP address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_metrics_port_of_its_own_is_kept_on_an_ip_address() {
    engine_metrics_port_kept("127.0.0.1").await;
}

/// A pool on `host` whose replica serves its API at `base_url`'s port and its engine metrics
/// (7 requests waiting) at another: the gauge says 7, not the API server's own /metrics.
async fn engine_metrics_port_kept(host: &str) {
    let ip = if host == "pool.test" {
        "127.0.0.22"
    } else {
        "127.0.0.23"
    };
    let sim = simulator_at(ip, 0, common::stream(5, 1, 2)).await;
    let sidecar = metrics_sidecar(ip, 7).await;
    let dir = tempfile::tempdir().unwrap();
    let sd = dir.path().join("pool.json");
    write_sd(&sd, &[sim.addr.to_string()]);
    let cfg = common::parse(
        &pool_yaml_at(
            sim.addr.port(),
            &format!("      file_sd: {}\n      refresh: 200ms\n", sd.display()),
            "300ms",
            &format!(
                "    server_metrics_url: http://pool.test:{}/metrics\n",
                sidecar.port()
            ),
        )
        .replace("pool.test", host),
    );
    let d = common::daemon(cfg).await;
    let replica = sim.addr.to_string();
    let labels = [("target", "pool"), ("replica", replica.as_str())];
    until(
        &d,
        "the engine's metrics read at their own port",
        Duration::from_secs(10),
        |t| common::sample(t, "llm_probe_server_requests_waiting", &labels) == Some(7.0),
    )
    .await;
    d.stop().await;
}

/// An engine's metrics alone on `ip` (port chosen by the system), in vLLM's names: `waiting`
/// requests waiting, none running. Returns its address.
async fn metrics_sidecar(ip: &str, waiting: u32) -> SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind(format!("{ip}:0"))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut head, mut chunk) = (Vec::new(), [0u8; 1024]);
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tcp.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&chunk[..n]),
                    }
                }
                let body = format!(
                    "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{model_name=\"m\"}} {waiting}\n\
                     # TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{model_name=\"m\"}} 0\n\
                     # TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{{model_name=\"m\"}} 0\n"
                );
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = tcp.write_all(response.as_bytes()).await;
                let _ = tcp.shutdown().await;
            });
        }
    });
    addr
}

/// A pool on an IP address over https: a replica's engine read is verified as its probe is,
/// against `base_url`'s address (which the certificate names), not the replica's (which it
/// does not).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_pool_on_an_ip_address_verifies_engine_reads_as_base_url() {
    let sim = simulator_at("127.0.0.24", 0, common::stream(5, 1, 2)).await;
    let pki = common::pki::pki();
    let (front, _) = common::https::tls_front("127.0.0.24:0", &pki, &[b"http/1.1"], sim.addr).await;
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let sd = dir.path().join("pool.json");
    write_sd(&sd, &[front.to_string()]);
    let text = format!(
        "defaults:\n  interval: 300ms\n  timeout: 300ms\nscenarios:\n{}targets:\n  - name: pool\n    protocol: openai-chat\n    base_url: https://127.0.0.1:8443/v1\n    model: m\n    tls: {{ca_file: {}}}\n    server_metrics_url: https://127.0.0.1:8443/metrics\n    replicas: {{file_sd: {}, refresh: 200ms}}\n",
        common::scenario("chat", 4),
        ca.display(),
        sd.display()
    );
    let d = common::daemon(common::parse(&text)).await;
    let replica = front.to_string();
    let text = until(
        &d,
        "three probes and an engine read",
        Duration::from_secs(30),
        |t| ttft(t, &replica).1 >= 3.0 && has_load(t, &replica),
    )
    .await;
    // A certificate refused fails the read as `connect`.
    let failures = engine_read_failures(&text);
    assert!(failures.is_empty(), "{failures:#?}");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_refuses_is_named_in_the_failure_detail() {
    let up = simulator_at("127.0.0.2", 0, common::stream(20, 2, 4)).await;
    // An address nothing listens on: bound, then closed.
    let refused = std::net::TcpListener::bind("127.0.0.5:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sd = dir.path().join("pool.json");
    write_sd(&sd, &[up.addr.to_string(), refused.to_string()]);
    let cfg = common::parse(&pool_yaml(
        &format!("      file_sd: {}\n", sd.display()),
        "300ms",
        "",
    ));
    let d = common::daemon(cfg).await;
    let detail = first_failure_at(&d, &refused.to_string()).await;
    // The pool's host name alone would not say which machine refused.
    assert!(
        detail.starts_with(&format!(
            "could not connect to replica {refused} of pool.test:8000"
        )),
        "{detail}"
    );
    assert!(d
        .history
        .pair_failures("pool", "chat")
        .iter()
        .all(|p| *p.replica != *up.addr.to_string()));
    d.stop().await;
}

/// The detail of the first failure of the pool's `replica` kept in the history (within 30 s).
async fn first_failure_at(d: &Daemon, replica: &str) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let failed = d.history.pair_failures("pool", "chat");
        if let Some(p) = failed.iter().find(|p| &*p.replica == replica) {
            return p.failure.clone().unwrap().1;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no failure at {replica}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A file_sd entry may be a host name, resolved when the set is read: the label alone does not
/// say which machine was dialled, so the detail names its address too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_replica_that_refuses_is_named_with_the_address_it_was_dialled_at() {
    let refused = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let named = format!("localhost:{}", refused.port());
    let dir = tempfile::tempdir().unwrap();
    let sd = dir.path().join("pool.json");
    write_sd(&sd, std::slice::from_ref(&named));
    let cfg = common::parse(&pool_yaml(
        &format!("      file_sd: {}\n", sd.display()),
        "300ms",
        "",
    ));
    let d = common::daemon(cfg).await;
    let detail = first_failure_at(&d, &named).await;
    assert!(
        detail.starts_with(&format!(
            "could not connect to replica {named} ({refused}) of pool.test:8000"
        )),
        "{detail}"
    );
    d.stop().await;
}

/// Two entries of a file_sd file that are one address (an IP address and a host name that
/// resolves to it) are one replica: one is discovered, and nothing says the cap left one out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_and_an_address_of_one_replica_are_discovered_once() {
    let up = simulator_at("127.0.0.1", 0, common::stream(20, 2, 4)).await;
    let dir = tempfile::tempdir().unwrap();
    let sd = dir.path().join("pool.json");
    let named = format!("localhost:{}", up.addr.port());
    write_sd(&sd, &[up.addr.to_string(), named]);
    let cfg = common::parse(&pool_yaml(
        &format!("      file_sd: {}\n", sd.display()),
        "300ms",
        "",
    ));
    let d = common::daemon(cfg).await;
    let text = until(&d, "one success", Duration::from_secs(30), |t| {
        ttft(t, &up.addr.to_string()).1 >= 1.0
    })
    .await;
    assert_eq!(gauge(&text, "llm_probe_replicas", "pool"), Some(1.0));
    assert_eq!(
        gauge(&text, "llm_probe_replicas_discovered", "pool"),
        Some(1.0)
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn departed_replicas_stop_at_once_and_their_series_go_after_the_grace() {
    let sims = [
        simulator_at("127.0.0.5", 0, common::stream(5, 1, 2)).await,
        simulator_at("127.0.0.6", 0, common::stream(5, 1, 2)).await,
        simulator_at("127.0.0.7", 0, common::stream(5, 1, 2)).await,
    ];
    let all = addrs(&[&sims[0], &sims[1], &sims[2]]);
    let dir = tempfile::tempdir().unwrap();
    let sd = dir.path().join("pool.json");
    write_sd(&sd, &all);
    let cfg = common::parse(&pool_yaml(
        &format!(
            "      file_sd: {}\n      refresh: 200ms\n      grace: 2s\n",
            sd.display()
        ),
        "200ms",
        "",
    ));
    let d = common::daemon(cfg).await;
    let series = |t: &str, r: &str| t.contains(&format!("replica=\"{r}\""));
    until(&d, "every replica probed", Duration::from_secs(30), |t| {
        all.iter().all(|r| ttft(t, r).1 >= 1.0)
    })
    .await;

    // 3 → 1: the departed replicas stop being probed, their series stay for the grace.
    write_sd(&sd, &all[..1]);
    let text = until(&d, "one replica", Duration::from_secs(10), |t| {
        gauge(t, "llm_probe_replicas", "pool") == Some(1.0)
    })
    .await;
    let applied = std::time::Instant::now();
    assert!(series(&text, &all[1]) && series(&text, &all[2]), "{text}");
    // A probe already under way when the set changed may still arrive; none after it ends
    // (the timeout bounds it).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let counts = |s: &Simulator| s.received().len();
    let before = (counts(&sims[1]), counts(&sims[2]), counts(&sims[0]));
    let text = until(
        &d,
        "series gone after the grace",
        Duration::from_secs(20),
        |t| !series(t, &all[1]) && !series(t, &all[2]),
    )
    .await;
    let gone_after = applied.elapsed();
    assert!(
        gone_after >= Duration::from_millis(1500),
        "series went {gone_after:?} after the change, before the 2 s grace"
    );
    assert_eq!((counts(&sims[1]), counts(&sims[2])), (before.0, before.1));
    assert!(
        counts(&sims[0]) > before.2,
        "the remaining replica is still probed"
    );
    assert!(series(&text, &all[0]));

    // Back to 3: the returning replicas are probed again.
    write_sd(&sd, &all);
    until(
        &d,
        "three replicas probed again",
        Duration::from_secs(20),
        |t| {
            gauge(t, "llm_probe_replicas", "pool") == Some(3.0)
                && all.iter().all(|r| ttft(t, r).1 >= 1.0)
        },
    )
    .await;
    assert!(counts(&sims[1]) > before.0 && counts(&sims[2]) > before.1);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_discovery_input_keeps_the_last_good_set_and_disturbs_no_other_target() {
    let sims = [
        simulator_at("127.0.0.8", 0, common::stream(5, 1, 2)).await,
        simulator_at("127.0.0.9", 0, common::stream(5, 1, 2)).await,
    ];
    let other = common::simulator(common::stream(5, 1, 2)).await;
    let good = addrs(&[&sims[0], &sims[1]]);
    let dir = tempfile::tempdir().unwrap();
    let sd = dir.path().join("pool.json");
    write_sd(&sd, &good);
    // 10,000 entries: only the first 64 (sorted) are probed; they refuse connections, on
    // addresses nothing listens on, and are probed once a day (the first probe comes early).
    let huge = dir.path().join("huge.json");
    let many: Vec<String> = (0..10_000)
        .map(|i| format!("127.1.{}.{}:9", i / 250, i % 250 + 1))
        .collect();
    write_sd(&huge, &many);
    let extra = format!(
        "  - name: other\n    protocol: openai-chat\n    base_url: {}\n    model: m\n  - name: capped\n    protocol: openai-chat\n    base_url: http://capped.test:9/v1\n    model: m\n    interval: 1d\n    replicas:\n      file_sd: {}\n      max: 64\n",
        other.base_url(),
        huge.display()
    );
    let cfg = common::parse(&pool_yaml(
        &format!("      file_sd: {}\n      refresh: 100ms\n", sd.display()),
        "200ms",
        &extra,
    ));
    let d = common::daemon(cfg).await;
    let failures = |t: &str, reason: &str| {
        common::sample(
            t,
            "llm_probe_replica_discovery_failures_total",
            &[("target", "pool"), ("reason", reason)],
        )
        .unwrap_or(0.0)
    };
    until(&d, "both replicas probed", Duration::from_secs(30), |t| {
        good.iter().all(|r| ttft(t, r).1 >= 1.0)
    })
    .await;

    // Each bad input in turn: counted under its reason, the two replicas still probed.
    let half_written = br#"[{"targets": ["127.0.0.8:1", "127.0"#.to_vec();
    let fifo = dir.path().join("fifo");
    common::mkfifo(&fifo);
    type BreakIt<'a> = Box<dyn Fn() + 'a>;
    let cases: Vec<(&str, BreakIt)> = vec![
        ("format", Box::new(|| write_whole(&sd, &half_written))),
        (
            "format",
            Box::new(|| write_whole(&sd, b"<html>not json</html>")),
        ),
        ("empty", Box::new(|| write_whole(&sd, b"[]"))),
        ("read", Box::new(|| std::fs::remove_file(&sd).unwrap())),
        ("read", Box::new(|| std::fs::rename(&fifo, &sd).unwrap())),
    ];
    for (reason, break_it) in cases {
        let before = failures(&scrape(&d).await, reason);
        break_it();
        let text = until(&d, reason, Duration::from_secs(10), |t| {
            failures(t, reason) > before
        })
        .await;
        assert_eq!(
            gauge(&text, "llm_probe_replicas", "pool"),
            Some(2.0),
            "{reason}"
        );
        let probed = |t: &str| good.iter().map(|r| ttft(t, r).1).sum::<f64>();
        let (now, other_now) = (probed(&text), other.received().len());
        // The last good set and the other target go on being probed.
        until(
            &d,
            "the last good set and the other target still probed",
            Duration::from_secs(10),
            |t| probed(t) >= now + 2.0 && other.received().len() > other_now,
        )
        .await;
        if reason == "read" && sd.exists() && !sd.is_file() {
            std::fs::remove_file(&sd).unwrap();
        }
    }

    // The cap: 64 probed, 10,000 found, and a pair for each of the 64 only.
    let text = until(&d, "the capped target", Duration::from_secs(10), |t| {
        gauge(t, "llm_probe_replicas", "capped") == Some(64.0)
    })
    .await;
    assert_eq!(
        gauge(&text, "llm_probe_replicas_discovered", "capped"),
        Some(10_000.0)
    );
    let pairs = text
        .lines()
        .filter(|l| l.starts_with("llm_probe_probe_interval_seconds{target=\"capped\""))
        .count();
    assert_eq!(pairs, 64);
    assert!(
        text.contains("replica=\"127.1.0.1:9\""),
        "the first of the sorted entries"
    );
    assert_eq!(
        d.server
            .stopped_schedules
            .load(std::sync::atomic::Ordering::Acquire),
        0
    );
    d.stop().await;
}

/// A DNS server on a loopback UDP port answering from `records` only (name with its root
/// dot, record data): the records of the question's name and type, NXDOMAIN for a name it has
/// no record of. Enough of DNS for `replicas.dns.nameserver` and `replicas.dns_srv`. Its
/// records have a TTL of 0. A name written `+name.` is a record of `name.` sent along in every
/// answer of its type, whatever the question (as a careless or hostile server might).
async fn dns_server(
    records: Vec<(&'static str, hickory_resolver::proto::rr::RData)>,
) -> SocketAddr {
    dns_server_ttl(records, 0).await.0
}

/// [`dns_server`] with records of TTL `ttl` seconds, and the count of questions it answered.
async fn dns_server_ttl(
    records: Vec<(&'static str, hickory_resolver::proto::rr::RData)>,
    ttl: u32,
) -> (SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use hickory_resolver::proto::op::{Message, ResponseCode};
    use hickory_resolver::proto::rr::{Name, Record};
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = socket.local_addr().unwrap();
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = asked.clone();
    tokio::spawn(async move {
        let mut buf = [0u8; 1500];
        loop {
            let Ok((n, from)) = socket.recv_from(&mut buf).await else {
                return;
            };
            let Ok(query) = Message::from_vec(&buf[..n]) else {
                continue;
            };
            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut reply = Message::response(query.metadata.id, query.metadata.op_code);
            reply.metadata.recursion_desired = query.metadata.recursion_desired;
            reply.metadata.recursion_available = true;
            for q in &query.queries {
                reply.add_query(q.clone());
                let asked = q.name().to_ascii().to_ascii_lowercase();
                for (name, data) in records.iter().filter(|(n, _)| n.starts_with('+')) {
                    if data.record_type() == q.query_type() {
                        let owner = Name::from_ascii(&name[1..]).unwrap();
                        reply.add_answer(Record::from_rdata(owner, ttl, data.clone()));
                    }
                }
                if !records.iter().any(|(name, _)| *name == asked) {
                    reply.metadata.response_code = ResponseCode::NXDomain;
                }
                for (name, data) in records.iter().filter(|(name, _)| *name == asked) {
                    // A CNAME answers every question of its name (the resolver follows it).
                    if data.record_type() == q.query_type()
                        || data.record_type() == hickory_resolver::proto::rr::RecordType::CNAME
                    {
                        let owner = Name::from_ascii(name).unwrap();
                        reply.add_answer(Record::from_rdata(owner, ttl, data.clone()));
                    }
                }
            }
            let bytes = reply.to_vec().unwrap();
            let _ = socket.send_to(&bytes, from).await;
        }
    });
    (addr, asked)
}

/// A CNAME loop (`loop.test` → `loop2.test` → `loop.test`) beside a healthy pool: each
/// discovery of the loop ends with reason resolve (counted again and again, so none hangs), no
/// replica of it is probed, and the other pool is probed all along.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cname_loop_is_a_resolve_failure_and_disturbs_no_other_target() {
    use hickory_resolver::proto::rr::{rdata::CNAME, Name, RData};
    let sim = simulator_at("127.0.0.52", 0, common::stream(5, 1, 2)).await;
    let port = sim.addr.port();
    let cname = |to: &str| RData::CNAME(CNAME(Name::from_ascii(to).unwrap()));
    let dns = dns_server(vec![
        ("loop.test.", cname("loop2.test.")),
        ("loop2.test.", cname("loop.test.")),
        ("pool.test.", a(sim.addr.ip())),
    ])
    .await;
    let target = |name: &str| {
        format!(
            "  - name: {name}\n    protocol: openai-chat\n    base_url: http://{name}.test:{port}/v1\n    model: m\n    replicas:\n      dns: {{nameserver: '{dns}'}}\n      refresh: 200ms\n"
        )
    };
    let text = format!(
        "defaults:\n  interval: 300ms\n  timeout: 300ms\nscenarios:\n{}targets:\n{}{}",
        common::scenario("chat", 4),
        target("loop"),
        target("pool"),
    );
    let d = common::daemon(common::parse(&text)).await;
    let failures = |t: &str| {
        common::sample(
            t,
            "llm_probe_replica_discovery_failures_total",
            &[("target", "loop"), ("reason", "resolve")],
        )
        .unwrap_or(0.0)
    };
    let ok = sim.addr.to_string();
    let text = until(
        &d,
        "three failed discoveries of the loop and the other pool probed",
        Duration::from_secs(30),
        |t| failures(t) >= 3.0 && ttft(t, &ok).1 >= 2.0,
    )
    .await;
    // No good discovery ever: no replica count either.
    assert_eq!(gauge(&text, "llm_probe_replicas", "loop"), None);
    assert!(
        !text.contains("target=\"loop\",model=\"m\",scenario=\"chat\",replica="),
        "{text}"
    );
    d.stop().await;
}

/// `refresh: 1h`, yet the records are asked for again when their TTL runs out: after 2 s for
/// a TTL of 2, and no more than once a second for a TTL of 0 (which must not make discovery
/// ask in a loop). Bounds are on the time the questions took, which load only lengthens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_is_asked_again_when_the_ttl_runs_out_and_a_zero_ttl_at_most_once_a_second() {
    use std::sync::atomic::Ordering;
    let sim = simulator_at("127.0.0.51", 0, common::stream(5, 1, 2)).await;
    let port = sim.addr.port();
    let (zero, asked_zero) = dns_server_ttl(vec![("pool.test.", a(sim.addr.ip()))], 0).await;
    let (two, asked_two) = dns_server_ttl(vec![("other.test.", a(sim.addr.ip()))], 2).await;
    let target = |name: &str, host: &str, dns: SocketAddr| {
        format!(
            "  - name: {name}\n    protocol: openai-chat\n    base_url: http://{host}:{port}/v1\n    model: m\n    replicas:\n      dns: {{nameserver: '{dns}'}}\n      refresh: 1h\n"
        )
    };
    let text = format!(
        "defaults:\n  interval: 1h\n  timeout: 1s\nscenarios:\n{}targets:\n{}{}",
        common::scenario("chat", 4),
        target("zero", "pool.test", zero),
        target("two", "other.test", two),
    );
    let started = std::time::Instant::now();
    let d = common::daemon(common::parse(&text)).await;
    // Each discovery asks one question per address family (A and AAAA).
    let discoveries = |asked: &std::sync::atomic::AtomicUsize| asked.load(Ordering::Relaxed) / 2;
    let deadline = started + Duration::from_secs(30);
    while discoveries(&asked_two) < 3 || discoveries(&asked_zero) < 4 {
        assert!(
            std::time::Instant::now() < deadline,
            "TTL 2: {} discoveries, TTL 0: {} in 30 s with refresh 1h",
            discoveries(&asked_two),
            discoveries(&asked_zero)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let took = started.elapsed();
    let zero_count = discoveries(&asked_zero);
    // Three discoveries at TTL 2 are two waits of 2 s apart at least.
    assert!(took >= Duration::from_secs(4), "{took:?}");
    // At TTL 0, one discovery a second at most (and the first at once).
    assert!(
        zero_count as f64 <= took.as_secs_f64() + 2.0,
        "{zero_count} discoveries in {took:?} at TTL 0"
    );
    d.stop().await;
}

/// An A record's data.
fn a(ip: std::net::IpAddr) -> hickory_resolver::proto::rr::RData {
    match ip {
        std::net::IpAddr::V4(v4) => hickory_resolver::proto::rr::RData::A(v4.into()),
        other => panic!("{other}"),
    }
}

/// An SRV record's data: `target` (with its root dot) at `port`.
fn srv(target: &str, port: u16) -> hickory_resolver::proto::rr::RData {
    use hickory_resolver::proto::rr::{rdata::SRV, Name, RData};
    RData::SRV(SRV::new(0, 0, port, Name::from_ascii(target).unwrap()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn srv_records_without_a_service_are_skipped_and_the_cap_applies_before_any_lookup() {
    let sims = [
        simulator_at("127.0.0.21", 0, common::stream(5, 1, 2)).await,
        simulator_at("127.0.0.22", 0, common::stream(5, 1, 2)).await,
    ];
    const NAME: &str = "_http._tcp.pool.test.";
    let mut records = vec![
        // RFC 2782: target "." = no service here; port 0 = no port. Neither is a replica.
        (NAME, srv(".", 8000)),
        (NAME, srv("zz-none.pool.test.", 0)),
        (NAME, srv("a.pool.test.", sims[0].addr.port())),
        (NAME, srv("b.pool.test.", sims[1].addr.port())),
        ("a.pool.test.", a(sims[0].addr.ip())),
        ("b.pool.test.", a(sims[1].addr.ip())),
    ];
    // Ten more targets that sort after a and b, none of which has an address: the cap
    // (max: 2) keeps a and b before any of them is looked up.
    let more: Vec<&'static str> = (0..10)
        .map(|i| &*Box::leak(format!("x{i}.pool.test.").into_boxed_str()))
        .collect();
    for m in &more {
        records.push((NAME, srv(m, 9)));
    }
    // Sent along in the answer, of another name: not a replica of this one.
    records.push(("+_http._tcp.other.test.", srv("c.pool.test.", 9)));
    let dns = dns_server(records).await;
    let cfg = common::parse(&pool_yaml(
        &format!(
            "      dns_srv: {{name: _http._tcp.pool.test, nameserver: '{dns}'}}\n      refresh: 200ms\n      max: 2\n"
        ),
        "300ms",
        "",
    ));
    let d = common::daemon(cfg).await;
    let want = [
        format!("a.pool.test:{}", sims[0].addr.port()),
        format!("b.pool.test:{}", sims[1].addr.port()),
    ];
    let text = until(
        &d,
        "both SRV replicas probed",
        Duration::from_secs(30),
        |t| want.iter().all(|r| ttft(t, r).1 >= 1.0),
    )
    .await;
    assert_eq!(gauge(&text, "llm_probe_replicas", "pool"), Some(2.0));
    assert_eq!(
        gauge(&text, "llm_probe_replicas_discovered", "pool"),
        Some(12.0),
        "a, b and the ten x targets; not the two records without a service"
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_srv_target_without_an_address_fails_the_discovery_and_keeps_nothing_new() {
    const NAME: &str = "_http._tcp.pool.test.";
    let dns = dns_server(vec![(NAME, srv("gone.pool.test.", 8000))]).await;
    let cfg = common::parse(&pool_yaml(
        &format!(
            "      dns_srv: {{name: _http._tcp.pool.test, nameserver: '{dns}'}}\n      refresh: 200ms\n"
        ),
        "300ms",
        "",
    ));
    let d = common::daemon(cfg).await;
    let text = until(
        &d,
        "a resolve failure counted",
        Duration::from_secs(30),
        |t| {
            common::sample(
                t,
                "llm_probe_replica_discovery_failures_total",
                &[("target", "pool"), ("reason", "resolve")],
            )
            .unwrap_or(0.0)
                >= 1.0
        },
    )
    .await;
    assert!(
        !text.contains("replica=\""),
        "no replica was ever probed:\n{text}"
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_replicas_are_every_address_of_the_host_name_from_a_configured_nameserver() {
    // Three simulators on one port of three loopback addresses: the DNS case, where every
    // replica listens on base_url's port.
    let first = simulator_at("127.0.0.10", 0, common::stream(5, 1, 2)).await;
    let port = first.addr.port();
    let mut sims = vec![first];
    for ip in ["127.0.0.11", "127.0.0.12"] {
        let addr: SocketAddr = format!("{ip}:{port}").parse().unwrap();
        sims.push(
            Simulator::start(addr, common::stream(5, 1, 2))
                .await
                .expect("the port is free on this address"),
        );
    }
    let mut records: Vec<_> = sims
        .iter()
        .map(|s| ("pool.test.", a(s.addr.ip())))
        .collect();
    // An address of another name sent along in every answer: not a replica.
    records.push(("+evil.test.", a("127.0.0.9".parse().unwrap())));
    let dns = dns_server(records).await;
    let text = format!(
        "defaults:\n  interval: 300ms\n  timeout: 300ms\nscenarios:\n{}targets:\n  - name: pool\n    protocol: openai-chat\n    base_url: http://pool.test:{port}/v1\n    model: m\n    replicas:\n      dns: {{nameserver: '{dns}'}}\n      refresh: 200ms\n",
        common::scenario("chat", 4)
    );
    let d = common::daemon(common::parse(&text)).await;
    let labels: Vec<String> = sims.iter().map(|s| s.addr.to_string()).collect();
    let text = until(&d, "every address probed", Duration::from_secs(30), |t| {
        labels.iter().all(|r| ttft(t, r).1 >= 1.0)
    })
    .await;
    assert_eq!(gauge(&text, "llm_probe_replicas", "pool"), Some(3.0));
    for s in &sims {
        assert_eq!(
            host_header(&s.received()[0]),
            Some(format!("pool.test:{port}"))
        );
    }
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_keeps_replica_pairs_consistent_and_removing_replicas_removes_their_series() {
    let (_sims, all, dir, sd) = two_listed(["127.0.0.13", "127.0.0.14"]).await;
    let with_replicas = pool_yaml(
        &format!(
            "      file_sd: {}\n      refresh: 200ms\n      grace: 1h\n",
            sd.display()
        ),
        "200ms",
        "",
    );
    let (d, probes) = reloadable(dir.path(), &with_replicas).await;
    until(&d, "both replicas probed", Duration::from_secs(30), |t| {
        all.iter().all(|r| ttft(t, r).1 >= 1.0)
    })
    .await;

    // The same file again: every replica pair kept, none restarted.
    let summary = d.reload().await.expect("the same file reloads");
    assert!(
        summary.contains("probes kept 2, restarted with new settings 0, started 0, removed 0"),
        "{summary}"
    );

    // Without replicas: the replica pairs and the discovery series go at once (a grace is for
    // replicas that leave discovery, not for a target that stops discovering).
    let plain = with_replicas.replace(
        &format!(
            "    replicas:\n      file_sd: {}\n      refresh: 200ms\n      grace: 1h\n",
            sd.display()
        ),
        "",
    );
    assert!(!plain.contains("replicas:"));
    std::fs::write(&probes, &plain).unwrap();
    let summary = d.reload().await.expect("a file without replicas reloads");
    assert!(summary.contains("removed 2"), "{summary}");
    let text = scrape(&d).await;
    assert!(!text.contains("replica="), "{text}");
    assert!(!text.contains("llm_probe_replicas{"), "{text}");
    assert!(
        !text.contains("llm_probe_replica_discovery_failures_total{"),
        "{text}"
    );

    // And back: discovered and probed again.
    std::fs::write(&probes, &with_replicas).unwrap();
    d.reload().await.expect("the file with replicas reloads");
    until(&d, "both replicas back", Duration::from_secs(30), |t| {
        gauge(t, "llm_probe_replicas", "pool") == Some(2.0) && all.iter().all(|r| series_of(t, r))
    })
    .await;
    d.stop().await;
}

/// A scenario removed from a pool takes its replica pairs' series with it at once: the grace
/// is for replicas that leave discovery, not for a scenario that is no longer probed (its
/// alerts would fire on for the grace).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scenario_removed_from_a_pool_takes_its_series_at_once() {
    let sim = simulator_at("127.0.0.15", 0, common::stream(5, 1, 2)).await;
    let dir = tempfile::tempdir().unwrap();
    let sd = dir.path().join("pool.json");
    write_sd(&sd, &addrs(&[&sim]));
    let one = pool_yaml(
        &format!(
            "      file_sd: {}\n      refresh: 200ms\n      grace: 1h\n",
            sd.display()
        ),
        "200ms",
        "",
    );
    let two = with_chat2(&one);
    let (d, probes) = reloadable(dir.path(), &two).await;
    let replica = sim.addr.to_string();
    let series = |t: &str, scenario: &str| {
        t.contains(&format!(
            "llm_probe_probes_total{{target=\"pool\",model=\"m\",scenario=\"{scenario}\",replica=\"{replica}\"}}"
        ))
    };
    until(&d, "both scenarios probed", Duration::from_secs(30), |t| {
        series(t, "chat") && series(t, "chat2")
    })
    .await;
    std::fs::write(&probes, &one).unwrap();
    let summary = d.reload().await.expect("the file without chat2 reloads");
    assert!(summary.contains("removed 1"), "{summary}");
    let text = scrape(&d).await;
    assert!(series(&text, "chat"), "{text}");
    assert!(
        !series(&text, "chat2"),
        "chat2's series outlive its removal:\n{text}"
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_replica_is_verified_and_named_by_the_target_host() {
    // The certificate names localhost and 127.0.0.1, not the replica's 127.0.0.15: the probe
    // verifies it only if it checks base_url's host name, and sends that name as SNI.
    let sim = simulator_at("127.0.0.15", 0, common::stream(5, 1, 2)).await;
    let pki = common::pki::pki();
    let (front, names) =
        common::https::tls_front("127.0.0.15:0", &pki, &[b"http/1.1"], sim.addr).await;
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let sd = dir.path().join("pool.json");
    write_sd(&sd, &[front.to_string()]);
    let target = |name: &str, host: &str| {
        format!(
            "  - name: {name}\n    protocol: openai-chat\n    base_url: https://{host}:8443/v1\n    model: m\n    tls: {{ca_file: {}}}\n    replicas: {{file_sd: {}}}\n",
            ca.display(),
            sd.display()
        )
    };
    let text = format!(
        "defaults:\n  interval: 300ms\n  timeout: 300ms\nscenarios:\n{}targets:\n{}{}",
        common::scenario("chat", 4),
        target("named", "localhost"),
        target("other-name", "elsewhere.test"),
    );
    let d = common::daemon(common::parse(&text)).await;
    let mut rx = d.subscribe();
    let (mut named, mut other) = (None, None);
    while named.is_none() || other.is_none() {
        let o = common::outcomes(&mut rx, 1, Duration::from_secs(30))
            .await
            .remove(0);
        match &*o.target {
            "named" => named = Some(o),
            _ => other = Some(o),
        }
    }
    let (named, other) = (named.unwrap(), other.unwrap());
    assert!(named.is_success(), "{:?}", named.result);
    assert_eq!(&*named.replica, front.to_string());
    // The same replica under a name its certificate does not cover fails the TLS check.
    assert_eq!(
        other.failure_reason(),
        Some(llm_probe::measure::FailureReason::Tls),
        "{:?}",
        other.result
    );
    let names = names.lock().unwrap().clone();
    assert!(!names.is_empty(), "no handshake completed");
    assert!(
        names.iter().all(|n| n.as_deref() == Some("localhost")),
        "{names:?}"
    );
    // (the other name's handshake ends at the client's certificate check, unrecorded)
    assert_eq!(
        host_header(&sim.received()[0]).as_deref(),
        Some("localhost:8443")
    );
    d.stop().await;
}

/// The binary: `check-config` prints the replica source; `run` says when the cap left replicas
/// out, logs a failing discovery once (not at every refresh) and never a file_sd entry's
/// credentials.
#[test]
fn the_binary_prints_the_source_and_logs_the_cap_and_a_failure_once() {
    const BIN: &str = env!("CARGO_BIN_EXE_llm-probe");
    let dir = tempfile::tempdir().unwrap();
    let huge = dir.path().join("huge.json");
    let many: Vec<String> = (0..10_000)
        .map(|i| format!("127.1.{}.{}:9", i / 250, i % 250 + 1))
        .collect();
    write_sd(&huge, &many);
    let secret = dir.path().join("secret.json");
    write_sd(&secret, &["admin:hunter2@127.0.0.2:80".to_string()]);
    let target = |name: &str, file: &Path, extra: &str| {
        format!(
            "  - name: {name}\n    protocol: openai-chat\n    base_url: http://{name}.test:9/v1\n    model: m\n    replicas:\n      file_sd: {}\n      refresh: 100ms\n{extra}",
            file.display()
        )
    };
    let text = format!(
        "defaults:\n  interval: 1d\nscenarios:\n{}targets:\n{}{}  - name: sd\n    protocol: openai-chat\n    base_url: http://sd.test:9/v1\n    model: m\n    replicas:\n      http_sd: http://admin:hunter2@127.0.0.1:1/sd?key=hunter2\n      refresh: 100ms\n",
        common::scenario("chat", 4),
        target("capped", &huge, "      max: 64\n"),
        target("secret", &secret, ""),
    );
    let cfg = dir.path().join("probes.yaml");
    std::fs::write(&cfg, text).unwrap();

    let check = std::process::Command::new(BIN)
        .args(["check-config", "--config.file"])
        .arg(&cfg)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{out}");
    assert!(
        out.contains(&format!(
            " replicas=file_sd:{} refresh=100ms max=64 grace=5m",
            huge.display()
        )),
        "{out}"
    );
    // A file_sd file is read as `run` would read it: the count, or a warning that names the
    // target (never the entry's credentials); DNS and http_sd are not asked.
    assert!(
        out.contains(&format!(
            "    replicas: 10000 listed in {}, the first 64 probed (replicas.max)\n",
            huge.display()
        )),
        "{out}"
    );
    let warned = String::from_utf8_lossy(&check.stderr);
    assert!(
        warned.contains("warning: target \"secret\": ")
            && warned.contains("probes this target only once a discovery succeeds"),
        "{warned}"
    );
    assert!(!warned.contains("target \"sd\""), "{warned}");
    assert!(!format!("{out}{warned}").contains("hunter2"));

    let (child, mut err) = common::spawn_logged(
        BIN,
        &["run", "--web.listen-address", "127.0.0.1:0"],
        &cfg,
        &[],
    );
    // The two targets discover at once: either line may come first.
    let cap = err.seen_or_until("more replicas were discovered than replicas.max");
    assert!(cap.contains("10000") && cap.contains("64"), "{cap}");
    // Each failing target's first failure (in whatever order the discoveries end).
    err.seen_or_until("target=secret reason=format");
    err.seen_or_until("the http_sd URL http://***@127.0.0.1:1/sd?key=***");
    // Ten refreshes more of the same failure.
    std::thread::sleep(Duration::from_secs(1));
    common::interrupt(&child.0);
    let mut child = child;
    child.0.wait().unwrap();
    let log = err.finish();
    // Once per failing target (secret, sd), not once per refresh.
    assert_eq!(log.matches("replica discovery failed").count(), 2, "{log}");
    assert!(log.contains("no replica was discovered yet"), "{log}");
    assert_eq!(
        log.matches("more replicas were discovered").count(),
        1,
        "{log}"
    );
    assert!(!log.contains("hunter2"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_sd_lists_the_replicas_and_bad_answers_keep_the_last_good_set() {
    use common::fleet::{sd_json, SdServer};
    let sims = [
        simulator_at("127.0.0.31", 0, common::stream(5, 1, 2)).await,
        simulator_at("127.0.0.32", 0, common::stream(5, 1, 2)).await,
    ];
    let all = addrs(&[&sims[0], &sims[1]]);
    let sd = SdServer::start(sd_json(&all)).await;
    let cfg = common::parse(&pool_yaml(
        &format!(
            "      http_sd: http://sd-user:hunter2@{}/targets?token=hunter2\n      refresh: 200ms\n",
            sd.addr
        ),
        "300ms",
        "",
    ));
    let summary = cfg.targets[0].summary();
    assert!(
        summary.contains(&format!(
            " replicas=http_sd:http://***@{}/targets?token=*** refresh=200ms",
            sd.addr
        )) && !summary.contains("hunter2"),
        "{summary}"
    );
    let d = common::daemon(cfg).await;
    until(
        &d,
        "both http_sd replicas probed",
        Duration::from_secs(30),
        |t| all.iter().all(|r| ttft(t, r).1 >= 1.0),
    )
    .await;
    // As Prometheus asks: JSON, with the refresh interval.
    let head = sd.last_head.lock().unwrap().to_ascii_lowercase();
    assert!(head.starts_with("get /targets?token=hunter2 "), "{head}");
    assert!(head.contains("accept: application/json"), "{head}");
    assert!(head.contains("\r\nuser-agent: llm-probe/"), "{head}");
    assert!(
        head.contains("x-prometheus-refresh-interval-seconds: 1"),
        "{head}"
    );

    let failures = |t: &str, reason: &str| {
        common::sample(
            t,
            "llm_probe_replica_discovery_failures_total",
            &[("target", "pool"), ("reason", reason)],
        )
        .unwrap_or(0.0)
    };
    // Each bad answer is counted under its reason, and both replicas stay probed.
    let huge = vec![b' '; 5 << 20];
    for (answer, reason) in [
        ((500, "application/json", b"[]".to_vec()), "read"),
        ((200, "text/html", b"<html>".to_vec()), "format"),
        (
            (200, "application/json", b"[{\"targets\": [".to_vec()),
            "format",
        ),
        ((200, "application/json", huge), "read"),
        ((200, "application/json", b"[]".to_vec()), "empty"),
    ] {
        let before = failures(&scrape(&d).await, reason);
        sd.set(answer);
        let text = until(&d, reason, Duration::from_secs(30), |t| {
            failures(t, reason) > before
        })
        .await;
        assert_eq!(gauge(&text, "llm_probe_replicas", "pool"), Some(2.0));
        assert!(!text.contains("hunter2"));
    }
    // A good answer again: one replica now.
    sd.set(sd_json(&all[..1]));
    until(
        &d,
        "one replica after a good answer",
        Duration::from_secs(30),
        |t| gauge(t, "llm_probe_replicas", "pool") == Some(1.0),
    )
    .await;
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discovery_that_names_new_replicas_every_time_keeps_its_series_bounded() {
    use common::fleet::replicas_in;
    let dir = tempfile::tempdir().unwrap();
    let sd = dir.path().join("churn.json");
    // Nothing listens on port 9 of these addresses: probes fail fast, series exist all the same.
    let set = |round: u32| -> Vec<String> {
        (0..4)
            .map(|i| {
                format!(
                    "127.0.{}.{}:9",
                    100 + round / 200,
                    (round % 200) + i * 50 + 1
                )
            })
            .collect()
    };
    write_sd(&sd, &set(0));
    let cfg = common::parse(&pool_yaml(
        &format!(
            "      file_sd: {}\n      refresh: 100ms\n      max: 4\n      grace: 1h\n",
            sd.display()
        ),
        "100ms",
        "",
    ));
    let d = common::daemon(cfg).await;
    let mut most = 0;
    for round in 1..=30 {
        write_sd(&sd, &set(round));
        let now: std::collections::BTreeSet<String> = set(round).into_iter().collect();
        let text = until(&d, "the new set probed", Duration::from_secs(30), |t| {
            now.iter().all(|r| series_of(t, r))
        })
        .await;
        most = most.max(replicas_in(&text).len());
    }
    // At rest: four current replicas and max (4) × 1 scenario departed ones in their grace.
    // A scrape in the middle of applying a new set may also see the new set's four pairs
    // registered before the old ones are moved out: 3 × max at most, never the 120 replicas
    // named so far.
    assert!(most <= 12, "{most} replicas' series at once");
    until(
        &d,
        "the current and max departed replicas",
        Duration::from_secs(30),
        |t| replicas_in(t).len() == 8,
    )
    .await;
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_set_is_applied_promptly_even_after_a_backlog_of_large_ones() {
    use common::fleet::{sd_json, SdServer};
    // 64 new replicas (nothing listens there) at every answer, refreshed every 100 ms: more
    // sets than the daemon applies in that time.
    let set = |round: u32| -> Vec<String> {
        (0..64)
            .map(|i| format!("127.0.{}.{}:9", 150 + round % 50, i + 1))
            .collect()
    };
    let sd = SdServer::start(sd_json(&set(0))).await;
    let cfg = common::parse(&pool_yaml(
        &format!(
            "      http_sd: http://{}/targets\n      refresh: 100ms\n      max: 64\n      grace: 1s\n",
            sd.addr
        ),
        "1s",
        "",
    ));
    let d = common::daemon(cfg).await;
    for round in 1..=30 {
        sd.set(sd_json(&set(round)));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Then one replica: the daemon follows within a few refreshes, not after the backlog.
    let one = common::simulator(common::stream(5, 1, 2)).await;
    sd.set(sd_json(&[one.addr.to_string()]));
    let changed = tokio::time::Instant::now();
    until(&d, "the one replica", Duration::from_secs(30), |t| {
        gauge(t, "llm_probe_replicas", "pool") == Some(1.0)
    })
    .await;
    let took = changed.elapsed();
    assert!(took < Duration::from_secs(10), "the new set took {took:?}");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_to_a_smaller_max_shows_what_is_probed_at_once() {
    let sims = [
        simulator_at("127.0.0.41", 0, common::stream(5, 1, 2)).await,
        simulator_at("127.0.0.42", 0, common::stream(5, 1, 2)).await,
        simulator_at("127.0.0.43", 0, common::stream(5, 1, 2)).await,
    ];
    let all = addrs(&[&sims[0], &sims[1], &sims[2]]);
    let dir = tempfile::tempdir().unwrap();
    let sd = dir.path().join("pool.json");
    write_sd(&sd, &all);
    let yaml = |file: &Path, max: usize| {
        pool_yaml(
            &format!(
                "      file_sd: {}\n      refresh: 200ms\n      max: {max}\n",
                file.display()
            ),
            "200ms",
            "",
        )
    };
    let (d, probes) = reloadable(dir.path(), &yaml(&sd, 64)).await;
    until(&d, "three replicas", Duration::from_secs(30), |t| {
        gauge(t, "llm_probe_replicas", "pool") == Some(3.0)
    })
    .await;
    // max 2, and the file_sd file gone (so no discovery succeeds again): the last good set,
    // cut to 2, is what is probed, and the gauge says so.
    std::fs::remove_file(&sd).unwrap();
    std::fs::write(&probes, yaml(&sd, 2)).unwrap();
    d.reload().await.expect("the smaller max reloads");
    let text = scrape(&d).await;
    assert_eq!(
        gauge(&text, "llm_probe_replicas", "pool"),
        Some(2.0),
        "{text}"
    );
    d.stop().await;
}

/// `check-config --shard.count N` prints which shard probes each pair before a rollout. `run`
/// spreads the replicas of a pool over the shards (per (target, replica, scenario)), so a
/// pool's pair is probed on every shard that owns one of its replicas: the assignment must
/// show it there, not on the one shard that would own (target, scenario) without replicas.
#[test]
fn check_config_shows_a_pools_pair_on_every_shard_that_probes_a_replica_of_it() {
    use llm_probe::shard::Shard;
    const BIN: &str = env!("CARGO_BIN_EXE_llm-probe");
    let dir = tempfile::tempdir().unwrap();
    let sd = dir.path().join("pool.json");
    let replicas: Vec<String> = (10..30).map(|i| format!("127.0.0.{i}:18001")).collect();
    write_sd(&sd, &replicas);
    let cfg = dir.path().join("probes.yaml");
    std::fs::write(
        &cfg,
        pool_yaml(&format!("      file_sd: {}\n", sd.display()), "1d", ""),
    )
    .unwrap();
    let check = std::process::Command::new(BIN)
        .args(["check-config", "--shard.count", "3", "--config.file"])
        .arg(&cfg)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{out}");
    for index in 0..3u32 {
        let shard = Shard::new(index, 3).unwrap();
        let probes_some = (replicas.iter()).any(|r| shard.owns_replica("pool", r, "chat"));
        assert!(
            probes_some,
            "20 replicas over 3 shards: shard {index} has none"
        );
        let block = out
            .split(&format!("  shard {index}: "))
            .nth(1)
            .and_then(|rest| rest.split("  shard ").next())
            .unwrap_or_else(|| panic!("no block for shard {index}:\n{out}"));
        assert!(
            block.contains("pool/chat"),
            "shard {index} probes replicas of pool, its block does not say so:\n{out}"
        );
    }
}

/// A scenario removed while a departed replica's pairs are in their grace takes those pairs'
/// series with it too: the grace keeps a departed replica's series for a scenario still
/// probed, not for one the file no longer has (its alerts would fire on for the grace).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scenario_removed_during_a_replica_s_grace_takes_its_lingering_series() {
    let (_sims, all, dir, sd) = two_listed(["127.0.0.16", "127.0.0.17"]).await;
    let one = pool_yaml(
        &format!(
            "      file_sd: {}\n      refresh: 200ms\n      grace: 1h\n",
            sd.display()
        ),
        "200ms",
        "",
    );
    let two = with_chat2(&one);
    let (d, probes) = reloadable(dir.path(), &two).await;
    let series = |t: &str, scenario: &str, replica: &str| {
        t.contains(&format!(
            "llm_probe_probes_total{{target=\"pool\",model=\"m\",scenario=\"{scenario}\",replica=\"{replica}\"}}"
        ))
    };
    until(
        &d,
        "both scenarios of both replicas",
        Duration::from_secs(30),
        |t| {
            all.iter()
                .all(|r| series(t, "chat", r) && series(t, "chat2", r))
        },
    )
    .await;
    // The first replica departs: its pairs stop, their series stay for the grace.
    write_sd(&sd, &all[1..]);
    let text = until(&d, "one replica", Duration::from_secs(10), |t| {
        gauge(t, "llm_probe_replicas", "pool") == Some(1.0)
    })
    .await;
    assert!(series(&text, "chat2", &all[0]), "{text}");

    std::fs::write(&probes, &one).unwrap();
    let summary = d.reload().await.expect("the file without chat2 reloads");
    assert!(summary.contains("removed 1"), "{summary}");
    let text = scrape(&d).await;
    let left: Vec<&str> = (text.lines())
        .filter(|l| l.contains("scenario=\"chat2\""))
        .collect();
    assert!(
        left.is_empty(),
        "chat2's series outlive its removal:\n{}",
        left.join("\n")
    );
    // The departed replica's pair of the scenario still probed keeps its grace.
    assert!(series(&text, "chat", &all[0]), "{text}");
    d.stop().await;
}

/// A replica back within its grace keeps its series, even when the same new set sends more
/// replicas into their grace than the cap keeps (`replicas.max` × scenarios): the cap bounds
/// the departed replicas, and a returning one is not departed. Its counters go on; they do not
/// start again at zero.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_back_within_its_grace_keeps_its_series_past_the_lingering_cap() {
    let dir = tempfile::tempdir().unwrap();
    let sd = dir.path().join("pool.json");
    // Nothing listens on port 9 of these addresses: probes fail fast, series exist all the same.
    let [a, b, c, d2, e] = [1, 2, 3, 4, 5].map(|i| format!("127.0.2.{i}:9"));
    write_sd(&sd, &[a.clone(), b.clone()]);
    let cfg = common::parse(&pool_yaml(
        &format!(
            "      file_sd: {}\n      refresh: 100ms\n      max: 2\n      grace: 1h\n",
            sd.display()
        ),
        "100ms",
        "",
    ));
    let d = common::daemon(cfg).await;
    let probes = |t: &str, r: &str| {
        common::sample(
            t,
            "llm_probe_probes_total",
            &[("target", "pool"), ("replica", r)],
        )
    };
    let text = until(&d, "a probed ten times", Duration::from_secs(30), |t| {
        probes(t, &a).is_some_and(|n| n >= 10.0)
    })
    .await;
    let before = probes(&text, &a).unwrap();
    // a and b depart: two pairs in their grace, as many as the cap keeps.
    write_sd(&sd, &[c.clone(), d2.clone()]);
    until(&d, "c and d probed", Duration::from_secs(30), |t| {
        series_of(t, &c) && series_of(t, &d2)
    })
    .await;
    // a returns as c and d depart: three departed pairs (b, c, d), one over the cap.
    write_sd(&sd, &[a.clone(), e.clone()]);
    let text = until(&d, "e probed", Duration::from_secs(30), |t| {
        series_of(t, &e)
    })
    .await;
    let after = probes(&text, &a).unwrap_or(0.0);
    assert!(
        after >= before,
        "a's probes counter went from {before} back to {after}:\n{text}"
    );
    let departed: Vec<String> = [&b, &c, &d2]
        .into_iter()
        .filter(|r| series_of(&text, r))
        .cloned()
        .collect();
    // The cap keeps the last two to depart.
    assert_eq!(departed, [c, d2]);
    d.stop().await;
}

/// A pool's engine-load gauges, one per replica, follow the pool through reloads: a new model
/// or a target without `replicas:` takes every replica's at once, grace or not (their numbers
/// describe engines no longer probed under those labels), and a target without replicas has
/// no `replica` label on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_s_engine_gauges_follow_it_through_reloads() {
    let (_sims, all, dir, sd) = two_listed(["127.0.0.18", "127.0.0.19"]).await;
    let replicas = format!(
        "    replicas:\n      file_sd: {}\n      refresh: 200ms\n      grace: 1h\n",
        sd.display()
    );
    let pool = pool_yaml_at(
        9,
        &replicas["    replicas:\n".len()..],
        "200ms",
        "    server_metrics_url: http://pool.test:9/metrics\n",
    );
    let (d, probes) = reloadable(dir.path(), &pool).await;
    let engine_gauges = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| {
                ["waiting", "running"]
                    .iter()
                    .any(|g| l.starts_with(&format!("llm_probe_server_requests_{g}{{")))
            })
            .map(String::from)
            .collect()
    };
    until(
        &d,
        "each replica's engine read",
        Duration::from_secs(30),
        |t| {
            all.iter().all(|r| {
                let labels = [("target", "pool"), ("replica", r.as_str())];
                common::sample(t, "llm_probe_server_requests_running", &labels).is_some()
            })
        },
    )
    .await;

    // A replica that leaves discovery: its series stay for the grace, but its engine's
    // numbers, a now and not a history, go at once.
    write_sd(&sd, &all[..1]);
    let gone = all[1].as_str();
    let text = until(
        &d,
        "the departed replica's engine gauges gone",
        Duration::from_secs(30),
        |t| {
            let labels = [("target", "pool"), ("replica", gone)];
            common::sample(t, "llm_probe_server_requests_running", &labels).is_none()
        },
    )
    .await;
    assert!(ttft(&text, gone).1 > 0.0, "{text}");
    write_sd(&sd, &all);

    // Another model: the old labels' gauges go at once.
    std::fs::write(&probes, pool.replace("model: m\n", "model: m2\n")).unwrap();
    d.reload().await.expect("another model reloads");
    let text = scrape(&d).await;
    let old: Vec<String> = (engine_gauges(&text).into_iter())
        .filter(|l| l.contains("model=\"m\""))
        .collect();
    assert!(old.is_empty(), "{old:#?}");

    // Back, then without replicas: no replica's gauge stays, and the target's own has none.
    std::fs::write(&probes, &pool).unwrap();
    d.reload().await.expect("the pool reloads");
    until(
        &d,
        "each replica's engine read again",
        Duration::from_secs(30),
        |t| {
            engine_gauges(t)
                .iter()
                .filter(|l| l.contains("model=\"m\""))
                .count()
                == 4
        },
    )
    .await;
    let plain = pool
        .replace(&replicas, "")
        .replace("http://pool.test:9/", &format!("http://{}/", all[0]));
    assert!(!plain.contains("replicas:"), "{plain}");
    std::fs::write(&probes, &plain).unwrap();
    d.reload()
        .await
        .expect("the target without replicas reloads");
    let text = scrape(&d).await;
    assert!(!text.contains("replica="), "{text}");
    let text = until(
        &d,
        "the target's own engine read",
        Duration::from_secs(30),
        |t| engine_gauges(t).len() == 2,
    )
    .await;
    for line in engine_gauges(&text) {
        assert!(line.contains("{target=\"pool\",model=\"m\"}"), "{line}");
    }
    d.stop().await;
}

/// `yaml` with a second scenario, `chat2`, before its first.
fn with_chat2(yaml: &str) -> String {
    yaml.replacen(
        "scenarios:\n",
        &format!("scenarios:\n{}", common::scenario("chat2", 4)),
        1,
    )
}

/// Two simulators (TTFT 5 ms) on the loopback addresses `ips` and, in a new directory, a
/// file_sd file that lists them: the simulators, their addresses, the directory and the file.
async fn two_listed(
    ips: [&str; 2],
) -> (
    [Simulator; 2],
    Vec<String>,
    tempfile::TempDir,
    std::path::PathBuf,
) {
    let sims = [
        simulator_at(ips[0], 0, common::stream(5, 1, 2)).await,
        simulator_at(ips[1], 0, common::stream(5, 1, 2)).await,
    ];
    let all = addrs(&[&sims[0], &sims[1]]);
    let dir = tempfile::tempdir().unwrap();
    let sd = dir.path().join("pool.json");
    write_sd(&sd, &all);
    (sims, all, dir, sd)
}

/// The probes file of a pool listed in `sd` with engine metrics at `pool.test:9`, a grace of
/// an hour, probed every `interval`.
fn pool_with_engine(sd: &Path, interval: &str) -> llm_probe::config::Config {
    common::parse(&pool_yaml_at(
        9,
        &format!(
            "      file_sd: {}\n      refresh: 100ms\n      grace: 1h\n",
            sd.display()
        ),
        interval,
        "    server_metrics_url: http://pool.test:9/metrics\n",
    ))
}

/// Whether the exposition has `replica`'s running-requests gauge.
fn has_load(text: &str, replica: &str) -> bool {
    let labels = [("target", "pool"), ("replica", replica)];
    common::sample(text, "llm_probe_server_requests_running", &labels).is_some()
}

/// The engine-read failure counters of the exposition that are not at 0, but for `timeout`:
/// that is the machine's load (a read's budget here is the target's timeout of a few hundred
/// milliseconds, a TLS handshake included), not where the read went or what it found.
fn engine_read_failures(text: &str) -> Vec<&str> {
    (text.lines())
        .filter(|l| l.starts_with("llm_probe_server_metrics_scrape_failures_total{"))
        .filter(|l| !l.ends_with(" 0") && !l.contains("reason=\"timeout\""))
        .collect()
}

/// A replica back within its grace has its engine gauges again at its next read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_back_within_its_grace_has_its_engine_load_again() {
    let (_sims, all, _dir, sd) = two_listed(["127.0.0.25", "127.0.0.26"]).await;
    let d = common::daemon(pool_with_engine(&sd, "200ms")).await;
    let limit = Duration::from_secs(20);
    until(&d, "both read", limit, |t| {
        all.iter().all(|r| has_load(t, r))
    })
    .await;
    write_sd(&sd, &all[..1]);
    until(&d, "gone", limit, |t| !has_load(t, &all[1])).await;
    write_sd(&sd, &all);
    until(&d, "back", limit, |t| has_load(t, &all[1])).await;
    d.stop().await;
}

/// A replica that departs while a probe of it (its engine read done) is in flight: the probe's
/// outcome, arriving after the departure, does not bring the engine gauges back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_in_flight_at_departure_does_not_bring_engine_load_back() {
    let sims = [
        simulator_at("127.0.0.27", 0, common::stream(5, 1, 2)).await,
        simulator_at("127.0.0.28", 0, common::stream(1500, 1, 2)).await,
    ];
    let all = addrs(&[&sims[0], &sims[1]]);
    let dir = tempfile::tempdir().unwrap();
    let sd = dir.path().join("pool.json");
    write_sd(&sd, &all);
    let d = common::daemon(pool_with_engine(&sd, "3s")).await;
    let slow = all[1].as_str();
    until(&d, "the slow replica read", Duration::from_secs(20), |t| {
        has_load(t, slow) && ttft(t, slow).1 >= 1.0
    })
    .await;
    // Its next probe: the engine read done, the stream 1.5 s from its first token.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while sims[1].received().len() < 2 {
        assert!(tokio::time::Instant::now() < deadline, "no second probe");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    write_sd(&sd, &all[..1]);
    until(&d, "gone", Duration::from_secs(5), |t| !has_load(t, slow)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let text = scrape(&d).await;
    assert!(!has_load(&text, slow), "{text}");
    assert_eq!(ttft(&text, slow).1, 1.0, "{text}");
    d.stop().await;
}
