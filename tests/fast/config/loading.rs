//! Config loading: one fixture per error with its exact message, defaults and
//! overrides, the shipped example file, and secret redaction.

use std::sync::Arc;
use std::time::Duration;

use llm_probe::config::{self, Config, PrefixCache, Protocol, Slo, Target};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/config");
const SECRET: &str = "sk-test-UNIQUE-9f3b";

/// The environment the fixtures see: one empty variable and one key.
fn env(name: &str) -> Option<String> {
    match name {
        "LLM_PROBE_TEST_EMPTY_KEY" => Some("  ".into()),
        "LOCAL_VLLM_KEY" => Some(SECRET.into()),
        _ => None,
    }
}

fn parse(text: &str) -> Result<Config, config::ConfigError> {
    config::parse(text, "test.yaml", &env)
}

fn fixture_error(file: &str) -> String {
    let text = std::fs::read_to_string(format!("{FIXTURES}/{file}")).unwrap();
    match config::parse(&text, file, &env) {
        Ok(_) => panic!("{file} loaded without error"),
        Err(e) => e.to_string(),
    }
}

/// (fixture file, the exact error `Display`, one problem per line).
const ERROR_CASES: &[(&str, &str)] = &[
    (
        "01_yaml_syntax.yaml",
        r#"01_yaml_syntax.yaml:4:5: the file is not valid YAML: did not find expected ',' or ']', while parsing a flow sequence at line 3 column 15; check the indentation and quoting on this line and the lines just above it."#,
    ),
    (
        "02_unknown_key.yaml",
        r#"02_unknown_key.yaml:10:5: targets[0].intervall: target "local-vllm": unknown key "intervall"; did you mean "interval"? The keys allowed here are: name, protocol, base_url, model, api_key_env, api_key_file, interval, timeout, temperature, headers, secret_headers, extra_body, scenarios, slo, deployment, api_version, version_path, tls, connect_timeout, connection, baseline_file, cost, aws_region, aws_profile, server_metrics_url, server_metrics_adapter, server_metrics_send_api_key, replicas."#,
    ),
    (
        "03_missing_base_url.yaml",
        r#"03_missing_base_url.yaml:6:5: targets[0].base_url: target "local-vllm": base_url is required; set it to the API root of the endpoint, e.g. http://127.0.0.1:8000/v1."#,
    ),
    (
        "04_bad_duration.yaml",
        concat!(
            r#"04_bad_duration.yaml:2:12: defaults.timeout: timeout "soon" is not a duration; use a duration like 15s or 300ms."#,
            "\n",
            r#"04_bad_duration.yaml:12:15: targets[0].interval: target "local-vllm": interval "fast" is not a duration; use a duration like 15s or 300ms."#,
            "\n",
            r#"04_bad_duration.yaml:17:15: targets[1].interval: target "other": interval is the bare number 15, which has no unit; use a duration like 15s or 300ms."#
        ),
    ),
    (
        "05_unknown_protocol.yaml",
        r#"05_unknown_protocol.yaml:7:15: targets[0].protocol: target "local-vllm": protocol "cohere" is not supported; use one of: openai-chat, openai-completions, openai-responses, anthropic, ollama, tgi, azure-openai, llama-cpp, gemini, vertex-gemini, bedrock."#,
    ),
    (
        "06_unknown_scenario.yaml",
        concat!(
            r#"06_unknown_scenario.yaml:13:17: targets[0].scenarios[0]: target "local-vllm": scenario "chat_shrt" is not defined; did you mean "chat_short"? The defined scenarios are chat_short, code_completion."#,
            "\n",
            r#"06_unknown_scenario.yaml:13:28: targets[0].scenarios[1]: target "local-vllm": scenario "summarize_long" is not defined; use one of the scenarios defined under scenarios: chat_short, code_completion."#
        ),
    ),
    (
        "07_duplicate_target.yaml",
        r#"07_duplicate_target.yaml:10:11: targets[1].name: target "local-vllm": name is already used by targets[0]; target names must be unique, so rename one of them."#,
    ),
    (
        "08_duplicate_scenario.yaml",
        r#"08_duplicate_scenario.yaml:5:11: scenarios[1].name: scenario "chat_short": name is already used by scenarios[0]; scenario names must be unique, so rename one of them."#,
    ),
    (
        "09_bad_base_url.yaml",
        concat!(
            r#"09_bad_base_url.yaml:8:15: targets[0].base_url: target "no-scheme": base_url "127.0.0.1:8000/v1" is not an absolute http(s) URL; write the scheme and host, e.g. http://127.0.0.1:8000/v1."#,
            "\n",
            r#"09_bad_base_url.yaml:12:15: targets[1].base_url: target "ftp": base_url "ftp://models.internal/v1" is not an absolute http(s) URL; write the scheme and host, e.g. http://127.0.0.1:8000/v1."#,
            "\n",
            r#"09_bad_base_url.yaml:16:15: targets[2].base_url: target "creds": base_url "https://***@models.internal/v1" contains a user name or password, which would end up in logs; remove it and use api_key_env or api_key_file instead."#
        ),
    ),
    (
        "10_timeout_over_interval.yaml",
        concat!(
            r#"10_timeout_over_interval.yaml:12:15: targets[0].interval: target "fast": timeout 20s (from defaults.timeout) is longer than interval 5s; a probe must finish before the next one starts, so lower the timeout or raise the interval."#,
            "\n",
            r#"10_timeout_over_interval.yaml:18:14: targets[1].timeout: target "explicit": timeout 1m is longer than interval 30s; a probe must finish before the next one starts, so lower the timeout or raise the interval."#
        ),
    ),
    (
        "11_max_tokens_zero.yaml",
        r#"11_max_tokens_zero.yaml:4:17: scenarios[0].max_tokens: scenario "chat_short": max_tokens is 0; set it to at least 1 (it caps the output tokens each probe generates, e.g. 64)."#,
    ),
    (
        "12_nothing_defined.yaml",
        concat!(
            r#"12_nothing_defined.yaml:3:12: scenarios: no scenarios are defined; add at least one entry under scenarios: (see probes.example.yaml)."#,
            "\n",
            r#"12_nothing_defined.yaml: targets: no targets are defined; add at least one entry under targets: (see probes.example.yaml)."#
        ),
    ),
    (
        "13_api_key_env_unset.yaml",
        concat!(
            r#"13_api_key_env_unset.yaml:10:18: targets[0].api_key_env: target "unset": api_key_env names the environment variable LLM_PROBE_TEST_UNSET_KEY, which is not set; export it before starting llm-probe, or remove api_key_env if the endpoint needs no key."#,
            "\n",
            r#"13_api_key_env_unset.yaml:15:18: targets[1].api_key_env: target "empty": the environment variable LLM_PROBE_TEST_EMPTY_KEY named by api_key_env is empty; put the API key in it, or remove api_key_env if the endpoint needs no key."#
        ),
    ),
    (
        "14_both_api_key_sources.yaml",
        r#"14_both_api_key_sources.yaml:11:19: targets[0].api_key_file: target "local-vllm": api_key_env and api_key_file are both set; keep only one of them."#,
    ),
    (
        "15_zero_interval.yaml",
        r#"15_zero_interval.yaml:10:15: targets[0].interval: target "local-vllm": interval is zero; it must be greater than zero, use a duration like 15s or 300ms."#,
    ),
    (
        "16_slo_non_positive.yaml",
        concat!(
            r#"16_slo_non_positive.yaml:3:15: defaults.slo.ttft_p95: slo.ttft_p95 is zero; it must be greater than zero, use a duration like 15s or 300ms."#,
            "\n",
            r#"16_slo_non_positive.yaml:14:37: targets[0].slo.output_tokens_per_second_min: target "local-vllm": slo.output_tokens_per_second_min is -5; it must be a number greater than zero, e.g. 30."#
        ),
    ),
    (
        "17_bad_header.yaml",
        concat!(
            r#"17_bad_header.yaml:3:13: defaults.headers.X Team: header name "X Team" is not a valid HTTP header name; use only letters, digits and "-", e.g. X-Team."#,
            "\n",
            r#"17_bad_header.yaml:14:16: targets[0].headers.X-Route: target "local-vllm": the value of header "X-Route" is not a valid HTTP header value (it has control characters such as a newline, or non-ASCII); fix the value."#,
            "\n",
            r#"17_bad_header.yaml:15:16: targets[0].headers.X-Shard: target "local-vllm": the value of header "X-Shard" must be a string; quote it, e.g. "1"."#
        ),
    ),
    (
        "18_empty_messages.yaml",
        r#"18_empty_messages.yaml:3:15: scenarios[0].messages: scenario "chat_short": messages is empty; add at least one message, e.g. [{role: user, content: "Hello"}]."#,
    ),
    (
        "19_bad_target_name.yaml",
        concat!(
            r#"19_bad_target_name.yaml:6:11: targets[0].name: target "local vllm/a100": name may only contain ASCII letters, digits, "_", ".", ":" and "-", because it becomes the "target" metric label; rename it, e.g. "local_vllm_a100"."#,
            "\n",
            r#"19_bad_target_name.yaml:10:11: targets[1].name: target "": name is empty; give the target a unique name made of ASCII letters, digits, "_", ".", ":" and "-" (it becomes the "target" metric label)."#
        ),
    ),
    (
        "20_api_key_file_unreadable.yaml",
        r#"20_api_key_file_unreadable.yaml:10:19: targets[0].api_key_file: target "local-vllm": api_key_file /nonexistent/llm-probe/vllm.key cannot be read (no such file); check the path and that llm-probe may read it."#,
    ),
    (
        "21_unknown_prefix_cache.yaml",
        r#"21_unknown_prefix_cache.yaml:5:19: scenarios[0].prefix_cache: scenario "chat_short": prefix_cache "hot" is not supported; use cold (a unique nonce starts every prompt so the server's prefix cache cannot serve it) or warm (the prompt is sent verbatim)."#,
    ),
    (
        "22_reserved_extra_body.yaml",
        concat!(
            r#"22_reserved_extra_body.yaml:5:26: scenarios[0].extra_body.stream: scenario "chat_short": extra_body sets "stream", which llm-probe controls; remove it (llm-probe sets it itself)."#,
            "\n",
            r#"22_reserved_extra_body.yaml:11:30: targets[0].extra_body.max_tokens: target "local-vllm": extra_body sets "max_tokens", which llm-probe controls; remove it (use the scenario's max_tokens field instead)."#
        ),
    ),
    (
        "23_wrong_type.yaml",
        r#"23_wrong_type.yaml:4:17: scenarios[0].max_tokens: scenario "chat_short": max_tokens must be an integer, but it is string "many"; fix the value (see probes.example.yaml)."#,
    ),
    (
        "24_duplicate_key.yaml",
        r#"24_duplicate_key.yaml:6:5: targets[0].model: the key "model" appears twice in the same mapping; keep only one of them."#,
    ),
    (
        "25_bad_message.yaml",
        concat!(
            r#"25_bad_message.yaml:4:16: scenarios[0].messages[0].role: scenario "chat_short": messages[0].role "bot" is not supported; use one of: system, developer, user, assistant, tool."#,
            "\n",
            r#"25_bad_message.yaml:5:10: scenarios[0].messages[1].content: scenario "chat_short": messages[1] has no content; write the message text in content."#
        ),
    ),
    (
        "26_bom_file.yaml",
        r#"26_bom_file.yaml:4:17: scenarios[0].max_tokens: scenario "chat_short": max_tokens is 0; set it to at least 1 (it caps the output tokens each probe generates, e.g. 64)."#,
    ),
    (
        "27_multiple_documents.yaml",
        r#"27_multiple_documents.yaml: the file holds more than one YAML document (a line "---" starts another); keep a single document."#,
    ),
    (
        "28_tagged_int.yaml",
        r#"28_tagged_int.yaml:4:17: scenarios[0].max_tokens: scenario "chat_short": max_tokens is written with a YAML tag on a quoted value (such as !!int "8"); write the plain value without tag or quotes, e.g. max_tokens: 8."#,
    ),
    (
        "29_integer_out_of_range.yaml",
        r#"29_integer_out_of_range.yaml:4:17: scenarios[0].max_tokens: max_tokens 18446744073709551616 is out of range; set it between 1 and 4294967295."#,
    ),
    (
        "30_port_out_of_range.yaml",
        concat!(
            r#"30_port_out_of_range.yaml:8:15: targets[0].base_url: target "big-port": base_url "http://127.0.0.1:99999/v1" has a port out of range; use a port from 1 to 65535."#,
            "\n",
            r#"30_port_out_of_range.yaml:12:15: targets[1].base_url: target "port-zero": base_url "http://127.0.0.1:0/v1" has port 0, which cannot be connected to; use a port from 1 to 65535."#
        ),
    ),
    (
        "31_bad_merge_key.yaml",
        r#"31_bad_merge_key.yaml:7:9: targets[0].<<: target "local-vllm": a merge key (<<) must be followed by a mapping, an alias of one (<<: *base) or a list of them; fix the value or write the keys out."#,
    ),
    (
        "32_unknown_tag.yaml",
        concat!(
            r#"32_unknown_tag.yaml:13:21: targets[0].timeout: target "local-vllm": the YAML tag !weird on a key is not supported (llm-probe reads plain keys); remove it."#,
            "\n",
            r#"32_unknown_tag.yaml:10:23: targets[0].api_key_env: target "local-vllm": the YAML tag !env is not supported (llm-probe reads plain values); remove it and write the value itself."#,
            "\n",
            r#"32_unknown_tag.yaml:12:23: targets[0].headers.X-Team: target "local-vllm": the YAML tag !secret is not supported (llm-probe reads plain values); remove it and write the value itself."#
        ),
    ),
    (
        "33_long_names.yaml",
        concat!(
            r#"33_long_names.yaml:2:11: scenarios[0].name: scenario "ssssssssssssssssssssssssssssssss…": name is 200 characters long; shorten it to at most 128, because it becomes the "scenario" label of every series."#,
            "\n",
            r#"33_long_names.yaml:6:11: targets[0].name: target "tttttttttttttttttttttttttttttttt…": name is 129 characters long; shorten it to at most 128, because it becomes the "target" label of every series."#,
            "\n",
            r#"33_long_names.yaml:9:12: targets[0].model: target "tttttttttttttttttttttttttttttttt…": model is 257 characters long; shorten it to at most 256, because it becomes the "model" label of every series."#,
            "\n",
            r#"33_long_names.yaml:13:12: targets[1].model: target "escapes": model "m\x1b[31m\n  ok          TTFT 1.0 ms" contains control characters (such as a newline, a tab or an escape) or bidirectional controls; write the model name the endpoint serves, without them."#
        ),
    ),
    (
        "34_secrets_in_urls.yaml",
        concat!(
            r#"34_secrets_in_urls.yaml:8:15: targets[0].base_url: target "userinfo": base_url "http://***@/v1" contains a user name or password, which would end up in logs; remove it and use api_key_env or api_key_file instead."#,
            "\n",
            r#"34_secrets_in_urls.yaml:12:15: targets[1].base_url: target "query": base_url "https://api.example.com/v1?key=***" has a query string or fragment; remove it, because the protocol appends its own path (e.g. /chat/completions) to base_url."#,
            "\n",
            r#"34_secrets_in_urls.yaml:16:15: targets[2].base_url: target "ftp": base_url "ftp://***@models.internal/" contains a user name or password, which would end up in logs; remove it and use api_key_env or api_key_file instead."#,
            "\n",
            r#"34_secrets_in_urls.yaml:20:15: targets[3].base_url: target "no-scheme": base_url "***@models.internal:8000/v1" contains a user name or password, which would end up in logs; remove it and use api_key_env or api_key_file instead."#,
            "\n",
            r#"34_secrets_in_urls.yaml:22:19: targets[3].version_path: target "no-scheme": version_path "/version?token=***" must be a path on the target's host starting with "/", without query or fragment, e.g. /version."#,
            "\n",
            r#"34_secrets_in_urls.yaml:27:17: targets[4].deployment: target "azure": deployment "gpt4?api-key=***" is not a valid Azure deployment name; use only letters, digits, "-", "_" and "."."#,
            "\n",
            r#"34_secrets_in_urls.yaml:28:18: targets[4].api_version: target "azure": api_version "***&api-key=***" is not an Azure OpenAI API version; use a date like 2024-10-21 (optionally with -preview), or remove it for the default."#
        ),
    ),
    (
        "35_secret_headers.yaml",
        concat!(
            r#"35_secret_headers.yaml:2:20: defaults.secret_headers[0]: secret_headers lists "X-Nowhere", but no header of that name is set, so nothing would be kept secret; list only headers set under headers (the target's or defaults.headers)."#,
            "\n",
            r#"35_secret_headers.yaml:13:7: targets[0].headers.Authorization: …: target "local-vllm": header name "Authorization: …" is not a valid HTTP header name; write each header as a mapping entry, name then value (e.g. X-Team: sre), not as one string."#,
            "\n",
            r#"35_secret_headers.yaml:15:22: targets[0].secret_headers[0]: target "local-vllm": secret_headers lists "X-Tenat", but no header of that name is set, so nothing would be kept secret; did you mean "X-Tenant"?"#,
            "\n",
            r#"35_secret_headers.yaml:15:31: targets[0].secret_headers[1]: target "local-vllm": secret_headers lists "Bad Name", which is not a valid HTTP header name; list the names of headers set under headers, e.g. X-Tenant-Token."#
        ),
    ),
    (
        "36_headers_as_string.yaml",
        r#"36_headers_as_string.yaml:10:14: targets[0].headers: target "local-vllm": headers must be a YAML mapping, but it is a string; fix the value (see probes.example.yaml)."#,
    ),
    (
        "37_tagged_float.yaml",
        r#"37_tagged_float.yaml:5:18: scenarios[0].temperature: scenario "chat_short": temperature is written with a YAML tag on a quoted value (such as !!float "0.5"); write the plain value without tag or quotes, e.g. temperature: 0.5."#,
    ),
    (
        "38_key_in_key_fields.yaml",
        concat!(
            r#"38_key_in_key_fields.yaml:10:18: targets[0].api_key_env: target "key-in-env": api_key_env must be the name of an environment variable (letters, digits and "_"), not the key itself; put the key in a variable (e.g. export LOCAL_VLLM_KEY=...) and name that variable here."#,
            "\n",
            r#"38_key_in_key_fields.yaml:15:19: targets[1].api_key_file: target "key-in-file": api_key_file cannot be read (no such file); its value is not shown because, without a "/" or ".", it may be the key itself. Give the path of a file that holds the key (e.g. ./vllm.key)."#
        ),
    ),
    (
        "39_integer_over_64_bit_signed.yaml",
        r#"39_integer_over_64_bit_signed.yaml:4:17: scenarios[0].max_tokens: scenario "chat_short": max_tokens 9223372036854775808 is out of range; set it between 1 and 4294967295."#,
    ),
    (
        "40_bad_replicas.yaml",
        concat!(
            r#"40_bad_replicas.yaml:12:16: targets[0].replicas.file_sd: target "both": replicas has both dns and file_sd; keep exactly one source of replicas."#,
            "\n",
            r#"40_bad_replicas.yaml:18:7: targets[1].replicas: target "none": replicas names no source; add dns: {} (every address of base_url's host is a replica), dns_srv: {name: _http._tcp.NAME} (every SRV record), file_sd: PATH (a Prometheus file_sd file) or http_sd: URL (a Prometheus http_sd endpoint)."#,
            "\n",
            r#"40_bad_replicas.yaml:18:16: targets[1].replicas.refresh: target "none": replicas.refresh "10ms" is shorter than the minimum of 100ms; set a value from 100ms to 1day."#,
            "\n",
            r#"40_bad_replicas.yaml:19:12: targets[1].replicas.max: target "none": replicas.max 0 is out of range; set it from 1 to 1024 (each replica is probed with every scenario of the target, and adds its series)."#,
            "\n",
            r#"40_bad_replicas.yaml:25:13: targets[2].replicas.dns: target "address": replicas.dns discovers the addresses of base_url's host name, but base_url names an IP address; put the name of the replicas (e.g. a Kubernetes headless Service) in base_url, or list the addresses in a file_sd file."#,
            "\n",
            r#"40_bad_replicas.yaml:25:25: targets[2].replicas.dns.nameserver: target "address": replicas.dns.nameserver "dns.example" is not an IP address with an optional port; write it like 10.96.0.10, 127.0.0.1:5353 or [::1]:53."#,
            "\n",
            r#"40_bad_replicas.yaml:26:14: targets[2].replicas.grace: target "address": replicas.grace "forever" is not a duration; use a duration like 15s or 300ms."#,
            "\n",
            r#"40_bad_replicas.yaml:27:12: targets[2].replicas.max: target "address": replicas.max 100000 is out of range; set it from 1 to 1024 (each replica is probed with every scenario of the target, and adds its series)."#,
            "\n",
            r#"40_bad_replicas.yaml:33:23: targets[3].replicas.dns_srv.name: target "srv": replicas.dns_srv.name must be the DNS name of the SRV records, e.g. name: _http._tcp.vllm.llm.svc.cluster.local (a Kubernetes Service's named port)."#,
            "\n",
            r#"40_bad_replicas.yaml:33:62: targets[3].replicas.dns_srv.nameserver: target "srv": replicas.dns_srv.nameserver "10.0.0.1:0" is not an IP address with an optional port; write it like 10.96.0.10, 127.0.0.1:5353 or [::1]:53."#,
            "\n",
            r#"40_bad_replicas.yaml:40:17: targets[4].replicas.dns_srv: target "three": replicas has dns, dns_srv and file_sd; keep exactly one source of replicas."#,
            "\n",
            r#"40_bad_replicas.yaml:47:16: targets[5].replicas.http_sd: target "badsd": replicas.http_sd "ftp://***@sd.example/targets" is not an http or https URL with a host; write the URL of a Prometheus http_sd endpoint, e.g. http_sd: http://sd.internal:8080/targets."#
        ),
    ),
];

#[test]
fn every_error_fixture_gives_its_exact_message() {
    let mut failures = Vec::new();
    for (file, expected) in ERROR_CASES {
        let got = fixture_error(file);
        if got != *expected {
            failures.push(format!("{file}\n  expected: {expected}\n  got:      {got}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Across every fixture: no message quotes a value the fixtures mark as secret (the word
/// SECRET in a URL's user-info or query, a header value, a mistyped header), and "this line"
/// is said only by a problem that has a line.
#[test]
fn no_fixture_message_echoes_a_secret_or_points_at_no_line() {
    for (file, _) in ERROR_CASES {
        let text = std::fs::read_to_string(format!("{FIXTURES}/{file}")).unwrap();
        let err = config::parse(&text, file, &env).unwrap_err();
        for p in &err.problems {
            assert!(!p.to_string().contains("SECRET"), "{file}: {p}");
            if p.message.contains("this line") {
                assert!(p.line.is_some(), "{file}: {p}");
            }
        }
    }
}

#[test]
fn every_fixture_file_is_in_the_table() {
    let mut files: Vec<String> = std::fs::read_dir(FIXTURES)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    files.sort();
    let table: Vec<&str> = ERROR_CASES.iter().map(|(f, _)| *f).collect();
    assert_eq!(files, table);
}

#[test]
fn problems_carry_structured_locations() {
    let err = parse("scenarios: []\ntargets: []\n").unwrap_err();
    let p = &err.problems[0];
    assert_eq!(
        (p.source.as_str(), p.line, p.column, p.path.as_str()),
        ("test.yaml", Some(1), Some(12), "scenarios")
    );
    assert_eq!(err.problems.len(), 2);
}

#[test]
fn empty_file_reports_both_missing_lists() {
    let err = parse("").unwrap_err();
    let paths: Vec<&str> = err.problems.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(paths, ["scenarios", "targets"]);
}

#[test]
fn load_reads_a_file_and_reports_a_missing_one() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("key"), format!("\n  {SECRET}\n")).unwrap();
    let path = dir.path().join("probes.yaml");
    std::fs::write(
        &path,
        format!("{SCENARIOS}targets:\n  - {{name: t, protocol: openai-chat, base_url: 'http://h/v1', model: m, api_key_file: key}}\n"),
    )
    .unwrap();
    let cfg = config::load(&path).unwrap();
    assert_eq!(cfg.source, path.display().to_string());
    let t = &cfg.targets[0];
    // Relative to the config file's directory, trimmed.
    assert_eq!(t.api_key.as_ref().unwrap().expose(), SECRET);
    assert_eq!(
        t.api_key_source.as_deref(),
        Some(format!("file {}", dir.path().join("key").display()).as_str())
    );

    let missing = dir.path().join("nope.yaml");
    let err = config::load(&missing).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!(
            "{}: cannot read the config file: ",
            missing.display()
        )),
        "{err}"
    );
    assert!(
        err.ends_with("; check the path and its permissions."),
        "{err}"
    );
}

// ---- defaults and overrides ---------------------------------------------------

const SCENARIOS: &str = "\
scenarios:
  - {name: a, messages: [{role: user, content: hi}], max_tokens: 8}
  - {name: b, messages: [{role: user, content: hi}], max_tokens: 8, temperature: 0.7, prefix_cache: warm, extra_body: {top_p: 0.5, seed: 1}}
";

/// A file with `defaults` (may be empty) and one target with extra lines.
fn one_target(defaults: &str, target_extra: &str) -> Arc<Target> {
    let text = format!(
        "{defaults}\n{SCENARIOS}targets:\n  - name: t\n    protocol: openai-chat\n    base_url: http://127.0.0.1:8000/v1\n    model: m\n{target_extra}"
    );
    let cfg = parse(&text).unwrap_or_else(|e| panic!("{e}\n--- file:\n{text}"));
    cfg.targets[0].clone()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn interval_timeout_defaults_and_overrides() {
    // (defaults, target lines, expected interval, expected timeout)
    let cases: &[(&str, &str, Duration, Duration)] = &[
        ("", "", ms(15_000), ms(10_000)),
        ("defaults: {interval: 1m}", "", ms(60_000), ms(10_000)),
        (
            "defaults: {interval: 1m, timeout: 45s}",
            "",
            ms(60_000),
            ms(45_000),
        ),
        (
            "defaults: {interval: 1m}",
            "    interval: 30s\n",
            ms(30_000),
            ms(10_000),
        ),
        (
            "defaults: {timeout: 2s}",
            "    interval: 5s\n",
            ms(5_000),
            ms(2_000),
        ),
        // No timeout anywhere and a short interval: the default timeout is lowered.
        ("", "    interval: 4s\n", ms(4_000), ms(4_000)),
        (
            "defaults: {interval: 20s, timeout: 5s}",
            "    timeout: 20s\n",
            ms(20_000),
            ms(20_000),
        ),
        (
            "",
            "    interval: 1m30s\n    timeout: 500ms\n",
            ms(90_000),
            ms(500),
        ),
    ];
    for (defaults, extra, interval, timeout) in cases {
        let t = one_target(defaults, extra);
        assert_eq!(
            (t.interval, t.timeout),
            (*interval, *timeout),
            "{defaults} / {extra}"
        );
    }
}

#[test]
fn temperature_slo_headers_defaults_and_overrides() {
    struct Case {
        defaults: &'static str,
        target: &'static str,
        temperature: Option<f64>,
        slo: Slo,
        headers: &'static [(&'static str, &'static str)],
    }
    let cases = [
        Case { defaults: "", target: "", temperature: None, slo: Slo::default(), headers: &[] },
        Case {
            defaults: "defaults: {temperature: 0.5, slo: {ttft_p95: 1s}, headers: {X-Team: sre, X-Env: prod}}",
            target: "",
            temperature: Some(0.5),
            slo: Slo { ttft_p95: ms(1000), output_tokens_per_second_min: 30.0, rate_limit_headroom_min: 0.1, prefill_tokens_per_second_min: None },
            headers: &[("X-Team", "sre"), ("X-Env", "prod")],
        },
        Case {
            defaults: "defaults: {temperature: 0.5, slo: {ttft_p95: 1s}, headers: {X-Team: sre, X-Env: prod}}",
            target: "    temperature: 0\n    slo: {output_tokens_per_second_min: 12.5}\n    headers: {x-team: ml, X-Route: a}\n",
            temperature: Some(0.0),
            slo: Slo { ttft_p95: ms(1000), output_tokens_per_second_min: 12.5, rate_limit_headroom_min: 0.1, prefill_tokens_per_second_min: None },
            // Target wins, case-insensitively, and keeps the defaults' order.
            headers: &[("x-team", "ml"), ("X-Env", "prod"), ("X-Route", "a")],
        },
        Case {
            defaults: "",
            target: "    slo: {ttft_p95: 250ms, output_tokens_per_second_min: 50}\n",
            temperature: None,
            slo: Slo { ttft_p95: ms(250), output_tokens_per_second_min: 50.0, rate_limit_headroom_min: 0.1, prefill_tokens_per_second_min: None },
            headers: &[],
        },
    ];
    for c in cases {
        let t = one_target(c.defaults, c.target);
        assert_eq!(
            t.temperature, c.temperature,
            "{} / {}",
            c.defaults, c.target
        );
        assert_eq!(t.slo, c.slo, "{} / {}", c.defaults, c.target);
        let headers: Vec<(&str, &str)> = t
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(headers, c.headers, "{} / {}", c.defaults, c.target);
    }
}

#[test]
fn scenario_fields_and_target_merges() {
    let t = one_target(
        "defaults: {temperature: 0.1}",
        "    extra_body: {top_p: 1, stop: [x]}\n    scenarios: [b, a]\n",
    );
    let names: Vec<&str> = t.scenarios.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["b", "a"], "resolved in the order listed");
    let (b, a) = (&t.scenarios[0], &t.scenarios[1]);
    assert_eq!(a.prefix_cache, PrefixCache::Cold, "cold is the default");
    assert_eq!(b.prefix_cache, PrefixCache::Warm);
    assert_eq!(a.max_tokens, 8);
    assert_eq!(t.temperature_for(a), Some(0.1), "target's (from defaults)");
    assert_eq!(t.temperature_for(b), Some(0.7), "scenario wins");
    assert_eq!(
        serde_json::Value::Object(t.extra_body_for(b)),
        serde_json::json!({"top_p": 0.5, "stop": ["x"], "seed": 1}),
        "scenario wins over target"
    );
    assert_eq!(t.protocol, Protocol::OpenAiChat);
    assert_eq!(t.protocol.as_str(), "openai-chat");
    // Without a list, every scenario in file order.
    let all = one_target("", "");
    let names: Vec<&str> = all.scenarios.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert!(all.api_key.is_none() && all.api_key_source.is_none());
}

#[test]
fn targets_share_scenario_arcs() {
    let text = format!(
        "{SCENARIOS}targets:\n  - {{name: x, protocol: openai-chat, base_url: 'http://h/v1', model: m}}\n  - {{name: y, protocol: openai-chat, base_url: 'https://h/v1', model: m, scenarios: [a]}}\n"
    );
    let cfg = parse(&text).unwrap();
    assert!(Arc::ptr_eq(&cfg.scenarios[0], &cfg.targets[0].scenarios[0]));
    assert!(Arc::ptr_eq(&cfg.scenarios[0], &cfg.targets[1].scenarios[0]));
}

// ---- the shipped example --------------------------------------------------------

#[test]
fn example_config_loads_cleanly() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/probes.example.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    // Copied to probes.yaml as is, it loads with no environment variable set: no target needs
    // a key the user may not have (the keyed examples are commented out).
    let cfg = config::parse(&text, "probes.example.yaml", &|_| None)
        .unwrap_or_else(|e| panic!("probes.example.yaml must load without any key set:\n{e}"));
    let names: Vec<&str> = cfg.scenarios.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "chat_short",
            "code_completion",
            "summarize_long",
            "long_generation"
        ]
    );
    assert!(cfg.targets.len() >= 2);
    for t in &cfg.targets {
        assert!(!t.scenarios.is_empty(), "{} has no scenarios", t.name);
        assert!(t.timeout <= t.interval);
    }
    let by_name = |n: &str| cfg.scenarios.iter().find(|s| s.name == n).unwrap();
    assert_eq!(by_name("chat_short").max_tokens, 64);
    assert_eq!(by_name("long_generation").max_tokens, 512);
    let long_words: usize = by_name("summarize_long")
        .messages
        .iter()
        .map(|m| m.content.split_whitespace().count())
        .sum();
    assert!(
        (1_300..=2_000).contains(&long_words),
        "summarize_long has {long_words} words"
    );
    let smol = cfg
        .targets
        .iter()
        .find(|t| t.model == "smollm2-135m-instruct")
        .unwrap();
    assert_eq!(smol.base_url.as_str(), "http://127.0.0.1:18080/v1");
    assert!(cfg.targets.iter().all(|t| t.api_key.is_none()));
    // The key option is still shown, commented out, and loads once uncommented and set.
    let keyed = text.replacen(
        "    # api_key_env: LOCAL_VLLM_KEY",
        "    api_key_env: LOCAL_VLLM_KEY",
        1,
    );
    assert_ne!(keyed, text, "the commented api_key_env example is gone");
    let cfg = config::parse(&keyed, "probes.example.yaml", &env).unwrap_or_else(|e| panic!("{e}"));
    let vllm = &cfg.targets[0];
    assert_eq!(vllm.api_key.as_ref().map(|k| k.expose()), Some(SECRET));
    assert_eq!(vllm.api_key_source.as_deref(), Some("env LOCAL_VLLM_KEY"));
}

// ---- secrets --------------------------------------------------------------------

#[test]
fn secret_never_appears_in_debug_summary_or_errors() {
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("key");
    std::fs::write(&key_file, SECRET).unwrap();
    let text = format!(
        "{SCENARIOS}targets:
  - name: from-env
    protocol: openai-chat
    base_url: http://127.0.0.1:8000/v1
    model: m
    api_key_env: LOCAL_VLLM_KEY
    headers: {{X-Api-Key: {SECRET}, X-Team: sre}}
  - name: from-file
    protocol: openai-chat
    base_url: http://127.0.0.1:8000/v1
    model: m
    api_key_file: {}
",
        key_file.display()
    );
    let cfg = parse(&text).unwrap();
    assert_eq!(cfg.targets[0].api_key.as_ref().unwrap().expose(), SECRET);
    assert_eq!(cfg.targets[1].api_key.as_ref().unwrap().expose(), SECRET);
    let mut outputs = vec![format!("{cfg:?}"), format!("{cfg:#?}")];
    for t in &cfg.targets {
        outputs.push(format!("{t:?}"));
        outputs.push(t.summary());
        let key = t.api_key.as_ref().unwrap();
        outputs.push(format!("{key} {key:?}"));
    }
    assert!(outputs[2].contains("\"X-Team\", \"sre\""), "{}", outputs[2]);
    assert_eq!(
        cfg.targets[0].summary(),
        "from-env: openai-chat http://127.0.0.1:8000/v1 model=m interval=15s timeout=10s scenarios=[a, b] api_key=env LOCAL_VLLM_KEY"
    );

    // Errors around keys: both sources, an invalid key value, a bad header value,
    // and credentials in base_url. None may echo the secret.
    let bad = format!(
        "{SCENARIOS}targets:
  - {{name: both, protocol: openai-chat, base_url: 'http://h/v1', model: m, api_key_env: LOCAL_VLLM_KEY, api_key_file: {kf}}}
  - {{name: ctl, protocol: openai-chat, base_url: 'http://h/v1', model: m, api_key_env: NEWLINE_KEY}}
  - {{name: hdr, protocol: openai-chat, base_url: 'http://h/v1', model: m, headers: {{Authorization: \"Bearer {SECRET}\\n\"}}}}
  - {{name: url, protocol: openai-chat, base_url: 'https://u:{SECRET}@h/v1', model: m}}
  - {{name: auth, protocol: openai-chat, base_url: 'http://h/v1', model: m, api_key_env: LOCAL_VLLM_KEY, headers: {{Authorization: x}}}}
",
        kf = key_file.display()
    );
    let env_with_newline = |n: &str| match n {
        "NEWLINE_KEY" => Some(format!("{SECRET}\nx")),
        other => env(other),
    };
    let err = config::parse(&bad, "bad.yaml", &env_with_newline).unwrap_err();
    assert_eq!(err.problems.len(), 5, "{err}");
    outputs.push(err.to_string());
    outputs.push(format!("{err:?}"));

    for out in &outputs {
        assert!(!out.contains(SECRET), "secret leaked in: {out}");
        assert!(!out.contains("UNIQUE-9f3b"), "secret leaked in: {out}");
    }
    assert!(outputs.iter().any(|o| o.contains("<redacted>")));
}

/// An http_sd URL may carry a user name, a password and a token in its query: every message
/// shows it without them, and so must a target's (and the config's) `Debug`.
#[test]
fn an_http_sd_urls_credentials_never_appear_in_debug() {
    let text = format!(
        "{SCENARIOS}targets:\n  - name: pool\n    protocol: openai-chat\n    base_url: http://pool.test:8000/v1\n    model: m\n    replicas: {{http_sd: 'http://sd-user:{SECRET}@sd.test:8080/targets?token={SECRET}'}}\n"
    );
    let cfg = parse(&text).unwrap_or_else(|e| panic!("{e}"));
    let t = &cfg.targets[0];
    assert!(t.replicas.is_some());
    for out in [
        format!("{cfg:?}"),
        format!("{cfg:#?}"),
        format!("{t:?}"),
        t.summary(),
    ] {
        assert!(!out.contains("UNIQUE-9f3b"), "secret leaked in: {out}");
        assert!(!out.contains("sd-user"), "user name leaked in: {out}");
    }
}

/// YAML merge keys apply: a target built from an anchored one gets its keys (its own win),
/// and a problem in a merged target is placed in the file as written.
#[test]
fn merge_keys_are_applied_and_problems_in_merged_targets_are_located() {
    let yaml = format!(
        "{SCENARIOS}targets:\n  - &base\n    name: a\n    protocol: openai-chat\n    base_url: http://h/v1\n    model: m\n    interval: 5s\n  - <<: *base\n    name: b\n    interval: 7s\n  - {{<<: [*base], name: c}}\n"
    );
    let cfg = parse(&yaml).unwrap_or_else(|e| panic!("{e}"));
    let got: Vec<(&str, &str, Duration)> = cfg
        .targets
        .iter()
        .map(|t| (t.name.as_str(), t.model.as_str(), t.interval))
        .collect();
    assert_eq!(
        got,
        [
            ("a", "m", ms(5000)),
            ("b", "m", ms(7000)),
            ("c", "m", ms(5000))
        ]
    );
    // A wrong type and a semantic problem, each in a target that merges: lines of this file.
    let bad_type = yaml.replace(
        "    interval: 7s\n",
        "    interval: 7s\n    temperature: [1]\n",
    );
    let err = parse(&bad_type).unwrap_err();
    assert_eq!(err.problems.len(), 1, "{err}");
    assert_eq!(
        (err.problems[0].line, err.problems[0].path.as_str()),
        (Some(14), "targets[1].temperature"),
        "{err}"
    );
    let bad_value = yaml.replace("interval: 7s", "interval: 0s");
    let err = parse(&bad_value).unwrap_err();
    assert_eq!(
        (err.problems[0].line, err.problems[0].path.as_str()),
        (Some(13), "targets[1].interval"),
        "{err}"
    );
}

/// `secret_headers` (defaults' and the target's) adds to the built-in list; the values of every
/// secret header are redacted in `Debug`, the others are shown.
#[test]
fn secret_headers_mark_any_header_secret() {
    let t = one_target(
        "defaults: {headers: {X-Shared: d-value}, secret_headers: [X-Shared]}",
        "    headers: {X-Tenant: t-value, X-Team: sre, Cookie: c-value, X-Goog-Api-Key: g-value}\n    secret_headers: [x-tenant]\n",
    );
    assert_eq!(t.secret_headers, ["x-shared", "x-tenant"]);
    for name in [
        "X-Shared",
        "x-tenant",
        "cookie",
        "X-Goog-Api-Key",
        "Authorization",
    ] {
        assert!(t.is_secret_header(name), "{name}");
    }
    assert!(!t.is_secret_header("X-Team"));
    let debug = format!("{t:?}");
    for value in ["d-value", "t-value", "c-value", "g-value"] {
        assert!(!debug.contains(value), "{value} in {debug}");
    }
    assert!(debug.contains("\"X-Team\", \"sre\""), "{debug}");
}

#[test]
fn an_invalid_interval_is_reported_once_not_compared_as_its_default() {
    let yaml = "scenarios:\n  - name: a\n    messages: [{role: user, content: hi}]\n    max_tokens: 8\ntargets:\n  - name: t\n    protocol: openai-chat\n    base_url: http://h/v1\n    model: m\n    interval: 0s\n    timeout: 25s\n";
    let err = llm_probe::config::parse(yaml, "t.yaml", &|_| None).unwrap_err();
    assert_eq!(err.problems.len(), 1, "{err}");
    assert!(
        err.problems[0].message.contains("interval is zero"),
        "{err}"
    );
}

/// Unknown keys do not hide the rest: every unknown key (in `defaults`, in two targets) and
/// every other problem come out of one check, each at the line of its key, and a misspelt key
/// is not also reported as the key it stands for being missing.
#[test]
fn every_unknown_key_and_every_other_problem_are_reported_in_one_run() {
    let yaml = "defaults:\n  intervall: 15s\nscenarios:\n  - name: s\n    messages: [{role: user, content: hi}]\n    max_tokens: 8\ntargets:\n  - name: a\n    protocol: openai-chat\n    baseurl: http://h/v1\n    model: m\n  - name: b\n    protocol: openai\n    base_url: http://h/v1\n    modle: m\n    interval: fast\n";
    let err = parse(yaml).unwrap_err();
    let got: Vec<(Option<usize>, Option<usize>, &str)> = err
        .problems
        .iter()
        .map(|p| (p.line, p.column, p.path.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (Some(2), Some(3), "defaults.intervall"),
            (Some(10), Some(5), "targets[0].baseurl"),
            (Some(13), Some(15), "targets[1].protocol"),
            (Some(15), Some(5), "targets[1].modle"),
            (Some(16), Some(15), "targets[1].interval"),
        ],
        "{err}"
    );
    assert!(
        err.problems[1]
            .message
            .contains("did you mean \"base_url\""),
        "{err}"
    );
    assert!(
        err.problems[3].message.contains("did you mean \"model\""),
        "{err}"
    );
    assert!(!err.to_string().contains("is required"), "{err}");
}

/// A mapping of `n` entries drawn from `keys` (allowed keys, near misses and junk) with scalar
/// values of every type, as YAML text indented by `indent`.
fn mapping_text(keys: &[&str], picks: &[(usize, usize)], indent: &str) -> String {
    const VALUES: [&str; 7] = ["15s", "7", "-1", "true", "null", "\"x y\"", "[a, 1]"];
    let mut seen = std::collections::HashSet::new();
    let mut out = String::new();
    for (k, v) in picks {
        let key = keys[k % keys.len()];
        // Duplicate keys are a YAML error of their own; keep each key once.
        if seen.insert(key) {
            out.push_str(&format!("{indent}{key}: {}\n", VALUES[v % VALUES.len()]));
        }
    }
    out
}

proptest::proptest! {
    // About one case in six has no wrong-typed value and gets the full check.
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1024))]
    /// However many unknown keys a file has, and wherever, the check ends (each unknown key is
    /// taken out once), never panics, gives each unknown key its line, and, unless a value of
    /// the wrong type stops it, reports every one of them.
    #[test]
    fn any_mix_of_known_and_unknown_keys_is_reported_without_panic(
        top in proptest::collection::vec((0usize..20, 0usize..7), 0..6),
        target in proptest::collection::vec((0usize..20, 0usize..7), 0..12),
        defaults in proptest::collection::vec((0usize..20, 0usize..7), 0..6),
    ) {
        let target_keys = ["version_path", "protocol", "base_url", "model", "interval", "timeout",
            "intervall", "baseurl", "modle", "timout", "foo", "tls", "slo", "connection",
            "headers", "bar_baz", "api_key_env", "temperature", "x", "protocl"];
        let default_keys = ["interval", "timeout", "temperature", "intervall", "junk", "slo",
            "headers", "tmeout", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"];
        let top_keys = ["extra", "defualts", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8",
            "x9", "y1", "y2", "y3", "y4", "y5", "y6", "y7", "y8", "y9"];
        let yaml = format!(
            "{}defaults:\n{}scenarios:\n  - name: s\n    messages: [{{role: user, content: hi}}]\n    max_tokens: 8\ntargets:\n  - name: t\n{}",
            mapping_text(&top_keys, &top, ""),
            mapping_text(&default_keys, &defaults, "  "),
            mapping_text(&target_keys, &target, "    "),
        );
        if let Err(err) = parse(&yaml) {
            for p in &err.problems {
                proptest::prop_assert!(!p.message.is_empty(), "{err}");
            }
            for p in err.problems.iter().filter(|p| p.message.contains("unknown key")) {
                proptest::prop_assert!(p.line.is_some(), "{} has no line:\n{err}\n{yaml}", p.path);
            }
            // A value of the wrong type stops the check there; without one, every unknown key
            // of the file is reported.
            if !err.problems.iter().any(|p| p.message.contains(" must be ")) {
                let allowed_target = ["version_path", "protocol", "base_url", "model", "interval",
                    "timeout", "tls", "slo", "connection", "headers", "api_key_env", "temperature"];
                let allowed_defaults = ["interval", "timeout", "temperature", "slo", "headers"];
                let mut expected: Vec<String> = Vec::new();
                for (k, _) in &top {
                    expected.push(top_keys[k % top_keys.len()].to_string());
                }
                for (k, _) in &defaults {
                    let key = default_keys[k % default_keys.len()];
                    if !allowed_defaults.contains(&key) {
                        expected.push(format!("defaults.{key}"));
                    }
                }
                for (k, _) in &target {
                    let key = target_keys[k % target_keys.len()];
                    if !allowed_target.contains(&key) {
                        expected.push(format!("targets[0].{key}"));
                    }
                }
                for path in expected {
                    proptest::prop_assert!(
                        err.problems.iter().any(|p| p.path == path),
                        "{path} not reported:\n{err}\n{yaml}"
                    );
                }
            }
        }
    }
}

/// A target or scenario named `.` or `..` becomes a path segment of the status pages' links
/// (`/targets/..`, `/badge/../…`), which browsers resolve away (`/targets/..` is the overview):
/// refused, with a rename suggested. Names merely containing dots stay valid.
#[test]
fn dot_and_dot_dot_are_not_names() {
    for name in [".", ".."] {
        let text = format!(
            "scenarios:\n  - name: \"{name}\"\n    messages: [{{role: user, content: hi}}]\n    max_tokens: 4\ntargets:\n  - name: \"{name}\"\n    protocol: openai-chat\n    base_url: http://127.0.0.1:1/v1\n    model: m\n"
        );
        let err = parse(&text).unwrap_err().to_string();
        for what in ["targets[0].name", "scenarios[0].name"] {
            assert!(err.contains(what), "{name:?}: {what} not refused:\n{err}");
        }
        assert!(err.contains("link"), "{err}");
    }
    let ok = "scenarios:\n  - name: a..b\n    messages: [{role: user, content: hi}]\n    max_tokens: 4\ntargets:\n  - name: .t.\n    protocol: openai-chat\n    base_url: http://127.0.0.1:1/v1\n    model: m\n";
    parse(ok).unwrap();
}

#[test]
fn replicas_defaults_sources_and_the_summary_line() {
    use llm_probe::config::replicas::{ReplicaSource, DEFAULT_GRACE, DEFAULT_MAX, DEFAULT_REFRESH};
    let plain = one_target("", "");
    assert_eq!(plain.replicas, None);
    assert!(!plain.summary().contains("replicas"), "{}", plain.summary());

    let text = format!(
        "{SCENARIOS}targets:\n  - name: pool\n    protocol: openai-chat\n    base_url: http://vllm-headless.llm.svc:8000/v1\n    model: m\n    replicas:\n      dns: {{}}\n"
    );
    let t = parse(&text).unwrap().targets[0].clone();
    let r = t.replicas.as_ref().expect("replicas");
    assert_eq!(r.source, ReplicaSource::Dns { nameserver: None });
    assert_eq!(
        (r.refresh, r.max, r.grace),
        (DEFAULT_REFRESH, DEFAULT_MAX, DEFAULT_GRACE)
    );
    assert!(
        t.summary()
            .ends_with(" replicas=dns refresh=30s max=64 grace=5m"),
        "{}",
        t.summary()
    );

    let text = format!(
        "{SCENARIOS}targets:\n  - name: pool\n    protocol: openai-chat\n    base_url: http://vllm:8000/v1\n    model: m\n    replicas:\n      dns: {{nameserver: 127.0.0.1:5353}}\n      refresh: 5s\n      max: 8\n      grace: 1m\n"
    );
    let t = parse(&text).unwrap().targets[0].clone();
    assert!(
        t.summary()
            .ends_with(" replicas=dns nameserver=127.0.0.1:5353 refresh=5s max=8 grace=1m"),
        "{}",
        t.summary()
    );

    // A relative file_sd path is relative to the probes file.
    let text = format!(
        "{SCENARIOS}targets:\n  - name: pool\n    protocol: openai-chat\n    base_url: http://vllm:8000/v1\n    model: m\n    replicas:\n      file_sd: sd/vllm.json\n"
    );
    let cfg = config::parse(&text, "/etc/llm-probe/probes.yaml", &env).unwrap();
    let r = cfg.targets[0].replicas.as_ref().unwrap();
    assert_eq!(
        r.source,
        ReplicaSource::FileSd("/etc/llm-probe/sd/vllm.json".into())
    );
    assert!(cfg.targets[0]
        .summary()
        .contains(" replicas=file_sd:/etc/llm-probe/sd/vllm.json refresh=30s"));

    // SRV: the name without the root's dot, in lower case; the name server with its port.
    let text = format!(
        "{SCENARIOS}targets:\n  - name: pool\n    protocol: openai-chat\n    base_url: http://vllm:8000/v1\n    model: m\n    replicas:\n      dns_srv: {{name: _HTTP._tcp.vllm.llm.svc.cluster.local., nameserver: 127.0.0.1:5353}}\n"
    );
    let cfg = config::parse(&text, "/etc/llm-probe/probes.yaml", &env).unwrap();
    let r = cfg.targets[0].replicas.as_ref().unwrap();
    assert_eq!(
        r.source,
        ReplicaSource::DnsSrv {
            name: "_http._tcp.vllm.llm.svc.cluster.local".into(),
            nameserver: Some("127.0.0.1:5353".parse().unwrap()),
        }
    );
    assert!(
        cfg.targets[0].summary().contains(
            " replicas=dns_srv:_http._tcp.vllm.llm.svc.cluster.local nameserver=127.0.0.1:5353 refresh=30s"
        ),
        "{}",
        cfg.targets[0].summary()
    );
}
