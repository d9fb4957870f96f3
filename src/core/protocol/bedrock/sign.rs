//! AWS Signature Version 4 for Bedrock requests, with AWS's own signer (`aws-sigv4`).
//!
//! What is signed: the method, the path (percent-encoded twice, as SigV4 does for every service
//! but S3), the query, the `host` header (from the URL), `x-amz-date` and, for temporary
//! credentials, `x-amz-security-token`; and the SHA-256 of the exact body bytes. The headers
//! returned are added to the request as they are.

use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;

use crate::config::aws::AwsCredentials;

/// The headers that sign `method url` with `body` for `service` in `region` at `time`:
/// `x-amz-date`, `authorization` and, with a session token, `x-amz-security-token`.
///
/// Errors: the signer refused the inputs (a URL it cannot parse); the message holds no secret.
pub(crate) fn sign_headers(
    method: &str,
    url: &str,
    body: &[u8],
    credentials: &AwsCredentials,
    region: &str,
    service: &str,
    time: SystemTime,
) -> Result<Vec<(String, String)>, String> {
    let identity = Credentials::new(
        credentials.access_key_id.expose(),
        credentials.secret_access_key.expose(),
        credentials
            .session_token
            .as_ref()
            .map(|t| t.expose().to_string()),
        None,
        "llm-probe",
    )
    .into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| format!("the SigV4 parameters are incomplete ({e})"))?
        .into();
    let request = SignableRequest::new(method, url, std::iter::empty(), SignableBody::Bytes(body))
        .map_err(|_| "the request URL cannot be signed".to_string())?;
    let (instructions, _signature) = sign(request, &params)
        .map_err(|_| "the request cannot be signed".to_string())?
        .into_parts();
    Ok(instructions
        .headers()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.to_string()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Secret;
    use std::time::{Duration, UNIX_EPOCH};

    /// 2015-08-30T12:36:00Z, the time of AWS's SigV4 test suite.
    fn suite_time() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_440_938_160)
    }

    fn example(token: Option<&str>) -> AwsCredentials {
        AwsCredentials {
            access_key_id: Secret::new("AKIDEXAMPLE".into()),
            secret_access_key: Secret::new("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into()),
            session_token: token.map(|t| Secret::new(t.into())),
        }
    }

    fn header<'a>(h: &'a [(String, String)], name: &str) -> Option<&'a str> {
        h.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// AWS SigV4 test suite, `get-vanilla`: `GET /` to `example.amazonaws.com`, region
    /// us-east-1, service `service`, the suite's example credentials at 20150830T123600Z.
    #[test]
    fn get_vanilla_known_answer() {
        let h = sign_headers(
            "GET",
            "https://example.amazonaws.com/",
            b"",
            &example(None),
            "us-east-1",
            "service",
            suite_time(),
        )
        .unwrap();
        assert_eq!(header(&h, "x-amz-date"), Some("20150830T123600Z"));
        assert_eq!(
            header(&h, "authorization"),
            Some("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")
        );
        assert_eq!(header(&h, "x-amz-security-token"), None);
    }

    /// A session token is sent as `x-amz-security-token` and signed, and changes the signature;
    /// the body's hash is signed too.
    #[test]
    fn session_token_and_body_are_signed() {
        let sign_with = |token, body: &[u8]| {
            sign_headers(
                "POST",
                "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream",
                body,
                &example(token),
                "us-east-1",
                "bedrock",
                suite_time(),
            )
            .unwrap()
        };
        let plain = sign_with(None, b"{}");
        let with = sign_with(Some("FQoGZXIvYXdzEXAMPLE"), b"{}");
        assert_eq!(
            header(&with, "x-amz-security-token"),
            Some("FQoGZXIvYXdzEXAMPLE")
        );
        let auth = header(&with, "authorization").unwrap();
        assert!(
            auth.contains("/20150830/us-east-1/bedrock/aws4_request"),
            "{auth}"
        );
        assert!(
            auth.contains("SignedHeaders=host;x-amz-date;x-amz-security-token"),
            "{auth}"
        );
        assert_ne!(header(&plain, "authorization"), Some(auth));
        let other_body = sign_with(None, b"{ }");
        assert_ne!(
            header(&plain, "authorization"),
            header(&other_body, "authorization")
        );
    }
}
