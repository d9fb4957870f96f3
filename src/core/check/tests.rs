use std::time::Instant;

use serde_json::json;

use super::*;

fn answer(text: &str) -> Answer {
    let mut a = Answer::default();
    a.push_text(text);
    a
}

fn failed(checks: &Checks, a: &Answer, n: u64) -> Option<CheckName> {
    checks.evaluate(a, n).err().map(|f| f.check)
}

fn pattern(re: &str, ci: bool) -> Pattern {
    Pattern(
        regex::RegexBuilder::new(re)
            .case_insensitive(ci)
            .build()
            .unwrap(),
    )
}

#[test]
fn clean_answers_pass_the_defaults() {
    let c = Checks::default();
    for text in [
        "Paris",
        " t0 t1 t2 t3 t4 t5 t6 t7",
        "4",
        "{\"a\": 1}",
        "The capital of France is Paris.",
    ] {
        assert_eq!(failed(&c, &answer(text), 5), None, "{text}");
    }
}

#[test]
fn each_degeneration_fails_its_own_check() {
    let c = Checks::default();
    let looped = format!("Sure. {}", "I am here. ".repeat(12));
    assert_eq!(
        failed(&c, &answer(&looped), 40),
        Some(CheckName::RepetitionLoop)
    );
    assert_eq!(
        failed(&c, &answer("////"), 4),
        Some(CheckName::PunctuationOnly)
    );
    assert_eq!(
        failed(&c, &answer("\n \n"), 2),
        Some(CheckName::PunctuationOnly)
    );
    assert_eq!(
        failed(&c, &answer("Paris<|im_end|>"), 3),
        Some(CheckName::SpecialTokens)
    );
    let mut thought = Answer::default();
    thought.push_reasoning("Let me think about this for a while");
    assert_eq!(
        failed(&c, &thought, 9),
        Some(CheckName::EmptyAfterReasoning)
    );
}

#[test]
fn degeneration_checks_turn_off_one_by_one() {
    let off = |f: fn(&mut Degeneration)| {
        let mut d = Degeneration::default();
        f(&mut d);
        Checks {
            degeneration: Some(d),
            ..Checks::default()
        }
    };
    let looped = "no ".repeat(20);
    assert_eq!(
        failed(&off(|d| d.repetition_loop = false), &answer(&looped), 20),
        None
    );
    assert_eq!(
        failed(&off(|d| d.punctuation_only = false), &answer("...."), 1),
        None
    );
    assert_eq!(
        failed(&off(|d| d.special_tokens = false), &answer("a</s>"), 1),
        None
    );
    let mut thought = Answer::default();
    thought.push_reasoning("hmm");
    assert_eq!(
        failed(&off(|d| d.empty_after_reasoning = false), &thought, 1),
        None
    );
}

#[test]
fn contains_and_regex_with_and_without_case() {
    let c = Checks {
        contains: vec!["Paris".into()],
        ..Checks::default()
    };
    assert_eq!(failed(&c, &answer("It is Paris."), 3), None);
    assert_eq!(
        failed(&c, &answer("it is paris."), 3),
        Some(CheckName::Contains)
    );
    let ci = Checks {
        case_insensitive: true,
        ..c
    };
    assert_eq!(failed(&ci, &answer("it is PARIS."), 3), None);
    let re = Checks {
        regex: vec![pattern(r"^\s*4\s*$", false)],
        ..Checks::default()
    };
    assert_eq!(failed(&re, &answer(" 4\n"), 1), None);
    assert_eq!(failed(&re, &answer("four"), 1), Some(CheckName::Regex));
    let re_ci = Checks {
        regex: vec![pattern("yes", true)],
        ..Checks::default()
    };
    assert_eq!(failed(&re_ci, &answer("YES"), 1), None);
}

#[test]
fn json_and_json_schema() {
    let schema = Schema::compile(json!({
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    }))
    .unwrap();
    let j = Checks {
        json: true,
        ..Checks::default()
    };
    assert_eq!(failed(&j, &answer("{\"x\": [1, 2]}"), 5), None);
    assert_eq!(failed(&j, &answer("```json\n{\"x\": 1}\n```"), 5), None);
    assert_eq!(failed(&j, &answer("{\"x\": "), 5), Some(CheckName::Json));
    let s = Checks {
        json_schema: Some(schema),
        ..Checks::default()
    };
    assert_eq!(failed(&s, &answer("{\"city\": \"Paris\"}"), 5), None);
    assert_eq!(
        failed(&s, &answer("{\"town\": \"Paris\"}"), 5),
        Some(CheckName::JsonSchema)
    );
    assert_eq!(failed(&s, &answer("Paris"), 5), Some(CheckName::JsonSchema));
}

#[test]
fn output_token_bounds() {
    let c = Checks {
        min_output_tokens: Some(2),
        max_output_tokens: Some(10),
        ..Checks::default()
    };
    assert_eq!(failed(&c, &answer("a b"), 2), None);
    assert_eq!(
        failed(&c, &answer("a"), 1),
        Some(CheckName::MinOutputTokens)
    );
    assert_eq!(
        failed(&c, &answer("a"), 11),
        Some(CheckName::MaxOutputTokens)
    );
}

fn weather() -> Checks {
    let params = json!({
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": false,
    });
    Checks {
        tools: vec![Tool {
            name: "get_weather".into(),
            parameters: Some(Schema::compile(params).unwrap()),
        }],
        tool_call_required: true,
        ..Checks::default()
    }
}

fn called(name: &str, args: &str) -> Answer {
    let mut a = Answer::default();
    a.push_tool_call(0, Some(name), Some(args), Instant::now());
    a
}

#[test]
fn tool_calls_are_required_and_their_arguments_validated() {
    let c = weather();
    assert_eq!(
        failed(&c, &called("get_weather", "{\"city\":\"Paris\"}"), 8),
        None
    );
    assert_eq!(
        failed(&c, &answer("It is sunny in Paris."), 8),
        Some(CheckName::ToolCallMissing)
    );
    assert_eq!(
        failed(&c, &called("get_weather", "{\"city\":"), 8),
        Some(CheckName::ToolArguments)
    );
    assert_eq!(
        failed(&c, &called("get_weather", "{\"town\":\"Paris\"}"), 8),
        Some(CheckName::ToolArguments)
    );
    assert_eq!(
        failed(&c, &called("delete_all", "{}"), 8),
        Some(CheckName::ToolArguments)
    );
    // Text checks do not apply to a call without text.
    let with_contains = Checks {
        contains: vec!["Paris".into()],
        ..weather()
    };
    assert_eq!(
        failed(
            &with_contains,
            &called("get_weather", "{\"city\":\"Paris\"}"),
            8
        ),
        None
    );
}

#[test]
fn the_failure_is_wrong_answer_with_a_short_redacted_excerpt() {
    let c = Checks {
        contains: vec!["Paris".into()],
        ..Checks::default()
    };
    let long = format!("sk-secret {}", "x".repeat(5000));
    let f = c
        .evaluate(&answer(&long), 3)
        .unwrap_err()
        .into_failure(|t| *t = t.replace("sk-secret", "[redacted]"));
    assert_eq!(f.reason, FailureReason::WrongAnswer);
    assert!(
        f.detail.starts_with("check contains: expected \"Paris\""),
        "{}",
        f.detail
    );
    assert!(f.detail.contains("[redacted]"), "{}", f.detail);
    assert!(!f.detail.contains("sk-secret"));
    assert!(f.detail.len() < 200, "{}", f.detail);
    // Control characters are shown escaped.
    let f = c.evaluate(&answer("a\u{1b}[2Jb"), 1).unwrap_err();
    assert!(!f.detail.contains('\u{1b}'), "{}", f.detail);
}

#[test]
fn check_names_are_distinct_labels() {
    let mut names: Vec<&str> = CheckName::ALL.iter().map(|c| c.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), CheckName::ALL.len());
}

/// Tool-call arguments of 10 MB (valid JSON) are kept up to the answer cap: the failure says
/// that the probe cut them, not just that they are not JSON.
#[test]
fn arguments_cut_at_the_cap_say_so() {
    let checks = Checks {
        tools: vec![Tool {
            name: "f".into(),
            parameters: None,
        }],
        ..Checks::default()
    };
    let mut a = Answer::default();
    let args = format!("{{\"a\": \"{}\"}}", "x".repeat(10 << 20));
    a.push_tool_call(0, Some("f"), Some(&args), Instant::now());
    let f = checks.evaluate(&a, 1).unwrap_err();
    assert_eq!(f.check, CheckName::ToolArguments);
    assert!(
        f.detail.contains("kept only the first 64 KiB"),
        "{}",
        f.detail
    );
    assert!(f.detail.len() < 1000, "{}", f.detail.len());
    // The same for a text answer checked as JSON.
    let json = Checks {
        json: true,
        ..Checks::default()
    };
    let f = json.evaluate(&answer(&args), 1).unwrap_err();
    assert!(
        f.detail.contains("kept only the first 64 KiB"),
        "{}",
        f.detail
    );
    // Short broken JSON beside a cut text is just broken.
    let quiet = Checks {
        degeneration: Some(Degeneration {
            repetition_loop: false,
            punctuation_only: false,
            special_tokens: false,
            empty_after_reasoning: false,
        }),
        ..checks
    };
    let mut short = Answer::default();
    short.push_text(&"y".repeat(100 << 10));
    short.push_tool_call(0, Some("f"), Some("{"), Instant::now());
    let f = quiet.evaluate(&short, 1).unwrap_err();
    assert_eq!(f.check, CheckName::ToolArguments);
    assert!(!f.detail.contains("kept only"), "{}", f.detail);
}

#[test]
fn the_needle_check_wants_the_code_word_in_any_case_or_punctuation() {
    let c = Checks {
        code_word: Some("violet-harbor-3817".into()),
        ..Checks::default()
    };
    for yes in [
        "violet-harbor-3817",
        "The code word is Violet Harbor 3817.",
        "**VIOLET-HARBOR-3817**",
    ] {
        assert_eq!(failed(&c, &answer(yes), 5), None, "{yes}");
    }
    for no in ["violet-harbor", "3817", "I do not know the code word."] {
        assert_eq!(
            failed(&c, &answer(no), 5),
            Some(CheckName::ContextTruncated),
            "{no}"
        );
    }
    let f = c.evaluate(&answer("no idea"), 2).unwrap_err();
    assert!(f.detail.contains("\"violet-harbor-3817\""), "{}", f.detail);
    assert!(f.detail.contains("\"no idea\""), "{}", f.detail);
    // It comes first: a cut prompt explains whatever else is wrong with the answer.
    let both = Checks {
        contains: vec!["Paris".into()],
        ..c.clone()
    };
    assert_eq!(
        failed(&both, &answer("no"), 1),
        Some(CheckName::ContextTruncated)
    );
    assert!(!repeats_code_word("anything", ""));
}

#[test]
fn an_answer_can_stop_inside_the_code_word() {
    let code = "juniper-orchid-1729";
    // SmolLM2-135M with max_tokens 16: a sentence, then the word, cut.
    for yes in [
        "The code word given at the very start was \"juniper-orchid",
        "It is JUNIPER orch",
        "jun",
    ] {
        assert!(ends_inside_code_word(yes, code), "{yes}");
    }
    for no in [
        "The code word given at the very start was \"A long text follows.\"",
        "juniper-orchid-1729",
        "The code word is ju",
        "juniper-orchid-1729.",
        "",
    ] {
        assert!(!ends_inside_code_word(no, code), "{no}");
    }
    assert!(!ends_inside_code_word("anything", ""));
}
