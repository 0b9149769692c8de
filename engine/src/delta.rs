//! The working-memory delta record (type [`codec::WORKING`](crate::codec::WORKING)): the
//! keys the memory's changes at one time set, to what, and the keys they removed.
//!
//! A UTF-8 JSON object, like a checkpoint: `{"set": {key: value, ...}, "del": [key,
//! ...]}`, each member omitted when empty, no key in both. It is the net effect of every
//! change stamped at the record's timestamp that the writer took together; the changes
//! of one time may take several records when they do not fit one, each applied in log
//! order. `docs/FORMAT.md` gives the rule readers fold them by.

use serde_json::{Map, Value};

/// One delta record, decoded.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WorkingDelta {
    /// Keys set, and their new values.
    pub set: Map<String, Value>,
    /// Keys removed.
    pub del: Vec<String>,
}

impl WorkingDelta {
    /// Decodes a delta record's payload.
    ///
    /// # Errors
    ///
    /// A sentence saying what is wrong: not a JSON object, a member other than `set` and
    /// `del`, `set` not an object, `del` not an array of strings, a key removed twice or
    /// both set and removed, or no key at all.
    pub fn decode(payload: &[u8]) -> Result<WorkingDelta, String> {
        let value: Value = serde_json::from_slice(payload)
            .map_err(|e| format!("a working-memory delta is a JSON object: {e}"))?;
        let Value::Object(mut obj) = value else {
            return Err("a working-memory delta is a JSON object, not another JSON value".into());
        };
        let set = match obj.remove("set") {
            None => Map::new(),
            Some(Value::Object(set)) => set,
            Some(_) => return Err("its \"set\" is not a JSON object".into()),
        };
        let mut del = Vec::new();
        match obj.remove("del") {
            None => {}
            Some(Value::Array(keys)) => {
                del.reserve(keys.len());
                for k in keys {
                    let Value::String(k) = k else {
                        return Err("its \"del\" holds something other than a key".into());
                    };
                    if set.contains_key(&k) {
                        return Err(format!("key {k:?} is removed twice, or set and removed"));
                    }
                    del.push(k);
                }
            }
            Some(_) => return Err("its \"del\" is not a JSON array".into()),
        }
        // A key removed twice, found in O(n log n): the removals sorted, neighbours
        // compared (`set` is a sorted map: each lookup above is O(log n)).
        let mut sorted: Vec<&String> = del.iter().collect();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!(
                "key {:?} is removed twice, or set and removed",
                w[0]
            ));
        }
        if let Some(member) = obj.keys().next() {
            return Err(format!("unknown member {member:?}"));
        }
        if set.is_empty() && del.is_empty() {
            return Err("it changes nothing (a delta sets or removes at least one key)".into());
        }
        Ok(WorkingDelta { set, del })
    }

    /// The delta as the writer encodes it: records of at most `limit_bytes` each (one
    /// when it fits), the sets then the removals, in their order, each value as its
    /// compact JSON text. Decoding the records and applying them in order is applying
    /// the delta. No record for a delta that changes nothing.
    pub fn encode(&self, limit_bytes: usize) -> Vec<Vec<u8>> {
        let sets: Vec<(String, String)> = self
            .set
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect();
        encode(&sets, &self.del, limit_bytes)
    }

    /// Applies the delta to a memory.
    pub fn apply(self, memory: &mut Map<String, Value>) {
        for k in &self.del {
            memory.remove(k);
        }
        memory.extend(self.set);
    }
}

/// Encodes a delta as records of at most `limit_bytes` each: one when it fits, else
/// several (the sets and removals split between them, in key order). Each value set is
/// given as its compact JSON text. A single entry always fits when the memory respects
/// its limit (`DELTA_OVERHEAD_BYTES` below the record limit).
pub(crate) fn encode(
    sets: &[(String, String)],
    dels: &[String],
    limit_bytes: usize,
) -> Vec<Vec<u8>> {
    /// `{` `}`, `"set":{` `}`, `"del":[` `]`, and the comma between the two.
    const BRACES: usize = 2;
    const SECTION: usize = 8;
    let size = |s_n: usize, s_bytes: usize, d_n: usize, d_bytes: usize| {
        let section = |n: usize, bytes: usize| if n == 0 { 0 } else { SECTION + bytes + n - 1 };
        BRACES + section(s_n, s_bytes) + section(d_n, d_bytes) + usize::from(s_n > 0 && d_n > 0)
    };
    let mut chunks = Vec::new();
    let (mut s_parts, mut d_parts): (Vec<Vec<u8>>, Vec<Vec<u8>>) = (Vec::new(), Vec::new());
    let (mut s_bytes, mut d_bytes) = (0, 0);
    let flush = |s: &mut Vec<Vec<u8>>, d: &mut Vec<Vec<u8>>, chunks: &mut Vec<Vec<u8>>| {
        if s.is_empty() && d.is_empty() {
            return;
        }
        let mut out = b"{".to_vec();
        if !s.is_empty() {
            out.extend_from_slice(b"\"set\":{");
            out.extend_from_slice(&s.join(&b","[..]));
            out.push(b'}');
        }
        if !d.is_empty() {
            if !s.is_empty() {
                out.push(b',');
            }
            out.extend_from_slice(b"\"del\":[");
            out.extend_from_slice(&d.join(&b","[..]));
            out.push(b']');
        }
        out.push(b'}');
        chunks.push(out);
        s.clear();
        d.clear();
    };
    let entries = sets
        .iter()
        .map(|(k, v)| (k, Some(v.as_bytes())))
        .chain(dels.iter().map(|k| (k, None)));
    for (key, value) in entries {
        // Writing JSON of a `String` into a vector cannot fail.
        let mut part = serde_json::to_vec(key).unwrap_or_default();
        if let Some(v) = value {
            part.push(b':');
            part.extend_from_slice(v);
        }
        let (s_n, d_n) = (s_parts.len(), d_parts.len());
        let after = match value {
            Some(_) => size(s_n + 1, s_bytes + part.len(), d_n, d_bytes),
            None => size(s_n, s_bytes, d_n + 1, d_bytes + part.len()),
        };
        if after > limit_bytes && s_n + d_n > 0 {
            flush(&mut s_parts, &mut d_parts, &mut chunks);
            (s_bytes, d_bytes) = (0, 0);
        }
        if value.is_some() {
            s_bytes += part.len();
            s_parts.push(part);
        } else {
            d_bytes += part.len();
            d_parts.push(part);
        }
    }
    flush(&mut s_parts, &mut d_parts, &mut chunks);
    chunks
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    #[test]
    fn a_delta_reads_back_as_written() {
        let sets = vec![
            ("goal".to_owned(), json!({"task": "pick"}).to_string()),
            ("step".to_owned(), json!(2).to_string()),
        ];
        let dels = vec!["grip".to_owned()];
        let chunks = encode(&sets, &dels, 1 << 20);
        assert_eq!(chunks.len(), 1);
        assert_eq!(
            std::str::from_utf8(&chunks[0]).unwrap(),
            r#"{"set":{"goal":{"task":"pick"},"step":2},"del":["grip"]}"#
        );
        let d = WorkingDelta::decode(&chunks[0]).unwrap();
        assert_eq!(d.set.len(), 2);
        assert_eq!(d.del, ["grip"]);
    }

    #[test]
    fn bad_deltas_are_refused_with_the_reason() {
        for (bad, why) in [
            (&b"[1]"[..], "JSON object"),
            (br#"{"set":[1]}"#, "\"set\""),
            (br#"{"del":{"a":1}}"#, "\"del\""),
            (br#"{"del":[1]}"#, "something other than a key"),
            (br#"{"set":{"a":1},"del":["a"]}"#, "set and removed"),
            (br#"{"del":["a","a"]}"#, "removed twice"),
            (br#"{"put":{}}"#, "unknown member"),
            (b"{}", "changes nothing"),
            (br#"{"set":{},"del":[]}"#, "changes nothing"),
            (b"{", "JSON object"),
        ] {
            let err = WorkingDelta::decode(bad).unwrap_err();
            assert!(
                err.contains(why),
                "{err:?} for {:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    /// A delta of many keys: each removal checked against the others without a pass
    /// over all of them per key. A key removed twice anywhere among them is refused, by
    /// name; the same keys each once are accepted, in their order.
    #[test]
    fn a_large_delta_is_checked_for_duplicates_whole() {
        let n = 200_000;
        let keys: Vec<String> = (0..n).map(|i| format!("k{i:06}")).collect();
        let sets: Vec<String> = (0..1000).map(|i| format!("s{i}")).collect();
        let text = |del: &[String]| {
            serde_json::to_vec(&json!({
                "set": sets.iter().map(|k| (k.clone(), json!(1))).collect::<Map<_, _>>(),
                "del": del,
            }))
            .unwrap()
        };
        // Reversed, so that the removals are not given sorted.
        let mut unique: Vec<String> = keys.iter().rev().cloned().collect();
        let d = WorkingDelta::decode(&text(&unique)).unwrap();
        assert_eq!(d.del, unique);
        assert_eq!(d.set.len(), 1000);
        // The first key again at the very end: the two are as far apart as can be.
        unique.push(keys[n - 1].clone());
        let err = WorkingDelta::decode(&text(&unique)).unwrap_err();
        assert!(
            err.contains("\"k199999\"") && err.contains("removed twice"),
            "{err}"
        );
        // A removal of a key also set, at the end.
        unique.pop();
        unique.push("s999".to_owned());
        let err = WorkingDelta::decode(&text(&unique)).unwrap_err();
        assert!(
            err.contains("\"s999\"") && err.contains("set and removed"),
            "{err}"
        );
    }

    proptest! {
        /// However the entries are split, every record fits the limit, is valid JSON of
        /// the delta's form, and together they hold every entry once.
        #[test]
        fn chunks_fit_the_limit_and_hold_every_entry(
            sets in prop::collection::btree_map("[a-z]{1,6}", ".{0,20}", 0..30),
            dels in prop::collection::btree_set("[A-Z]{1,6}", 0..30),
            // At least one entry's record: 8 + 20 characters of at most 6 bytes as JSON.
            limit in 160usize..600,
        ) {
            let sets: Vec<(String, String)> = sets.into_iter().map(|(k, v)| (k, json!(v).to_string())).collect();
            let dels: Vec<String> = dels.into_iter().collect();
            let chunks = encode(&sets, &dels, limit);
            let mut got_sets = Map::new();
            let mut got_dels = Vec::new();
            for c in &chunks {
                prop_assert!(c.len() <= limit, "{} > {limit}", c.len());
                let parsed: Value = serde_json::from_slice(c).unwrap();
                prop_assert!(parsed.is_object());
                let d = WorkingDelta::decode(c).unwrap();
                prop_assert!(!d.set.is_empty() || !d.del.is_empty());
                got_sets.extend(d.set);
                got_dels.extend(d.del);
            }
            prop_assert_eq!(
                got_sets,
                sets.into_iter()
                    .map(|(k, v)| (k, serde_json::from_str::<Value>(&v).unwrap()))
                    .collect::<Map<_, _>>()
            );
            prop_assert_eq!(got_dels, dels);
        }
    }
}
