//! The `targets:` section: one target's protocol, model, timing, headers, connection policy
//! and the scenarios it runs, each checked and merged over `defaults:`.

use super::*;

impl Validator<'_> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn target(
        &mut self,
        path: &str,
        i: usize,
        raw: RawTarget,
        d: &Defaults,
        seen: &HashMap<String, usize>,
        scenario_names: &[String],
        scenarios: &[Arc<Scenario>],
    ) -> Option<Target> {
        let before = self.problems.len();
        let credentials_before = self.credential_problems.len();
        let pre = entity_prefix("target", raw.name.as_deref(), i);
        let name = self.name(path, &pre, "target", raw.name.as_deref(), seen, "targets");

        let protocol = self.protocol(path, &pre, raw.protocol.as_deref());

        let base_url = self.base_url(&format!("{path}.base_url"), &pre, raw.base_url.as_deref());

        let model = self.model(path, &pre, raw.model.clone());
        if let (Some(Protocol::Bedrock), Some(m @ ("." | ".."))) = (protocol, model.as_deref()) {
            // Percent-encoding does not help: `%2E%2E` is a dot segment to URL parsers too.
            self.problem(
                format!("{path}.model"),
                format!("{pre}model \"{m}\" cannot be a Bedrock model id: the request path would be /model/{m}/converse-stream, and \"{m}\" as a path segment is removed by URL normalisation, so the request would go elsewhere; set it to the model id, inference profile id or ARN to call, e.g. anthropic.claude-3-haiku-20240307-v1:0."),
            );
        }

        let (api_key, api_key_source, api_key_file) = self.api_key(path, &pre, &raw);

        let (interval, timeout) = self.timing(path, &pre, &raw, d);

        let temperature = match raw.temperature {
            Some(t) => self.temperature(&format!("{path}.temperature"), &pre, t),
            None => d.temperature,
        };

        let (headers, secret_headers) = self.target_headers(path, &pre, &raw, d, protocol);

        let (deployment, api_version) = self.azure_fields(path, &pre, protocol, &raw);
        let aws = self.aws(path, &pre, protocol, &raw, api_key_source.is_some());
        let version_path = self.version_path(path, &pre, raw.version_path.as_deref());
        let server_metrics = self.server_metrics(path, &pre, &raw);
        let tls = self.tls(path, &pre, raw.tls.as_ref(), base_url.as_ref());
        let connect_timeout = raw
            .connect_timeout
            .as_ref()
            .and_then(|v| {
                self.positive_duration(
                    &format!("{path}.connect_timeout"),
                    &pre,
                    "connect_timeout",
                    v,
                )
            })
            .unwrap_or(DEFAULT_CONNECT_TIMEOUT)
            .min(timeout);
        let connection = self.connection(path, &pre, raw.connection.as_deref());

        let extra_body = raw.extra_body.unwrap_or_default();
        self.extra_body(&format!("{path}.extra_body"), &pre, &extra_body);

        let resolved = self.target_scenarios(
            path,
            &pre,
            raw.scenarios.as_deref(),
            scenario_names,
            scenarios,
        );
        if let (Some(protocol), Some(list)) = (protocol, &resolved) {
            self.structured_support(path, &pre, protocol, list);
        }

        let slo = self.slo(&format!("{path}.slo"), &pre, raw.slo.as_ref(), d.slo);
        let cost = self.cost(path, &pre, raw.cost.as_ref());
        let replicas = self.replicas(path, &pre, raw.replicas.as_ref(), base_url.as_ref());

        let baselines = self.baseline_files(
            path,
            &pre,
            raw.name.as_deref(),
            raw.baseline_file.as_ref(),
            resolved.as_deref(),
        );

        if self.problems.len() != before {
            return None;
        }
        let unreadable: Vec<&str> = self.credential_problems[credentials_before..]
            .iter()
            .map(|(_, m)| m.as_str())
            .collect();
        let credentials_error = (!unreadable.is_empty()).then(|| unreadable.join(" "));
        Some(Target {
            name: name?,
            protocol: protocol?,
            base_url: base_url?,
            model: model?,
            api_key,
            api_key_source,
            api_key_file,
            credentials_error,
            headers,
            secret_headers,
            interval,
            timeout,
            temperature,
            extra_body,
            scenarios: resolved?,
            slo,
            deployment,
            api_version,
            version_path,
            tls,
            connect_timeout,
            connection,
            baselines,
            cost,
            aws,
            server_metrics,
            replicas,
        })
    }

    /// `protocol`: required, one of [`Protocol::ALL`].
    fn protocol(&mut self, path: &str, pre: &str, raw: Option<&str>) -> Option<Protocol> {
        let protocols: Vec<&str> = Protocol::ALL.iter().map(|p| p.as_str()).collect();
        let protocols = protocols.join(", ");
        match raw {
            None => {
                self.problem(
                    format!("{path}.protocol"),
                    format!("{pre}protocol is required; set it to one of: {protocols}."),
                );
                None
            }
            Some(p) => {
                let parsed = Protocol::from_name(p);
                if parsed.is_none() {
                    self.problem(
                        format!("{path}.protocol"),
                        format!("{pre}protocol \"{p}\" is not supported; use one of: {protocols}."),
                    );
                }
                parsed
            }
        }
    }

    /// `model`: required, at most [`MAX_MODEL_LEN`] characters, no control characters (it
    /// becomes a label value).
    fn model(&mut self, path: &str, pre: &str, raw: Option<String>) -> Option<String> {
        match raw {
            Some(m) if m.chars().count() > MAX_MODEL_LEN => {
                self.problem(
                    format!("{path}.model"),
                    format!("{pre}model is {} characters long; shorten it to at most {MAX_MODEL_LEN}, because it becomes the \"model\" label of every series.", m.chars().count()),
                );
                None
            }
            Some(m) if m.chars().any(is_unsafe_char) => {
                self.problem(
                    format!("{path}.model"),
                    format!("{pre}model \"{m}\" contains control characters (such as a newline, a tab or an escape) or bidirectional controls; write the model name the endpoint serves, without them."),
                );
                None
            }
            Some(m) if !m.trim().is_empty() => Some(m),
            _ => {
                self.problem(
                    format!("{path}.model"),
                    format!("{pre}model is required; set it to the model name the endpoint serves (GET <base_url>/models lists them)."),
                );
                None
            }
        }
    }

    /// `interval` and `timeout`: (interval, timeout) in force, with a timeout longer than
    /// the interval reported.
    fn timing(
        &mut self,
        path: &str,
        pre: &str,
        raw: &RawTarget,
        d: &Defaults,
    ) -> (Duration, Duration) {
        // Interval and timeout: target over defaults over built-ins. An unset timeout
        // is lowered to the interval when the interval is shorter than the default.
        let t_interval = raw
            .interval
            .as_ref()
            .and_then(|v| self.positive_duration(&format!("{path}.interval"), pre, "interval", v));
        let t_timeout = raw
            .timeout
            .as_ref()
            .and_then(|v| self.positive_duration(&format!("{path}.timeout"), pre, "timeout", v));
        let interval = t_interval.or(d.interval).unwrap_or(DEFAULT_INTERVAL);
        let timeout = t_timeout
            .or(d.timeout)
            .unwrap_or_else(|| DEFAULT_TIMEOUT.min(interval));
        let timeout_set_here = raw.timeout.is_some();
        let interval_set_here = raw.interval.is_some();
        // An invalid value was already reported; comparing the default that stands in for it
        // would only add a misleading second problem.
        let timing_valid = !d.timing_invalid
            && (t_interval.is_some() || !interval_set_here)
            && (t_timeout.is_some() || !timeout_set_here);
        if timing_valid && (timeout_set_here || interval_set_here) && timeout > interval {
            let origin = |here: bool, key: &str, d: Duration| {
                if here {
                    format!("{key} {}", fmt_dur(d))
                } else {
                    format!("{key} {} (from defaults.{key})", fmt_dur(d))
                }
            };
            self.problem(
                format!(
                    "{path}.{}",
                    if timeout_set_here { "timeout" } else { "interval" }
                ),
                format!(
                    "{pre}{} is longer than {}; a probe must finish before the next one starts, so lower the timeout or raise the interval.",
                    origin(timeout_set_here, "timeout", timeout),
                    origin(interval_set_here, "interval", interval),
                ),
            );
        }
        (interval, timeout)
    }

    /// `headers` merged over `defaults.headers` (case-insensitive names, the target's value
    /// wins), `secret_headers` added to the defaults' list, and an API key that would also be
    /// sent as a configured header reported. Returns (headers, secret header names).
    fn target_headers(
        &mut self,
        path: &str,
        pre: &str,
        raw: &RawTarget,
        d: &Defaults,
        protocol: Option<Protocol>,
    ) -> (Vec<(String, String)>, Vec<String>) {
        let mut headers = d.headers.clone();
        if let Some(h) = &raw.headers {
            for (k, v) in self.headers(&format!("{path}.headers"), pre, h) {
                match headers
                    .iter_mut()
                    .find(|(dk, _)| dk.eq_ignore_ascii_case(&k))
                {
                    Some(slot) => *slot = (k, v),
                    None => headers.push((k, v)),
                }
            }
        }
        let set: Vec<&str> = headers.iter().map(|(k, _)| k.as_str()).collect();
        let mut secret_headers = d.secret_headers.clone();
        for name in self.secret_headers(path, pre, raw.secret_headers.as_deref(), &set) {
            if !secret_headers.contains(&name) {
                secret_headers.push(name);
            }
        }
        if raw.api_key_env.is_some() || raw.api_key_file.is_some() {
            let auth = protocol.map_or("authorization", Protocol::auth_header);
            if let Some((k, _)) = headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(auth)) {
                let key_field = if raw.api_key_env.is_some() {
                    "api_key_env"
                } else {
                    "api_key_file"
                };
                let shown = if auth == "authorization" {
                    "Authorization"
                } else {
                    auth
                };
                self.problem(
                    format!("{path}.{key_field}"),
                    format!("{pre}both {key_field} and an {k} header are set, and the API key is sent as the {shown} header; keep only one of them."),
                );
            }
        }
        (headers, secret_headers)
    }

    /// `connection`: `fresh` (the default) or `reuse`.
    fn connection(&mut self, path: &str, pre: &str, raw: Option<&str>) -> ConnectionPolicy {
        match raw {
            None | Some("fresh") => ConnectionPolicy::Fresh,
            Some("reuse") => ConnectionPolicy::Reuse,
            Some(other) => {
                self.problem(
                    format!("{path}.connection"),
                    format!("{pre}connection \"{other}\" is not a policy; use fresh (a new connection per probe, the default) or reuse."),
                );
                ConnectionPolicy::Fresh
            }
        }
    }

    pub(super) fn target_scenarios(
        &mut self,
        path: &str,
        pre: &str,
        listed: Option<&[String]>,
        names: &[String],
        scenarios: &[Arc<Scenario>],
    ) -> Option<Vec<Arc<Scenario>>> {
        let by_name = |n: &str| scenarios.iter().find(|s| s.name == n).cloned();
        let Some(listed) = listed else {
            return Some(scenarios.to_vec());
        };
        if listed.is_empty() {
            self.problem(
                format!("{path}.scenarios"),
                format!("{pre}scenarios is an empty list; list at least one scenario name, or remove the key to run all scenarios."),
            );
            return None;
        }
        let mut out = Vec::new();
        let mut ok = true;
        for (j, n) in listed.iter().enumerate() {
            let p = format!("{path}.scenarios[{j}]");
            if !names.iter().any(|k| k == n) {
                let known = names.join(", ");
                let message = match closest(n, names.iter().map(String::as_str)) {
                    Some(c) => format!("{pre}scenario \"{n}\" is not defined; did you mean \"{c}\"? The defined scenarios are {known}."),
                    None => format!("{pre}scenario \"{n}\" is not defined; use one of the scenarios defined under scenarios: {known}."),
                };
                self.problem(p, message);
                ok = false;
            } else if listed[..j].contains(n) {
                self.problem(
                    p,
                    format!("{pre}scenario \"{n}\" is listed twice; remove the duplicate."),
                );
                ok = false;
            } else if let Some(s) = by_name(n) {
                out.push(s);
            } else {
                // Defined but invalid: already reported at the scenario.
                ok = false;
            }
        }
        ok.then_some(out)
    }

    /// Tools are sent on every protocol that has them (OpenAI chat, Azure, Responses,
    /// Anthropic, Ollama, Gemini, Vertex Gemini, Bedrock); `response_format` by the OpenAI chat
    /// shapes only (`openai-chat`, `azure-openai`). A scenario with them on another protocol
    /// would probe something else than it says.
    fn structured_support(
        &mut self,
        path: &str,
        pre: &str,
        protocol: Protocol,
        scenarios: &[Arc<Scenario>],
    ) {
        let chat = matches!(protocol, Protocol::OpenAiChat | Protocol::AzureOpenAi);
        let tools = chat
            || matches!(
                protocol,
                Protocol::OpenAiResponses
                    | Protocol::Anthropic
                    | Protocol::Ollama
                    | Protocol::Gemini
                    | Protocol::VertexGemini
                    | Protocol::Bedrock
            );
        for s in scenarios {
            if !s.tools.is_empty() && !tools {
                self.problem(
                    format!("{path}.scenarios"),
                    format!("{pre}scenario \"{}\" declares tools, which this protocol has no field for (llm-probe sends tools on openai-chat, azure-openai, openai-responses, anthropic, ollama, gemini, vertex-gemini and bedrock targets); list this target's scenarios: without it.", s.name),
                );
            }
            if s.response_format.is_some() && !chat {
                self.problem(
                    format!("{path}.scenarios"),
                    format!("{pre}scenario \"{}\" declares response_format, which llm-probe sends on openai-chat and azure-openai targets only; list this target's scenarios: without it.", s.name),
                );
            }
        }
    }
}
