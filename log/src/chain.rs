//! The blake3 hash chain.
//!
//! The chain runs over blocks, not single records: hashing a 100-byte record costs about
//! as much as hashing 1 KiB, so one link per block of frames keeps the chain far off the
//! hot path. Each frame still carries a crc32c for fast torn-write detection and local
//! damage reports.
//!
//! ```text
//! link[n] = blake3_keyed(K, frames[n] ‖ meta[n] ‖ link[n-1])
//! ```
//!
//! The frames come first so that blake3 sees them on its 1 KiB chunk boundaries (a
//! prefix would shift them and halve its speed); the 32 bytes of block metadata (see
//! [`BlockHeader::chain_meta`](crate::format::BlockHeader::chain_meta)) and the previous
//! link follow. `K` is derived from the secret key in keyed mode and from a public
//! constant otherwise, so a keyed chain cannot be recomputed by whoever lacks the key.

use std::fmt;

/// A chain link: 32 bytes of blake3 output.
pub type Link = [u8; 32];

/// The link that precedes the very first block of a log.
pub const GENESIS_LINK: Link = [0u8; 32];

const UNKEYED_CONTEXT: &str = "blackbox-log 2026-11-30 chain link, unkeyed";
const KEYED_CONTEXT: &str = "blackbox-log 2026-11-30 chain link, keyed";
const KEY_ID_CONTEXT: &str = "blackbox-log 2026-11-30 key id";
const TAG_UNKEYED_CONTEXT: &str = "blackbox-log 2026-12-01 tag index, unkeyed";
const TAG_KEYED_CONTEXT: &str = "blackbox-log 2026-12-01 tag index, keyed";

/// A secret 32-byte key mixed into every chain link.
///
/// Whoever can write the log's files but lacks the key cannot produce a chain that
/// verifies with it. The key's `Debug` output never shows the key.
#[derive(Clone, PartialEq, Eq)]
pub struct ChainKey([u8; 32]);

impl ChainKey {
    /// Wraps 32 secret bytes.
    pub fn new(bytes: [u8; 32]) -> ChainKey {
        ChainKey(bytes)
    }

    /// The id written into segment headers: identifies the key without revealing it.
    pub fn id(&self) -> [u8; 32] {
        blake3::derive_key(KEY_ID_CONTEXT, &self.0)
    }
}

impl fmt::Debug for ChainKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ChainKey(<secret>)")
    }
}

/// Computes chain links for one log (keyed or not).
#[derive(Clone)]
pub(crate) struct Chainer {
    hash_key: [u8; 32],
    tag_key: [u8; 32],
}

impl fmt::Debug for Chainer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Chainer")
    }
}

impl Chainer {
    pub(crate) fn new(key: Option<&ChainKey>) -> Chainer {
        let (hash_key, tag_key) = match key {
            Some(k) => (
                blake3::derive_key(KEYED_CONTEXT, &k.0),
                blake3::derive_key(TAG_KEYED_CONTEXT, &k.0),
            ),
            None => (
                blake3::derive_key(UNKEYED_CONTEXT, &[]),
                blake3::derive_key(TAG_UNKEYED_CONTEXT, &[]),
            ),
        };
        Chainer { hash_key, tag_key }
    }

    /// The authenticator of a sealed segment's tag index
    /// ([`Footer::tag_mac_message`](crate::format::Footer::tag_mac_message)).
    pub(crate) fn tag_mac(&self, message: &[u8]) -> Link {
        *blake3::keyed_hash(&self.tag_key, message).as_bytes()
    }

    /// The link of a block with these frames and metadata following `prev`.
    pub(crate) fn link(&self, frames: &[u8], meta: &[u8; 32], prev: &Link) -> Link {
        let mut h = blake3::Hasher::new_keyed(&self.hash_key);
        h.update(frames);
        h.update(meta);
        h.update(prev);
        *h.finalize().as_bytes()
    }
}

/// Formats a link as 64 lowercase hex digits.
pub fn link_to_hex(link: &Link) -> String {
    let mut s = String::with_capacity(64);
    for b in link {
        s.push(char::from(HEX[usize::from(b >> 4)]));
        s.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    s
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Parses 64 hex digits into a link.
pub fn link_from_hex(s: &str) -> Option<Link> {
    let bytes = s.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        let hi = char::from(pair[0]).to_digit(16)?;
        let lo = char::from(pair[1]).to_digit(16)?;
        out[i] = u8::try_from(hi * 16 + lo).ok()?;
    }
    Some(out)
}

/// A point in the chain that can be written down and checked later: `SEQ:HASH`.
///
/// `seq` is the last record of a block and `link` that block's chain link, which
/// commits to every record up to and including `seq`. Checking a digest against a log
/// proves the log still holds that exact prefix, and so catches a cut tail that a
/// plain verification cannot see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Digest {
    /// The last seq the digest covers.
    pub seq: u64,
    /// The chain link after that record.
    pub link: Link,
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.seq, link_to_hex(&self.link))
    }
}

impl std::str::FromStr for Digest {
    type Err = crate::Error;

    fn from_str(s: &str) -> Result<Digest, crate::Error> {
        let invalid = || crate::Error::InvalidDigest {
            input: s.to_owned(),
        };
        let (seq, hash) = s.trim().split_once(':').ok_or_else(invalid)?;
        let seq = seq.parse().map_err(|_| invalid())?;
        let link = link_from_hex(hash).ok_or_else(invalid)?;
        Ok(Digest { seq, link })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_round_trips_through_text() {
        let d = Digest {
            seq: 12,
            link: [0xab; 32],
        };
        let text = d.to_string();
        assert_eq!(text.parse::<Digest>().ok(), Some(d));
        assert!("12".parse::<Digest>().is_err());
        assert!("x:00".parse::<Digest>().is_err());
    }

    #[test]
    fn keyed_and_unkeyed_links_differ() {
        let meta = [1u8; 32];
        let a = Chainer::new(None).link(b"frames", &meta, &GENESIS_LINK);
        let b = Chainer::new(Some(&ChainKey::new([5; 32]))).link(b"frames", &meta, &GENESIS_LINK);
        assert_ne!(a, b);
    }
}
