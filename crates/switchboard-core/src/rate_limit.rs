//! Rate limits as users write them: `10/s`, `600/min`, `1000/h`, with an optional burst
//! (`10/s:40`, how many calls may come at once after a quiet spell; the rate's count by
//! default).
//!
//! A limit is a token bucket: it refills at the rate and holds at most the burst. Limits apply
//! to a whole server, to one of its tools, and to each client of the daemon (see the hub).

use std::fmt;
use std::num::NonZeroU32;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A token-bucket rate limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RateLimit {
    /// Calls per period.
    pub count: NonZeroU32,
    /// The period.
    pub per: Period,
    /// The most calls at once.
    pub burst: NonZeroU32,
}

/// The period of a [`RateLimit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Period {
    /// A second (`s`).
    Second,
    /// A minute (`min`).
    Minute,
    /// An hour (`h`).
    Hour,
}

impl Period {
    /// Its length.
    pub fn duration(self) -> Duration {
        match self {
            Self::Second => Duration::from_secs(1),
            Self::Minute => Duration::from_secs(60),
            Self::Hour => Duration::from_secs(3600),
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Second => "s",
            Self::Minute => "min",
            Self::Hour => "h",
        }
    }
}

impl RateLimit {
    /// The time one call's token takes to come back.
    pub fn replenish_every(&self) -> Duration {
        self.per.duration() / self.count.get()
    }
}

impl fmt::Display for RateLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.count, self.per.as_str())?;
        if self.burst != self.count {
            write!(f, ":{}", self.burst)?;
        }
        Ok(())
    }
}

impl FromStr for RateLimit {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let explain = || {
            format!(
                "'{text}' is not a rate limit: write calls per period, as 10/s, 600/min or \
                 1000/h, with an optional burst (10/s:40)"
            )
        };
        let (rate, burst) = match text.trim().split_once(':') {
            Some((rate, burst)) => (rate, Some(burst)),
            None => (text.trim(), None),
        };
        let (count, per) = rate.split_once('/').ok_or_else(explain)?;
        let count: NonZeroU32 = count.trim().parse().map_err(|_| explain())?;
        let per = match per.trim() {
            "s" | "sec" | "second" => Period::Second,
            "m" | "min" | "minute" => Period::Minute,
            "h" | "hour" => Period::Hour,
            _ => return Err(explain()),
        };
        let burst = match burst {
            Some(burst) => burst.trim().parse().map_err(|_| explain())?,
            None => count,
        };
        Ok(Self { count, per, burst })
    }
}

impl Serialize for RateLimit {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for RateLimit {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_read_and_print_the_same() {
        for text in ["10/s", "600/min", "1000/h", "10/s:40"] {
            assert_eq!(text.parse::<RateLimit>().unwrap().to_string(), text);
        }
        let limit: RateLimit = "5/m".parse().unwrap();
        assert_eq!(limit.to_string(), "5/min");
        assert_eq!(limit.replenish_every(), Duration::from_secs(12));
        for bad in ["", "10", "0/s", "10/day", "x/s", "10/s:0", "10/s:x", "-1/s"] {
            let error = bad.parse::<RateLimit>().unwrap_err();
            assert!(error.contains("10/s"), "{bad}: {error}");
        }
    }
}
