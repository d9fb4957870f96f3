//! Deadline arithmetic that cannot panic, shared by the schedule (the next probe), the probe
//! (its timeout) and the demo (the next summary). A leaf: it imports nothing from the crate.

use std::time::Duration;

use tokio::time::Instant;

/// `from + d`, or an instant far beyond any run of the process if that overflows: waiting
/// "forever" instead of panicking on `overflow when adding duration to instant`.
pub fn instant_after(from: Instant, d: Duration) -> Instant {
    const FAR: Duration = Duration::from_secs(30 * 365 * 24 * 60 * 60);
    from.checked_add(d)
        .or_else(|| from.checked_add(FAR))
        .unwrap_or(from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_never_overflow() {
        let now = Instant::now();
        assert!(instant_after(now, Duration::MAX) > now + Duration::from_secs(365 * 24 * 3600));
        assert_eq!(
            instant_after(now, Duration::from_secs(1)),
            now + Duration::from_secs(1)
        );
    }
}
