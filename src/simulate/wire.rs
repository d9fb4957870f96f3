//! The simulator's wire shapes, one per protocol family (docs/protocols.md): which path serves it,
//! how a message is framed, and the bytes of each part of a scripted stream (preamble, token
//! event, error inside the 200, end of generation, terminator). The timing lives in
//! [`super::stream`]; this file only knows shapes.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};

/// A protocol family the simulator speaks, chosen by the request path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// `…/chat/completions` (also Azure's `/openai/deployments/{d}/chat/completions`).
    OpenAiChat,
    /// `…/completions`.
    OpenAiCompletions,
    /// `…/responses`.
    OpenAiResponses,
    /// `…/messages`.
    Anthropic,
    /// `/api/chat`, NDJSON.
    Ollama,
    /// `/generate_stream`, `data:` without a space.
    Tgi,
    /// llama.cpp `/completion`.
    LlamaCpp,
    /// Gemini `…/models/{m}:streamGenerateContent` (`?alt=sse`): AI Studio's
    /// `/v1beta/models/{m}` and Vertex AI's
    /// `/v1/projects/{p}/locations/{l}/publishers/google/models/{m}`; CRLF line ends, no
    /// terminator (the last chunk carries `finishReason`, then the server closes).
    Gemini,
    /// Amazon Bedrock `/model/{modelId}/converse-stream`, AWS's binary event stream
    /// (`src/simulate/bedrock.rs`).
    Bedrock,
}

/// What every part of one scripted stream needs to know.
#[derive(Debug, Clone)]
pub(super) struct Ctx {
    /// The `model` field.
    pub model: String,
    /// Output tokens of this stream (after the request's cap).
    pub tokens: u32,
    /// Whether the stream opens with reasoning tokens.
    pub reasoning: bool,
    /// How many of the output tokens are reasoning (Gemini's `thoughtsTokenCount`).
    pub reasoning_tokens: u32,
    /// Scripted TTFT, reported as the server's own prefill time where the protocol has one.
    pub ttft: Duration,
    /// Scripted time from the first to the last token event.
    pub decode: Duration,
    /// Prompt tokens reported in the usage: the request's, counted as
    /// [`super::prompt_tokens`] counts them, or the context's size when it was truncated.
    pub prompt_tokens: u64,
    /// Of them, served from the prefix cache (`None`: the simulator has no prefix cache).
    pub cached_prompt_tokens: Option<u64>,
}

/// How a protocol's stream ends (the faults that leave parts out).
#[derive(Debug, Clone, Copy)]
pub(super) struct End {
    /// Send the token count (usage, `eval_count`, `details`, `timings`).
    pub count: bool,
    /// Send the terminator.
    pub terminator: bool,
    /// vLLM's per-request metrics to put beside the usage (OpenAI chat, completions and
    /// Responses), when the load model asks for them.
    pub metrics: Option<RequestMetrics>,
}

/// What vLLM's `--enable-per-request-metrics` reports, in the simulator's terms.
#[derive(Debug, Clone, Copy)]
pub(super) struct RequestMetrics {
    /// Arrival → slot (vLLM: queued → scheduled).
    pub queue: Duration,
    /// Slot → first token event handed to the connection (vLLM: scheduled → first token).
    pub first_token: Duration,
    /// First → last token event.
    pub generation: Duration,
}

impl RequestMetrics {
    /// The `metrics` object, milliseconds as vLLM sends them (fractional).
    fn json(self, n: u32) -> Value {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let mut m = json!({
            "time_to_first_token_ms": ms(self.first_token),
            "generation_time_ms": ms(self.generation),
            "queue_time_ms": ms(self.queue),
        });
        if n > 1 {
            m["mean_itl_ms"] = json!(ms(self.generation) / f64::from(n - 1));
        }
        m
    }
}

impl Wire {
    /// The protocol served at `path`, as real servers route (Azure's deployment path is chat).
    pub fn for_path(path: &str) -> Option<Wire> {
        let p = path.trim_end_matches('/');
        // Only what a real server serves: a base_url with a doubled endpoint path
        // (`…/v1/chat/completions/chat/completions`) or without its `/v1` gets a 404 here too.
        Some(match p {
            "/v1/chat/completions" => Wire::OpenAiChat,
            "/v1/completions" => Wire::OpenAiCompletions,
            "/v1/responses" => Wire::OpenAiResponses,
            "/v1/messages" => Wire::Anthropic,
            "/api/chat" => Wire::Ollama,
            "/generate_stream" => Wire::Tgi,
            "/completion" => Wire::LlamaCpp,
            _ if is_gemini_path(p) => Wire::Gemini,
            _ if super::bedrock::is_path(p) => Wire::Bedrock,
            _ => match p
                .strip_prefix("/openai/deployments/")
                .and_then(|rest| rest.strip_suffix("/chat/completions"))
            {
                Some(d) if !d.is_empty() && !d.contains('/') => Wire::OpenAiChat,
                _ => return None,
            },
        })
    }

    /// The request's cap on output tokens, from the protocol's own field.
    pub fn max_tokens(self, body: &Value) -> Option<u64> {
        let v = match self {
            Wire::OpenAiChat | Wire::OpenAiCompletions | Wire::Anthropic => &body["max_tokens"],
            Wire::OpenAiResponses => &body["max_output_tokens"],
            Wire::Ollama => &body["options"]["num_predict"],
            Wire::Tgi => &body["parameters"]["max_new_tokens"],
            Wire::LlamaCpp => &body["n_predict"],
            Wire::Gemini => &body["generationConfig"]["maxOutputTokens"],
            Wire::Bedrock => &body["inferenceConfig"]["maxTokens"],
        };
        v.as_u64()
    }

    /// The response's content type.
    pub(super) fn content_type(self) -> &'static str {
        match self {
            Wire::Ollama => "application/x-ndjson",
            Wire::Bedrock => crate::protocol::BEDROCK_CONTENT_TYPE,
            _ => "text/event-stream",
        }
    }

    /// Frames one payload: `data: …` (OpenAI, llama.cpp), `event: {type}` + `data: …`
    /// (Responses, Anthropic), `data:…` (TGI) or one line (Ollama).
    fn frame_raw(self, event: Option<&str>, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(payload.len() + 32);
        match self {
            Wire::Ollama => {
                out.extend_from_slice(payload);
                out.push(b'\n');
                return out;
            }
            Wire::OpenAiResponses | Wire::Anthropic => {
                if let Some(e) = event {
                    out.extend_from_slice(format!("event: {e}\n").as_bytes());
                }
                out.extend_from_slice(b"data: ");
            }
            Wire::Tgi => out.extend_from_slice(b"data:"),
            Wire::Bedrock => unreachable!("Bedrock messages are framed in simulate::bedrock"),
            Wire::OpenAiChat | Wire::OpenAiCompletions | Wire::LlamaCpp | Wire::Gemini => {
                out.extend_from_slice(b"data: ")
            }
        }
        out.extend_from_slice(payload);
        if self == Wire::Gemini {
            out.extend_from_slice(b"\r\n\r\n");
        } else {
            out.extend_from_slice(b"\n\n");
        }
        out
    }

    /// Frames JSON messages (the `event:` name is the message's `type`) into one write.
    fn frame(self, msgs: &[Value]) -> Bytes {
        let mut out = Vec::new();
        for m in msgs {
            out.extend(self.frame_raw(m["type"].as_str(), m.to_string().as_bytes()));
        }
        out.into()
    }

    /// An OpenAI chunk.
    fn chunk(ctx: &Ctx, object: &str, choices: Value, usage: Option<Value>) -> Value {
        let mut c = json!({
            "id": "chatcmpl-sim", "object": object, "created": 0, "model": ctx.model,
            "system_fingerprint": concat!("llm-probe-simulator-", env!("CARGO_PKG_VERSION")),
            "choices": choices,
        });
        if let Some(u) = usage {
            c["usage"] = u;
        }
        c
    }

    fn ollama_line(ctx: &Ctx, message: Value, done: bool) -> Value {
        json!({"model": ctx.model, "created_at": "2025-01-01T00:00:00Z", "message": message, "done": done})
    }

    fn response_obj(ctx: &Ctx, status: &str, usage: Option<Value>) -> Value {
        let mut r = json!({"id": "resp_sim", "object": "response", "created_at": 0, "status": status, "model": ctx.model, "output": []});
        if let Some(u) = usage {
            r["usage"] = u;
        }
        r
    }

    /// What is sent at once with the headers.
    pub(super) fn preamble(self, ctx: &Ctx) -> Bytes {
        match self {
            Wire::OpenAiChat => self.frame(&[Self::chunk(
                ctx,
                "chat.completion.chunk",
                json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]),
                None,
            )]),
            Wire::OpenAiResponses => {
                let item = if ctx.reasoning {
                    json!({"type": "response.output_item.added", "output_index": 0, "item": {"id": "rs_sim", "type": "reasoning", "summary": []}})
                } else {
                    json!({"type": "response.output_item.added", "output_index": 0, "item": {"id": "msg_sim", "type": "message", "role": "assistant", "content": []}})
                };
                let mut msgs = vec![
                    json!({"type": "response.created", "response": Self::response_obj(ctx, "in_progress", None)}),
                    json!({"type": "response.in_progress", "response": Self::response_obj(ctx, "in_progress", None)}),
                    item,
                ];
                if !ctx.reasoning {
                    msgs.push(json!({"type": "response.content_part.added", "item_id": "msg_sim", "output_index": 0, "content_index": 0, "part": {"type": "output_text", "text": ""}}));
                }
                self.frame(&msgs)
            }
            Wire::Anthropic => {
                let block = if ctx.reasoning {
                    json!({"type": "thinking", "thinking": ""})
                } else {
                    json!({"type": "text", "text": ""})
                };
                self.frame(&[
                    json!({"type": "message_start", "message": {"id": "msg_sim", "type": "message", "role": "assistant", "model": ctx.model, "content": [], "stop_reason": null, "stop_sequence": null, "usage": Self::usage_anthropic(ctx)}}),
                    json!({"type": "content_block_start", "index": 0, "content_block": block}),
                    json!({"type": "ping"}),
                ])
            }
            Wire::OpenAiCompletions | Wire::Ollama | Wire::Tgi | Wire::LlamaCpp | Wire::Gemini => {
                Bytes::new()
            }
            Wire::Bedrock => super::bedrock::preamble(),
        }
    }

    /// A Gemini `GenerateContentResponse` chunk with `parts` in its one candidate.
    fn gemini_chunk(ctx: &Ctx, parts: Value, finish: Option<&str>, usage: Value) -> Value {
        let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
        if let Some(f) = finish {
            candidate["finishReason"] = json!(f);
        }
        json!({"candidates": [candidate], "usageMetadata": usage, "modelVersion": ctx.model, "responseId": "sim-response"})
    }

    /// The JSON of one token event carrying `text` (`index` = tokens sent before it).
    fn token_msg(self, ctx: &Ctx, text: &str, reasoning: bool, index: u32) -> Value {
        match self {
            Wire::OpenAiChat => {
                let delta = if reasoning {
                    json!({"reasoning_content": text})
                } else {
                    json!({"content": text})
                };
                Self::chunk(
                    ctx,
                    "chat.completion.chunk",
                    json!([{"index": 0, "delta": delta, "finish_reason": null}]),
                    None,
                )
            }
            Wire::OpenAiCompletions => Self::chunk(
                ctx,
                "text_completion",
                json!([{"index": 0, "text": text, "logprobs": null, "finish_reason": null}]),
                None,
            ),
            Wire::OpenAiResponses if reasoning => {
                json!({"type": "response.reasoning_text.delta", "item_id": "rs_sim", "output_index": 0, "content_index": 0, "delta": text})
            }
            Wire::OpenAiResponses => {
                json!({"type": "response.output_text.delta", "item_id": "msg_sim", "output_index": usize::from(ctx.reasoning), "content_index": 0, "delta": text})
            }
            Wire::Anthropic => {
                let delta = if reasoning {
                    json!({"type": "thinking_delta", "thinking": text})
                } else {
                    json!({"type": "text_delta", "text": text})
                };
                json!({"type": "content_block_delta", "index": usize::from(ctx.reasoning && !reasoning), "delta": delta})
            }
            Wire::Ollama => {
                let message = if reasoning {
                    json!({"role": "assistant", "content": "", "thinking": text})
                } else {
                    json!({"role": "assistant", "content": text})
                };
                Self::ollama_line(ctx, message, false)
            }
            Wire::Tgi => json!({
                "index": index + 1,
                "token": {"id": 1000 + index, "text": text, "logprob": -0.5, "special": false},
                "generated_text": null, "details": null,
            }),
            Wire::Bedrock => unreachable!("Bedrock tokens are built in simulate::bedrock"),
            Wire::LlamaCpp => json!({
                "index": 0, "content": text, "tokens": [], "stop": false, "id_slot": 0,
                "tokens_predicted": index + 1, "tokens_evaluated": ctx.prompt_tokens,
            }),
            Wire::Gemini => {
                let part = if reasoning {
                    json!({"text": text, "thought": true})
                } else {
                    json!({"text": text})
                };
                Self::gemini_chunk(
                    ctx,
                    json!([part]),
                    None,
                    json!({"promptTokenCount": ctx.prompt_tokens, "totalTokenCount": ctx.prompt_tokens}),
                )
            }
        }
    }

    /// One token event; `first_output_after_reasoning` closes the reasoning block where the
    /// protocol has blocks (Anthropic, Responses) in the same write.
    pub(super) fn token(
        self,
        ctx: &Ctx,
        text: &str,
        reasoning: bool,
        first_output_after_reasoning: bool,
        index: u32,
    ) -> Bytes {
        if self == Wire::Bedrock {
            return super::bedrock::token(ctx, text, reasoning, first_output_after_reasoning);
        }
        let mut msgs = Vec::new();
        if first_output_after_reasoning {
            match self {
                Wire::Anthropic => msgs.extend([
                    json!({"type": "content_block_stop", "index": 0}),
                    json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
                ]),
                Wire::OpenAiResponses => msgs.extend([
                    json!({"type": "response.reasoning_text.done", "item_id": "rs_sim", "output_index": 0, "content_index": 0, "text": ""}),
                    json!({"type": "response.output_item.done", "output_index": 0, "item": {"id": "rs_sim", "type": "reasoning", "summary": []}}),
                    json!({"type": "response.output_item.added", "output_index": 1, "item": {"id": "msg_sim", "type": "message", "role": "assistant", "content": []}}),
                    json!({"type": "response.content_part.added", "item_id": "msg_sim", "output_index": 1, "content_index": 0, "part": {"type": "output_text", "text": ""}}),
                ]),
                _ => {}
            }
        }
        msgs.push(self.token_msg(ctx, text, reasoning, index));
        self.frame(&msgs)
    }

    /// Whether the protocol sends a tool call whole in one event (Ollama, Gemini: `arguments`
    /// / `args` is an object), rather than its arguments in fragments.
    pub(super) fn whole_tool_calls(self) -> bool {
        matches!(self, Wire::Ollama | Wire::Gemini)
    }

    /// Whether the protocol has tool calls (the wires of `tool_call`).
    pub(super) fn has_tools(self) -> bool {
        matches!(
            self,
            Wire::OpenAiChat
                | Wire::OpenAiResponses
                | Wire::Anthropic
                | Wire::Ollama
                | Wire::Gemini
                | Wire::Bedrock
        )
    }

    /// One tool-call event in the protocol's shape: the call opens with its `name` on its first
    /// event, then argument fragments (OpenAI chat `tool_calls` deltas, a Responses
    /// `function_call` item and `function_call_arguments.delta`, an Anthropic `tool_use` block
    /// and `input_json_delta`, Bedrock `toolUse`). Ollama and Gemini send a call whole: the first
    /// event carries the name with all of `arguments` parsed as a JSON object (kept as a string
    /// when it is not JSON). Wires without tools get the text as a token.
    pub(super) fn tool_call(self, ctx: &Ctx, name: Option<&str>, arguments: &str) -> Bytes {
        let open = usize::from(ctx.reasoning);
        match self {
            Wire::OpenAiChat => {}
            Wire::Bedrock => return super::bedrock::tool_call(ctx, name, arguments),
            Wire::OpenAiResponses => {
                let output = open + 1;
                let mut msgs = Vec::new();
                if let Some(n) = name {
                    msgs.push(json!({"type": "response.output_item.added", "output_index": output, "item": {"id": "fc_sim", "type": "function_call", "call_id": "call_sim", "name": n, "arguments": "", "status": "in_progress"}}));
                }
                msgs.push(json!({"type": "response.function_call_arguments.delta", "item_id": "fc_sim", "output_index": output, "delta": arguments}));
                return self.frame(&msgs);
            }
            Wire::Anthropic => {
                let index = open + 1;
                let mut msgs = Vec::new();
                if let Some(n) = name {
                    msgs.push(json!({"type": "content_block_stop", "index": open}));
                    msgs.push(json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": "toolu_sim", "name": n, "input": {}}}));
                }
                msgs.push(json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": arguments}}));
                return self.frame(&msgs);
            }
            Wire::Ollama | Wire::Gemini => {
                let Some(n) = name else {
                    return self.token(ctx, "", false, false, 0);
                };
                let args: Value = serde_json::from_str(arguments)
                    .unwrap_or_else(|_| Value::String(arguments.to_string()));
                let msg = if self == Wire::Ollama {
                    Self::ollama_line(
                        ctx,
                        json!({"role": "assistant", "content": "", "tool_calls": [{"function": {"name": n, "arguments": args}}]}),
                        false,
                    )
                } else {
                    Self::gemini_chunk(
                        ctx,
                        json!([{"functionCall": {"name": n, "args": args}}]),
                        None,
                        json!({"promptTokenCount": ctx.prompt_tokens, "totalTokenCount": ctx.prompt_tokens}),
                    )
                };
                return self.frame(&[msg]);
            }
            _ => return self.token(ctx, arguments, false, false, 0),
        }
        let mut call = json!({"index": 0, "function": {"arguments": arguments}});
        if let Some(n) = name {
            call["id"] = json!("call_sim");
            call["type"] = json!("function");
            call["function"]["name"] = json!(n);
        }
        let msg = Self::chunk(
            ctx,
            "chat.completion.chunk",
            json!([{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": null}]),
            None,
        );
        self.frame(&[msg])
    }

    /// A token event whose JSON breaks off (it starts as JSON: a `decode` failure, not an
    /// anomaly).
    pub(super) fn broken_json(self, ctx: &Ctx) -> Bytes {
        if self == Wire::Bedrock {
            return super::bedrock::broken_json(ctx);
        }
        let msg = self.token_msg(ctx, "x", false, 0);
        let s = msg.to_string();
        let cut = &s.as_bytes()[..s.len() - 2];
        self.frame_raw(msg["type"].as_str(), cut).into()
    }

    /// A token event whose text is not UTF-8.
    pub(super) fn invalid_utf8(self, ctx: &Ctx) -> Bytes {
        if self == Wire::Bedrock {
            return super::bedrock::invalid_utf8(ctx);
        }
        let msg = self.token_msg(ctx, "@@BAD@@", false, 0);
        let s = msg.to_string();
        let (a, b) = s.split_once("@@BAD@@").expect("the marker is in the JSON");
        let mut payload = a.as_bytes().to_vec();
        payload.extend_from_slice(b"\xff\xfe");
        payload.extend_from_slice(b.as_bytes());
        self.frame_raw(msg["type"].as_str(), &payload).into()
    }

    /// The start of one endless line (no line end follows), for the huge-line fault.
    pub(super) fn huge_line_prefix(self) -> &'static [u8] {
        match self {
            Wire::Ollama => br#"{"message":{"content":""#,
            Wire::Tgi => b"data:",
            Wire::Bedrock => super::bedrock::HUGE_PRELUDE,
            _ => b"data: ",
        }
    }

    /// A comment keep-alive where the framing has comments (SSE); NDJSON has none.
    pub(super) fn keepalive(self) -> Option<Bytes> {
        match self {
            Wire::Ollama | Wire::Bedrock => None,
            _ => Some(Bytes::from_static(b": keep-alive\n\n")),
        }
    }

    /// The protocol's error inside a 200 stream (`after_tokens` picks Responses'
    /// `response.failed` over its `error` event; the message says which fault it is).
    pub(super) fn error(self, ctx: &Ctx, after_tokens: bool) -> Bytes {
        let message = if after_tokens {
            "simulated error after tokens"
        } else {
            "simulated error inside a 200 stream"
        };
        if self == Wire::Bedrock {
            return super::bedrock::error(after_tokens);
        }
        let msg = match self {
            Wire::OpenAiChat | Wire::OpenAiCompletions => {
                json!({"error": {"message": message, "type": "server_error"}})
            }
            Wire::LlamaCpp => {
                json!({"error": {"code": 500, "message": message, "type": "server_error"}})
            }
            Wire::OpenAiResponses if after_tokens => {
                let mut r = Self::response_obj(ctx, "failed", None);
                r["error"] = json!({"code": "server_error", "message": message});
                json!({"type": "response.failed", "response": r})
            }
            Wire::OpenAiResponses => {
                json!({"type": "error", "code": "server_error", "message": message, "param": null})
            }
            Wire::Anthropic => {
                json!({"type": "error", "error": {"type": "api_error", "message": message}})
            }
            Wire::Ollama => json!({"error": message}),
            Wire::Tgi => json!({"error": message, "error_type": "generation"}),
            Wire::Gemini => {
                json!({"error": {"code": 500, "message": message, "status": "INTERNAL"}})
            }
            Wire::Bedrock => unreachable!("returned above"),
        };
        self.frame(&[msg])
    }

    fn usage_openai(ctx: &Ctx, n: u32) -> Value {
        let mut u = json!({"prompt_tokens": ctx.prompt_tokens, "completion_tokens": n, "total_tokens": ctx.prompt_tokens + u64::from(n)});
        if let Some(c) = ctx.cached_prompt_tokens {
            u["prompt_tokens_details"] = json!({"cached_tokens": c});
        }
        u
    }

    /// Anthropic's `message_start` usage: `input_tokens` leaves out what the cache served,
    /// counted apart as `cache_read_input_tokens`.
    fn usage_anthropic(ctx: &Ctx) -> Value {
        let cached = ctx.cached_prompt_tokens;
        let mut u =
            json!({"input_tokens": ctx.prompt_tokens - cached.unwrap_or(0), "output_tokens": 1});
        if let Some(c) = cached {
            u["cache_read_input_tokens"] = json!(c);
        }
        u
    }

    fn llama_timings(ctx: &Ctx, n: u32) -> Value {
        let predicted_ms = ctx.decode.as_secs_f64() * 1000.0;
        json!({
            "prompt_n": ctx.prompt_tokens, "prompt_ms": ctx.ttft.as_secs_f64() * 1000.0,
            "predicted_n": n, "predicted_ms": predicted_ms,
            "predicted_per_second": if predicted_ms > 0.0 { f64::from(n) * 1000.0 / predicted_ms } else { 0.0 },
        })
    }

    /// The writes after the last token: finish, count (unless `end.count` is false) and
    /// terminator (unless `end.terminator` is false). Where the count travels inside the
    /// terminator (Responses, Ollama, TGI, llama.cpp), no terminator means no count either.
    pub(super) fn end(self, ctx: &Ctx, end: End) -> Vec<Bytes> {
        let n = ctx.tokens;
        let mut out = Vec::new();
        match self {
            Wire::Bedrock => return super::bedrock::end(ctx, end),
            Wire::OpenAiChat | Wire::OpenAiCompletions => {
                let (object, finish) = if self == Wire::OpenAiChat {
                    (
                        "chat.completion.chunk",
                        json!([{"index": 0, "delta": {}, "finish_reason": "stop"}]),
                    )
                } else {
                    (
                        "text_completion",
                        json!([{"index": 0, "text": "", "logprobs": null, "finish_reason": "stop"}]),
                    )
                };
                out.push(self.frame(&[Self::chunk(ctx, object, finish, None)]));
                if end.count {
                    let mut c =
                        Self::chunk(ctx, object, json!([]), Some(Self::usage_openai(ctx, n)));
                    if let Some(m) = end.metrics {
                        c["metrics"] = m.json(n);
                    }
                    out.push(self.frame(&[c]));
                }
                if end.terminator {
                    out.push(self.frame_raw(None, b"[DONE]").into());
                }
            }
            Wire::OpenAiResponses => {
                let oi = usize::from(ctx.reasoning);
                out.push(self.frame(&[
                    json!({"type": "response.output_text.done", "item_id": "msg_sim", "output_index": oi, "content_index": 0, "text": ""}),
                    json!({"type": "response.content_part.done", "item_id": "msg_sim", "output_index": oi, "content_index": 0, "part": {"type": "output_text", "text": ""}}),
                    json!({"type": "response.output_item.done", "output_index": oi, "item": {"id": "msg_sim", "type": "message", "role": "assistant", "content": []}}),
                ]));
                if end.terminator {
                    let usage = end.count.then(|| {
                        let mut u = json!({"input_tokens": ctx.prompt_tokens, "output_tokens": n, "total_tokens": ctx.prompt_tokens + u64::from(n)});
                        if let Some(c) = ctx.cached_prompt_tokens {
                            u["input_tokens_details"] = json!({"cached_tokens": c});
                        }
                        u
                    });
                    let mut resp = Self::response_obj(ctx, "completed", usage);
                    if let Some(m) = end.metrics.filter(|_| end.count) {
                        resp["metrics"] = m.json(n);
                    }
                    out.push(
                        self.frame(&[json!({"type": "response.completed", "response": resp})]),
                    );
                }
            }
            Wire::Anthropic => {
                let mut delta = json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}});
                if end.count {
                    delta["usage"] = json!({"output_tokens": n});
                }
                out.push(self.frame(&[
                    json!({"type": "content_block_stop", "index": usize::from(ctx.reasoning)}),
                    delta,
                ]));
                if end.terminator {
                    out.push(self.frame(&[json!({"type": "message_stop"})]));
                }
            }
            Wire::Ollama => {
                if end.terminator {
                    let mut last =
                        Self::ollama_line(ctx, json!({"role": "assistant", "content": ""}), true);
                    last["done_reason"] = json!("stop");
                    if end.count {
                        let ns = |d: Duration| d.as_nanos() as u64;
                        last["total_duration"] = json!(ns(ctx.ttft + ctx.decode));
                        last["load_duration"] = json!(0);
                        last["prompt_eval_count"] = json!(ctx.prompt_tokens);
                        last["prompt_eval_duration"] = json!(ns(ctx.ttft));
                        last["eval_count"] = json!(n);
                        last["eval_duration"] = json!(ns(ctx.decode));
                    }
                    out.push(self.frame(&[last]));
                }
            }
            Wire::Tgi => {
                if end.terminator {
                    // The end-of-sequence token: generated (and counted) but no text.
                    let details = if end.count {
                        json!({"finish_reason": "eos_token", "generated_tokens": n + 1, "seed": null})
                    } else {
                        Value::Null
                    };
                    out.push(self.frame(&[json!({
                        "index": n + 1,
                        "token": {"id": 2, "text": "</s>", "logprob": -0.1, "special": true},
                        "generated_text": (0..n).map(|i| format!(" t{i}")).collect::<String>(),
                        "details": details,
                    })]));
                }
            }
            Wire::LlamaCpp => {
                if end.terminator {
                    let mut last = json!({"index": 0, "content": "", "tokens": [], "stop": true, "id_slot": 0, "model": ctx.model, "stop_type": "eos"});
                    if end.count {
                        last["tokens_predicted"] = json!(n);
                        last["tokens_evaluated"] = json!(ctx.prompt_tokens);
                        last["timings"] = Self::llama_timings(ctx, n);
                    }
                    out.push(self.frame(&[last]));
                }
            }
            Wire::Gemini => {
                // The finish rides on the last chunk, with the final counts: no terminator
                // means neither.
                if end.terminator {
                    let usage = if end.count {
                        // Gemini counts thoughts apart from the candidates' tokens.
                        let thoughts = ctx.reasoning_tokens.min(n);
                        let mut u = json!({"promptTokenCount": ctx.prompt_tokens, "candidatesTokenCount": n - thoughts, "totalTokenCount": ctx.prompt_tokens + u64::from(n)});
                        if thoughts > 0 {
                            u["thoughtsTokenCount"] = json!(thoughts);
                        }
                        if let Some(c) = ctx.cached_prompt_tokens {
                            u["cachedContentTokenCount"] = json!(c);
                        }
                        u
                    } else {
                        json!({"promptTokenCount": ctx.prompt_tokens, "totalTokenCount": ctx.prompt_tokens})
                    };
                    let parts = json!([{"text": ""}]);
                    out.push(self.frame(&[Self::gemini_chunk(ctx, parts, Some("STOP"), usage)]));
                }
            }
        }
        out
    }

    /// A stream that ends without a single token: the terminator (with a count of 0 where
    /// the protocol carries one in it) and nothing else.
    pub(super) fn terminator_only(self, ctx: &Ctx) -> Bytes {
        let empty = Ctx {
            tokens: 0,
            decode: Duration::ZERO,
            ..ctx.clone()
        };
        match self {
            Wire::OpenAiChat | Wire::OpenAiCompletions => self.frame_raw(None, b"[DONE]").into(),
            Wire::OpenAiResponses => self.frame(&[
                json!({"type": "response.created", "response": Self::response_obj(ctx, "in_progress", None)}),
                json!({"type": "response.completed", "response": Self::response_obj(ctx, "completed", Some(json!({"input_tokens": ctx.prompt_tokens, "output_tokens": 0, "total_tokens": ctx.prompt_tokens})))}),
            ]),
            Wire::Anthropic => self.frame(&[
                json!({"type": "message_start", "message": {"id": "msg_sim", "type": "message", "role": "assistant", "model": ctx.model, "content": [], "stop_reason": null, "usage": {"input_tokens": ctx.prompt_tokens, "output_tokens": 0}}}),
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 0}}),
                json!({"type": "message_stop"}),
            ]),
            Wire::Tgi => {
                // Only the end-of-sequence token: one generated token, no text.
                self.frame(&[json!({
                    "index": 1,
                    "token": {"id": 2, "text": "</s>", "logprob": -0.1, "special": true},
                    "generated_text": "",
                    "details": {"finish_reason": "eos_token", "generated_tokens": 1, "seed": null},
                })])
            }
            Wire::Bedrock => super::bedrock::terminator_only(ctx),
            Wire::Ollama | Wire::LlamaCpp | Wire::Gemini => {
                let all = End {
                    count: true,
                    terminator: true,
                    metrics: None,
                };
                self.end(&empty, all).concat().into()
            }
        }
    }
}

/// Whether `path` is a Gemini streaming path: AI Studio's
/// `/v1beta/models/{m}:streamGenerateContent` or Vertex AI's
/// `/v1/projects/{p}/locations/{l}/publishers/google/models/{m}:streamGenerateContent`
/// (any API version segment; every name one non-empty segment).
fn is_gemini_path(path: &str) -> bool {
    let Some(rest) = path.strip_suffix(":streamGenerateContent") else {
        return false;
    };
    let segs: Vec<&str> = rest.split('/').skip(1).collect();
    if segs.iter().any(|s| s.is_empty()) {
        return false;
    }
    matches!(
        segs.as_slice(),
        [_version, "models", _model]
            | [
                _version,
                "projects",
                _,
                "locations",
                _,
                "publishers",
                "google",
                "models",
                _model
            ]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemini_is_served_on_both_of_its_paths_only() {
        for ok in [
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
            "/v1/projects/p-1/locations/us-central1/publishers/google/models/m:streamGenerateContent",
        ] {
            assert_eq!(Wire::for_path(ok), Some(Wire::Gemini), "{ok}");
        }
        for bad in [
            "/v1beta/models/:streamGenerateContent",
            "/v1beta/models/m:generateContent",
            "/v1beta/models/a/b:streamGenerateContent",
            "/models/m:streamGenerateContent",
            "/v1/projects/p/locations/l/publishers/other/models/m:streamGenerateContent",
            "/v1/projects/p/locations/l/models/m:streamGenerateContent",
        ] {
            assert_eq!(Wire::for_path(bad), None, "{bad}");
        }
    }
}
