//! A target's `tls:` block and the PEM files it names (paths in messages, never contents);
//! the files are read by [`credentials`].

use super::*;
use crate::config::credentials;

impl Validator<'_> {
    /// The `tls:` block: CA file, client certificate and key (both or neither), and
    /// `insecure_skip_verify`; only for `https` base URLs. The PEM is checked by the TLS library.
    pub(super) fn tls(
        &mut self,
        path: &str,
        pre: &str,
        raw: Option<&RawTls>,
        base_url: Option<&reqwest::Url>,
    ) -> Tls {
        let Some(raw) = raw else {
            return Tls::default();
        };
        if base_url.is_some_and(|u| u.scheme() != "https") {
            self.problem(
                format!("{path}.tls"),
                format!("{pre}tls is set but base_url is not https; remove tls or use an https:// base_url."),
            );
        }
        let mut tls = Tls {
            insecure_skip_verify: raw.insecure_skip_verify.unwrap_or(false),
            ..Tls::default()
        };
        if let Some(file) = &raw.ca_file {
            let p = self.relative_to_config(file);
            match credentials::read_ca(&p) {
                Ok(pem) => tls.ca_pem = Some(credentials::shared_pem(pem)),
                Err(e) => {
                    self.credential_problem(format!("{path}.tls.ca_file"), format!("{pre}{e}"))
                }
            }
            tls.ca_file = Some(p);
        }
        match (&raw.cert_file, &raw.key_file) {
            (None, None) => {}
            (Some(_), None) | (None, Some(_)) => {
                let missing = if raw.cert_file.is_none() {
                    "cert_file"
                } else {
                    "key_file"
                };
                self.problem(
                    format!("{path}.tls.{missing}"),
                    format!("{pre}tls.cert_file and tls.key_file go together (the client certificate and its key, for mTLS); set tls.{missing} too."),
                );
            }
            (Some(cert), Some(key)) => {
                let (cp, kp) = (self.relative_to_config(cert), self.relative_to_config(key));
                match credentials::read_identity(&cp, &kp) {
                    Ok(pem) => tls.client_identity_pem = Some(credentials::shared_pem(pem)),
                    Err(e) => {
                        self.credential_problem(format!("{path}.tls.key_file"), format!("{pre}{e}"))
                    }
                }
                tls.client_files = Some((cp, kp));
            }
        }
        tls
    }
}
