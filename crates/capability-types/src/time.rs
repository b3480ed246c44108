//! Deadlines that cannot overflow the clock.

use std::time::{Duration, Instant};

/// How far off a deadline too long for the clock is put: thirty years, as
/// `tokio::time::timeout` has it.
const FAR: Duration = Duration::from_secs(86_400 * 365 * 30);

/// The instant `wait` after `start`; a wait too long for the clock to count (an operator's "no
/// limit" written as `Duration::MAX`, say) is thirty years off instead of a panic.
///
/// `Instant + Duration` panics when the sum does not fit the platform's clock, so every deadline
/// built from a configured or requested duration goes through here (docs/semantics.md,
/// "Timeouts").
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let now = Instant::now();
/// assert_eq!(capability_types::deadline(now, Duration::from_secs(1)), now + Duration::from_secs(1));
/// assert!(capability_types::deadline(now, Duration::MAX) > now + Duration::from_secs(86_400 * 365));
/// ```
pub fn deadline(start: Instant, wait: Duration) -> Instant {
    start
        .checked_add(wait)
        .or_else(|| start.checked_add(FAR))
        .unwrap_or(start)
}
