//! The one list of HTTP headers whose values are credentials. Outgoing requests mark them
//! sensitive (so no `Debug` of a request shows them) and every summary or `Debug` of a target
//! redacts them; a target adds its own with `secret_headers:`.

/// Header names (lower case) that always carry credentials: the standard ones, the API-key
/// headers of the providers llm-probe speaks to (`x-api-key` for Anthropic, `api-key` for Azure
/// OpenAI) and common gateways (Google, Azure API Management).
pub const SECRET_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "ocp-apim-subscription-key",
    "x-auth-token",
    "x-amz-security-token",
    "x-functions-key",
    "private-token",
];

/// Words that make any header name secret when they appear in it (lower case): `X-Vault-Token`,
/// `X-Client-Secret`, `X-Custom-Auth`, `X-Session-Id`, …
pub const SECRET_HEADER_WORDS: &[&str] = &[
    "key",
    "token",
    "secret",
    "auth",
    "password",
    "passwd",
    "credential",
    "cookie",
    "session",
    "signature",
];

/// True when `name` (any case) is in [`SECRET_HEADERS`] or contains one of
/// [`SECRET_HEADER_WORDS`]. A target's own additions are in [`super::Target::is_secret_header`].
pub fn is_secret_header(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    SECRET_HEADERS.contains(&n.as_str()) || SECRET_HEADER_WORDS.iter().any(|w| n.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_name_in_any_case_is_secret_and_plain_ones_are_not() {
        for name in SECRET_HEADERS {
            assert!(is_secret_header(name), "{name}");
            assert!(is_secret_header(&name.to_ascii_uppercase()), "{name}");
        }
        for name in [
            "X-Vault-Token",
            "X-Client-Secret",
            "X-Custom-Auth",
            "Set-Cookie",
        ] {
            assert!(is_secret_header(name), "{name}");
        }
        for name in [
            "X-Team",
            "Accept",
            "anthropic-version",
            "User-Agent",
            "X-Route",
        ] {
            assert!(!is_secret_header(name), "{name}");
        }
    }
}
