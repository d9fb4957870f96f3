//! A flood of wrong passwords against basic auth (40 clients, bcrypt cost 12): the right user's
//! first login is answered within seconds and a user verified once is answered at once.

use crate::common;
use llm_probe::server::ServerOptions;
use llm_probe::simulate::Script;
use std::time::{Duration, Instant};

/// Under a flood of wrong passwords (40 clients, bcrypt cost 12 ≈ 0.5 s a
/// check here) the right user's first login is answered within seconds, not after every
/// attacker's check, and a user whose password was verified once (a scraper, a liveness
/// probe) is answered at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_flood_does_not_lock_out_the_right_user() {
    let sim = common::simulator(Script::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let web = dir.path().join("web.yml");
    let hash = |pw: &str| bcrypt::hash(pw, 12).unwrap();
    std::fs::write(
        &web,
        format!(
            "basic_auth_users:\n  prom: '{}'\n  probe: '{}'\n",
            hash("right"),
            hash("live")
        ),
    )
    .unwrap();
    let d = common::daemon_with(
        common::parse(&common::yaml(
            &sim.base_url(),
            "24h",
            &common::scenario("a2", 4),
            "",
        )),
        ServerOptions {
            web_config_file: Some(web),
            ..Default::default()
        },
    )
    .await;
    let url = format!("http://{}/-/healthy", d.addr);
    // The attackers come from 127.0.0.1, the right user from 127.0.0.2 (both loopback).
    let attacker = reqwest::Client::new();
    let user_client = reqwest::Client::builder()
        .local_address("127.0.0.2".parse::<std::net::IpAddr>().unwrap())
        .build()
        .unwrap();
    let get = move |user: &'static str, pw: String| {
        let c = if user == "prom" && pw == "right" {
            user_client.clone()
        } else {
            attacker.clone()
        };
        let u = url.clone();
        async move {
            let t = Instant::now();
            let r = c.get(u).basic_auth(user, Some(pw)).send().await.unwrap();
            (r.status().as_u16(), t.elapsed())
        }
    };
    // The liveness probe's credentials, verified once before the flood.
    assert_eq!(get("probe", "live".into()).await.0, 200);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut attackers = Vec::new();
    for a in 0..40 {
        let (get, stop) = (get.clone(), stop.clone());
        attackers.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let (status, _) = get("prom", format!("wrong-{a}-{n}")).await;
                assert!(status == 401 || status == 429, "{status}");
                if status == 429 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                n += 1;
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut slowest = Duration::ZERO;
    for _ in 0..3 {
        let (status, took) = get("probe", "live".into()).await;
        assert_eq!(status, 200);
        assert!(
            took < Duration::from_secs(1),
            "a verified user waited {took:?}"
        );
        slowest = slowest.max(took);
    }
    eprintln!("/-/healthy (remembered credentials) under the flood: slowest {slowest:?}");
    // The right user's first login: retried on 429 as a client would, within seconds.
    let t = Instant::now();
    loop {
        let (status, _) = get("prom", "right".into()).await;
        if status == 200 {
            break;
        }
        assert_eq!(status, 429);
        assert!(
            t.elapsed() < Duration::from_secs(8),
            "still refused after {:?}",
            t.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let took = t.elapsed();
    eprintln!("the first login under the flood took {took:?}");
    assert!(
        took < Duration::from_secs(8),
        "the first login took {took:?}"
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for a in attackers {
        a.await.unwrap();
    }
    d.stop().await;
}
