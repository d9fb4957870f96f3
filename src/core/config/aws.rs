//! AWS credentials and region for the `bedrock` protocol (SigV4 signing): from the standard
//! environment variables (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`) or
//! a profile of the shared credentials file (`~/.aws/credentials`, or the file
//! `AWS_SHARED_CREDENTIALS_FILE` names), as the AWS CLI and SDKs read them. Every message names
//! the variable, file or profile, never a value.

use std::path::{Path, PathBuf};

use super::files::{self, ReadError};
use super::Secret;

/// The environment variables read, in the AWS SDKs' spelling.
pub const ENV_ACCESS_KEY_ID: &str = "AWS_ACCESS_KEY_ID";
/// The secret access key's variable.
pub const ENV_SECRET_ACCESS_KEY: &str = "AWS_SECRET_ACCESS_KEY";
/// The session token's variable (temporary credentials from STS, SSO or a role).
pub const ENV_SESSION_TOKEN: &str = "AWS_SESSION_TOKEN";

/// One set of AWS credentials. `Debug` shows no value.
#[derive(Clone, PartialEq, Eq)]
pub struct AwsCredentials {
    /// The access key id (`AKIA…`/`ASIA…`).
    pub access_key_id: Secret,
    /// The secret access key.
    pub secret_access_key: Secret,
    /// The session token of temporary credentials, sent as `x-amz-security-token`.
    pub session_token: Option<Secret>,
}

impl std::fmt::Debug for AwsCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsCredentials")
            .field("access_key_id", &"<redacted>")
            .field("secret_access_key", &"<redacted>")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

impl AwsCredentials {
    /// The values to redact from anything the server sends back (never shown).
    pub fn secrets(&self) -> impl Iterator<Item = &str> {
        [
            Some(&self.access_key_id),
            Some(&self.secret_access_key),
            self.session_token.as_ref(),
        ]
        .into_iter()
        .flatten()
        .map(Secret::expose)
    }
}

/// How a `bedrock` target signs its requests: the region and where the credentials come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsAuth {
    /// The signing region (`aws_region:`, else `AWS_REGION`, else `AWS_DEFAULT_REGION`), e.g.
    /// `us-east-1`.
    pub region: String,
    /// The credentials, `None` when they were not read (`check-config` without secrets) or
    /// cannot be read (then the target's `credentials_error` says why).
    pub credentials: Option<AwsCredentials>,
    /// Where they come from ([`AwsSource::describe`] for summaries); a profile file is re-read
    /// when it changes ([`super::credentials::reread`]).
    pub source: AwsSource,
}

/// Where a target's credentials are looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AwsSource {
    /// The three environment variables.
    Env,
    /// A profile of a shared credentials file.
    Profile {
        /// The profile name (`aws_profile:`, else `AWS_PROFILE`, else `default`).
        name: String,
        /// The shared credentials file.
        file: PathBuf,
    },
}

impl AwsSource {
    /// Where `env` says to look: the profile `configured` (the `aws_profile:` key) when set;
    /// else the environment variables when `AWS_ACCESS_KEY_ID` is set; else the profile
    /// `AWS_PROFILE` (or `default`) in `AWS_SHARED_CREDENTIALS_FILE` (or `$HOME/.aws/credentials`).
    pub fn choose(configured: Option<&str>, env: &dyn Fn(&str) -> Option<String>) -> AwsSource {
        let set = |v: &str| env(v).filter(|s| !s.trim().is_empty());
        if configured.is_none() && set(ENV_ACCESS_KEY_ID).is_some() {
            return AwsSource::Env;
        }
        let name = configured
            .map(str::to_string)
            .or_else(|| set("AWS_PROFILE"))
            .unwrap_or_else(|| "default".to_string());
        let file = match set("AWS_SHARED_CREDENTIALS_FILE") {
            Some(f) => PathBuf::from(f),
            None => PathBuf::from(set("HOME").unwrap_or_default())
                .join(".aws")
                .join("credentials"),
        };
        AwsSource::Profile { name, file }
    }

    /// For summaries: `env AWS_ACCESS_KEY_ID` or `profile NAME in FILE`.
    pub fn describe(&self) -> String {
        match self {
            AwsSource::Env => format!("env {ENV_ACCESS_KEY_ID}"),
            AwsSource::Profile { name, file } => {
                format!("profile {name} in {}", file.display())
            }
        }
    }

    /// Reads the credentials. Errors: a sentence naming the variable, file or profile that is
    /// missing or incomplete (never a value).
    pub fn read(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<AwsCredentials, String> {
        match self {
            AwsSource::Env => {
                let get = |v: &str| {
                    env(v)
                        .map(|s| s.trim().to_string())
                        .filter(|s| !s.is_empty())
                };
                let id = get(ENV_ACCESS_KEY_ID);
                let Some(secret) = get(ENV_SECRET_ACCESS_KEY) else {
                    return Err(format!("{ENV_ACCESS_KEY_ID} is set but {ENV_SECRET_ACCESS_KEY} is not; export both (and {ENV_SESSION_TOKEN} for temporary credentials), or set aws_profile to use a profile of ~/.aws/credentials."));
                };
                checked(
                    id.unwrap_or_default(),
                    secret,
                    get(ENV_SESSION_TOKEN),
                    "the AWS environment variables",
                )
            }
            AwsSource::Profile { name, file } => read_profile(file, name),
        }
    }
}

/// Wraps and checks the values (header-safe ASCII) read from `what`.
fn checked(
    id: String,
    secret: String,
    token: Option<String>,
    what: &str,
) -> Result<AwsCredentials, String> {
    let printable = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic());
    if !printable(&id) || !printable(&secret) || !token.as_deref().is_none_or(printable) {
        return Err(format!("the credentials in {what} are empty or contain characters an AWS key cannot have (spaces, control characters or non-ASCII); check them."));
    }
    Ok(AwsCredentials {
        access_key_id: Secret::new(id),
        secret_access_key: Secret::new(secret),
        session_token: token.map(Secret::new),
    })
}

/// The profile `name` of the shared credentials file `path` (INI: `[name]` sections with
/// `aws_access_key_id`, `aws_secret_access_key` and optionally `aws_session_token`; `#` and
/// `;` start comments; a leading UTF-8 byte-order mark is ignored).
///
/// Errors: the file cannot be read, has no such profile, or the profile lacks a key.
pub fn read_profile(path: &Path, name: &str) -> Result<AwsCredentials, String> {
    let shown = path.display();
    let bytes = files::read(path, files::MAX_SMALL_FILE_BYTES).map_err(|e: ReadError| {
        format!("the AWS credentials file {shown} cannot be read ({e}); {}, or export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.", e.fix())
    })?;
    let text = String::from_utf8_lossy(&bytes);
    // A byte-order mark (a file saved by a Windows editor) would hide the first `[profile]`.
    let text = text.trim_start_matches('\u{feff}');
    let mut in_profile = false;
    let mut found = false;
    let (mut id, mut secret, mut token) = (None, None, None);
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if let Some(section) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            in_profile = section.trim() == name;
            found |= in_profile;
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if !in_profile {
            continue;
        }
        let value = Some(value.trim().to_string());
        match key.trim().to_ascii_lowercase().as_str() {
            "aws_access_key_id" => id = value,
            "aws_secret_access_key" => secret = value,
            "aws_session_token" => token = value,
            _ => {}
        }
    }
    if !found {
        return Err(format!("the AWS credentials file {shown} has no profile [{name}]; add it, set aws_profile (or AWS_PROFILE) to a profile it has, or export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY."));
    }
    let (Some(id), Some(secret)) = (id, secret) else {
        return Err(format!("profile [{name}] of the AWS credentials file {shown} lacks aws_access_key_id or aws_secret_access_key; add both."));
    };
    checked(
        id,
        secret,
        token.filter(|t| !t.is_empty()),
        &format!("profile [{name}] of {shown}"),
    )
}

/// Whether `region` looks like an AWS region name (`us-east-1`, `eu-central-2`, `us-gov-west-1`):
/// lower-case letters, digits and `-`, 1 to 32 characters.
pub fn is_region(region: &str) -> bool {
    (1..=32).contains(&region.len())
        && region
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "AKIDEXAMPLE";
    const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

    #[test]
    fn environment_first_unless_a_profile_is_configured() {
        let env = |v: &str| match v {
            "AWS_ACCESS_KEY_ID" => Some(ID.to_string()),
            "AWS_SECRET_ACCESS_KEY" => Some(SECRET.to_string()),
            "AWS_SESSION_TOKEN" => Some("tok/+=".to_string()),
            "HOME" => Some("/home/u".to_string()),
            _ => None,
        };
        let src = AwsSource::choose(None, &env);
        assert_eq!(src, AwsSource::Env);
        let c = src.read(&env).unwrap();
        assert_eq!(c.access_key_id.expose(), ID);
        assert_eq!(c.session_token.as_ref().map(Secret::expose), Some("tok/+="));
        let dbg = format!("{c:?}");
        assert!(!dbg.contains(ID) && !dbg.contains(SECRET) && !dbg.contains("tok/"));
        assert_eq!(
            AwsSource::choose(Some("prod"), &env),
            AwsSource::Profile {
                name: "prod".into(),
                file: "/home/u/.aws/credentials".into()
            }
        );
        // Only the id set: the message names the missing variable, not the value.
        let half = |v: &str| (v == "AWS_ACCESS_KEY_ID").then(|| ID.to_string());
        let e = AwsSource::Env.read(&half).unwrap_err();
        assert!(
            e.contains("AWS_SECRET_ACCESS_KEY") && !e.contains(ID),
            "{e}"
        );
    }

    #[test]
    fn profiles_of_the_shared_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("credentials");
        std::fs::write(
            &file,
            format!("# comment\n[default]\naws_access_key_id = {ID}\naws_secret_access_key={SECRET}\n\n[temp]\naws_access_key_id=ASIA1\n aws_secret_access_key = s2 \naws_session_token = t3\n[broken]\naws_access_key_id=X\n"),
        )
        .unwrap();
        let env = |v: &str| match v {
            "AWS_SHARED_CREDENTIALS_FILE" => Some(file.display().to_string()),
            "AWS_PROFILE" => Some("temp".to_string()),
            _ => None,
        };
        let src = AwsSource::choose(None, &env);
        let c = src.read(&env).unwrap();
        assert_eq!(
            (
                c.access_key_id.expose(),
                c.secret_access_key.expose(),
                c.session_token.as_ref().map(Secret::expose)
            ),
            ("ASIA1", "s2", Some("t3"))
        );
        let c = read_profile(&file, "default").unwrap();
        assert_eq!(c.secret_access_key.expose(), SECRET);
        assert!(c.session_token.is_none());
        let e = read_profile(&file, "nope").unwrap_err();
        assert!(e.contains("no profile [nope]"), "{e}");
        let e = read_profile(&file, "broken").unwrap_err();
        assert!(e.contains("lacks") && !e.contains("=X"), "{e}");
        let e = read_profile(&dir.path().join("missing"), "default").unwrap_err();
        assert!(e.contains("cannot be read"), "{e}");
    }

    /// A credentials file saved by a Windows editor starts with a UTF-8 byte-order mark (and
    /// has CRLF line ends): its first profile is still found.
    #[test]
    fn a_byte_order_mark_before_the_first_profile_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("credentials");
        std::fs::write(
            &file,
            format!("\u{feff}[default]\r\naws_access_key_id = {ID}\r\naws_secret_access_key = {SECRET}\r\n"),
        )
        .unwrap();
        let c = read_profile(&file, "default").unwrap();
        assert_eq!(
            (c.access_key_id.expose(), c.secret_access_key.expose()),
            (ID, SECRET)
        );
    }

    #[test]
    fn regions() {
        assert!(is_region("us-east-1") && is_region("us-gov-west-1"));
        assert!(!is_region("") && !is_region("US-EAST-1") && !is_region("us east"));
    }
}
