use super::input::{parse_run, Identity, RunKind};
use super::*;

fn run(scenario: &str, ttfts: &[f64], fingerprint: &str) -> Run {
    let requests: Vec<String> = ttfts
        .iter()
        .map(|t| format!(r#"{{"level":0,"ok":true,"ttft_seconds":{t},"tpot_seconds":0.02}}"#))
        .collect();
    parse_run(
        std::path::Path::new("x.json"),
        &format!(
            r#"{{"schema":"llm-probe.bench/v1","metadata":{{"target":"t","model":"m",
               "scenario":"{scenario}","max_tokens":64,
               "endpoint":{{"system_fingerprint":"{fingerprint}"}}}},
               "levels":[{{"concurrency":1}},{{"concurrency":8}}],"requests":[{}]}}"#,
            requests.join(",")
        ),
    )
    .unwrap()
}

fn spread(n: usize, scale: f64) -> Vec<f64> {
    (0..n)
        .map(|i| scale * (0.15 + 0.1 * (i as f64 / n as f64)))
        .collect()
}

#[test]
fn regression_row_and_failure_row() {
    let b = run("s", &spread(100, 1.0), "a");
    let a = run("s", &spread(100, 1.3), "b");
    let c = compare(&b, &a, &Options::default()).unwrap();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert_eq!(c.levels.len(), 2);
    let ttft = &c.levels[0].rows[0];
    assert_eq!(ttft.metric, Metric::Ttft);
    assert_eq!(ttft.verdict, Some(Verdict::Regression));
    let e = ttft.evidence.unwrap();
    assert!((e.change - 0.3).abs() < 0.03, "{}", e.change);
    // TPOT identical: no change; the level without requests has no rows, failure test n/a.
    assert_eq!(c.levels[0].rows[1].verdict, Some(Verdict::NoChange));
    assert!(c.levels[1].rows.is_empty());
    assert!(c.levels[1].failures.test.is_none());
    assert!(c.has_regression());
}

#[test]
fn refusal_names_every_difference_and_force_warns() {
    let b = run("short", &spread(10, 1.0), "a");
    let mut a = run("long", &spread(10, 1.0), "b");
    a.max_tokens = Some(serde_json::json!(256));
    let e = compare(&b, &a, &Options::default()).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("scenario short vs long"), "{text}");
    assert!(text.contains("max_tokens 64 vs 256"), "{text}");
    assert!(text.contains("--force"), "{text}");
    let forced = compare(
        &b,
        &a,
        &Options {
            force: true,
            ..Options::default()
        },
    )
    .unwrap();
    assert!(forced.warnings[0].contains("--force"));
}

#[test]
fn unchanged_identity_is_warned_and_levels_matched_by_key() {
    let b = run("s", &spread(10, 1.0), "same");
    let mut a = run("s", &spread(10, 1.0), "same");
    a.levels.remove(1);
    let c = compare(&b, &a, &Options::default()).unwrap();
    assert!(c.warnings.iter().any(|w| w.contains("did not change")));
    assert_eq!(c.unmatched, vec!["concurrency 8 (BEFORE only)".to_string()]);
    // An unknown identity is not "unchanged".
    let (mut b2, mut a2) = (b.clone(), a.clone());
    b2.identity = Identity::default();
    a2.identity = Identity::default();
    assert!(compare(&b2, &a2, &Options::default())
        .unwrap()
        .warnings
        .is_empty());
    assert_eq!(b.kind, RunKind::Bench);
}

#[test]
fn selection_only_for_different_endpoints() {
    let b = run("s", &spread(50, 1.0), "a");
    let mut a = run("s", &spread(50, 1.0), "b");
    assert!(compare(&b, &a, &Options::default())
        .unwrap()
        .selection
        .is_none());
    a.model = Some("other".into());
    let s = compare(&b, &a, &Options::default())
        .unwrap()
        .selection
        .unwrap();
    assert_eq!(s.lengths.len(), selection::TYPICAL_LENGTHS.len());
    // Same TPOT: no crossover.
    assert!(s.crossover.is_none());
}

#[test]
fn prompt_sizes_within_five_percent_are_the_same() {
    let (mut b, mut a) = (run("s", &[0.2], "x"), run("s", &[0.2], "y"));
    b.prompt_tokens = Some(serde_json::json!(100));
    a.prompt_tokens = Some(serde_json::json!(104));
    assert!(compare(&b, &a, &Options::default()).is_ok());
    a.prompt_tokens = Some(serde_json::json!(200));
    let e = compare(&b, &a, &Options::default()).unwrap_err();
    assert!(e.to_string().contains("prompt tokens 100 vs 200"), "{e}");
    // Unknown on one side: nothing to check.
    a.prompt_tokens = None;
    assert!(compare(&b, &a, &Options::default()).is_ok());
}

#[test]
fn no_common_level_is_an_error_not_an_empty_success() {
    let b = run("s", &spread(10, 1.0), "a");
    let mut a = run("s", &spread(10, 1.0), "b");
    for l in &mut a.levels {
        l.key = LevelKey::Rate(2.0);
    }
    let e = compare(&b, &a, &Options::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("BEFORE has concurrency 1, concurrency 8; AFTER has rate 2/s, rate 2/s"),
        "{e}"
    );
    assert!(e.contains("same --concurrency or --rate"), "{e}");
}

#[test]
fn a_side_with_no_request_is_refused_not_judged() {
    let b = run("s", &spread(10, 1.0), "a");
    let a = run("s", &[], "b");
    let e = compare(&b, &a, &Options::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("nothing to compare: AFTER has no request"),
        "{e}"
    );
    let e = compare(&a, &a, &Options::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("BEFORE and AFTER"), "{e}");
}

#[test]
fn option_parsers() {
    assert_eq!(parse_threshold("10%"), Ok(0.1));
    assert_eq!(parse_threshold("0.05"), Ok(0.05));
    assert!(parse_threshold("-1%").is_err());
    assert!(parse_threshold("ten").unwrap_err().contains("10%"));
    assert_eq!(parse_alpha("0.01"), Ok(0.01));
    assert!(parse_alpha("0.7").is_err());
}

/// Issue 27 (minor): level summaries that contradict the file's requests, a level listed
/// twice, or a rate that is not a positive number are refused: they were trusted (and a file
/// whose summaries claimed requests it did not hold compared as "no regression").
#[test]
fn level_counts_that_contradict_the_records_are_refused() {
    let file = |levels: &str, requests: &str| {
        parse_run(
            std::path::Path::new("x.json"),
            &format!(
                r#"{{"schema":"llm-probe.bench/v1","metadata":{{"target":"t","model":"m","scenario":"s"}},
                   "levels":[{levels}],"requests":[{requests}]}}"#
            ),
        )
    };
    let ok = r#"{"level":0,"ok":true,"ttft_seconds":0.1}"#;
    let failed = r#"{"level":0,"ok":false,"reason":"timeout"}"#;
    let both = format!("{ok},{failed}");
    file(
        r#"{"concurrency":1,"requests":{"sent":2,"failed":1}}"#,
        &both,
    )
    .unwrap();
    for (levels, requests, needle) in [
        (
            r#"{"concurrency":1,"requests":{"sent":1,"failed":5}}"#,
            ok,
            "failed",
        ),
        (
            r#"{"concurrency":1,"requests":{"sent":100,"failed":0}}"#,
            "",
            "100",
        ),
        (
            r#"{"concurrency":1,"requests":{"sent":2,"failed":0}}"#,
            both.as_str(),
            "contradict",
        ),
        (r#"{"concurrency":1},{"concurrency":1}"#, ok, "twice"),
        (r#"{"rate":-2}"#, ok, "rate"),
        (r#"{"rate":0}"#, ok, "rate"),
    ] {
        let e = file(levels, requests).unwrap_err();
        assert!(e.contains(needle), "{levels} {requests}: {e}");
    }
}
