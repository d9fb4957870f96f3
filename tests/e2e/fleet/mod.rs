//! Fleets with real parts: replicas discovered from a real DNS server (dnsmasq: A and SRV
//! records), a real balancer (haproxy) in front of the same replicas, and a pool of two real
//! llama.cpp servers.

mod balancer;
mod dns;
mod real_engine;
