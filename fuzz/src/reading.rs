//! What the log targets share: reading a directory through the crate's readers into the
//! forger's [`Rec`]s, and the checks every error and every result must pass.

use std::path::Path;

use blackbox_log::{Error, LogReader, LogRecord, Seq};

use crate::forge::Rec;

/// A record read, as the forger's [`Rec`].
pub fn rec(r: &LogRecord) -> Rec {
    Rec {
        seq: r.seq().0,
        ts: r.ts_ns(),
        record_type: r.record_type().0,
        payload: r.payload().to_vec(),
    }
}

/// The records of seqs `lo..=hi`, or the first error.
///
/// # Errors
///
/// The reader's error.
pub fn by_seq(reader: &LogReader, lo: u64, hi: u64) -> Result<Vec<Rec>, Error> {
    reader
        .records(Seq(lo)..=Seq(hi))?
        .map(|r| r.map(|r| rec(&r)))
        .collect()
}

/// The records of timestamps `lo..=hi`, or the first error.
///
/// # Errors
///
/// The reader's error.
pub fn by_time(reader: &LogReader, lo: u64, hi: u64) -> Result<Vec<Rec>, Error> {
    reader
        .records_by_time(lo..=hi)?
        .map(|r| r.map(|r| rec(&r)))
        .collect()
}

/// Panics unless the error's sentence names a path inside `dir` (the segment or the
/// directory), as every error about bytes on disk must.
pub fn assert_names_file(what: &str, err: &Error, dir: &Path) {
    let shown = err.to_string();
    assert!(
        shown.contains(&*dir.to_string_lossy()),
        "{what}: the error does not name the file: {shown}"
    );
}

/// Panics unless the seqs of `v` follow one another.
pub fn assert_dense(what: &str, v: &[Rec]) {
    for w in v.windows(2) {
        assert!(
            w[0].seq.checked_add(1) == Some(w[1].seq),
            "{what}: seq {} followed by seq {}",
            w[0].seq,
            w[1].seq
        );
    }
}

/// Panics unless a read's result, if it is one, is exactly `expected` (which the
/// caller filtered to the range); an error must name the file.
pub fn check_read(
    what: &str,
    got: &Result<Vec<Rec>, Error>,
    expected: &[Rec],
    must_succeed: bool,
    dir: &Path,
) {
    match got {
        Ok(v) => {
            assert_dense(what, v);
            if v != expected {
                let seqs = |v: &[Rec]| v.iter().map(|r| r.seq).collect::<Vec<_>>();
                panic!(
                    "{what}: read seqs {:?}, the forger meant {:?} (first difference: {:?} vs {:?})",
                    seqs(v),
                    seqs(expected),
                    v.iter().zip(expected).find(|(a, b)| a != b).map(|x| x.0),
                    v.iter().zip(expected).find(|(a, b)| a != b).map(|x| x.1)
                );
            }
        }
        Err(e) => {
            assert!(!must_succeed, "{what}: a well-formed log failed: {e}");
            assert_names_file(what, e, dir);
        }
    }
}

/// For a log the forger knows is inconsistent, where a read that never meets the
/// inconsistency may succeed: panics unless every record read is one the forger wrote,
/// in dense seqs; an error must name the file.
pub fn check_read_within(what: &str, got: &Result<Vec<Rec>, Error>, forged: &[Rec], dir: &Path) {
    match got {
        Ok(v) => {
            assert_dense(what, v);
            for r in v {
                assert!(
                    forged.contains(r),
                    "{what}: read seq {} that the forger did not write",
                    r.seq
                );
            }
        }
        Err(e) => assert_names_file(what, e, dir),
    }
}
