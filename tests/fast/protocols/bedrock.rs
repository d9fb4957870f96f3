//! Amazon Bedrock ConverseStream end to end against the simulator's Bedrock mode (AWS's binary
//! event stream): the signed request on its path, each fault class with its exact outcome, the
//! measured numbers against the script (the ground truth), kernel arrival stamps on the binary
//! framing, `probe-once` with credentials from the environment that never show. The official
//! AWS SDK for JavaScript, a second and real client of the simulator's Bedrock mode, is in the
//! end-to-end tier (`engines::aws_sdk`).
//!
//! No local Bedrock emulator serves `converse-stream` (checked 2026-12: moto 5.2.5's
//! `bedrock-runtime` has `invoke_model` only; LocalStack's Bedrock is a Pro feature that needs a
//! licence and Docker), so the real component is AWS's own client: `@aws-sdk/client-bedrock-runtime`
//! signs, sends and decodes the event stream with AWS's codec, against the simulator.

use crate::common;

use std::time::Duration;

use llm_probe::config::Protocol;
use llm_probe::measure::{Anomaly, FailureReason, TimestampSource, TokenCountSource, TokenKind};
use llm_probe::probe::Prober;
use llm_probe::simulate::{Fault, Script, Simulator};

use common::bedrock::{MODEL, TOKENS};

const ACCESS_KEY: &str = "AKIDBEDROCKTEST0001";
const SECRET_KEY: &str = "bedrockSecretKey/TEST+0001xyzXYZ0123456789";
const SESSION_TOKEN: &str = "FwoGZXIvYXdzBEDROCKSESSIONTOKEN/test+token==";
/// Slack above the simulator's own first send, where the probe's marks are judged only against
/// it (the fault matrix; the subprocess, whose send instant this process cannot see): the
/// request's transit and the delivery, generous for two busy shared cores. The clean-stream
/// test compares each token event with the simulator's send, tightly.
const SLACK: Duration = Duration::from_millis(100);
/// How long after the simulator handed a token event to the connection its kernel arrival
/// stamp may be (loopback takes microseconds; the rest is the simulator thread's scheduling
/// between noting the send and writing, on a busy machine).
const ARRIVAL: Duration = Duration::from_millis(10);

fn env(var: &str) -> Option<String> {
    match var {
        "AWS_ACCESS_KEY_ID" => Some(ACCESS_KEY.into()),
        "AWS_SECRET_ACCESS_KEY" => Some(SECRET_KEY.into()),
        "AWS_SESSION_TOKEN" => Some(SESSION_TOKEN.into()),
        _ => None,
    }
}

/// The target keys Bedrock needs.
const REGION: &str = "    aws_region: us-east-1\n";

/// One Bedrock probe: model [`MODEL`], a system and a user message, the credentials of [`env`],
/// judged to the stream's end.
fn bedrock() -> common::OneProbe {
    common::OneProbe::default()
        .protocol(Protocol::Bedrock)
        .model(MODEL)
        .messages(
            r#"[{role: system, content: "Be brief."}, {role: user, content: "Say something."}]"#,
        )
        .env(env)
        .drained()
}

#[tokio::test]
async fn a_signed_request_and_a_clean_stream_measured_to_the_script() {
    let (o, sim) = bedrock()
        .timeout("3s")
        .of(Script {
            reasoning_tokens: 5,
            ..common::faulty(Fault::None)
        })
        .await;
    let r = sim.received();
    assert_eq!(r.len(), 1);
    assert_eq!(
        r[0].path,
        "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream"
    );
    let header = |name: &str| {
        (r[0].headers.iter())
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    let auth = header("authorization").expect("signed");
    assert!(
        auth.starts_with(&format!("AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/"))
            && auth.contains("/us-east-1/bedrock/aws4_request, SignedHeaders=host;x-amz-date;x-amz-security-token, Signature="),
        "{auth}"
    );
    assert_eq!(
        header("x-amz-security-token").as_deref(),
        Some(SESSION_TOKEN)
    );
    assert_eq!(header("x-amz-date").map(|d| d.len()), Some(16));
    assert_eq!(
        header("accept").as_deref(),
        Some("application/vnd.amazon.eventstream")
    );
    let body = &r[0].body;
    assert_eq!(body["inferenceConfig"]["maxTokens"], 64);
    // The cold-cache nonce opens the prompt (in the system message, which comes first).
    let system = body["system"][0]["text"].as_str().unwrap();
    assert!(
        system.starts_with("[probe ") && system.ends_with("] Be brief."),
        "{system}"
    );
    assert_eq!(body["messages"][0]["role"], "user");
    assert_eq!(body["messages"][0]["content"][0]["text"], "Say something.");

    let m = o.result.as_ref().unwrap_or_else(|f| panic!("{f:?}"));
    let obs = &o.observations;
    assert_eq!(obs.timeline.timestamp_source, TimestampSource::Kernel);
    assert_eq!(
        (m.output_tokens, m.token_count_source, m.token_events),
        (TOKENS as u64, TokenCountSource::Usage, TOKENS as usize)
    );
    assert!(obs.anomalies.is_empty(), "{:?}", obs.anomalies);
    // The ground truth: the instants the simulator handed each token event to the connection.
    // Every token event is marked at the kernel arrival of its own frame, just after its send.
    let sent = r[0].events_sent.lock().unwrap().clone();
    let events = &obs.timeline.token_events;
    assert_eq!(sent.len(), events.len());
    for (k, (e, s)) in events.iter().zip(&sent).enumerate() {
        assert!(
            e.at >= *s && e.at - *s < ARRIVAL,
            "token {k} marked {:?} after its send",
            e.at.checked_duration_since(*s)
        );
    }
    assert!(m.ttft >= Duration::from_millis(30), "TTFT {:?}", m.ttft);
    assert_eq!(m.ttft, events[0].at - obs.timeline.sent);
    // Five reasoning tokens first: the first output token is the sixth event.
    assert!(events[..5].iter().all(|e| e.kind == TokenKind::Reasoning));
    assert_eq!(
        m.time_to_first_output_token,
        Some(events[5].at - obs.timeline.sent)
    );
    // TPOT against the sends: (last − first) / (N − 1), within the arrival slack spread.
    let truth = (sent[19] - sent[0]).as_secs_f64() / 19.0;
    let tpot = m.tpot.unwrap().as_secs_f64();
    assert!(
        (tpot - truth).abs() < ARRIVAL.as_secs_f64() / 19.0,
        "TPOT {tpot} vs {truth}"
    );
    // The server's own latency (metadata.metrics.latencyMs) = scripted TTFT + decode = 87 ms.
    assert_eq!(obs.server_timings.latency_seconds, Some(0.087));
    assert_eq!(obs.finish_reason.as_deref(), Some("end_turn"));
    // The simulator counts the prompt's words (nonce, messages and system prompt).
    assert_eq!(obs.usage.prompt_tokens, Some(6));
}

/// Every fault class the simulator plays, in Bedrock's shapes, with its exact outcome.
#[tokio::test]
async fn each_fault_class_has_its_exact_outcome() {
    use Anomaly::*;
    use FailureReason as R;
    use TokenCountSource::{Events, Usage};
    let t = TOKENS as usize;
    let n = TOKENS as u64;
    type Want =
        Result<(u64, TokenCountSource, usize, Vec<Anomaly>), (R, &'static str, Option<usize>)>;
    let cases: Vec<(Fault, Want)> = vec![
        (Fault::None, Ok((n, Usage, t, vec![]))),
        // No comments in the binary framing: the simulator sends nothing extra.
        (Fault::Keepalive, Ok((n, Usage, t, vec![]))),
        (Fault::NoUsage, Ok((n, Events, t, vec![MissingUsage]))),
        (Fault::Collapsed, Ok((n, Usage, t, vec![CollapsedStream]))),
        // messageStop came, the metadata event (terminator and count) did not.
        (
            Fault::NoTerminator,
            Ok((n, Events, t, vec![MissingTerminator, MissingUsage])),
        ),
        (
            Fault::ErrorAfterTokens,
            Err((
                R::StreamError,
                "modelStreamErrorException: simulated error after tokens",
                Some(3),
            )),
        ),
        (
            Fault::ErrorOnly,
            Err((
                R::StreamError,
                "throttlingException: simulated error inside a 200 stream",
                Some(0),
            )),
        ),
        (
            Fault::DoneOnly,
            Err((R::EmptyStream, "without a single token", Some(0))),
        ),
        (
            Fault::Http500,
            Err((R::HttpStatus, "simulated internal error", Some(0))),
        ),
        (Fault::Stall, Err((R::Timeout, "", Some(3)))),
        (Fault::Reset, Err((R::Truncated, "", None))),
        (
            Fault::InvalidJson,
            Err((R::Decode, "not valid JSON", Some(2))),
        ),
        (Fault::InvalidUtf8, Err((R::Decode, "UTF-8", None))),
        (Fault::Endless, Err((R::TooLarge, "", None))),
        (Fault::HugeLine, Err((R::TooLarge, "", None))),
    ];
    for (fault, want) in cases {
        let timeout = if fault == Fault::Stall { "400ms" } else { "3s" };
        let (o, sim) = bedrock().timeout(timeout).of(common::faulty(fault)).await;
        let obs = &o.observations;
        let ctx = format!("{fault:?}: {:?}, anomalies {:?}", o.result, obs.anomalies);
        match want {
            Ok((n, source, events, anomalies)) => {
                let m = o.result.as_ref().unwrap_or_else(|_| panic!("{ctx}"));
                assert_eq!(
                    (m.output_tokens, m.token_count_source, m.token_events),
                    (n, source, events),
                    "{ctx}"
                );
                assert_eq!(obs.anomalies, anomalies, "{ctx}");
                if fault != Fault::Collapsed {
                    // Against when the simulator sent the first token event (its own timer
                    // may fire late on a busy host), not only the script.
                    let first_sent = sim.received()[0].events_sent.lock().unwrap()[0];
                    let truth = first_sent - obs.timeline.sent;
                    assert!(
                        m.ttft >= Duration::from_millis(30)
                            && m.ttft >= truth
                            && m.ttft <= truth + SLACK,
                        "TTFT {:?}, the first token event sent after {truth:?}: {ctx}",
                        m.ttft
                    );
                }
            }
            Err((reason, detail, events)) => {
                let f = o.result.as_ref().err().unwrap_or_else(|| panic!("{ctx}"));
                assert_eq!(f.reason, reason, "{ctx}");
                assert!(f.detail.contains(detail), "{ctx}");
                if let Some(e) = events {
                    assert_eq!(obs.timeline.token_events.len(), e, "{ctx}");
                }
            }
        }
    }
}

/// A target whose profile file is missing fails every probe with `credentials` (naming the
/// file), sending nothing; once the file appears the next probe signs with it, and a rotated
/// file (new temporary credentials) is used by the probe after the rotation, without a reload.
#[tokio::test]
async fn a_profile_file_is_read_and_re_read_when_it_changes() {
    let sim = Simulator::start("127.0.0.1:0".parse().unwrap(), common::faulty(Fault::None))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("credentials");
    let env = |v: &str| match v {
        "AWS_SHARED_CREDENTIALS_FILE" => Some(file.display().to_string()),
        "AWS_PROFILE" => Some("probe".to_string()),
        _ => None,
    };
    let cfg = llm_probe::config::parse_with(
        &bedrock().timeout("3s").yaml(&sim.root_url(), REGION),
        "<test>",
        &env,
        llm_probe::config::Secrets::Isolate,
    )
    .unwrap();
    let t = cfg.targets[0].clone();
    let prober = Prober::new(t.clone()).unwrap();
    let f = prober.probe(&t.scenarios[0]).await.result.unwrap_err();
    assert_eq!(f.reason, FailureReason::Credentials);
    assert!(
        f.detail.contains("cannot be read") && f.detail.contains("credentials"),
        "{}",
        f.detail
    );
    assert!(sim.received().is_empty());

    let auth = |i: usize| {
        let r = sim.received();
        (r[i].headers.iter())
            .find(|(k, _)| k == "authorization")
            .map(|(_, v)| v.clone())
            .unwrap()
    };
    let write = |id: &str, token: Option<&str>| {
        let token = token.map_or(String::new(), |t| format!("aws_session_token = {t}\n"));
        std::fs::write(
            &file,
            format!("[default]\naws_access_key_id = AKIDOTHER\naws_secret_access_key = x\n[probe]\naws_access_key_id = {id}\naws_secret_access_key = {SECRET_KEY}\n{token}"),
        )
        .unwrap();
    };
    write(ACCESS_KEY, None);
    let o = prober.probe(&t.scenarios[0]).await;
    assert!(o.is_success(), "{:?}", o.result);
    assert!(o.observations.credentials_reloaded);
    let first = auth(0);
    assert!(
        first.contains(&format!("Credential={ACCESS_KEY}/"))
            && first.contains("SignedHeaders=host;x-amz-date,"),
        "{first}"
    );
    // Rotated: new temporary credentials with a session token.
    write("ASIAROTATED", Some("rotated-token"));
    let o = prober.probe(&t.scenarios[0]).await;
    assert!(o.is_success(), "{:?}", o.result);
    let second = auth(1);
    assert!(second.contains("Credential=ASIAROTATED/"), "{second}");
    let r = sim.received();
    let token = (r[1].headers.iter()).find(|(k, _)| k == "x-amz-security-token");
    assert_eq!(token.map(|(_, v)| v.as_str()), Some("rotated-token"));
}

/// `probe-once --output json` with the credentials in the environment: the measured numbers
/// match the script exactly where they are exact (N, token events, the server's latency), the
/// reads are kernel-stamped, and no credential appears on stdout or stderr.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_once_end_to_end() {
    let sim = Simulator::start("127.0.0.1:0".parse().unwrap(), common::faulty(Fault::None))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("probes.yaml");
    std::fs::write(&p, bedrock().timeout("3s").yaml(&sim.root_url(), REGION)).unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_llm-probe"))
        .args(["probe-once", "--output", "json", "--config.file"])
        .arg(&p)
        .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        .env("AWS_SESSION_TOKEN", SESSION_TOKEN)
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_REGION")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for secret in [ACCESS_KEY, SECRET_KEY, SESSION_TOKEN] {
        assert!(!stdout.contains(secret) && !stderr.contains(secret));
    }
    let json: serde_json::Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    assert_eq!(json["success"], true, "{json}");
    assert_eq!(json["output_tokens"], TOKENS);
    assert_eq!(json["token_events"], TOKENS);
    assert_eq!(json["token_count_source"], "usage");
    assert_eq!(json["prompt_tokens"], 6, "the prompt's words: {json}");
    assert_eq!(json["server_latency_seconds"], 0.087, "{json}");
    assert_eq!(json["timestamp_source"], "kernel", "{json}");
    // At least the scripted 30 ms; at most the simulator's own first send after the request
    // arrived (its timer may fire late on a busy host) plus the slack.
    let ttft = json["ttft_seconds"].as_f64().unwrap();
    let r = &sim.received()[0];
    let truth = (r.events_sent.lock().unwrap()[0] - r.arrived).as_secs_f64();
    assert!(
        ttft >= 0.030 && ttft >= truth && ttft <= truth + SLACK.as_secs_f64(),
        "TTFT {ttft}, the first token event sent {truth} s after the request arrived"
    );
}
