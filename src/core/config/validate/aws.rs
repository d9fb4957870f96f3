//! A `bedrock` target's `aws_region` and `aws_profile`, and the AWS credentials they select.

use super::*;
use crate::config::aws::{is_region, AwsAuth, AwsSource};

impl Validator<'_> {
    /// The AWS signing of a `bedrock` target without an API key: the region (`aws_region`, else
    /// `AWS_REGION`, else `AWS_DEFAULT_REGION`; required) and the credentials
    /// ([`AwsSource::choose`]). A target with an API key (a Bedrock API key, sent as a bearer
    /// token) signs nothing: `None`. For any other protocol both keys must be absent.
    pub(super) fn aws(
        &mut self,
        path: &str,
        pre: &str,
        protocol: Option<Protocol>,
        raw: &RawTarget,
        has_api_key: bool,
    ) -> Option<AwsAuth> {
        let protocol = protocol?;
        if protocol != Protocol::Bedrock {
            for (key, set) in [
                ("aws_region", raw.aws_region.is_some()),
                ("aws_profile", raw.aws_profile.is_some()),
            ] {
                if set {
                    self.problem(
                        format!("{path}.{key}"),
                        format!("{pre}{key} is only used with protocol bedrock, and this target's protocol is {protocol}; remove it."),
                    );
                }
            }
            return None;
        }
        if has_api_key {
            // A Bedrock API key is sent as a bearer token: nothing is signed, no region needed.
            if raw.aws_profile.is_some() {
                self.problem(
                    format!("{path}.aws_profile"),
                    format!("{pre}aws_profile and an API key are both set; a bedrock target uses either a Bedrock API key (api_key_env/api_key_file) or AWS credentials, keep one."),
                );
            }
            return None;
        }
        let env_region = || {
            ["AWS_REGION", "AWS_DEFAULT_REGION"]
                .into_iter()
                .find_map(|v| (self.env)(v).filter(|r| !r.trim().is_empty()))
        };
        let region = match raw.aws_region.clone().or_else(env_region) {
            None => {
                self.problem(
                    format!("{path}.aws_region"),
                    format!("{pre}aws_region is required with protocol bedrock (or AWS_REGION in the environment); set it to the region of the base_url, e.g. us-east-1."),
                );
                None
            }
            Some(r) if !is_region(r.trim()) => {
                self.problem(
                    format!("{path}.aws_region"),
                    format!(
                        "{pre}aws_region \"{}\" is not an AWS region name; use one like us-east-1.",
                        crate::sanitize::terminal_safe(&r)
                    ),
                );
                None
            }
            Some(r) => Some(r.trim().to_string()),
        };
        if let Some(p) = raw.aws_profile.as_deref() {
            let plain = !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@' | '+'));
            if !plain {
                // Not echoed: a value that is no profile name may be a key pasted in.
                self.problem(
                    format!("{path}.aws_profile"),
                    format!("{pre}aws_profile must be the name of a profile of ~/.aws/credentials (letters, digits, \"-\", \"_\", \".\"), not a key."),
                );
                return None;
            }
        }
        let source = AwsSource::choose(raw.aws_profile.as_deref(), self.env);
        let credentials = match self.secrets {
            Secrets::Skip => None,
            _ => match source.read(self.env) {
                Ok(c) => Some(c),
                Err(e) => {
                    // Point at aws_profile only when it is set: without one, the credentials
                    // came from the environment or the default profile, which no field names.
                    let field = match raw.aws_profile {
                        Some(_) => format!("{path}.aws_profile"),
                        None => path.to_string(),
                    };
                    self.credential_problem(field, format!("{pre}{e}"));
                    None
                }
            },
        };
        Some(AwsAuth {
            region: region?,
            credentials,
            source,
        })
    }
}
