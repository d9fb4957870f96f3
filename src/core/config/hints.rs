//! Mistakes a valid config can still hold, told as warnings with the fix: a `base_url` that
//! ends in the endpoint path the protocol appends itself, an OpenAI-style one without a
//! version segment, or a Gemini one of the other URL form (AI Studio's host root, Vertex AI's
//! `…/projects/{p}/locations/{l}`). Each would make every probe fail `http_status` 404.

use super::{Config, Protocol, Target};

/// Endpoint paths the protocols append to `base_url` (docs/protocols.md), longest first.
pub const ENDPOINT_PATHS: &[&str] = &[
    "/chat/completions",
    "/generate_stream",
    "/completions",
    "/completion",
    "/responses",
    "/messages",
    "/api/chat",
];

/// The warnings of every target of `config`, in file order: `target "NAME": base_url …; fix`.
pub fn warnings(config: &Config) -> Vec<String> {
    config
        .targets
        .iter()
        .filter_map(|t| base_url_warning(t))
        .collect()
}

/// The warning for `target`'s `base_url`, if it looks wrong (see the module docs).
pub fn base_url_warning(target: &Target) -> Option<String> {
    let url = &target.base_url;
    let path = url.path().trim_end_matches('/');
    let appended = endpoint_path(target.protocol);
    if let Some(w) = gemini_warning(target, path, appended) {
        return Some(w);
    }
    if let Some(end) = ENDPOINT_PATHS.iter().find(|e| path.ends_with(*e)) {
        let mut fixed = url.clone();
        fixed.set_path(&path[..path.len() - end.len()]);
        return Some(format!(
            "target \"{}\": base_url {url} ends in the endpoint path {end}, and protocol {} appends {appended} itself (each probe would POST {}{appended}); set base_url to {}.",
            target.name,
            target.protocol,
            path,
            fixed.as_str().trim_end_matches('/'),
        ));
    }
    let openai_style = matches!(
        target.protocol,
        Protocol::OpenAiChat
            | Protocol::OpenAiCompletions
            | Protocol::OpenAiResponses
            | Protocol::Anthropic
    );
    let versioned = path.split('/').any(is_version_segment);
    if openai_style && !versioned {
        return Some(format!(
            "target \"{}\": base_url {url} has no version segment such as /v1, and {} servers (vLLM, SGLang, llama.cpp, Ollama, OpenAI, Anthropic) serve {}{appended} (each probe would POST {path}{appended}); set base_url to {}/v1 unless the endpoint really serves the API there.",
            target.name,
            target.protocol,
            "/v1",
            url.as_str().trim_end_matches('/'),
        ));
    }
    None
}

/// Gemini's two URL forms: `gemini` wants the host root (it appends `/v1beta/models/…`), so a
/// `base_url` with a `/models` or `/v1beta` tail is warned; `vertex-gemini` wants the base up
/// to `…/projects/{project}/locations/{location}`, so one that does not end so is warned.
fn gemini_warning(target: &Target, path: &str, appended: &str) -> Option<String> {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let fix = match target.protocol {
        Protocol::Gemini => {
            let versioned = segments.iter().position(|s| is_version_segment(s))?;
            let mut fixed = target.base_url.clone();
            fixed.set_path(&format!("/{}", segments[..versioned].join("/")));
            format!("set base_url to {}", fixed.as_str().trim_end_matches('/'))
        }
        Protocol::VertexGemini => {
            let n = segments.len();
            if n >= 4 && segments[n - 4] == "projects" && segments[n - 2] == "locations" {
                return None;
            }
            "set base_url to https://{LOCATION}-aiplatform.googleapis.com/v1/projects/{PROJECT}/locations/{LOCATION}".to_string()
        }
        _ => return None,
    };
    Some(format!(
        "target \"{}\": base_url {} does not fit protocol {}, which appends {appended} itself (each probe would POST {path}{appended}); {fix}.",
        target.name, target.base_url, target.protocol,
    ))
}

/// What the protocol appends to `base_url`.
fn endpoint_path(protocol: Protocol) -> &'static str {
    match protocol {
        Protocol::OpenAiChat => "/chat/completions",
        Protocol::OpenAiCompletions => "/completions",
        Protocol::OpenAiResponses => "/responses",
        Protocol::Anthropic => "/messages",
        Protocol::Ollama => "/api/chat",
        Protocol::Tgi => "/generate_stream",
        Protocol::AzureOpenAi => "/openai/deployments/{deployment}/chat/completions",
        Protocol::LlamaCpp => "/completion",
        Protocol::Gemini => "/v1beta/models/{model}:streamGenerateContent",
        Protocol::VertexGemini => "/publishers/google/models/{model}:streamGenerateContent",
        Protocol::Bedrock => "/model/{model}/converse-stream",
    }
}

/// `v1`, `v2`, `v1beta`, `v1alpha1`: a `v`, a digit, then letters or digits.
fn is_version_segment(s: &str) -> bool {
    let mut c = s.chars();
    c.next() == Some('v')
        && c.next().is_some_and(|d| d.is_ascii_digit())
        && c.all(|x| x.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn warning(protocol: &str, base_url: &str) -> Option<String> {
        let extra = if protocol == "azure-openai" {
            "\n    deployment: d"
        } else {
            ""
        };
        let yaml = format!("scenarios: [{{name: s, messages: [{{role: user, content: hi}}], max_tokens: 1}}]\ntargets:\n  - name: t\n    protocol: {protocol}\n    base_url: {base_url}\n    model: m{extra}\n");
        let cfg =
            crate::config::parse(&yaml, "t.yaml", &|_| None).unwrap_or_else(|e| panic!("{e}"));
        base_url_warning(&cfg.targets[0])
    }

    #[test]
    fn endpoint_paths_in_base_url_are_warned_with_the_fix() {
        for end in ENDPOINT_PATHS {
            let w = warning("openai-chat", &format!("http://h:8000/v1{end}"))
                .unwrap_or_else(|| panic!("{end}"));
            assert!(
                w.contains(&format!("ends in the endpoint path {end}")),
                "{w}"
            );
            assert!(w.contains("set base_url to http://h:8000/v1."), "{w}");
        }
        let w = warning("ollama", "http://h:11434/api/chat/").unwrap();
        assert!(w.contains("set base_url to http://h:11434."), "{w}");
    }

    #[test]
    fn openai_style_without_a_version_is_warned() {
        let w = warning("openai-chat", "http://h:8000").unwrap();
        assert!(
            w.contains("no version segment") && w.contains("http://h:8000/v1"),
            "{w}"
        );
        assert!(warning("anthropic", "https://api.anthropic.com").is_some());
        for ok in [
            ("openai-chat", "http://h:8000/v1"),
            ("openai-chat", "https://gw/openai/v1/"),
            ("openai-responses", "https://h/api/v2beta"),
            ("ollama", "http://h:11434"),
            ("tgi", "http://h:8080"),
            ("llama-cpp", "http://h:8080"),
            ("azure-openai", "https://x.openai.azure.com"),
            ("gemini", "https://generativelanguage.googleapis.com"),
            ("gemini", "https://gw.example/google"),
            (
                "vertex-gemini",
                "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/",
            ),
        ] {
            assert_eq!(warning(ok.0, ok.1), None, "{ok:?}");
        }
    }

    #[test]
    fn gemini_base_urls_of_the_other_form_are_warned_with_the_fix() {
        let w = warning(
            "gemini",
            "https://generativelanguage.googleapis.com/v1beta/models",
        )
        .unwrap();
        assert!(
            w.contains("set base_url to https://generativelanguage.googleapis.com.")
                && w.contains("appends /v1beta/models/{model}:streamGenerateContent"),
            "{w}"
        );
        let w = warning("gemini", "https://gw.example/google/v1beta").unwrap();
        assert!(
            w.contains("set base_url to https://gw.example/google."),
            "{w}"
        );
        for bad in [
            "https://us-central1-aiplatform.googleapis.com",
            "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/l/publishers/google/models",
        ] {
            let w = warning("vertex-gemini", bad).unwrap_or_else(|| panic!("{bad}"));
            assert!(w.contains("/v1/projects/{PROJECT}/locations/{LOCATION}."), "{w}");
        }
    }
}
