//! Replays every fuzz target's seed corpus (`corpus/TARGET/`) and the inputs campaigns
//! found (`regressions/TARGET/`) through the target's function: a regression fails here,
//! in a plain `cargo test`, without nightly or libFuzzer.

use std::fs;
use std::path::{Path, PathBuf};

fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_corpus_file_passes_its_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (name, target) in blackbox_fuzz::TARGETS {
        let seeds = files(&root.join("corpus").join(name));
        assert!(
            !seeds.is_empty(),
            "the fuzz target {name} has no seed corpus in fuzz/corpus/{name}/"
        );
        let regressions = files(&root.join("regressions").join(name));
        for path in seeds.iter().chain(&regressions) {
            let data = fs::read(path)
                .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
            let outcome = std::panic::catch_unwind(|| target(&data));
            assert!(
                outcome.is_ok(),
                "the fuzz target {name} failed on {}",
                path.display()
            );
        }
    }
}

#[test]
fn every_target_has_a_cargo_fuzz_binary() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = fs::read_to_string(root.join("Cargo.toml")).unwrap_or_default();
    for (name, _) in blackbox_fuzz::TARGETS {
        let source = root.join("fuzz_targets").join(format!("{name}.rs"));
        assert!(source.is_file(), "fuzz_targets/{name}.rs is missing");
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "Cargo.toml has no [[bin]] for {name}"
        );
    }
}
