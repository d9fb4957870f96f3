//! Making text safe to show: strings a server sent (or a config file holds) are escaped before
//! they reach a terminal or a log, and URLs lose their credentials and query values before
//! they reach any message.
//!
//! - [`terminal_safe`]: control characters (C0, DEL, C1) and the Unicode bidirectional
//!   controls become visible escapes (`\x1b`, `\n`, `\u{202e}`), so a model name like
//!   `"m\x1b[2J\n  ok          TTFT 1.0 ms"` cannot clear the screen or forge a line.
//! - [`redact_url`] / [`redact_urls_in`]: `http://admin:pw@h/v1?key=k#t` becomes
//!   `http://***@h/v1?key=***#***`.

use std::borrow::Cow;
use std::fmt::Write;

/// True for characters that a terminal may act on instead of printing: C0 controls (tab,
/// newline and carriage return included), DEL, C1 controls, and the bidirectional embedding,
/// override and isolate controls (U+200E/F, U+202A–E, U+2066–9, U+061C) that reorder what is
/// shown, and the line and paragraph separators (U+2028/9) that some viewers break lines at.
pub fn is_unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
}

/// `s` with every [`is_unsafe_char`] written as an escape: `\n`, `\r`, `\t`, `\xHH` for other
/// characters below U+0100, `\u{HHHH}` above. Borrowed when there is nothing to escape.
/// Use it on every server-sent (or file-sourced) string printed to a terminal or a log.
pub fn terminal_safe(s: &str) -> Cow<'_, str> {
    escape_unsafe(s, is_unsafe_char)
}

/// A rendered HTML or SVG document (`doc`) as the status pages send it: every
/// [`is_unsafe_char`] but the line feed (which only breaks the markup's own lines and a `<pre>`'s)
/// written as a visible escape, as [`terminal_safe`] writes it (`\x1b`, `\r`, `\u{202e}`).
///
/// Every HTML and SVG answer of the exporter passes through this once, after rendering, so a
/// control character in any interpolated string (a failure detail, a model name, a chart's
/// `<title>`) reaches no page raw, whichever page or template put it there. The templates
/// themselves hold none, and the escape is plain ASCII that is inert in text, attributes and
/// markup alike.
pub fn markup_safe(doc: String) -> String {
    match escape_unsafe(&doc, |c| c != '\n' && is_unsafe_char(c)) {
        Cow::Borrowed(_) => doc,
        Cow::Owned(escaped) => escaped,
    }
}

/// `s` with every character `unsafe_char` holds written as a visible escape (see
/// [`terminal_safe`]); borrowed when there is none.
fn escape_unsafe(s: &str, unsafe_char: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(&unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            c if !unsafe_char(c) => out.push(c),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x100 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

/// `s` as literal Markdown text on one line: [`terminal_safe`] first (so a newline cannot start
/// a heading or a table row), then every character Markdown or HTML gives a meaning to
/// backslash-escaped, and `<`, `>`, `&` as entities. For names and identities from a file or a
/// server written into a Markdown report (a pull-request comment must show them, not render
/// them as links, images or HTML).
pub fn markdown_text(s: &str) -> String {
    let safe = terminal_safe(s);
    let mut out = String::with_capacity(safe.len() + 8);
    for c in safe.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '(' | ')' | '#' | '|' | '!' | '~' | '{' | '}' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// What stands in for a redacted part.
pub const REDACTED: &str = "***";

/// `url` (valid or not, with or without a scheme) without its secrets: the user-info (up to the
/// last `@`) becomes `***`, and so does every query and fragment value (`?key=***&v=***`, a value without
/// a name as a whole). Scheme, host, port and path are kept, so a message still shows which
/// URL is meant.
///
/// `http://admin:SECRET@/v1` → `http://***@/v1`; `https://h/v1?key=SECRET` →
/// `https://h/v1?key=***`; `user:pw@host/v1` → `***@host/v1`.
pub fn redact_url(url: &str) -> String {
    let authority_start = url.find("://").map_or(0, |i| i + 3);
    // User-info ends at the last '@' anywhere after the scheme: a password may hold an
    // unescaped '/', '?' or '#' (`http://u:p?w@h/v1`). A query value with an '@' in it then
    // hides more than it must, never less.
    let mut out = String::with_capacity(url.len());
    let after_user_info = match url[authority_start..].rfind('@') {
        Some(i) => {
            out.push_str(&url[..authority_start]);
            out.push_str(REDACTED);
            &url[authority_start + i..]
        }
        None => {
            out.push_str(&url[..authority_start]);
            &url[authority_start..]
        }
    };
    // Everything after the first '?' or '#' that follows is query or fragment.
    let (before, rest) = match after_user_info.find(['?', '#']) {
        Some(i) => after_user_info.split_at(i),
        None => (after_user_info, ""),
    };
    out.push_str(before);
    // Query and fragment: keep the separators and the names, hide the values.
    let mut part = String::new();
    let flush = |part: &mut String, out: &mut String| {
        if !part.is_empty() {
            match part.split_once('=') {
                Some((name, _)) => {
                    out.push_str(name);
                    out.push('=');
                    out.push_str(REDACTED);
                }
                None => out.push_str(REDACTED),
            }
            part.clear();
        }
    };
    for c in rest.chars() {
        if matches!(c, '?' | '#' | '&' | ';') {
            flush(&mut part, &mut out);
            out.push(c);
        } else {
            part.push(c);
        }
    }
    flush(&mut part, &mut out);
    out
}

/// `text` with every `scheme://…` URL in it passed through [`redact_url`]. A URL ends at
/// whitespace, a quote, a backtick or an angle bracket. For messages that may quote a URL
/// anywhere (an error that echoes a value).
pub fn redact_urls_in(text: &str) -> Cow<'_, str> {
    if !text.contains("://") {
        return Cow::Borrowed(text);
    }
    let is_end = |c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>');
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let start = rest[..i]
            .char_indices()
            .rev()
            .find(|(_, c)| is_end(*c))
            .map_or(0, |(j, c)| j + c.len_utf8());
        let end = rest[i..].find(is_end).map_or(rest.len(), |j| i + j);
        out.push_str(&rest[..start]);
        out.push_str(&redact_url(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// `text` as a config or error message may show it: URLs redacted ([`redact_urls_in`]), then
/// made [`terminal_safe`].
pub fn for_message(text: &str) -> String {
    terminal_safe(&redact_urls_in(text)).into_owned()
}

/// What stands in for a secret found in server-sent text.
pub const SECRET_MARK: &str = "[redacted]";

/// Secrets shorter than this many bytes are not searched for (they would match ordinary text).
pub const MIN_SECRET_LEN: usize = 4;

/// The shortest secret whose base64 forms are redacted: shorter ones leave too few characters
/// that only the secret decides, and those would match unrelated text.
pub const MIN_BASE64_SECRET_LEN: usize = 12;

/// Replaces in `text` every occurrence of each of `secrets` (those at least [`MIN_SECRET_LEN`]
/// bytes long) with [`SECRET_MARK`], and also the *beginning* of a secret that a cut left
/// behind: text is bounded before it is shown (an error body cut at 400 characters and marked
/// `…`, an identity label cut at 128 characters), so a server that echoes a key back can leave
/// `Bearer sk-live-12…` or a label ending in `sk-live-12`. Before every `…` and at the end of
/// `text`, the longest beginning of a secret (at least [`MIN_SECRET_LEN`] bytes) is replaced too.
///
/// A secret's surrounding whitespace is not part of it: a header value configured as
/// `" s3cr3t "` is received (and echoed) as `s3cr3t` (RFC 9110 §5.5).
///
/// A server may echo a key encoded: each secret's JSON-escaped form (`a/b"c` → `a\/b\"c` and
/// `a/b\"c`) and percent-encoded forms (`a+b/c=` → `a%2Bb%2Fc%3D`, lower-case hex too, and
/// every byte encoded: `sk-1` → `%73%6B%2D%31`) are redacted as well; so is a secret of
/// [`MIN_BASE64_SECRET_LEN`] bytes or more inside a base64 text (standard or URL-safe, at any
/// of the three offsets: the characters that only the secret's bytes decide).
pub fn redact_secrets<'a>(text: &mut String, secrets: impl IntoIterator<Item = &'a str>) {
    Redactor::new(secrets).redact(text);
}

/// Secrets to redact, with every encoded form of each ([`redact_secrets`]) worked out once:
/// build it where the secrets are known (a prober, per target) and redact many texts with it.
/// Its `Debug` shows how many forms it holds, never one of them.
#[derive(Clone, Default)]
pub struct Redactor {
    forms: Vec<String>,
    /// Per secret: each character as itself or as any JSON escape of it (`\u002d`, `\u002D`,
    /// `\/`), however a server mixes them.
    escaped: Vec<regex::Regex>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Redactor {{ {} forms }}",
            self.forms.len() + self.escaped.len()
        )
    }
}

impl Redactor {
    /// The forms of `secrets` (trimmed; those shorter than [`MIN_SECRET_LEN`] are ignored).
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a str>) -> Self {
        let mut forms: Vec<String> = Vec::new();
        let mut escaped = Vec::new();
        for secret in secrets
            .into_iter()
            .map(str::trim)
            .filter(|s| s.len() >= MIN_SECRET_LEN)
        {
            for form in encoded_forms(secret) {
                if !forms.contains(&form) {
                    forms.push(form);
                }
            }
            escaped.extend(escape_pattern(secret));
        }
        Redactor { forms, escaped }
    }

    /// `text` with every form and every beginning a cut left behind replaced, as
    /// [`redact_secrets`] describes.
    pub fn redact(&self, text: &mut String) {
        for pattern in &self.escaped {
            if let std::borrow::Cow::Owned(t) = pattern.replace_all(text, SECRET_MARK) {
                *text = t;
            }
        }
        for secret in self.forms.iter().map(String::as_str) {
            if text.contains(secret) {
                *text = text.replace(secret, SECRET_MARK);
            }
            let mut out = String::with_capacity(text.len());
            let mut rest = text.as_str();
            loop {
                let (piece, cut, after) = match rest.find('…') {
                    Some(i) => (&rest[..i], "…", &rest[i + '…'.len_utf8()..]),
                    None => (rest, "", ""),
                };
                out.push_str(&without_secret_start(piece, secret));
                out.push_str(cut);
                if cut.is_empty() {
                    break;
                }
                rest = after;
            }
            *text = out;
        }
    }
}

/// `secret` as sent and as a server may echo it: JSON-escaped (with and without `\/`) and
/// percent-encoded (upper- and lower-case hex). Longest first, so a form that contains
/// another is replaced whole.
fn encoded_forms(secret: &str) -> Vec<String> {
    use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
    const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~');
    let json = serde_json::to_string(secret).unwrap_or_default();
    let json = json.trim_matches('"').to_string();
    let percent = utf8_percent_encode(secret, COMPONENT).to_string();
    let lower = lower_hex_escapes(&percent);
    // Every character as a JSON `\uXXXX` escape (some servers escape all non-letters, some
    // everything), in both cases of hex digit.
    let escaped: String = secret
        .encode_utf16()
        .map(|u| format!("\\u{u:04x}"))
        .collect();
    // Every byte percent-encoded, unreserved characters included.
    let all_percent: String = secret.bytes().map(|b| format!("%{b:02X}")).collect();
    let mut forms = vec![
        all_percent.to_ascii_lowercase(),
        all_percent,
        secret.to_string(),
        json.replace('/', "\\/"),
        json,
        percent,
        lower,
        escaped.to_ascii_uppercase().replace("\\U", "\\u"),
        escaped,
    ];
    forms.extend(base64_forms(secret));
    forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    forms.dedup();
    forms
}

/// The base64 characters that only `secret`'s bytes decide, when it stands at offset 0, 1 or 2
/// (mod 3) of an encoded text, in the standard and the URL-safe alphabet; none for a secret
/// shorter than [`MIN_BASE64_SECRET_LEN`].
fn base64_forms(secret: &str) -> Vec<String> {
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    use base64::Engine;
    let len = secret.len();
    if len < MIN_BASE64_SECRET_LEN {
        return Vec::new();
    }
    let mut forms = Vec::new();
    for engine in [STANDARD_NO_PAD, URL_SAFE_NO_PAD] {
        for offset in 0..3 {
            let mut bytes = vec![0u8; offset];
            bytes.extend_from_slice(secret.as_bytes());
            let encoded = engine.encode(&bytes);
            // Character i holds bits 6i..6i+6: free of the bytes before the secret from
            // ⌈8·offset / 6⌉, of those after it up to ⌊8·(offset + len) / 6⌋.
            let (start, end) = ((8 * offset).div_ceil(6), 8 * (offset + len) / 6);
            forms.push(encoded[start..end].to_string());
        }
    }
    forms
}

/// A pattern matching `secret` with any of its characters written as a JSON escape instead
/// (`\uXXXX` in either case of hex digit, surrogate pairs beyond the BMP, `\/`, `\"`, `\\`),
/// as servers that escape some characters (Go's `&<>`, "all non-letters") echo it. `None` if
/// the pattern would be too large to build.
fn escape_pattern(secret: &str) -> Option<regex::Regex> {
    let mut pattern = String::new();
    for c in secret.chars() {
        let mut units = [0u16; 2];
        let escape: String = c
            .encode_utf16(&mut units)
            .iter()
            .map(|u| format!(r"\\u(?i:{u:04x})"))
            .collect();
        let mut alternatives = vec![regex::escape(&c.to_string()), escape];
        if matches!(c, '/' | '"' | '\\') {
            alternatives.push(regex::escape(&format!("\\{c}")));
        }
        pattern += &format!("(?:{})", alternatives.join("|"));
    }
    regex::RegexBuilder::new(&pattern)
        .size_limit(1 << 20)
        .build()
        .ok()
}

/// `%2F` → `%2f` for every percent escape in `s`.
fn lower_hex_escapes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let escape = rest.get(i..i + 3).unwrap_or(&rest[i..]);
        out.push_str(&escape.to_ascii_lowercase());
        rest = &rest[i + escape.len()..];
    }
    out.push_str(rest);
    out
}

/// `piece` without a trailing beginning of `secret` (at least [`MIN_SECRET_LEN`] bytes, shorter
/// than the whole secret), which is then followed by [`SECRET_MARK`]; `piece` unchanged when it
/// ends with no such beginning.
fn without_secret_start<'p>(piece: &'p str, secret: &str) -> Cow<'p, str> {
    let longest = (MIN_SECRET_LEN..secret.len())
        .rev()
        .filter(|k| secret.is_char_boundary(*k))
        .find(|k| piece.ends_with(&secret[..*k]));
    match longest {
        Some(k) => Cow::Owned(format!("{}{SECRET_MARK}", &piece[..piece.len() - k])),
        None => Cow::Borrowed(piece),
    }
}

/// An HTTP client error and its causes, joined by `: `, each cause once, without reqwest's
/// copy of the request URL (it may hold a user name, a password or a key) and with any URL a
/// cause quotes passed through [`redact_url`].
pub fn http_error(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut parts = vec![e.to_string()];
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    redact_urls_in(&parts.join(": ")).into_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn markup_safe_escapes_every_control_character_but_the_line_feed() {
        let doc = "<p>a\u{1b}[2J\r\u{7}\u{0}\t\u{202e}b</p>\n<pre>x\ny</pre>".to_string();
        assert_eq!(
            super::markup_safe(doc),
            "<p>a\\x1b[2J\\r\\x07\\x00\\t\\u{202e}b</p>\n<pre>x\ny</pre>"
        );
        assert_eq!(super::markup_safe("<p>é ok</p>".into()), "<p>é ok</p>");
    }

    #[test]
    fn markdown_text_shows_markup_instead_of_rendering_it() {
        let s = super::markdown_text("a](javascript:x) <img src=x> **b**\n# h | c `d` & \\");
        assert_eq!(
            s,
            "a\\]\\(javascript:x\\) &lt;img src=x&gt; \\*\\*b\\*\\*\\\\n\\# h \\| c \\`d\\` &amp; \\\\"
        );
        assert_eq!(super::markdown_text("gpt-4o.mini/v1"), "gpt-4o.mini/v1");
    }

    use super::*;

    #[test]
    fn control_and_bidi_characters_are_escaped() {
        assert!(matches!(terminal_safe("plain model-1 é"), Cow::Borrowed(_)));
        assert_eq!(
            terminal_safe("m\x1b[31m\r\n\tok\u{7f}\u{9b}\u{202e}x\u{2066}"),
            "m\\x1b[31m\\r\\n\\tok\\x7f\\x9b\\u{202e}x\\u{2066}"
        );
    }

    #[test]
    fn urls_lose_user_info_query_and_fragment_values() {
        let cases = [
            ("http://admin:SECRET@/v1", "http://***@/v1"),
            (
                "https://api.example.com/v1?key=SECRET",
                "https://api.example.com/v1?key=***",
            ),
            ("ftp://user:pw@host/", "ftp://***@host/"),
            ("user:pw@host:8000/v1", "***@host:8000/v1"),
            (
                "http://a:b@c@h/p?x=1&SECRET#t=2",
                "http://***@h/p?x=***&***#t=***",
            ),
            ("/version?key=SECRET", "/version?key=***"),
            ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
            ("http://u:p/w@h/v1", "http://***@h/v1"),
            ("http:/u:pw@h/v1", "***@h/v1"),
            // A password with an unescaped '?' or '#' is hidden whole.
            ("http://admin:s3cr?t@host/sd", "http://***@host/sd"),
            ("http://admin:pa#ss@host/sd?k=v", "http://***@host/sd?k=***"),
        ];
        for (url, want) in cases {
            assert_eq!(redact_url(url), want, "{url}");
        }
    }

    #[test]
    fn secrets_and_the_beginnings_a_cut_left_are_redacted() {
        let secrets = ["sk-live-123456", " hdr-secret\t", "abc", "  ab  "];
        let cases = [
            ("Bearer sk-live-123456 ok", "Bearer [redacted] ok"),
            ("Bearer sk-live-12…", "Bearer [redacted]…"),
            (
                "x sk-live-12… then hdr-sec…",
                "x [redacted]… then [redacted]…",
            ),
            ("label ends with sk-l", "label ends with [redacted]"),
            ("too short a prefix: sk-…", "too short a prefix: sk-…"),
            ("short secrets stay: abc ab", "short secrets stay: abc ab"),
            (
                "trimmed as sent: hdr-secret.",
                "trimmed as sent: [redacted].",
            ),
            ("nothing here…", "nothing here…"),
        ];
        for (given, want) in cases {
            let mut text = given.to_string();
            redact_secrets(&mut text, secrets);
            assert_eq!(text, want, "{given:?}");
        }
    }

    #[test]
    fn secrets_echoed_json_escaped_or_percent_encoded_are_redacted() {
        let secret = "k3y+a/b=\"c\\d";
        for echoed in [
            r#"{"error":"bad key k3y+a\/b=\"c\\d"}"#,
            r#"{"error":"bad key k3y+a/b=\"c\\d"}"#,
            "GET /v1?key=k3y%2Ba%2Fb%3D%22c%5Cd",
            "GET /v1?key=k3y%2ba%2fb%3d%22c%5cd",
            r#"{"error":"bad key \u006b\u0033\u0079\u002b\u0061\u002f\u0062\u003d\u0022\u0063\u005c\u0064"}"#,
            r#"{"error":"bad key \u006B\u0033\u0079\u002B\u0061\u002F\u0062\u003D\u0022\u0063\u005C\u0064"}"#,
            // Some characters escaped, some not, in both cases.
            r#"{"error":"bad key k3y\u002ba\/b\u003D\"c\u005cd"}"#,
        ] {
            let mut text = echoed.to_string();
            redact_secrets(&mut text, [secret]);
            assert!(text.contains(SECRET_MARK), "{echoed} → {text}");
            for part in ["k3y", "2Fb", "2fb", "a/b", "a\\/b", "u006b\\u0033", "u002B"] {
                assert!(!text.contains(part), "{echoed} → {text}");
            }
        }
    }

    #[test]
    fn secrets_echoed_fully_percent_encoded_or_in_base64_are_redacted() {
        use base64::engine::general_purpose::{STANDARD, URL_SAFE};
        use base64::Engine;
        let secret = "sk-live-0123456789abcdef";
        let mut text =
            "key=%73%6B%2D%6C%69%76%65%2D%30%31%32%33%34%35%36%37%38%39%61%62%63%64%65%66"
                .to_string();
        redact_secrets(&mut text, [secret]);
        assert_eq!(text, format!("key={SECRET_MARK}"));
        // Inside a base64 body at each offset, in both alphabets.
        for prefix in ["", "a", "ab", "abc"] {
            for engine in [STANDARD, URL_SAFE] {
                let body = engine.encode(format!("{prefix}{{\"key\":\"{secret}\"}}"));
                let mut text = format!("echo: {body}");
                redact_secrets(&mut text, [secret]);
                assert!(text.contains(SECRET_MARK), "{prefix:?}: {text}");
                let decoded_middle = &engine.encode(secret)[4..20];
                assert!(!text.contains(decoded_middle), "{prefix:?}: {text}");
            }
        }
        // A short secret has no base64 forms: they would match unrelated text.
        assert!(super::base64_forms("sk-12345").is_empty());
    }

    #[test]
    fn a_redactor_built_once_redacts_as_the_function_and_debugs_no_secret() {
        let r = super::Redactor::new(["sk-live-123456", "ab"]);
        let mut text = "Bearer sk-live-12…".to_string();
        r.redact(&mut text);
        assert_eq!(text, "Bearer [redacted]…");
        let debug = format!("{r:?}");
        assert!(!debug.contains("sk-live"), "{debug}");
    }

    #[test]
    fn urls_inside_text_are_redacted() {
        assert_eq!(
            redact_urls_in(
                r#"base_url "http://u:SECRET@h/v1?k=S" is bad; e.g. http://127.0.0.1:8000/v1."#
            ),
            r#"base_url "http://***@h/v1?k=***" is bad; e.g. http://127.0.0.1:8000/v1."#
        );
        assert_eq!(redact_urls_in("x: `s3://k:S@b` y"), "x: `s3://***@b` y");
        assert_eq!(redact_urls_in("no url here"), "no url here");
    }
}
