//! `--web.listen-address` as Prometheus exporters take it: `:PORT` (every interface),
//! `HOST:PORT` (a name is resolved, e.g. `localhost:9464`), `IP:PORT` and `[IPv6]:PORT`.

use std::net::{Ipv4Addr, SocketAddr, ToSocketAddrs};

/// Parses a listen address (see the module docs). `:PORT` binds every IPv4 interface
/// (`0.0.0.0:PORT`); a host name takes its first resolved address.
///
/// Errors: no port, a port that is not a number from 0 to 65535, or a name that does not
/// resolve; the message says what forms are accepted.
pub fn parse(s: &str) -> Result<SocketAddr, String> {
    const FORMS: &str = "use :PORT, HOST:PORT, IP:PORT or [IPv6]:PORT (e.g. :9464, localhost:9464, 0.0.0.0:9464, [::1]:9464)";
    let s = s.trim();
    if let Ok(addr) = s.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err(format!("{s:?} has no port; {FORMS}"));
    };
    let port: u16 = port
        .parse()
        .map_err(|_| format!("{port:?} in {s:?} is not a port (0 to 65535); {FORMS}"))?;
    if host.is_empty() {
        return Ok(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)));
    }
    if host.starts_with('[') || host.contains(':') {
        return Err(format!("{s:?} is not a valid address; {FORMS}"));
    }
    let resolved = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("{host:?} in {s:?} does not resolve ({e}); {FORMS}"))?;
    let all: Vec<SocketAddr> = resolved.collect();
    // IPv4 first: `localhost` may list ::1 first on hosts without IPv6 loopback in containers.
    all.iter()
        .find(|a| a.is_ipv4())
        .or(all.first())
        .copied()
        .ok_or_else(|| format!("{host:?} in {s:?} resolves to no address; {FORMS}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_exporter_form_is_accepted() {
        let ok = [
            (":9464", "0.0.0.0:9464"),
            ("127.0.0.1:9464", "127.0.0.1:9464"),
            ("[::1]:9464", "[::1]:9464"),
            ("localhost:9464", "127.0.0.1:9464"),
            (" :0 ", "0.0.0.0:0"),
        ];
        for (given, want) in ok {
            assert_eq!(parse(given), Ok(want.parse().unwrap()), "{given}");
        }
        for bad in [
            "9464",
            ":",
            ":99999",
            "host:",
            "[::1:9464",
            "no-such-host.invalid:9464",
        ] {
            let e = parse(bad).expect_err(bad);
            assert!(e.contains(":PORT"), "{bad}: {e}");
        }
    }
}
