//! A target's `tls:` block and the PEM files it names (paths in messages, never contents).

use super::*;

impl Validator<'_> {
    /// Reads and checks a PEM file named by `tls.<field>`; the message names the path, never
    /// the contents.
    pub(super) fn pem_file(
        &mut self,
        path: &str,
        pre: &str,
        field: &str,
        file: &str,
    ) -> Option<(PathBuf, Vec<u8>)> {
        let resolved = self.relative_to_config(file);
        match crate::config::files::read(&resolved, crate::config::files::MAX_SMALL_FILE_BYTES) {
            Ok(bytes) if String::from_utf8_lossy(&bytes).contains("-----BEGIN ") => {
                Some((resolved, bytes))
            }
            Ok(_) => {
                self.problem(
                    format!("{path}.tls.{field}"),
                    format!("{pre}tls.{field} {} is not a PEM file (no \"-----BEGIN\" line); give the PEM form.", resolved.display()),
                );
                None
            }
            Err(e) => {
                self.problem(
                    format!("{path}.tls.{field}"),
                    format!(
                        "{pre}tls.{field} {} cannot be read ({e}); {}.",
                        resolved.display(),
                        e.fix()
                    ),
                );
                None
            }
        }
    }

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
            if let Some((p, pem)) = self.pem_file(path, pre, "ca_file", file) {
                if reqwest::Certificate::from_pem_bundle(&pem).map_or(true, |v| v.is_empty()) {
                    self.problem(format!("{path}.tls.ca_file"), format!("{pre}tls.ca_file {} holds no usable certificate; give the CA certificate in PEM form.", p.display()));
                }
                tls.ca_file = Some(p);
                tls.ca_pem = Some(pem);
            }
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
                let cert = self.pem_file(path, pre, "cert_file", cert);
                let key = self.pem_file(path, pre, "key_file", key);
                if let (Some((cp, mut pem)), Some((kp, key_pem))) = (cert, key) {
                    pem.push(b'\n');
                    pem.extend_from_slice(&key_pem);
                    if reqwest::Identity::from_pem(&pem).is_err() {
                        self.problem(
                            format!("{path}.tls.key_file"),
                            format!("{pre}tls.cert_file {} and tls.key_file {} do not form a client identity (a PEM certificate and its PEM private key); check both files.", cp.display(), kp.display()),
                        );
                    }
                    tls.client_files = Some((cp, kp));
                    tls.client_identity_pem = Some(pem);
                }
            }
        }
        tls
    }
}
