//! Fleets with real parts: replicas discovered from a real DNS server (dnsmasq: A and SRV
//! records), and a real balancer (haproxy) in front of the same replicas.

mod balancer;
mod dns;
