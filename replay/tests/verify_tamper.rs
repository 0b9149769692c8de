//! `blackbox verify` of a tampered log exits non-zero, every time.
//!
//! Random edits (one byte flipped, or eight bytes overwritten) at random places of random
//! segments of two logs written by `blackbox record` (raw blocks, and zstd blocks), each
//! on a fresh copy. `verify --digest D` (the digest taken before the edit) must exit 1
//! every time. `verify` alone must exit 1 every time but one: an edit inside the last
//! block of the active segment is what a crash's torn write leaves, so `verify` reports
//! it as a torn tail (exit 0, and a note naming the bytes) — and only when the note's
//! bytes run from at or before the edit to the end of that file. Without a digest, no
//! hash chain can tell a cut or torn tail from a crash (RELIABILITY.md).
//!
//! `BLACKBOX_TAMPER_EDITS` sets the number of edits per log (100 in CI);
//! `BLACKBOX_TAMPER_SEED` the seed. A failure prints both.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::{blackbox, ok, record, s, segment_files as segments};

/// xorshift64*: a fixed sequence from a seed, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).map_or(default, |v| v.parse().unwrap())
}

fn copy_dir(src: &Path, dst: &Path) {
    fs::create_dir_all(dst).unwrap();
    for entry in fs::read_dir(src).unwrap() {
        let path = entry.unwrap().path();
        let to = dst.join(path.file_name().unwrap());
        fs::copy(&path, &to).unwrap();
        fs::set_permissions(&to, fs::Permissions::from_mode(0o600)).unwrap();
    }
}

/// The torn tail `verify` reports: (file name, byte offset, length).
fn torn_note(stdout: &str) -> Option<(String, u64, u64)> {
    let note = stdout.lines().find(|l| l.starts_with("note: "))?;
    let words: Vec<&str> = note.split_whitespace().collect();
    let len = words[1].parse().ok()?;
    let offset = words[5].parse().ok()?;
    let path = Path::new(words[8]);
    Some((path.file_name()?.to_str()?.to_owned(), offset, len))
}

fn tamper_loop(name: &str, extra: &[&str]) {
    let edits = env_u64("BLACKBOX_TAMPER_EDITS", 100);
    let seed = env_u64("BLACKBOX_TAMPER_SEED", 0x5eed_7a3e);
    let tmp = tempfile::tempdir().unwrap();
    let original = tmp.path().join(name);
    let input: String = (0..400)
        .map(|i| format!("{{\"kind\":\"arm.joint\",\"payload\":{{\"i\":{i},\"pad\":\"{}\"}},\"values\":{{\"q\":{i}.5}}}}\n", "ab".repeat(i % 40)))
        .collect();
    let mut args = vec!["--segment-bytes", "4KiB"];
    args.extend_from_slice(extra);
    ok(&record(&original, &input, &args));
    let digest = ok(&blackbox(&["digest", "--dir", s(&original)]));
    let digest = digest.trim().to_owned();
    let files = segments(&original);
    assert!(
        files.len() >= 3,
        "{name}: the log has sealed segments and an active one"
    );
    let last = files.last().unwrap().file_name().unwrap().to_owned();
    let mut rng = Rng(seed ^ name.len() as u64);
    let (mut torn, mut refused) = (0_u64, 0_u64);
    for i in 0..edits {
        let copy = tmp.path().join(format!("{name}-{i}"));
        copy_dir(&original, &copy);
        let file = &files[usize::try_from(rng.below(files.len() as u64)).unwrap()];
        let path = copy.join(file.file_name().unwrap());
        let mut bytes = fs::read(&path).unwrap();
        let at = rng.below(bytes.len() as u64);
        let at_usize = usize::try_from(at).unwrap();
        let what = if rng.below(4) == 0 {
            let end = (at_usize + 8).min(bytes.len());
            for b in &mut bytes[at_usize..end] {
                *b = u8::try_from(rng.below(256)).unwrap();
            }
            format!("8 random bytes at {at}")
        } else {
            bytes[at_usize] ^= u8::try_from(1 + rng.below(255)).unwrap();
            format!("a flip at {at}")
        };
        let unchanged = bytes == fs::read(&path).unwrap();
        fs::write(&path, &bytes).unwrap();
        if unchanged {
            // Random bytes equal to those they replace: no edit.
            fs::remove_dir_all(&copy).unwrap();
            continue;
        }
        let place = format!(
            "{name}: {what} of {} (edit {i}, BLACKBOX_TAMPER_SEED={seed})",
            file.file_name().unwrap().to_string_lossy()
        );
        let with_digest = blackbox(&["verify", "--dir", s(&copy), "--digest", &digest]);
        assert_eq!(
            with_digest.status.code(),
            Some(1),
            "verify --digest accepted {place}: {}",
            String::from_utf8_lossy(&with_digest.stdout)
        );
        let alone = blackbox(&["verify", "--dir", s(&copy)]);
        let stdout = String::from_utf8_lossy(&alone.stdout).into_owned();
        match alone.status.code() {
            Some(1) => refused += 1,
            Some(0) => {
                let (in_file, offset, len) = torn_note(&stdout)
                    .unwrap_or_else(|| panic!("verify accepted {place} without a note: {stdout}"));
                assert!(
                    file.file_name().unwrap() == last
                        && in_file == last.to_string_lossy()
                        && offset <= at
                        && offset + len == bytes.len() as u64,
                    "verify accepted {place} as a torn tail it is not: {stdout}"
                );
                torn += 1;
            }
            other => panic!(
                "verify exited {other:?} on {place}: {}",
                String::from_utf8_lossy(&alone.stderr)
            ),
        }
        fs::remove_dir_all(&copy).unwrap();
    }
    eprintln!(
        "{name}: {edits} edits, {refused} refused by verify, {torn} reported as a torn tail of the active segment, all refused by verify --digest"
    );
    assert!(refused > 0, "{name}: no edit was refused");
}

#[test]
fn every_edit_of_a_raw_log_fails_verify() {
    tamper_loop("raw", &[]);
}

#[test]
fn every_edit_of_a_compressed_log_fails_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let policy = tmp.path().join("policy.toml");
    fs::write(
        &policy,
        "default = \"full\"\n\n[log]\ncompression = \"zstd\"\nlevel = 3\n",
    )
    .unwrap();
    tamper_loop("zstd", &["--policy", s(&policy)]);
}
