//! A headless browser for the tests that look at a page as a person would: Chromium
//! (`BLACKBOX_CHROMIUM`, or `chromium`, `chromium-browser`, `google-chrome` on the PATH;
//! `.ci/run` installs Debian's `chromium`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The browser's executable.
pub fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("BLACKBOX_CHROMIUM") {
        return PathBuf::from(path);
    }
    let names = [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ];
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in names {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "no Chromium found ({} on the PATH, or BLACKBOX_CHROMIUM): install it (Debian: `apt-get install -y chromium`) to run the browser tests",
        names.join(", ")
    );
}

fn headless(extra: &[&str], page: &Path) -> Output {
    let url = format!("file://{}", page.display());
    Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .args(extra)
        .arg(url)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", chromium().display()))
}

/// The console messages a page logged (errors, warnings, logs, failed loads).
fn console(stderr: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stderr)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_owned)
        .collect()
}

/// The page's DOM once loaded, as the browser serializes it, and its console messages.
pub fn dump_dom(page: &Path) -> (String, Vec<String>) {
    let out = headless(&["--dump-dom"], page);
    assert!(
        out.status.success(),
        "the browser failed on {}: {}",
        page.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        console(&out.stderr),
    )
}

/// A screenshot of the page, `width` × `height` pixels, to `png`; the console messages.
pub fn screenshot(page: &Path, png: &Path, width: u32, height: u32) -> Vec<String> {
    let shot = format!("--screenshot={}", png.display());
    let size = format!("--window-size={width},{height}");
    let out = headless(&[shot.as_str(), size.as_str(), "--hide-scrollbars"], page);
    assert!(
        out.status.success() && png.is_file(),
        "the browser made no screenshot of {}: {}",
        page.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    console(&out.stderr)
}
