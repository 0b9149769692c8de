//! The workload every contender writes and reads: `n` events of 8 kinds, each with a
//! nanosecond timestamp and a payload, in one of two variants; the kind-and-window
//! query; and the [`Tally`] that checks what a contender reads back.
//!
//! Everything is deterministic: the same `n` and variant always give the same events,
//! so every contender and every round sees identical input.

use std::fmt;

use crate::Result;

/// The event kinds, indexed by kind id. Every contender stores the kind its own way
/// (a name, a channel, an integer column, a byte); readers map it back to this index.
pub const KINDS: [&str; 8] = [
    "sensor.imu",
    "sensor.lidar",
    "joint.state",
    "odom.pose",
    "cmd.velocity",
    "planner.goal",
    "gripper.state",
    "power.battery",
];

/// Number of kinds.
pub const KIND_COUNT: usize = KINDS.len();

/// Size of a binary payload, in bytes.
pub const BINARY_PAYLOAD_BYTES: usize = 100;

/// Top-level members of every JSON payload (a robot's state message): `pose`, `vel`,
/// `mode`, `seq`. A reader that hands out parsed JSON checks this count.
pub const JSON_MEMBERS: usize = 4;

/// Bytes of a timestamp in the logical size of an event.
pub const LOGICAL_TS_BYTES: u64 = 8;
/// Bytes of a kind id in the logical size of an event (MCAP's channel id width).
pub const LOGICAL_KIND_BYTES: u64 = 2;

/// The kind the window query asks for (`joint.state`).
pub const WINDOW_KIND: u8 = 2;
/// Where the window starts, in per mille of the stream's time span.
pub const WINDOW_START_PER_MILLE: u64 = 450;
/// How long the window is, in per mille of the stream's time span (10 %).
pub const WINDOW_LEN_PER_MILLE: u64 = 100;

/// First timestamp of the stream (2023-11-14T22:13:20Z).
const BASE_TS_NS: u64 = 1_700_000_000_000_000_000;
/// Nominal spacing between events: 1 µs, plus up to 999 ns of jitter.
const TS_STEP_NS: u64 = 1_000;

/// The two payload variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// 100 pseudo-random (incompressible) bytes.
    Binary,
    /// About 100 bytes of JSON text: a robot's state message.
    Json,
}

impl Variant {
    /// Both variants, in report order.
    pub const ALL: [Variant; 2] = [Variant::Binary, Variant::Json];

    /// The name used on the command line and in the report.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Variant::Binary => "binary",
            Variant::Json => "json",
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// SplitMix64: tiny, fast and good enough to make payloads incompressible.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `[0, n)` (`n` small: the bias is negligible).
    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// The payload bytes of every event, back to back.
#[derive(Debug, Clone)]
enum Arena {
    Binary(Vec<u8>),
    /// Kept as a `String` so that JSON payloads are handed out as `&str` at no cost,
    /// as a host's serializer would hand them to a recorder.
    Json(String),
}

impl Arena {
    fn bytes(&self) -> &[u8] {
        match self {
            Arena::Binary(b) => b,
            Arena::Json(s) => s.as_bytes(),
        }
    }
}

/// One event of the workload, borrowed from it.
#[derive(Debug, Clone, Copy)]
pub struct Event<'a> {
    /// Position in the stream, from 0.
    pub seq: u64,
    /// Timestamp, ns since the Unix epoch; strictly increasing along the stream.
    pub ts_ns: u64,
    /// Kind id: an index into [`KINDS`].
    pub kind: u8,
    /// The payload bytes.
    pub payload: &'a [u8],
    /// The payload as text, for the JSON variant.
    pub json: Option<&'a str>,
}

impl Event<'_> {
    /// The kind's name.
    #[must_use]
    pub fn kind_name(&self) -> &'static str {
        KINDS[usize::from(self.kind)]
    }
}

/// "One kind in a time window": the events of `kind` stamped in `since_ns..=until_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowQuery {
    /// Kind id.
    pub kind: u8,
    /// First timestamp in the window (inclusive).
    pub since_ns: u64,
    /// Last timestamp in the window (inclusive).
    pub until_ns: u64,
}

impl WindowQuery {
    /// Whether an event of `kind` stamped `ts_ns` is in the answer.
    #[must_use]
    pub fn matches(&self, kind: u8, ts_ns: u64) -> bool {
        kind == self.kind && (self.since_ns..=self.until_ns).contains(&ts_ns)
    }

    /// The kind's name.
    #[must_use]
    pub fn kind_name(&self) -> &'static str {
        KINDS[usize::from(self.kind)]
    }
}

/// The generated events.
#[derive(Debug, Clone)]
pub struct Workload {
    variant: Variant,
    ts_ns: Vec<u64>,
    kinds: Vec<u8>,
    /// End offset of each payload in the arena.
    ends: Vec<usize>,
    arena: Arena,
}

impl Workload {
    /// Builds `n` events of `variant`.
    ///
    /// # Errors
    ///
    /// Fails if `n` does not fit in memory addressing (`usize`).
    pub fn generate(n: u64, variant: Variant) -> Result<Workload> {
        let len = usize::try_from(n)?;
        let mut rng = SplitMix64(0x0B1A_C0B0_0000_0001);
        let mut ts_ns = Vec::with_capacity(len);
        let mut kinds = Vec::with_capacity(len);
        let mut ends = Vec::with_capacity(len);
        let mut binary = Vec::new();
        let mut text = String::new();
        match variant {
            Variant::Binary => binary.reserve(len * BINARY_PAYLOAD_BYTES),
            Variant::Json => text.reserve(len * 112),
        }
        for seq in 0..n {
            let kind = u8::try_from(rng.below(KIND_COUNT as u64))?;
            let jitter = rng.below(TS_STEP_NS);
            ts_ns.push(BASE_TS_NS + seq * TS_STEP_NS + jitter);
            kinds.push(kind);
            match variant {
                Variant::Binary => {
                    let start = binary.len();
                    binary.resize(start + BINARY_PAYLOAD_BYTES, 0);
                    for chunk in binary[start..].chunks_mut(8) {
                        let word = rng.next_u64().to_le_bytes();
                        chunk.copy_from_slice(&word[..chunk.len()]);
                    }
                    ends.push(binary.len());
                }
                Variant::Json => {
                    push_state_message(&mut text, &mut rng, seq);
                    ends.push(text.len());
                }
            }
        }
        let arena = match variant {
            Variant::Binary => Arena::Binary(binary),
            Variant::Json => Arena::Json(text),
        };
        Ok(Workload {
            variant,
            ts_ns,
            kinds,
            ends,
            arena,
        })
    }

    /// The variant.
    #[must_use]
    pub fn variant(&self) -> Variant {
        self.variant
    }

    /// Number of events.
    #[must_use]
    pub fn len(&self) -> usize {
        self.ts_ns.len()
    }

    /// Whether there are no events.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ts_ns.is_empty()
    }

    /// Event `i` (`i < len()`).
    #[must_use]
    pub fn event(&self, i: usize) -> Event<'_> {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        let end = self.ends[i];
        let json = match &self.arena {
            Arena::Binary(_) => None,
            Arena::Json(s) => Some(&s[start..end]),
        };
        Event {
            seq: i as u64,
            ts_ns: self.ts_ns[i],
            kind: self.kinds[i],
            payload: &self.arena.bytes()[start..end],
            json,
        }
    }

    /// Every event, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Event<'_>> + '_ {
        (0..self.len()).map(|i| self.event(i))
    }

    /// Sum of the payloads' sizes.
    #[must_use]
    pub fn payload_bytes(&self) -> u64 {
        self.arena.bytes().len() as u64
    }

    /// The logical size of the stream, the denominator of every row's bytes on disk:
    /// each event's payload plus an 8-byte timestamp plus a 2-byte kind id.
    #[must_use]
    pub fn logical_bytes(&self) -> u64 {
        self.payload_bytes() + self.len() as u64 * (LOGICAL_TS_BYTES + LOGICAL_KIND_BYTES)
    }

    /// The window query: kind [`WINDOW_KIND`], from 45 % to 55 % of the stream's time
    /// span (both ends inclusive).
    #[must_use]
    pub fn window(&self) -> WindowQuery {
        let first = self.ts_ns.first().copied().unwrap_or(BASE_TS_NS);
        let last = self.ts_ns.last().copied().unwrap_or(BASE_TS_NS);
        let span = last - first;
        let since_ns = first + span / 1000 * WINDOW_START_PER_MILLE;
        let until_ns = since_ns + span / 1000 * WINDOW_LEN_PER_MILLE;
        WindowQuery {
            kind: WINDOW_KIND,
            since_ns,
            until_ns,
        }
    }

    /// What reading every event must give.
    #[must_use]
    pub fn expected_all(&self) -> Tally {
        let mut tally = Tally::default();
        for e in self.iter() {
            tally.add_known(e.kind, e.ts_ns, e.payload);
        }
        tally
    }

    /// What the window query must give.
    #[must_use]
    pub fn expected_window(&self, query: &WindowQuery) -> Tally {
        let mut tally = Tally::default();
        for e in self.iter().filter(|e| query.matches(e.kind, e.ts_ns)) {
            tally.add_known(e.kind, e.ts_ns, e.payload);
        }
        tally
    }
}

/// Appends one robot state message: pose (m, rad), velocity (m/s, rad/s), mode and
/// sequence number, compact JSON as a robot's middleware would emit it (about 100
/// bytes).
fn push_state_message(out: &mut String, rng: &mut SplitMix64, seq: u64) {
    use std::fmt::Write as _;
    const MODES: [&str; 4] = ["auto", "manual", "docking", "idle"];
    // Fixed-point values drawn as integers, so the text does not depend on float
    // formatting.
    let mut milli = |range: u64| -> i64 {
        let v = i64::try_from(rng.below(2 * range)).unwrap_or(0);
        v - i64::try_from(range).unwrap_or(0)
    };
    let (x, y, yaw) = (milli(10_000), milli(10_000), milli(3_142));
    let (v, w) = (milli(1_500), milli(2_000));
    let mode = MODES[usize::try_from(rng.below(4)).unwrap_or(0)];
    let fixed = |m: i64| {
        let sign = if m < 0 { "-" } else { "" };
        format!(
            "{sign}{}.{:03}",
            m.unsigned_abs() / 1000,
            m.unsigned_abs() % 1000
        )
    };
    // Writing into a String cannot fail.
    let _ = write!(
        out,
        r#"{{"pose":{{"x":{},"y":{},"yaw":{}}},"vel":{{"v":{},"w":{}}},"mode":"{mode}","seq":{seq}}}"#,
        fixed(x),
        fixed(y),
        fixed(yaw),
        fixed(v),
        fixed(w),
    );
}

/// What a read returned, summed so that a contender's answer can be compared with the
/// workload's: how many events, how many of each kind, their timestamps, and their
/// payloads' sizes and last eight bytes. A reader that hands out a parsed JSON payload
/// instead of its bytes counts it as parsed (after checking its shape).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Events read.
    pub events: u64,
    /// Events read, per kind id.
    pub per_kind: [u64; KIND_COUNT],
    /// Wrapping sum of the timestamps.
    pub ts_sum: u64,
    /// Sum of the payload sizes, over payloads read as bytes.
    pub payload_bytes: u64,
    /// Wrapping sum of each payload's last eight bytes (little-endian, zero-padded),
    /// over payloads read as bytes.
    pub payload_tail_sum: u64,
    /// Payloads handed out parsed (JSON), whose bytes the reader never sees.
    pub payloads_parsed: u64,
}

impl Tally {
    /// Counts an event whose kind id is known to be valid.
    fn add_known(&mut self, kind: u8, ts_ns: u64, payload: &[u8]) {
        self.count(usize::from(kind), ts_ns);
        self.payload_bytes += payload.len() as u64;
        self.payload_tail_sum = self.payload_tail_sum.wrapping_add(tail_word(payload));
    }

    fn count(&mut self, kind: usize, ts_ns: u64) {
        self.events += 1;
        self.per_kind[kind] += 1;
        self.ts_sum = self.ts_sum.wrapping_add(ts_ns);
    }

    /// Counts an event read back with its payload bytes.
    ///
    /// # Errors
    ///
    /// A kind id outside [`KINDS`].
    pub fn add(&mut self, kind: u8, ts_ns: u64, payload: &[u8]) -> Result<()> {
        check_kind(kind)?;
        self.add_known(kind, ts_ns, payload);
        Ok(())
    }

    /// Counts an event read back with its kind as a name.
    ///
    /// # Errors
    ///
    /// A name not in [`KINDS`].
    pub fn add_named(&mut self, kind: &str, ts_ns: u64, payload: &[u8]) -> Result<()> {
        self.add(kind_id(kind)?, ts_ns, payload)
    }

    /// Counts an event whose payload the reader handed out parsed as a JSON value.
    ///
    /// # Errors
    ///
    /// A kind name not in [`KINDS`], or a value that is not an object of
    /// [`JSON_MEMBERS`] members.
    pub fn add_parsed(&mut self, kind: &str, ts_ns: u64, value: &serde_json::Value) -> Result<()> {
        let kind = kind_id(kind)?;
        match value.as_object() {
            Some(object) if object.len() == JSON_MEMBERS => {}
            _ => {
                return Err(format!(
                    "an event stamped {ts_ns} has a JSON payload that is not the state message: {value}"
                )
                .into());
            }
        }
        self.count(usize::from(kind), ts_ns);
        self.payloads_parsed += 1;
        Ok(())
    }

    /// Checks that `got`, what a contender read, is this expected tally.
    ///
    /// Payloads read as bytes must match in size and tails; payloads handed out parsed
    /// must be exactly the events (their text is checked by the parser and their shape
    /// by [`Tally::add_parsed`]).
    ///
    /// # Errors
    ///
    /// A sentence naming the first figure that differs.
    pub fn check(&self, got: &Tally) -> Result<()> {
        let differ = |what: &str, want: &dyn fmt::Debug, got: &dyn fmt::Debug| {
            Err(format!("read back {got:?} {what}, expected {want:?}").into())
        };
        if got.events != self.events {
            return differ("events", &self.events, &got.events);
        }
        if got.per_kind != self.per_kind {
            return differ("events per kind", &self.per_kind, &got.per_kind);
        }
        if got.ts_sum != self.ts_sum {
            return differ("as the timestamps' sum", &self.ts_sum, &got.ts_sum);
        }
        if got.payloads_parsed == 0 {
            if got.payload_bytes != self.payload_bytes {
                return differ("payload bytes", &self.payload_bytes, &got.payload_bytes);
            }
            if got.payload_tail_sum != self.payload_tail_sum {
                return differ(
                    "as the payload tails' sum",
                    &self.payload_tail_sum,
                    &got.payload_tail_sum,
                );
            }
        } else if got.payloads_parsed != got.events || got.payload_bytes != 0 {
            return differ(
                "parsed payloads (some parsed, some not)",
                &got.events,
                &got.payloads_parsed,
            );
        }
        Ok(())
    }
}

/// The kind id of a kind name.
///
/// # Errors
///
/// A name not in [`KINDS`].
pub fn kind_id(name: &str) -> Result<u8> {
    match KINDS.iter().position(|k| *k == name) {
        // KINDS has 8 entries.
        Some(i) => Ok(u8::try_from(i)?),
        None => Err(format!("read back an event of unknown kind {name:?}").into()),
    }
}

fn check_kind(kind: u8) -> Result<()> {
    if usize::from(kind) < KIND_COUNT {
        Ok(())
    } else {
        Err(format!("read back an event of unknown kind id {kind}").into())
    }
}

/// The last eight bytes of `payload` as a little-endian word (zero-padded).
fn tail_word(payload: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    let tail = &payload[payload.len().saturating_sub(8)..];
    word[..tail.len()].copy_from_slice(tail);
    u64::from_le_bytes(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_variants_are_deterministic_ordered_and_use_every_kind() -> Result<()> {
        for variant in Variant::ALL {
            let a = Workload::generate(4_000, variant)?;
            let b = Workload::generate(4_000, variant)?;
            assert_eq!(a.len(), 4_000);
            assert!(
                a.iter()
                    .zip(b.iter())
                    .all(|(x, y)| (x.ts_ns, x.kind, x.payload) == (y.ts_ns, y.kind, y.payload))
            );
            let ts: Vec<u64> = a.iter().map(|e| e.ts_ns).collect();
            assert!(ts.windows(2).all(|w| w[0] < w[1]), "{variant}");
            let per_kind = a.expected_all().per_kind;
            // 4 000 events over 8 kinds: about 500 each.
            assert!(
                per_kind.iter().all(|&n| (400..600).contains(&n)),
                "{per_kind:?}"
            );
        }
        Ok(())
    }

    #[test]
    fn binary_payloads_are_100_random_bytes() -> Result<()> {
        let w = Workload::generate(1_000, Variant::Binary)?;
        assert!(w.iter().all(|e| e.payload.len() == 100 && e.json.is_none()));
        assert_ne!(w.event(0).payload, w.event(1).payload);
        assert_eq!(w.payload_bytes(), 100_000);
        assert_eq!(w.logical_bytes(), 110_000);
        Ok(())
    }

    #[test]
    fn json_payloads_are_state_messages_of_about_100_bytes() -> Result<()> {
        let w = Workload::generate(1_000, Variant::Json)?;
        for e in w.iter() {
            let text = e.json.ok_or("a JSON event without text")?;
            assert_eq!(text.as_bytes(), e.payload);
            let value: serde_json::Value = serde_json::from_str(text)?;
            let object = value.as_object().ok_or("not an object")?;
            assert_eq!(object.len(), JSON_MEMBERS, "{text}");
            assert_eq!(value["seq"].as_u64(), Some(e.seq), "{text}");
            assert!(value["pose"]["yaw"].is_f64(), "{text}");
        }
        // About 100 bytes: 90 to 100 here, where sequence numbers are short.
        let mean = w.payload_bytes() / w.len() as u64;
        assert!((90..=105).contains(&mean), "mean JSON payload {mean} B");
        Ok(())
    }

    #[test]
    fn the_window_is_a_tenth_of_the_span_and_one_kind() -> Result<()> {
        let w = Workload::generate(100_000, Variant::Binary)?;
        let q = w.window();
        let first = w.event(0).ts_ns;
        let last = w.event(w.len() - 1).ts_ns;
        let share = (q.until_ns - q.since_ns) as f64 / (last - first) as f64;
        assert!((0.099..=0.101).contains(&share), "{share}");
        let expected = w.expected_window(&q);
        // A tenth of the time, an eighth of the kinds: about 1 250 events.
        assert!((1_100..1_400).contains(&expected.events), "{expected:?}");
        assert_eq!(expected.events, expected.per_kind[usize::from(WINDOW_KIND)]);
        // The matching events, counted by hand.
        let by_hand = w
            .iter()
            .filter(|e| e.kind == WINDOW_KIND && e.ts_ns >= q.since_ns && e.ts_ns <= q.until_ns)
            .count();
        assert_eq!(expected.events, by_hand as u64);
        Ok(())
    }

    #[test]
    fn a_tally_that_differs_anywhere_is_refused() -> Result<()> {
        let w = Workload::generate(500, Variant::Binary)?;
        let expected = w.expected_all();
        let mut same = Tally::default();
        for e in w.iter() {
            same.add(e.kind, e.ts_ns, e.payload)?;
        }
        expected.check(&same)?;

        // One event missing, one payload cut short, one wrong kind, one wrong byte.
        let mut missing = Tally::default();
        let mut short = Tally::default();
        let mut wrong_kind = Tally::default();
        let mut wrong_byte = Tally::default();
        for e in w.iter() {
            if e.seq != 7 {
                missing.add(e.kind, e.ts_ns, e.payload)?;
            }
            let cut = if e.seq == 7 {
                &e.payload[..99]
            } else {
                e.payload
            };
            short.add(e.kind, e.ts_ns, cut)?;
            let kind = if e.seq == 7 { (e.kind + 1) % 8 } else { e.kind };
            wrong_kind.add(kind, e.ts_ns, e.payload)?;
            let mut bytes = e.payload.to_vec();
            if e.seq == 7 {
                bytes[99] ^= 1;
            }
            wrong_byte.add(e.kind, e.ts_ns, &bytes)?;
        }
        for bad in [missing, short, wrong_kind, wrong_byte] {
            assert!(expected.check(&bad).is_err(), "{bad:?}");
        }
        assert!(Tally::default().add(8, 0, &[]).is_err());
        assert!(kind_id("no.such").is_err());
        Ok(())
    }

    #[test]
    fn parsed_payloads_must_be_state_messages() -> Result<()> {
        let w = Workload::generate(300, Variant::Json)?;
        let expected = w.expected_all();
        let mut parsed = Tally::default();
        for e in w.iter() {
            let value: serde_json::Value = serde_json::from_slice(e.payload)?;
            parsed.add_parsed(e.kind_name(), e.ts_ns, &value)?;
        }
        expected.check(&parsed)?;
        let not_the_message = serde_json::json!({"pose": 1});
        assert!(
            Tally::default()
                .add_parsed(KINDS[0], 1, &not_the_message)
                .is_err()
        );
        // Parsed and raw payloads mixed in one read are refused.
        let mut mixed = Tally::default();
        for e in w.iter() {
            if e.seq == 0 {
                mixed.add(e.kind, e.ts_ns, e.payload)?;
            } else {
                let value: serde_json::Value = serde_json::from_slice(e.payload)?;
                mixed.add_parsed(e.kind_name(), e.ts_ns, &value)?;
            }
        }
        assert!(expected.check(&mixed).is_err());
        Ok(())
    }
}
