//! The supply chain: the pinned toolchain, the Dockerfile, advisories.

mod supply_chain;
