//! The JSON Schemas of the reports (docs/schemas/): the checked-in files are what the report
//! types generate, and real outputs validate against them — bench runs against the simulator,
//! `compare` of two of them (and of the compare fixtures), `probe-once` on the binary.

use crate::common;

use common::bench::{bench, plan};

use std::process::Command;

use llm_probe::bench::level::Load;
use llm_probe::bench::plan::Warmup;
use llm_probe::compare::{compare, input, report, Options};
use llm_probe::simulate::Fault;
use serde_json::Value;

const SCHEMAS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/schemas");

/// Every report's schema, as the types generate it, equals its file in docs/schemas/ (rewrite
/// them with `LLM_PROBE_REGENERATE_GOLDEN=1 cargo test --test fast tools::report_schemas::`),
/// and no other schema file lies there.
#[test]
fn checked_in_schemas_are_what_the_types_generate() {
    let schemas = llm_probe::schemas::all();
    for (name, schema) in &schemas {
        let text = serde_json::to_string_pretty(schema).unwrap() + "\n";
        common::golden::assert_golden(
            &format!("{SCHEMAS}/{name}"),
            &text,
            "tools::report_schemas::",
        );
    }
    let mut files: Vec<String> = std::fs::read_dir(SCHEMAS)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let mut names: Vec<&str> = schemas.iter().map(|(n, _)| *n).collect();
    names.sort();
    assert_eq!(
        files, names,
        "docs/schemas/ holds exactly the reports' schemas"
    );
}

/// The validator of the schema `name` (a file name in docs/schemas/).
fn validator(name: &str) -> jsonschema::Validator {
    let (_, schema) = llm_probe::schemas::all()
        .into_iter()
        .find(|(n, _)| *n == name)
        .unwrap();
    jsonschema::validator_for(schema.as_value()).unwrap()
}

/// Panics with every violation unless `doc` is valid, or unless `doc` with `pointer` set to
/// `wrong` is invalid (the schema says something about that field).
fn assert_valid(v: &jsonschema::Validator, doc: &Value, what: &str, pointer: &str, wrong: Value) {
    let errors: Vec<String> = v
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{what}: {errors:#?}");
    let mut broken = doc.clone();
    *broken.pointer_mut(pointer).unwrap() = wrong;
    assert!(
        !v.is_valid(&broken),
        "{what} with {pointer} changed is still valid"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_and_compare_outputs_validate() {
    let bench_schema = validator("bench.schema.json");
    let fast = common::simulator(common::stream(20, 2, 6)).await;
    let slow = common::simulator(common::stream(30, 2, 6)).await;
    let levels = || vec![Load::Concurrency(1), Load::Concurrency(2)];
    let before = bench(&fast.base_url(), plan(levels(), 6, 1)).await;
    let after = bench(&slow.base_url(), plan(levels(), 6, 1)).await;
    // Open loop, a time warmup, and a server failing every request (the SLA broken at once).
    let mut failing = common::stream(20, 2, 6);
    failing.fault = Fault::Http500;
    let failing = common::simulator(failing).await;
    let mut open = plan(vec![Load::Rate(20.0)], 4, 0);
    open.warmup = Warmup::Time(std::time::Duration::from_millis(50));
    let broken = bench(&failing.base_url(), open).await;
    assert!(broken.records.iter().all(|r| r.result.is_err()));
    // A prompt-length sweep: its levels keyed by the generated prompt's size.
    let prompts = bench(
        &fast.base_url(),
        plan(common::bench::prompts(&[64, 128]), 2, 0),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (name, r) in [
        ("before", &before),
        ("after", &after),
        ("broken", &broken),
        ("prompts", &prompts),
    ] {
        let doc = llm_probe::bench::json::to_json(r);
        // What compare and baseline save read back is what bench wrote, field for field.
        let back: llm_probe::bench::json::BenchFile = serde_json::from_value(doc.clone()).unwrap();
        assert_eq!(back, llm_probe::bench::json::file(r), "{name}");
        assert_valid(&bench_schema, &doc, name, "/requests/0/ok", "yes".into());
        let path = dir.path().join(format!("{name}.json"));
        std::fs::write(&path, format!("{doc:#}\n")).unwrap();
        files.push(path);
    }

    let compare_schema = validator("compare.schema.json");
    let fixture = |name: &str| {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/compare")
            .join(name)
    };
    let pairs = [
        // Two real runs, their SLA capacities side by side.
        (files[0].clone(), files[1].clone()),
        (files[0].clone(), files[0].clone()),
        // Two prompt-length sweeps, compared per prompt length.
        (files[3].clone(), files[3].clone()),
        // A regression.
        (fixture("before.json"), fixture("after_ttft_plus20.json")),
        // Two endpoints: the selection section.
        (fixture("endpoint_a.json"), fixture("endpoint_b.json")),
    ];
    let options = Options {
        resamples: 2000,
        ..Options::default()
    };
    for (b, a) in pairs {
        let (b, a) = (input::read_run(&b).unwrap(), input::read_run(&a).unwrap());
        let c = compare(&b, &a, &options).unwrap();
        let doc = report::to_json(&c, &b, &a);
        let what = format!("{:?}", b.path);
        assert_valid(&compare_schema, &doc, &what, "/exit_status", (-1).into());
    }
    let c = compare(
        &input::read_run(&fixture("endpoint_a.json")).unwrap(),
        &input::read_run(&fixture("endpoint_b.json")).unwrap(),
        &options,
    )
    .unwrap();
    assert!(c.selection.is_some(), "the selection section was validated");
}

/// `probe-once --output json` on the binary: a success with the simulator's per-request metrics
/// (a TTFT split) and its engine metrics, a success whose engine metrics cannot be read, and a
/// failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_once_output_validates() {
    let mut script = common::stream(20, 2, 6);
    script.load.per_request_metrics = true;
    let sim = common::simulator(script).await;
    let closed = common::free_port();
    let targets = [
        (sim.base_url(), format!("{}/metrics", sim.root_url())),
        (sim.base_url(), format!("http://127.0.0.1:{closed}/metrics")),
        (
            format!("http://127.0.0.1:{closed}/v1"),
            format!("http://127.0.0.1:{closed}/metrics"),
        ),
    ];
    let mut yaml = format!("scenarios:\n{}targets:\n", common::scenario("s", 8));
    for (i, (url, metrics)) in targets.iter().enumerate() {
        yaml += &format!(
            "  - name: t{i}\n    protocol: openai-chat\n    base_url: {url}\n    model: m\n    timeout: 5s\n    server_metrics_url: {metrics}\n"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("probes.yaml");
    std::fs::write(&path, yaml).unwrap();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_llm-probe"))
            .args(["probe-once", "--output", "json", "--config.file"])
            .arg(&path)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    assert!(
        lines[0]["ttft_split"]["engine_queue_seconds"].is_number(),
        "{}",
        lines[0]
    );
    assert_eq!(lines[0]["server_load"]["engine"], "vllm", "{}", lines[0]);
    assert!(lines[1]["server_load"]["error"].is_object(), "{}", lines[1]);
    assert_eq!(lines[2]["success"], false, "{}", lines[2]);
    let schema = validator("probe-once.schema.json");
    for (i, line) in lines.iter().enumerate() {
        // What compare reads back is what probe-once wrote, field for field.
        let back: llm_probe::report::ProbeRecord = serde_json::from_value(line.clone()).unwrap();
        assert_eq!(&serde_json::to_value(back).unwrap(), line);
        let what = format!("probe-once line {}", i + 1);
        assert_valid(&schema, line, &what, "/success", "maybe".into());
    }
}
