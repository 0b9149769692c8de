//! A writer that counts and hashes what passes through it: an export's byte count and
//! blake3, taken as it writes.

use std::io::Write;

/// Counts and hashes the bytes written through it into `inner`.
pub(crate) struct Hashing<W> {
    pub(crate) inner: W,
    hasher: blake3::Hasher,
    bytes: u64,
}

impl<W: Write> Hashing<W> {
    pub(crate) fn new(inner: W) -> Hashing<W> {
        Hashing {
            inner,
            hasher: blake3::Hasher::new(),
            bytes: 0,
        }
    }

    /// The bytes written so far, and their blake3.
    pub(crate) fn digest(&self) -> (u64, [u8; 32]) {
        (self.bytes, *self.hasher.finalize().as_bytes())
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
