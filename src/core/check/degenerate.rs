//! The built-in degeneration checks: signs of a broken model or serving stack that need no
//! configuration (`docs/answer-checks.md`). Pure functions over the answer text; each is linear
//! in the text's length.

/// Special tokens that must never reach the answer text: chat-template and end-of-sequence
/// markers of the common model families (ChatML/Qwen, Llama 2/3, Gemma, Mistral, Phi, GPT-OSS
/// harmony, DeepSeek).
pub const SPECIAL_TOKENS: &[&str] = &[
    "<|im_end|>",
    "<|im_start|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<|begin_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<end_of_turn>",
    "<start_of_turn>",
    "</s>",
    "[/INST]",
    "<|end|>",
    "<|return|>",
    "<|channel|>",
    "<｜end▁of▁sentence｜>",
];

/// The first special token in `text`, if any.
pub fn leaked_special_token(text: &str) -> Option<&'static str> {
    // Every marker has '<' or '[': skip the scan for text without them.
    if !text.bytes().any(|b| b == b'<' || b == b'[') {
        return None;
    }
    SPECIAL_TOKENS.iter().copied().find(|t| text.contains(t))
}

/// True when `text` is non-empty and has no letter, digit or other word character: only
/// punctuation, symbols and whitespace (e.g. `////`, `...`, `\n\n`).
pub fn punctuation_only(text: &str) -> bool {
    !text.is_empty() && !text.chars().any(char::is_alphanumeric)
}

/// Shortest repeated unit considered, and the number of times it must repeat back to back at
/// the end of the answer, for the word-level loop check.
const MAX_WORD_PERIOD: usize = 12;
const MIN_WORD_REPEATS: usize = 8;
/// The same for the character-level check (text without spaces: `abcabcabc…`).
const MAX_CHAR_PERIOD: usize = 24;
const MIN_CHAR_REPEATS: usize = 10;
const MIN_CHAR_LOOP: usize = 120;

/// A repetition loop at the end of the answer: the same unit of 1–12 words repeated at least
/// 8 times back to back (or of 1–24 characters, at least 10 times and over at least 120
/// characters, with a letter or digit in the unit). Returns the repeated unit's period in
/// words or characters. A model stuck in a loop runs until `max_tokens`, so the loop is at the
/// end; a list or a table with repeated words in the middle does not trip it.
pub fn repetition_loop(text: &str) -> Option<usize> {
    // A loop long enough to count is within the last 2 KiB (96 words of up to 21 bytes, or
    // 240 characters): the check reads that much whatever the answer's length.
    let text = tail_bytes(text.trim_end(), LOOP_WINDOW);
    let words: Vec<&str> = text.split_whitespace().collect();
    if let Some(p) = trailing_period(&words, MAX_WORD_PERIOD, MIN_WORD_REPEATS) {
        // A unit of punctuation only is the punctuation check's (or a divider line).
        let unit = &words[words.len() - p..];
        if unit.iter().any(|w| w.chars().any(char::is_alphanumeric)) {
            return Some(p);
        }
    }
    let chars: Vec<char> = text.chars().collect();
    if chars.len() < MIN_CHAR_LOOP {
        return None;
    }
    let p = trailing_period(&chars, MAX_CHAR_PERIOD, MIN_CHAR_REPEATS)?;
    let run = periodic_suffix(&chars, p);
    let unit = &chars[chars.len() - p..];
    (run >= MIN_CHAR_LOOP && unit.iter().any(|c| c.is_alphanumeric())).then_some(p)
}

/// Bytes at the end of the answer the loop check reads.
const LOOP_WINDOW: usize = 2048;

/// The last `max` bytes of `text` (less, to start on a character boundary).
fn tail_bytes(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// The smallest period `p ≤ max_period` whose periodic suffix holds at least `repeats` units.
fn trailing_period<T: PartialEq>(items: &[T], max_period: usize, repeats: usize) -> Option<usize> {
    (1..=max_period)
        .filter(|p| items.len() >= p * repeats)
        .find(|&p| periodic_suffix(items, p) >= p * repeats)
}

/// Length of the longest suffix of `items` in which every item equals the one `p` before it
/// (plus the first unit).
fn periodic_suffix<T: PartialEq>(items: &[T], p: usize) -> usize {
    let n = items.len();
    if n < p {
        return 0;
    }
    let mut i = n;
    while i > p && items[i - 1] == items[i - 1 - p] {
        i -= 1;
    }
    n - i + p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loops_are_found_at_the_end() {
        let looped = format!("The answer is {}", "the cat sat. ".repeat(10));
        assert_eq!(repetition_loop(&looped), Some(3));
        assert_eq!(repetition_loop(&"no ".repeat(20)), Some(1));
        assert_eq!(repetition_loop(&"abc".repeat(50)), Some(3));
    }

    #[test]
    fn ordinary_text_is_not_a_loop() {
        let prose = "Paris is the capital of France. It lies on the Seine and has about two million inhabitants in the city proper.";
        assert_eq!(repetition_loop(prose), None);
        let counted: String = (0..64).map(|i| format!(" t{i}")).collect();
        assert_eq!(repetition_loop(&counted), None);
        // A markdown divider is not a loop of words.
        assert_eq!(
            repetition_loop(&format!("Title\n{}", "=".repeat(200))),
            None
        );
        // Seven repeats are not yet a loop.
        assert_eq!(repetition_loop(&"yes no ".repeat(7)), None);
        assert_eq!(repetition_loop(""), None);
    }

    #[test]
    fn a_loop_at_the_end_of_a_long_answer_is_found_in_the_window() {
        let long = format!(
            "{}{}",
            "Some varied prose, word number x. ".repeat(2000),
            "loop again ".repeat(20)
        );
        assert_eq!(repetition_loop(&long), Some(2));
        let clean = "Some varied prose; ".repeat(10) + &"é".repeat(3000) + " end";
        assert_eq!(repetition_loop(&clean), None);
    }

    #[test]
    fn punctuation_only_needs_no_word_character() {
        assert!(punctuation_only("////"));
        assert!(punctuation_only(" \n\t... !!"));
        assert!(!punctuation_only(""));
        assert!(!punctuation_only("4"));
        assert!(!punctuation_only("é."));
    }

    #[test]
    fn special_tokens_are_named() {
        assert_eq!(leaked_special_token("Paris<|im_end|>"), Some("<|im_end|>"));
        assert_eq!(leaked_special_token("done</s>"), Some("</s>"));
        assert_eq!(leaked_special_token("a < b and [x]"), None);
    }
}
