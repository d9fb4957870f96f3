//! Config loading: one fixture per error with its exact message, defaults, the
//! example file, and secret redaction.

use llm_probe::config::{self, PrefixCache, Protocol};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/config");

fn env(name: &str) -> Option<String> {
    match name {
        "LLM_PROBE_TEST_EMPTY_KEY" => Some("  ".into()),
        "LOCAL_VLLM_KEY" => Some("sk-test-UNIQUE-9f3b".into()),
        _ => None,
    }
}

fn fixture_error(file: &str) -> String {
    let text = std::fs::read_to_string(format!("{FIXTURES}/{file}")).unwrap();
    match config::parse(&text, file, &env) {
        Ok(_) => panic!("{file} loaded without error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn dump_fixture_errors() {
    let mut names: Vec<_> = std::fs::read_dir(FIXTURES)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    for n in names {
        println!("==== {n}\n{}", fixture_error(&n));
    }
}
