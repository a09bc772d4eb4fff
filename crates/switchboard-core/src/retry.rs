//! Sending a request again after a transient failure, when repeating it is safe.
//!
//! Servers restart, balancers answer 502 for a moment, a connection is refused while a process
//! comes back. A request that may run twice without harm (a list, a read, a ping, a completion,
//! a call of a tool annotated `readOnlyHint` or `idempotentHint`, or one the operator marks as
//! safe) is sent again after such a failure, with backoff and jitter. A request that cannot be
//! repeated is never sent twice. The presets are those AI apps commonly ship.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How a server's requests that are safe to repeat are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RetryPreset {
    /// Never: one try.
    Off,
    /// Two tries, the second after about 1 s.
    #[default]
    Quick,
    /// Three tries, after about 1 s and then 2 s.
    Standard,
}

/// Why a text names no preset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "'{0}' is no retry preset: use off, quick (2 tries, 1 s) or standard (3 tries, 1 s doubling)"
)]
pub struct UnknownRetryPreset(pub String);

impl std::str::FromStr for RetryPreset {
    type Err = UnknownRetryPreset;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "off" => Ok(Self::Off),
            "quick" => Ok(Self::Quick),
            "standard" => Ok(Self::Standard),
            other => Err(UnknownRetryPreset(other.to_owned())),
        }
    }
}

impl RetryPreset {
    /// Its name, as configured.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Quick => "quick",
            Self::Standard => "standard",
        }
    }

    /// How many times a request is sent at most.
    pub fn tries(self) -> u32 {
        match self {
            Self::Off => 1,
            Self::Quick => 2,
            Self::Standard => 3,
        }
    }

    /// How long to wait before the try after `failed` tries (1 for the first retry): 1 s,
    /// doubling for each retry after it, times `1 ± 20 %` by `jitter` (uniform in `[0, 1)`), so
    /// that callers that failed together do not all come back together.
    pub fn delay_after(self, failed: u32, jitter: f64) -> Duration {
        let base = Duration::from_secs(1).saturating_mul(1 << failed.saturating_sub(1).min(6));
        base.mul_f64(0.8 + 0.4 * jitter.clamp(0.0, 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_try_as_often_and_wait_as_long_as_they_say() {
        assert_eq!(
            [RetryPreset::Off, RetryPreset::Quick, RetryPreset::Standard].map(RetryPreset::tries),
            [1, 2, 3]
        );
        let standard = RetryPreset::Standard;
        assert_eq!(standard.delay_after(1, 0.5), Duration::from_secs(1));
        assert_eq!(standard.delay_after(2, 0.5), Duration::from_secs(2));
        assert_eq!(standard.delay_after(1, 0.0), Duration::from_millis(800));
        assert_eq!(standard.delay_after(1, 1.0), Duration::from_millis(1200));
        assert_eq!("standard".parse(), Ok(RetryPreset::Standard));
        assert!("often".parse::<RetryPreset>().is_err());
        assert_eq!(RetryPreset::default(), RetryPreset::Quick);
    }
}
