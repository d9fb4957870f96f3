//! Generated long prompts (`prompt_tokens:`): a user message of about N tokens, built
//! deterministically from a word list in the binary, so that TTFT can be watched where prefill
//! dominates it (docs/configuration.md "Long prompts").
//!
//! The message has three parts: with the needle (the default), a sentence at the very start
//! that gives a code word; a filler of plain English words in sentences; and a question at the
//! end that asks for the code word. A server that truncates the prompt from the left (a context
//! limit applied silently) drops the code word, and the answer misses it: the answer check
//! `context_truncated` fails. Without the needle the question asks for a one-sentence summary.
//!
//! Size: one word of the list is one token in the common tokenizers (Llama 3, Qwen 2, GPT-4o,
//! SmolLM2 BPE vocabularies: each is a frequent English word, spelled in lower case after a
//! space), and a sentence's full stop is one more. The size is counted as the simulator counts
//! a prompt, by whitespace-separated words ([`words`]); a real tokenizer counts about one token
//! more per sentence, plus its chat template (SmolLM2's, on llama.cpp and vLLM: 1.12 × N at
//! 4,000 words, 1.17 × at 1,000, 1.34 × at 256, its default system prompt included).

/// The smallest `prompt_tokens`: the needle sentence and the question take about 40 words.
pub const MIN_TOKENS: u32 = 64;
/// The largest `prompt_tokens`: one million tokens (the longest context a hosted model offers),
/// about 6 MB of text per request.
pub const MAX_TOKENS: u32 = 1_000_000;

/// A scenario's generated prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LongPrompt {
    /// The requested size, tokens ([`MIN_TOKENS`] ..= [`MAX_TOKENS`]): the generated message
    /// has exactly this many whitespace-separated words.
    pub tokens: u32,
    /// The code word placed at the start (`needle: true`, the default), which the answer must
    /// repeat; `None` with `needle: false`.
    pub code_word: Option<String>,
}

impl LongPrompt {
    /// The prompt for a scenario named `scenario` of `tokens` tokens, with a needle or not. The
    /// code word depends on the scenario's name only, so the prompt is the same on every probe
    /// (the cold-cache nonce, when on, is put in front of it per probe).
    pub fn new(scenario: &str, tokens: u32, needle: bool) -> LongPrompt {
        LongPrompt {
            tokens: tokens.clamp(MIN_TOKENS, MAX_TOKENS),
            code_word: needle.then(|| code_word(scenario)),
        }
    }

    /// The user message's text: exactly [`LongPrompt::tokens`] whitespace-separated words.
    pub fn text(&self) -> String {
        let (head, question) = match &self.code_word {
            Some(code) => (
                format!(
                    "Remember this code word: {code}. A long text follows; after it you will be \
                     asked for the code word."
                ),
                "End of the text. What was the code word given at the very start? Reply with \
                 the code word only."
                    .to_string(),
            ),
            None => (
                "Read the following text.".to_string(),
                "End of the text. Summarise it in one sentence.".to_string(),
            ),
        };
        let fixed = words(&head) + words(&question);
        let filler = (self.tokens as usize).saturating_sub(fixed);
        let mut out = String::with_capacity(filler * 7 + head.len() + question.len() + 4);
        out.push_str(&head);
        out.push_str("\n\n");
        filler_into(&mut out, filler);
        out.push_str("\n\n");
        out.push_str(&question);
        out
    }
}

/// Whitespace-separated words of `text`: the size of a prompt as [`LongPrompt::tokens`] counts
/// it (and as the simulator counts a prompt's tokens).
pub fn words(text: &str) -> usize {
    text.split_whitespace().count()
}

/// The code word of a scenario: two different words and four digits (`violet-harbor-3817`),
/// from a hash of its name (FNV-1a, stable across builds and platforms).
pub fn code_word(scenario: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in scenario.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let mut rng = SplitMix(h);
    let i = rng.below(CODE_WORDS.len());
    // Two different words: the second is drawn from the others.
    let j = (i + 1 + rng.below(CODE_WORDS.len() - 1)) % CODE_WORDS.len();
    let (a, b) = (CODE_WORDS[i], CODE_WORDS[j]);
    format!("{a}-{b}-{:04}", 1000 + rng.below(9000))
}

/// Appends exactly `n` words of filler to `out`: sentences of 6 to 15 words from [`WORDS`], the
/// first capitalised, ending in a full stop, separated by one space; the same `n` always gives
/// the same text, and a longer one starts with a shorter one's sentences.
fn filler_into(out: &mut String, n: usize) {
    let mut rng = SplitMix(0x6c6c_6d2d_7072_6f62);
    let mut left = n;
    let mut first = true;
    while left > 0 {
        let len = (6 + rng.below(10)).min(left);
        for i in 0..len {
            if !first {
                out.push(' ');
            }
            first = false;
            let w = WORDS[rng.below(WORDS.len())];
            if i == 0 {
                let mut c = w.chars();
                if let Some(f) = c.next() {
                    out.extend(f.to_uppercase());
                    out.push_str(c.as_str());
                }
            } else {
                out.push_str(w);
            }
        }
        out.push('.');
        left -= len;
    }
}

/// SplitMix64: a small, fixed generator (the text must not change between builds).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform enough in `0..n` for a word list (`n` > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Words of the code word: short, common, unambiguous to spell.
const CODE_WORDS: [&str; 32] = [
    "amber", "anchor", "aspen", "basil", "birch", "cedar", "cobalt", "comet", "coral", "crimson",
    "delta", "ember", "falcon", "garnet", "harbor", "indigo", "jasper", "juniper", "lagoon",
    "maple", "meadow", "nickel", "olive", "orchid", "pepper", "quartz", "raven", "saffron",
    "tundra", "velvet", "violet", "walnut",
];

/// The filler's words: frequent English words, each one token in the common BPE vocabularies.
const WORDS: [&str; 160] = [
    "the", "a", "of", "and", "to", "in", "on", "with", "for", "from", "by", "at", "over", "under",
    "near", "after", "before", "while", "because", "then", "also", "very", "quite", "often",
    "always", "never", "slowly", "quickly", "quietly", "river", "house", "garden", "city",
    "market", "road", "bridge", "window", "table", "book", "letter", "paper", "story", "music",
    "song", "voice", "light", "water", "stone", "tree", "forest", "field", "hill", "mountain",
    "island", "ship", "train", "car", "horse", "bird", "dog", "cat", "fish", "child", "friend",
    "family", "teacher", "doctor", "farmer", "worker", "king", "village", "school", "church",
    "office", "room", "door", "wall", "floor", "fire", "wind", "rain", "snow", "sun", "moon",
    "star", "morning", "evening", "night", "day", "week", "year", "time", "place", "world",
    "country", "people", "man", "woman", "group", "team", "game", "work", "food", "bread",
    "coffee", "money", "price", "plan", "idea", "question", "answer", "reason", "problem",
    "change", "walks", "runs", "reads", "writes", "sings", "builds", "finds", "keeps", "brings",
    "holds", "opens", "closes", "watches", "follows", "carries", "moves", "turns", "waits",
    "looks", "sees", "hears", "knows", "makes", "takes", "gives", "shows", "old", "new", "small",
    "large", "long", "short", "warm", "cold", "dark", "bright", "green", "blue", "red", "white",
    "black", "quiet", "busy", "happy", "simple", "early",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_has_exactly_the_requested_words() {
        for n in [MIN_TOKENS, 65, 100, 256, 1000, 4096, 8000, 32_768] {
            for needle in [true, false] {
                let p = LongPrompt::new("long", n, needle);
                assert_eq!(words(&p.text()), n as usize, "{n} {needle}");
            }
        }
    }

    #[test]
    fn the_text_is_deterministic_and_the_needle_comes_first() {
        let p = LongPrompt::new("long-4k", 4000, true);
        assert_eq!(p.text(), LongPrompt::new("long-4k", 4000, true).text());
        let code = p.code_word.clone().unwrap();
        let text = p.text();
        let at = text.find(&code).unwrap();
        assert!(at < 40, "the code word is at byte {at}");
        assert_eq!(text.matches(&code).count(), 1);
        assert!(text.ends_with("Reply with the code word only."));
        // Another scenario has another code word; no needle, no code word.
        assert_ne!(code_word("long-4k"), code_word("long-8k"));
        assert!(!LongPrompt::new("x", 100, false)
            .text()
            .contains("code word"));
    }

    #[test]
    fn a_longer_prompt_starts_with_a_shorter_ones_sentences() {
        let mut short = String::new();
        filler_into(&mut short, 500);
        let mut long = String::new();
        filler_into(&mut long, 5000);
        let whole = short.rfind(". ").unwrap();
        assert_eq!(short[..whole], long[..whole]);
    }

    #[test]
    fn code_words_are_stable() {
        // Pinned: a change would change every long-prompt scenario's text (and its cache).
        assert_eq!(code_word("long-4k"), code_word("long-4k"));
        let c = code_word("long-4k");
        let parts: Vec<&str> = c.split('-').collect();
        assert_eq!(parts.len(), 3, "{c}");
        assert!(CODE_WORDS.contains(&parts[0]) && CODE_WORDS.contains(&parts[1]));
        for name in (0..2000).map(|i| format!("s{i}")) {
            let c = code_word(&name);
            let parts: Vec<&str> = c.split('-').collect();
            assert_ne!(parts[0], parts[1], "{c}");
        }
        assert!(parts[2].len() == 4 && parts[2].chars().all(|c| c.is_ascii_digit()));
    }
}
