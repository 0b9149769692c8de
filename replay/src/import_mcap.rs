//! Importing an MCAP recording (ROS 2's default format, Foxglove's) into a log through
//! a retention policy, so that recordings made elsewhere get tiers, accounting and
//! incidents.
//!
//! Each message becomes an event recorded at its `log_time`: the recorder runs on a
//! [`ManualClock`] the file drives, set to each message's log time before the message
//! is recorded. The recorder's stamps never go back, so a message whose log time is
//! earlier than one recorded before it is stamped at that earlier message's time (as
//! on a live clock that stepped back). Then:
//!
//! - kind: the channel's topic with one leading `/` dropped and every other `/` read
//!   as `.` (`/robot/imu` → `robot.imu`); a topic that gives no valid kind stops the
//!   import with an error naming it.
//! - a message whose channel's encoding is `json` and whose bytes are JSON: a JSON
//!   payload (the text as the file holds it); the numbers among its top-level fields
//!   become the event's values (by field name, in name order, up to
//!   [`blackbox::VALUES_PER_EVENT_MAX`]), so summaries aggregate them; the channel's
//!   schema name, if it has a schema, is the event's source.
//! - any other message: a raw payload (its bytes), with source `ENCODING:SCHEMA` (the
//!   channel's message encoding and schema name, like `cdr:sensor_msgs/msg/Imu`).
//! - a message's `publish_time`, when not 0, is the event's event time.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use blackbox::{Config, Counters, Event, ManualClock, Recorder};
use mcap::records::Record;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::error::Error;

/// What an import recorded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct McapImport {
    /// Messages recorded.
    pub messages: u64,
    /// Of them, recorded with a raw payload (an encoding other than JSON).
    pub raw: u64,
    /// Messages by kind.
    pub per_kind: BTreeMap<String, u64>,
    /// The first and last message's log time (ns).
    pub first_log_ns: Option<u64>,
    /// See `first_log_ns`.
    pub last_log_ns: Option<u64>,
    /// The file's bytes read.
    pub bytes: u64,
    /// The recorder's counters by kind after the import (what the policy kept, sampled,
    /// summarized or dropped), running totals of the log.
    pub counters: BTreeMap<String, Counters>,
}

/// An import that stopped: what it recorded before (kept, and synced to disk), and why
/// it stopped.
#[derive(Debug)]
pub struct ImportFailed {
    /// What was recorded before the fault.
    pub recorded: McapImport,
    /// The fault.
    pub error: Error,
}

/// The kind of a topic: one leading `/` dropped, every other `/` read as `.`.
///
/// # Errors
///
/// A sentence naming the topic when the result is not a valid kind
/// ([`blackbox::policy::validate_kind`]).
pub fn topic_kind(topic: &str) -> std::result::Result<String, String> {
    let kind = topic.strip_prefix('/').unwrap_or(topic).replace('/', ".");
    blackbox::policy::validate_kind(&kind)
        .map(|()| kind)
        .map_err(|e| format!("topic {topic:?} gives no valid kind: {e}"))
}

/// One channel's mapping.
struct ChannelMap {
    kind: String,
    json: bool,
    /// The event's source: the schema name for JSON, `ENCODING:SCHEMA` for raw.
    source: Option<String>,
    topic: String,
}

/// Imports the MCAP file `path` into the log in `dir`, recording each message through
/// `config`'s policy at its log time (the module's documentation says how messages map
/// to events). `config`'s clock is replaced by one the file drives. The log is opened
/// at the first message's time and closed (synced) at the end, or when a fault stops the
/// import: what was recorded before it is kept. `progress` is called with the byte
/// offset read.
///
/// # Errors
///
/// [`ImportFailed`]: the file is not an MCAP file or is damaged ([`Error::Mcap`], with
/// the offset), a topic gives no valid kind or a message cannot be recorded (an
/// [`Error::Mcap`] naming it), or the recorder failed.
pub fn import_mcap(
    path: &Path,
    dir: &Path,
    config: Config,
    progress: &mut dyn FnMut(u64),
) -> std::result::Result<McapImport, Box<ImportFailed>> {
    let clock = ManualClock::new(0);
    let mut config = Some(config.clock(Arc::new(clock.clone())));
    let mut recorder: Option<Recorder> = None;
    let mut schemas: HashMap<u16, (String, String)> = HashMap::new();
    let mut channels: HashMap<u16, ChannelMap> = HashMap::new();
    let mut done = McapImport::default();
    let read = crate::mcap_read::read_mcap(path, &mut |record, offset| {
        match record {
            Record::Schema { header, .. } => {
                schemas.insert(header.id, (header.name, header.encoding));
            }
            Record::Channel(c) => {
                let kind =
                    topic_kind(&c.topic).map_err(|reason| mcap_fault(path, offset, reason))?;
                let schema = schemas.get(&c.schema_id).map(|(name, _)| name.clone());
                let json = c.message_encoding == "json";
                let source = if json {
                    schema
                } else {
                    Some(format!(
                        "{}:{}",
                        c.message_encoding,
                        schema.unwrap_or_default()
                    ))
                };
                channels.insert(
                    c.id,
                    ChannelMap {
                        kind,
                        json,
                        source,
                        topic: c.topic,
                    },
                );
            }
            Record::Message { header, data } => {
                let Some(channel) = channels.get(&header.channel_id) else {
                    return Err(mcap_fault(
                        path,
                        offset,
                        format!(
                            "a message names channel {}, which no channel record before it declares",
                            header.channel_id
                        ),
                    ));
                };
                clock.set_ns(header.log_time);
                if recorder.is_none() {
                    let Some(config) = config.take() else {
                        return Err(Error::Recorder(blackbox::Error::Closed));
                    };
                    recorder = Some(Recorder::open(dir, config).map_err(Error::Recorder)?);
                }
                let Some(r) = recorder.as_ref() else {
                    return Err(Error::Recorder(blackbox::Error::Closed));
                };
                let mut values: Vec<(Cow<'_, str>, f64)> = Vec::new();
                let text = channel
                    .json
                    .then(|| std::str::from_utf8(&data).ok())
                    .flatten()
                    .filter(|t| top_level_numbers(t, &mut values));
                let mut event = Event::new(&channel.kind);
                if let Some(s) = &channel.source {
                    event = event.source(s);
                }
                if header.publish_time != 0 {
                    event = event.event_time_ns(header.publish_time);
                }
                let named: Vec<(&str, f64)>;
                match text {
                    Some(t) => {
                        named = values.iter().map(|(n, v)| (n.as_ref(), *v)).collect();
                        event = event.json(t).values(&named);
                    }
                    None => {
                        event = event.raw(&data);
                        done.raw += 1;
                    }
                }
                r.record(&event).map_err(|e| match e {
                    e @ (blackbox::Error::InvalidName { .. }
                    | blackbox::Error::EventTooLarge { .. }
                    | blackbox::Error::TooManyValues { .. }
                    | blackbox::Error::NameLimit(_)) => mcap_fault(
                        path,
                        offset,
                        format!(
                            "a message on {:?} at log time {} cannot be recorded: {e}",
                            channel.topic, header.log_time
                        ),
                    ),
                    e => Error::Recorder(e),
                })?;
                done.messages += 1;
                match done.per_kind.get_mut(&channel.kind) {
                    Some(n) => *n += 1,
                    None => {
                        done.per_kind.insert(channel.kind.clone(), 1);
                    }
                }
                done.first_log_ns.get_or_insert(header.log_time);
                done.last_log_ns = Some(header.log_time);
                if done.messages % 4096 == 0 {
                    progress(offset);
                }
            }
            _ => {}
        }
        Ok(())
    });
    // A whole file without messages still gives a log, opened at the time of the
    // import; a file refused before its first message gives none.
    if recorder.is_none()
        && read.is_ok()
        && let Some(config) = config.take()
    {
        clock.set_ns(crate::export::now_ns());
        match Recorder::open(dir, config) {
            Ok(r) => recorder = Some(r),
            Err(e) => {
                return Err(Box::new(ImportFailed {
                    recorded: done,
                    error: Error::Recorder(e),
                }));
            }
        }
    }
    let mut error = match read {
        Ok((bytes, _)) => {
            done.bytes = bytes;
            None
        }
        Err(e) => Some(e),
    };
    if let Some(r) = recorder {
        if let Ok(counters) = r.stats() {
            done.counters = counters;
        }
        // What was recorded is kept: closing writes the open summary windows and
        // syncs, whether the file was read to its end or not.
        if let Err(e) = r.close()
            && error.is_none()
        {
            error = Some(Error::Recorder(e));
        }
    }
    match error {
        None => Ok(done),
        Some(error) => Err(Box::new(ImportFailed {
            recorded: done,
            error,
        })),
    }
}

fn mcap_fault(path: &Path, offset: u64, reason: String) -> Error {
    Error::Mcap {
        path: PathBuf::from(path),
        offset,
        reason,
    }
}

/// Reads the numbers among the top-level fields of the JSON object `text` into
/// `values` (by name, in name order, at most [`blackbox::VALUES_PER_EVENT_MAX`], names
/// of 1 to 256 bytes); false when `text` is not JSON. A JSON value other than an
/// object has none.
fn top_level_numbers<'t>(text: &'t str, values: &mut Vec<(Cow<'t, str>, f64)>) -> bool {
    values.clear();
    let mut de = serde_json::Deserializer::from_str(text);
    let ok = de.deserialize_any(TopLevel(values)).is_ok() && de.end().is_ok();
    values.sort_by(|a, b| a.0.cmp(&b.0));
    values.dedup_by(|a, b| a.0 == b.0);
    values.truncate(blackbox::VALUES_PER_EVENT_MAX);
    ok
}

/// A JSON value read for its top-level numeric fields.
struct TopLevel<'v, 't>(&'v mut Vec<(Cow<'t, str>, f64)>);

impl<'de> Visitor<'de> for TopLevel<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<(), A::Error> {
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            if let Some(v) = map.next_value::<Number>()?.0
                && (1..=256).contains(&key.len())
            {
                self.0.push((key, v));
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> std::result::Result<(), E> {
        Ok(())
    }
}

/// A field's name: borrowed from the text unless it holds an escape.
struct Key<'t>(Cow<'t, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Key<'de>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> std::result::Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> std::result::Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> std::result::Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// A field's value: its number, or none for any other JSON value.
struct Number(Option<f64>);

impl<'de> serde::Deserialize<'de> for Number {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Number, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Number;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_i64<E>(self, v: i64) -> std::result::Result<Number, E> {
                Ok(Number(Some(v as f64)))
            }
            fn visit_u64<E>(self, v: u64) -> std::result::Result<Number, E> {
                Ok(Number(Some(v as f64)))
            }
            fn visit_f64<E>(self, v: f64) -> std::result::Result<Number, E> {
                Ok(Number(Some(v)))
            }
            fn visit_bool<E>(self, _: bool) -> std::result::Result<Number, E> {
                Ok(Number(None))
            }
            fn visit_str<E>(self, _: &str) -> std::result::Result<Number, E> {
                Ok(Number(None))
            }
            fn visit_unit<E>(self) -> std::result::Result<Number, E> {
                Ok(Number(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> std::result::Result<Number, A::Error> {
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Number(None))
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut m: A,
            ) -> std::result::Result<Number, A::Error> {
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Number(None))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_map_to_kinds() {
        assert_eq!(topic_kind("/robot/imu").as_deref(), Ok("robot.imu"));
        assert_eq!(topic_kind("sensor.imu").as_deref(), Ok("sensor.imu"));
        assert_eq!(
            topic_kind("/camera/image_raw").as_deref(),
            Ok("camera.image_raw")
        );
        assert!(topic_kind("/").is_err());
        assert!(topic_kind("/a//b").is_err());
        assert!(topic_kind("/tf static").is_err());
    }

    /// The numbers among the top-level fields, by name, and no others: nested numbers,
    /// strings, booleans and arrays are not values.
    #[test]
    fn top_level_numbers_are_the_values() {
        let mut v = Vec::new();
        assert!(top_level_numbers(
            r#"{"z": 1, "a": -2.5, "s": "3", "n": {"x": 4}, "l": [5], "b": true, "u": null, "big": 18446744073709551615}"#,
            &mut v
        ));
        let got: Vec<(&str, f64)> = v.iter().map(|(n, x)| (n.as_ref(), *x)).collect();
        assert_eq!(
            got,
            vec![("a", -2.5), ("big", 18446744073709551615.0), ("z", 1.0)]
        );
        let mut v = Vec::new();
        assert!(top_level_numbers("[1, 2]", &mut v));
        assert!(v.is_empty());
        // An escaped name is read as the name it spells.
        assert!(top_level_numbers(r#"{"a\u0062": 3}"#, &mut v));
        assert_eq!(v, vec![(Cow::Borrowed("ab"), 3.0)]);
        let mut v = Vec::new();
        assert!(top_level_numbers("[1]", &mut v));
        assert!(v.is_empty());
        assert!(!top_level_numbers("{\"a\": 1", &mut v));
        assert!(!top_level_numbers("{} x", &mut v));
    }
}
