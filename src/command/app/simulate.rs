//! `llm-probe simulate`: the scripted endpoint, until SIGINT or SIGTERM.

use crate::logging::stderr_line;
use crate::simulate::{Script, Simulator};

use super::signals::shutdown_signal;

pub(super) async fn run(listen: std::net::SocketAddr, script: Script) -> anyhow::Result<()> {
    let desc = format!(
        "TTFT {}, a token event every {}, {} tokens ({} per event, {} reasoning), fault {}, headers {}, {}, {}, {}",
        humantime::format_duration(script.ttft),
        humantime::format_duration(script.itl),
        script.tokens,
        script.tokens_per_event,
        script.reasoning_tokens,
        crate::simulate::Fault::NAMES
            .iter()
            .find(|(_, f)| *f == script.fault)
            .map_or("?", |(n, _)| *n),
        match script.headers {
            crate::simulate::HeadersAt::AtOnce => "at once",
            crate::simulate::HeadersAt::WithFirstToken => "with the first token",
        },
        load_summary(&script.load),
        match script.rate_limit {
            0 => "no request quota".to_string(),
            n => format!("a quota of {n} requests a minute"),
        },
        match (script.context_limit, script.context_overflow) {
            (0, _) => "no context limit".to_string(),
            (n, crate::simulate::ContextOverflow::Refuse) => {
                format!("a context of {n} prompt tokens (a longer prompt is refused)")
            }
            (n, crate::simulate::ContextOverflow::Truncate) => {
                format!("a context of {n} prompt tokens (a longer prompt is cut from the left)")
            }
        },
    );
    let sim = Simulator::start(listen, script).await?;
    stderr_line(format_args!(
        "llm-probe simulator: OpenAI-compatible endpoint at {} ({desc}); also /v1/completions, /v1/responses, /v1/messages, /api/chat, /generate_stream, /completion, /openai/deployments/{{d}}/chat/completions, Gemini (/v1beta/models/{{m}}:streamGenerateContent, /v1/projects/{{p}}/locations/{{l}}/publishers/google/models/{{m}}:streamGenerateContent) and Bedrock (/model/{{id}}/converse-stream) at {}; its load in vLLM's metric names (for server_metrics_url) at {}/metrics",
        sim.base_url(),
        sim.root_url(),
        sim.root_url()
    ));
    shutdown_signal().cancelled().await;
    Ok(())
}

fn load_summary(l: &crate::simulate::Load) -> String {
    let slots = match l.slots {
        0 => "unlimited slots".to_string(),
        1 => "1 slot".to_string(),
        n => format!("{n} slots"),
    };
    format!(
        "{slots}, prefill {} per prompt token, ITL +{}% per extra stream, jitter sigma {} (seed {})",
        humantime::format_duration(l.prefill_per_token),
        l.itl_slowdown_per_stream * 100.0,
        l.jitter,
        l.seed
    )
}
