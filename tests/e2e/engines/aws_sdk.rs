//! The AWS SDK for JavaScript reads the simulator's Bedrock stream: the simulator speaks what
//! AWS's own client expects.

use crate::common;

use llm_probe::simulate::{Fault, Script, Simulator};

use common::bedrock::MODEL;

/// The AWS SDK for JavaScript (installed by scripts/install-test-deps.sh into
/// `~/.cache/llm-probe-aws-sdk`) run against the simulator with `fault`; its JSON output.
fn aws_sdk(base_url: &str, fault_name: &str) -> serde_json::Value {
    let node = common::require_tool("node", "apt-get install nodejs");
    let modules = std::path::Path::new(&std::env::var("HOME").unwrap())
        .join(".cache/llm-probe-aws-sdk/node_modules");
    assert!(
        modules.join("@aws-sdk/client-bedrock-runtime").is_dir(),
        "the AWS SDK for JavaScript is not installed in {}; this test needs the real thing: npm install --prefix ~/.cache/llm-probe-aws-sdk @aws-sdk/client-bedrock-runtime@3.1164.0 (scripts/install-test-deps.sh installs it)",
        modules.display()
    );
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/aws-sdk/converse-stream.cjs"
    );
    let out = std::process::Command::new(node)
        .arg(script)
        .arg(base_url)
        .arg(MODEL)
        .env("NODE_PATH", &modules)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{fault_name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{fault_name}: {e}: {stdout}"))
}

/// AWS's own ConverseStream client reads the simulator's Bedrock stream: the same events, text,
/// stop reason, usage and latency the probe reads, and the exceptions as the SDK's typed errors.
/// The simulator also routes the SDK's own request (its path encoding of the model id).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_aws_sdk_reads_the_simulators_stream() {
    let sim = Simulator::start(
        "127.0.0.1:0".parse().unwrap(),
        Script {
            reasoning_tokens: 2,
            tokens: 5,
            ..common::faulty(Fault::None)
        },
    )
    .await
    .unwrap();
    let url = sim.root_url();
    let got = tokio::task::spawn_blocking(move || aws_sdk(&url, "clean"))
        .await
        .unwrap();
    assert_eq!(got.get("error"), None, "{got}");
    let events = got["events"].as_array().unwrap();
    let kind = |e: &serde_json::Value| e.as_object().unwrap().keys().next().unwrap().clone();
    let kinds: Vec<String> = events.iter().map(kind).collect();
    assert_eq!(
        kinds.first().map(String::as_str),
        Some("messageStart"),
        "{got}"
    );
    assert_eq!(kinds.last().map(String::as_str), Some("metadata"), "{got}");
    let (mut reasoning, mut text) = (String::new(), String::new());
    for e in events {
        if let Some(d) = e.get("contentBlockDelta") {
            if let Some(t) = d["delta"]["text"].as_str() {
                text += t;
            }
            if let Some(t) = d["delta"]["reasoningContent"]["text"].as_str() {
                reasoning += t;
            }
        }
    }
    assert_eq!(
        (reasoning.as_str(), text.as_str()),
        (" t0 t1", " t2 t3 t4"),
        "{got}"
    );
    let stop = events.iter().find_map(|e| e.get("messageStop")).unwrap();
    assert_eq!(stop["stopReason"], "end_turn");
    let meta = &events.last().unwrap()["metadata"];
    assert_eq!(meta["usage"]["outputTokens"], 5, "{got}");
    // The simulator counts the prompt's words: "Say something."
    assert_eq!(meta["usage"]["inputTokens"], 2, "{got}");
    assert_eq!(meta["metrics"]["latencyMs"], 30 + 4 * 3, "{got}");
    let r = sim.received();
    assert_eq!(
        r[0].path,
        "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream"
    );

    for (fault, name, message) in [
        (
            Fault::ErrorAfterTokens,
            "ModelStreamErrorException",
            "simulated error after tokens",
        ),
        (
            Fault::ErrorOnly,
            "ThrottlingException",
            "simulated error inside a 200 stream",
        ),
    ] {
        let sim = Simulator::start("127.0.0.1:0".parse().unwrap(), common::faulty(fault))
            .await
            .unwrap();
        let url = sim.root_url();
        let got = tokio::task::spawn_blocking(move || aws_sdk(&url, name))
            .await
            .unwrap();
        assert_eq!(got["error"]["name"], name, "{got}");
        assert_eq!(got["error"]["message"], message, "{got}");
    }
}
