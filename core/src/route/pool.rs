//! Pools: a route value that names several equivalent targets, and which member serves a request.
//!
//! Any route value (`default`, `background`, `think`, `long_context`, a rule's `to`) may be a
//! list — `default = ["gpu1,qwen3-coder", "gpu2,qwen3-coder"]` — whose members are equivalent:
//! one is chosen per request ([`order_members`]), the others are tried next if it fails, then the
//! route's fallbacks.
//!
//! The choice is pure: the host passes each member's load ([`MemberLoad`]: weight, requests in
//! flight and queued, whether it is available and whether it has room), the request's session
//! (a Claude Code session id, a Codex `prompt_cache_key`, an AG-UI thread), and a random salt.
//!
//! - **Affinity.** A request with a session goes to the member that rendezvous hashing (highest
//!   random weight, weighted) ranks first for it among the available ones, unless that member
//!   is full and another has room: a conversation's turns reach the upstream that holds its
//!   prompt cache. A member leaving the pool moves only its own sessions, and replicas agree
//!   with no shared state (the hash is fixed: FNV-1a, then a SplitMix64 finish).
//! - **Load.** Otherwise a member with room before a full one (where a request would queue),
//!   then the fewest outstanding requests per unit of weight, `(outstanding + 1) / weight`; ties
//!   go by rendezvous rank on the salt, so equal members share evenly. Members that are
//!   unavailable (circuit open, told to wait by a 429) come last.
//!
//! ```
//! use bridge_core::route::{MemberLoad, Pick, Target, order_members};
//! let pool: Vec<Target> = ["a,m", "b,m", "c,m"].iter().map(|t| t.parse().unwrap()).collect();
//! let idle = |_: &Target| MemberLoad::idle(1);
//! // A session always reaches the same member…
//! let (first, pick) = order_members(&pool, idle, Some("session-1"), 0);
//! let (again, _) = order_members(&pool, idle, Some("session-1"), 99);
//! assert_eq!((first[0].clone(), pick), (again[0].clone(), Pick::Affinity));
//! // …and without one, the least loaded member serves.
//! let busy = |t: &Target| MemberLoad { outstanding: if t.provider == "b" { 0 } else { 5 }, ..MemberLoad::idle(1) };
//! let (order, pick) = order_members(&pool, busy, None, 7);
//! assert_eq!((order[0].provider.as_str(), pick), ("b", Pick::Load));
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

use super::target::Target;

/// One or more equivalent targets (never empty, no member twice). Written as a target string or
/// a list of them; a pool of one is written back as a string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool(Vec<Target>);

impl Serialize for Pool {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0.as_slice() {
            [one] => one.serialize(serializer),
            members => members.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Pool {
    /// A string (a target) or a list of strings; a target's own error message is kept.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Pool;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a target (\"provider,model\") or a list of equivalent targets")
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Pool, E> {
                text.parse::<Target>().map(Pool::from).map_err(E::custom)
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Pool, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = seq.next_element::<Target>()? {
                    members.push(member);
                }
                Pool::new(members).map_err(serde::de::Error::custom)
            }
        }
        deserializer.deserialize_any(Visit)
    }
}

impl Pool {
    /// A pool of these members.
    ///
    /// # Errors
    /// No members, or one twice; the message says what to write.
    pub fn new(members: Vec<Target>) -> Result<Self, String> {
        if members.is_empty() {
            return Err(String::from(
                "an empty list: name at least one target (\"provider,model\")",
            ));
        }
        for (i, member) in members.iter().enumerate() {
            if members[..i].contains(member) {
                return Err(format!("`{member}` is in the list twice"));
            }
        }
        Ok(Self(members))
    }

    /// The members, in the order written.
    #[must_use]
    pub fn members(&self) -> &[Target] {
        &self.0
    }

    /// The first member written (a pool of one: its target).
    #[must_use]
    pub fn first(&self) -> &Target {
        // Never empty: `Pool::new` refuses an empty list, and the `From<Target>` pool has one.
        &self.0[0]
    }
}

impl From<Target> for Pool {
    fn from(target: Target) -> Self {
        Self(vec![target])
    }
}

impl fmt::Display for Pool {
    /// `a,m` for a pool of one, `[a,m | b,m]` for more.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [one] => write!(f, "{one}"),
            members => {
                f.write_str("[")?;
                for (i, member) in members.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" | ")?;
                    }
                    write!(f, "{member}")?;
                }
                f.write_str("]")
            }
        }
    }
}

/// What the host knows of one member when a request is routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberLoad {
    /// Its share in its pools (the provider's `weight`, at least 1).
    pub weight: u32,
    /// Requests in flight on it and waiting for it.
    pub outstanding: u32,
    /// Whether it may be tried now (its circuit is not open, no 429 told it to wait).
    pub available: bool,
    /// Whether a request would start at once (`false`: at its `max_parallel` or `rpm`, a request
    /// waits in its queue).
    pub has_room: bool,
    /// Its time to first byte lately (µs, a weighted average), once it has answered.
    #[serde(default)]
    pub latency_us: Option<u32>,
}

/// How the least loaded member is measured (`[router] balance`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Balance {
    /// The fewest requests outstanding per unit of weight.
    #[default]
    LeastOutstanding,
    /// The least expected wait: outstanding requests per weight times the member's recent time
    /// to first byte (a member not yet measured counts as the fastest measured one).
    Latency,
}

impl MemberLoad {
    /// A member with nothing in flight, available, with room.
    #[must_use]
    pub fn idle(weight: u32) -> Self {
        Self {
            weight,
            outstanding: 0,
            available: true,
            has_room: true,
            latency_us: None,
        }
    }
}

/// Why a pool's first member was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pick {
    /// The pool has one member.
    Only,
    /// The request's session hashes to it.
    Affinity,
    /// The fewest outstanding requests per weight (no session, or its member was full).
    Load,
    /// No member was available: tried anyway, in the order written.
    NoneAvailable,
}

impl Pick {
    /// `only`, `affinity`, `load`, `none_available` (as it is serialized).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Only => "only",
            Self::Affinity => "affinity",
            Self::Load => "load",
            Self::NoneAvailable => "none_available",
        }
    }
}

impl fmt::Display for Pick {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The members of `pool` in the order to try them, and why the first: see the module docs.
/// `load` says each member's load; `session` is the request's conversation, if it has one;
/// `salt` breaks ties between equally loaded members (a random number per request).
#[must_use]
pub fn order_members(
    pool: &[Target],
    load: impl Fn(&Target) -> MemberLoad,
    session: Option<&str>,
    salt: u64,
) -> (Vec<Target>, Pick) {
    order_members_by(Balance::LeastOutstanding, pool, load, session, salt)
}

/// [`order_members`], measuring load as `balance` says.
#[must_use]
pub fn order_members_by(
    balance: Balance,
    pool: &[Target],
    load: impl Fn(&Target) -> MemberLoad,
    session: Option<&str>,
    salt: u64,
) -> (Vec<Target>, Pick) {
    if pool.len() <= 1 {
        return (pool.to_vec(), Pick::Only);
    }
    let salt_key = salt.to_le_bytes();
    let mut ranked: Vec<(MemberLoad, f64, f64, &Target)> = pool
        .iter()
        .map(|target| {
            let load = load(target);
            let weight = f64::from(load.weight.max(1));
            let affinity = session.map_or(0.0, |s| rendezvous(s.as_bytes(), target, weight));
            let tie = rendezvous(&salt_key, target, weight);
            (load, affinity, tie, target)
        })
        .collect();
    if ranked.iter().all(|(load, ..)| !load.available) {
        return (pool.to_vec(), Pick::NoneAvailable);
    }
    // A member not measured yet counts as the fastest measured one (so it gets tried).
    let fastest = ranked
        .iter()
        .filter_map(|(load, ..)| load.latency_us)
        .min()
        .map_or(1.0, f64::from);
    let cost = |load: &MemberLoad| match balance {
        Balance::LeastOutstanding => per_weight(load),
        Balance::Latency => per_weight(load) * load.latency_us.map_or(fastest, f64::from).max(1.0),
    };
    // By load: available first, then those with room (a request on a full one would queue),
    // then fewest outstanding per weight, then the salt's rank.
    ranked.sort_by(|a, b| {
        b.0.available
            .cmp(&a.0.available)
            .then_with(|| b.0.has_room.cmp(&a.0.has_room))
            .then_with(|| cost(&a.0).total_cmp(&cost(&b.0)))
            .then_with(|| b.2.total_cmp(&a.2))
    });
    let mut pick = Pick::Load;
    if session.is_some() {
        // The session's member: the highest rendezvous rank among the available ones.
        let affine = ranked
            .iter()
            .enumerate()
            .filter(|(_, (load, ..))| load.available)
            .max_by(|(_, a), (_, b)| a.1.total_cmp(&b.1))
            .map(|(i, (load, ..))| (i, load.has_room));
        let others_have_room = |i: usize| {
            ranked
                .iter()
                .enumerate()
                .any(|(j, (load, ..))| j != i && load.available && load.has_room)
        };
        if let Some((i, has_room)) = affine
            && (has_room || !others_have_room(i))
        {
            let member = ranked.remove(i);
            ranked.insert(0, member);
            pick = Pick::Affinity;
        }
    }
    (ranked.into_iter().map(|(.., t)| t.clone()).collect(), pick)
}

fn per_weight(load: &MemberLoad) -> f64 {
    (f64::from(load.outstanding) + 1.0) / f64::from(load.weight.max(1))
}

/// Weighted rendezvous score of `target` for `key`: `-weight / ln(u)`, `u` in (0, 1) from a
/// fixed hash of both. The highest score wins; removing a member changes no other's score.
fn rendezvous(key: &[u8], target: &Target, weight: f64) -> f64 {
    let mut hash = Fnv::default();
    hash.write(key);
    hash.write(&[0xff]);
    hash.write(target.provider.as_bytes());
    hash.write(&[0xfe]);
    hash.write(target.model.as_deref().unwrap_or_default().as_bytes());
    let mixed = splitmix64(hash.0);
    // 53 bits, never 0 or 1.
    let u = ((mixed >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    -weight / u.ln()
}

/// FNV-1a, 64 bits: fixed, so every replica and version ranks alike.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn t(text: &str) -> Target {
        text.parse().unwrap()
    }

    fn pool(names: &[&str]) -> Vec<Target> {
        names.iter().map(|n| t(&format!("{n},m"))).collect()
    }

    #[test]
    fn a_pool_is_a_string_or_a_list_and_refuses_empty_or_repeated_lists() {
        let one: Pool = serde_json::from_str(r#""a,m""#).unwrap();
        assert_eq!(one.members(), [t("a,m")]);
        assert_eq!(serde_json::to_string(&one).unwrap(), r#""a,m""#);
        let two: Pool = serde_json::from_str(r#"["a,m","b"]"#).unwrap();
        assert_eq!(two.members(), [t("a,m"), t("b")]);
        assert_eq!(serde_json::to_string(&two).unwrap(), r#"["a,m","b"]"#);
        assert_eq!(two.to_string(), "[a,m | b]");
        let empty = serde_json::from_str::<Pool>("[]").unwrap_err().to_string();
        assert!(empty.contains("an empty list"), "{empty}");
        let twice = serde_json::from_str::<Pool>(r#"["a","a"]"#)
            .unwrap_err()
            .to_string();
        assert!(twice.contains("`a` is in the list twice"), "{twice}");
    }

    #[test]
    fn a_session_stays_on_its_member_and_a_member_leaving_moves_only_its_sessions() {
        let three = pool(&["a", "b", "c"]);
        let two = pool(&["a", "c"]);
        let idle = |_: &Target| MemberLoad::idle(1);
        let mut per_member = BTreeMap::new();
        for i in 0..3000 {
            let session = format!("session-{i}");
            let (before, pick) = order_members(&three, idle, Some(&session), i);
            assert_eq!(pick, Pick::Affinity);
            let (again, _) = order_members(&three, idle, Some(&session), i * 7 + 1);
            assert_eq!(before[0], again[0], "the salt never moves a session");
            *per_member.entry(before[0].provider.clone()).or_insert(0) += 1;
            let (after, _) = order_members(&two, idle, Some(&session), i);
            if before[0].provider != "b" {
                assert_eq!(
                    after[0], before[0],
                    "{session} moved though its member stayed"
                );
            }
        }
        // Each of three equal members holds about a third of the sessions.
        for (member, n) in &per_member {
            assert!((850..=1150).contains(n), "{member}: {n} of 3000");
        }
    }

    #[test]
    fn weights_share_sessions_and_ties() {
        let members = pool(&["big", "small"]);
        let load = |t: &Target| MemberLoad::idle(if t.provider == "big" { 3 } else { 1 });
        let mut big = 0;
        for i in 0..4000 {
            let (order, _) = order_members(&members, load, Some(&format!("s{i}")), 0);
            big += usize::from(order[0].provider == "big");
        }
        assert!(
            (2800..=3200).contains(&big),
            "sessions on the weight-3 member: {big}/4000"
        );
        // Without a session, idle members: the weight-3 member's score is lower, it wins.
        let (order, pick) = order_members(&members, load, None, 5);
        assert_eq!((order[0].provider.as_str(), pick), ("big", Pick::Load));
        // Equal members, equal load: the salt spreads them.
        let equal = pool(&["a", "b"]);
        let firsts: usize = (0..1000)
            .map(|salt| {
                let (order, _) = order_members(&equal, |_| MemberLoad::idle(1), None, salt);
                usize::from(order[0].provider == "a")
            })
            .sum();
        assert!((400..=600).contains(&firsts), "a first {firsts}/1000");
    }

    #[test]
    fn the_least_loaded_available_member_comes_first_and_unavailable_ones_last() {
        let members = pool(&["a", "b", "c"]);
        let load = |t: &Target| match t.provider.as_str() {
            "a" => MemberLoad {
                outstanding: 1,
                ..MemberLoad::idle(1)
            },
            "b" => MemberLoad {
                available: false,
                ..MemberLoad::idle(1)
            },
            _ => MemberLoad {
                outstanding: 3,
                ..MemberLoad::idle(1)
            },
        };
        let (order, pick) = order_members(&members, load, None, 1);
        let names: Vec<&str> = order.iter().map(|t| t.provider.as_str()).collect();
        assert_eq!((names, pick), (vec!["a", "c", "b"], Pick::Load));
        // A session whose member is unavailable goes to the next in its ranking, still affine.
        for i in 0..200 {
            let (order, pick) = order_members(&members, load, Some(&format!("s{i}")), 0);
            assert_ne!(order[0].provider, "b");
            assert_eq!(pick, Pick::Affinity);
        }
        let down = |_: &Target| MemberLoad {
            available: false,
            ..MemberLoad::idle(1)
        };
        let (order, pick) = order_members(&members, down, Some("s"), 0);
        assert_eq!((order, pick), (members.clone(), Pick::NoneAvailable));
        // A full member (it would queue) comes after one with room, however light its load.
        let full_a = |t: &Target| MemberLoad {
            has_room: t.provider != "a",
            outstanding: if t.provider == "a" { 0 } else { 9 },
            ..MemberLoad::idle(1)
        };
        let (order, _) = order_members(&members, full_a, None, 0);
        assert_eq!(order.last().map(|t| t.provider.as_str()), Some("a"));
    }

    #[test]
    fn latency_balance_weighs_outstanding_by_each_members_speed() {
        let members = pool(&["fast", "slow", "new"]);
        let load = |t: &Target| match t.provider.as_str() {
            "fast" => MemberLoad {
                outstanding: 3,
                latency_us: Some(5_000),
                ..MemberLoad::idle(1)
            },
            "slow" => MemberLoad {
                outstanding: 0,
                latency_us: Some(250_000),
                ..MemberLoad::idle(1)
            },
            _ => MemberLoad {
                outstanding: 4,
                ..MemberLoad::idle(1)
            },
        };
        // Fewest outstanding: the idle slow one. Least expected wait: the busy fast one
        // (4 × 5 ms < 1 × 250 ms), and the unmeasured one counts as fast (5 × 5 ms).
        let names = |balance| {
            let (order, _) = order_members_by(balance, &members, load, None, 0);
            order.iter().map(|t| t.provider.clone()).collect::<Vec<_>>()
        };
        assert_eq!(names(Balance::LeastOutstanding), ["slow", "fast", "new"]);
        assert_eq!(names(Balance::Latency), ["fast", "new", "slow"]);
    }

    #[test]
    fn a_full_member_keeps_its_session_only_when_no_other_has_room() {
        let members = pool(&["a", "b"]);
        let (order, _) = order_members(&members, |_| MemberLoad::idle(1), Some("s"), 0);
        let affine = order[0].provider.clone();
        let full = |t: &Target| MemberLoad {
            has_room: t.provider != affine,
            outstanding: 0,
            ..MemberLoad::idle(1)
        };
        let (order, pick) = order_members(&members, full, Some("s"), 0);
        assert_ne!(order[0].provider, affine);
        assert_eq!(pick, Pick::Load);
        let all_full = |_: &Target| MemberLoad {
            has_room: false,
            ..MemberLoad::idle(1)
        };
        let (order, pick) = order_members(&members, all_full, Some("s"), 0);
        assert_eq!((order[0].provider.clone(), pick), (affine, Pick::Affinity));
    }

    #[test]
    fn the_hash_is_fixed() {
        // A change here moves every session of every deployment: never without a reason.
        let fnv = |bytes: &[u8]| {
            let mut fnv = Fnv::default();
            fnv.write(bytes);
            fnv.0
        };
        // FNV-1a's published test vectors.
        assert_eq!(fnv(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv(b"foobar"), 0x8594_4171_f739_67e8);
        assert_eq!(splitmix64(0), 0xe220_a839_7b1d_cdaf);
    }
}
