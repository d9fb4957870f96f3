//! A pool of two real llama.cpp servers (`scripts/real-llm.sh`: the shared one on 18080 and a
//! second one started here on a free port, stopped again at the end), listed in a file_sd file
//! under a host name no resolver knows: every probe must reach a replica at its own address.
//! Each replica gets its own series and its own `endpoint_info` (llama.cpp names itself in its
//! `server` header), and each server's own count of generated tokens shows that it was the one probed.

use crate::common;

use std::time::{Duration, Instant};

use common::fleet::{ttft, write_sd};

/// A llama.cpp server's `llamacpp:tokens_predicted_total` (its /metrics).
async fn tokens_predicted(port: u16) -> f64 {
    let text = reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("llamacpp:tokens_predicted_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no llamacpp:tokens_predicted_total in:\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_real_llama_cpp_replica_is_probed_and_named() {
    let first = tokio::task::spawn_blocking(common::real_server)
        .await
        .unwrap();
    let first_port: u16 = first
        .trim_end_matches("/v1")
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let second_port = common::free_port();
    // Stopped (by the script, which stops only what it started) when the test ends.
    let (_second, _) =
        tokio::task::spawn_blocking(move || common::real_llm::own_server(second_port, &[]))
            .await
            .unwrap();
    let before = [
        tokens_predicted(first_port).await,
        tokens_predicted(second_port).await,
    ];

    let dir = tempfile::tempdir().unwrap();
    let sd = dir.path().join("pool.json");
    let replicas = [
        format!("127.0.0.1:{first_port}"),
        format!("127.0.0.1:{second_port}"),
    ];
    write_sd(&sd, &replicas);
    let cfg = common::parse(&format!(
        "defaults:\n  interval: 5s\n  timeout: 5s\nscenarios:\n  - name: hi\n    messages: [{{role: user, content: \"Say hi.\"}}]\n    max_tokens: 8\n    temperature: 0\ntargets:\n  - name: pool\n    protocol: openai-chat\n    base_url: http://llama-pool.test:{first_port}/v1\n    model: smollm2-135m-instruct\n    replicas:\n      file_sd: {}\n      refresh: 1s\n",
        sd.display()
    ));
    let d = common::daemon(cfg).await;
    let deadline = Instant::now() + Duration::from_secs(120);
    let text = loop {
        let text = common::fleet::scrape(&d).await;
        if replicas.iter().all(|r| ttft(&text, r).1 >= 2.0) {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "two successful probes of each real replica not seen in 120 s:\n{}",
            text.lines()
                .filter(|l| l.starts_with("llm_probe_probe_failures_total") && !l.ends_with(" 0"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    for r in &replicas {
        let info = text
            .lines()
            .find(|l| {
                l.starts_with("llm_probe_endpoint_info{") && l.contains(&format!("replica=\"{r}\""))
            })
            .unwrap_or_else(|| panic!("no endpoint_info for replica {r}:\n{text}"));
        assert!(info.contains("server=\"llama.cpp\""), "{info}");
        let (sum, count) = ttft(&text, r);
        assert!(
            sum / count > 0.0 && sum / count < 5.0,
            "{r}: mean TTFT {}",
            sum / count
        );
    }
    // Each server generated tokens of its own: both were reached at their own address.
    let after = [
        tokens_predicted(first_port).await,
        tokens_predicted(second_port).await,
    ];
    assert!(
        after[0] > before[0] && after[1] > before[1],
        "tokens predicted before {before:?}, after {after:?}"
    );
    d.stop().await;
}
