//! Replica discovery from a real DNS server: dnsmasq on a loopback port serves the replicas of
//! `pool.test` as A records (simulators on 127.0.0.2–9, one port) and as SRV records (host
//! names at their own ports); the daemon asks it (`nameserver:`) at every refresh.

use crate::common;

use std::net::IpAddr;
use std::time::Duration;

use common::fleet::{
    gauge, host_header, pool_yaml_at, replicas_in, simulator_at, ttft, until, Dnsmasq,
};
use llm_probe::simulate::Simulator;

/// Eight simulators on 127.0.0.2–127.0.0.9, all on one port (the DNS case: every replica at
/// base_url's port).
async fn eight_on_one_port() -> (Vec<Simulator>, u16) {
    let first = simulator_at("127.0.0.2", 0, common::stream(5, 1, 2)).await;
    let port = first.addr.port();
    let mut sims = vec![first];
    for i in 3..=9 {
        sims.push(simulator_at(&format!("127.0.0.{i}"), port, common::stream(5, 1, 2)).await);
    }
    (sims, port)
}

/// The daemon probing `pool.test` at `port`, its replicas every address `dns` serves for it
/// (refresh 300 ms, grace 1 s), every 300 ms.
async fn dns_pool(port: u16, dns: &Dnsmasq) -> llm_probe::daemon::Daemon {
    common::daemon(common::parse(&pool_yaml_at(
        port,
        &format!(
            "      dns: {{nameserver: '{}'}}\n      refresh: 300ms\n      grace: 1s\n",
            dns.addr
        ),
        "300ms",
        "",
    )))
    .await
}

fn ips(sims: &[Simulator]) -> Vec<IpAddr> {
    sims.iter().map(|s| s.addr.ip()).collect()
}

fn labels(sims: &[Simulator]) -> Vec<String> {
    sims.iter().map(|s| s.addr.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_records_churn_from_three_to_eight_to_two_replicas() {
    let (sims, port) = eight_on_one_port().await;
    let dir = tempfile::tempdir().unwrap();
    let dns = Dnsmasq::start(dir.path());
    dns.set_a("pool.test", &ips(&sims[..3]));
    let d = dns_pool(port, &dns).await;
    let probed = |t: &str, set: &[String]| {
        gauge(t, "llm_probe_replicas", "pool") == Some(set.len() as f64)
            && set.iter().all(|r| ttft(t, r).1 >= 1.0)
    };
    let all = labels(&sims);

    let three = all[..3].to_vec();
    let text = until(&d, "3 replicas probed", Duration::from_secs(30), |t| {
        probed(t, &three)
    })
    .await;
    assert_eq!(replicas_in(&text), three.iter().cloned().collect());

    // 3 → 8: the new replicas are probed from the next refresh on.
    dns.set_a("pool.test", &ips(&sims));
    until(&d, "8 replicas probed", Duration::from_secs(30), |t| {
        probed(t, &all)
    })
    .await;

    // 8 → 2: the departed replicas stop at once, and after the grace (1 s) no series of
    // theirs is left; the exposition holds the two replicas' series only.
    let two = [all[0].clone(), all[7].clone()];
    dns.set_a("pool.test", &[sims[0].addr.ip(), sims[7].addr.ip()]);
    let text = until(&d, "only 2 replicas left", Duration::from_secs(30), |t| {
        gauge(t, "llm_probe_replicas", "pool") == Some(2.0)
            && replicas_in(t) == two.iter().cloned().collect()
    })
    .await;
    // No probe reached a departed replica after it left (one in flight at the change at most).
    let counted = |t: &str, r: &str| ttft(t, r).1;
    let before: Vec<usize> = sims.iter().map(|s| s.received().len()).collect();
    until(
        &d,
        "the two replicas probed again",
        Duration::from_secs(30),
        |t| two.iter().all(|r| counted(t, r) > counted(&text, r)),
    )
    .await;
    for (i, s) in sims.iter().enumerate().filter(|(i, _)| ![0, 7].contains(i)) {
        assert!(
            s.received().len() <= before[i] + 1,
            "replica {} was probed after it left DNS",
            s.addr
        );
    }
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn srv_records_name_each_replica_by_host_and_port() {
    // Two replicas on one address at two ports: only SRV can say so.
    let a = simulator_at("127.0.0.1", 0, common::stream(5, 1, 2)).await;
    let b = simulator_at("127.0.0.1", 0, common::stream(5, 1, 2)).await;
    let dir = tempfile::tempdir().unwrap();
    let mut dns = Dnsmasq::start(dir.path());
    dns.set_a("vllm-0.pool.test", &[a.addr.ip()]);
    dns.set_a("vllm-1.pool.test", &[b.addr.ip()]);
    let name = "_http._tcp.pool.test";
    dns.restart_with_srv(&[
        (name, "vllm-0.pool.test", a.addr.port()),
        (name, "vllm-1.pool.test", b.addr.port()),
    ]);
    let cfg = common::parse(&pool_yaml_at(
        8000,
        &format!(
            "      dns_srv: {{name: {name}, nameserver: '{}'}}\n      refresh: 300ms\n      grace: 1s\n",
            dns.addr
        ),
        "300ms",
        "",
    ));
    let d = common::daemon(cfg).await;
    let want = [
        format!("vllm-0.pool.test:{}", a.addr.port()),
        format!("vllm-1.pool.test:{}", b.addr.port()),
    ];
    let text = until(
        &d,
        "both SRV replicas probed",
        Duration::from_secs(30),
        |t| want.iter().all(|r| ttft(t, r).1 >= 1.0),
    )
    .await;
    assert_eq!(replicas_in(&text), want.iter().cloned().collect());
    // Each replica at its own port, with the target's host name in Host.
    for s in [&a, &b] {
        let got = s.received();
        assert!(!got.is_empty(), "{} was never probed", s.addr);
        assert_eq!(host_header(&got[0]).as_deref(), Some("pool.test:8000"));
    }

    // The records change (dnsmasq restarted with one record): the other replica leaves.
    dns.restart_with_srv(&[(name, "vllm-1.pool.test", b.addr.port())]);
    until(&d, "one SRV replica left", Duration::from_secs(30), |t| {
        replicas_in(t) == [want[1].clone()].into_iter().collect()
    })
    .await;
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_name_keeps_the_last_good_set_and_is_counted() {
    let (sims, port) = eight_on_one_port().await;
    let dir = tempfile::tempdir().unwrap();
    let dns = Dnsmasq::start(dir.path());
    dns.set_a("pool.test", &ips(&sims[..2]));
    let d = dns_pool(port, &dns).await;
    let two = labels(&sims[..2]);
    until(&d, "2 replicas probed", Duration::from_secs(30), |t| {
        two.iter().all(|r| ttft(t, r).1 >= 1.0)
    })
    .await;
    // The name disappears (NXDOMAIN from a real server): a resolve failure is counted, and the
    // two replicas stay probed.
    dns.set_a("pool.test", &[]);
    let failures = |t: &str| {
        common::sample(
            t,
            "llm_probe_replica_discovery_failures_total",
            &[("target", "pool"), ("reason", "resolve")],
        )
        .unwrap_or(0.0)
    };
    let text = until(
        &d,
        "a resolve failure counted",
        Duration::from_secs(30),
        |t| failures(t) >= 2.0,
    )
    .await;
    assert_eq!(gauge(&text, "llm_probe_replicas", "pool"), Some(2.0));
    until(
        &d,
        "the last good set still probed",
        Duration::from_secs(30),
        |t| two.iter().all(|r| ttft(t, r).1 > ttft(&text, r).1),
    )
    .await;
    d.stop().await;
}
