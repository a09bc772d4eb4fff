//! The hash maps a relayed call looks up: std's maps with foldhash's hasher instead of SipHash.
//!
//! A call through the short path looks up its session, its in-flight request, its server and
//! its tool's metric handles, some forty hashes of short strings; SipHash-1-3 (std's default)
//! spends about 70 instructions on each, foldhash a fraction of that. foldhash is hashbrown's
//! own default: each map takes a random seed, which keeps keys a client chooses (request ids,
//! session ids it presents) from being aimed at one bucket. Maps off the call's path keep std's
//! hasher.

use std::collections::HashMap;

/// The hasher of [`FastMap`]: foldhash, seeded at random for each map.
pub type FastHasher = foldhash::fast::RandomState;

/// A `HashMap` with [`FastHasher`]; made with `FastMap::default()`.
pub type FastMap<K, V> = HashMap<K, V, FastHasher>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_maps_hash_the_same_key_differently() {
        use std::hash::BuildHasher;
        // Seeded per map: a key that collides in one map does not in another.
        let (one, other) = (FastHasher::default(), FastHasher::default());
        let hashes = |state: &FastHasher| -> Vec<u64> {
            (0..8)
                .map(|n| state.hash_one(format!("session-{n}")))
                .collect()
        };
        assert_ne!(hashes(&one), hashes(&other));
        let mut map: FastMap<String, u32> = FastMap::default();
        map.insert("a".into(), 1);
        assert_eq!(map.get("a"), Some(&1));
    }
}
