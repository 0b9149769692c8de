//! A fleet: the logs shipped under one prefix, one per robot
//! (`<fleet>/<robot>/manifest.json`), listed with one delimited listing and verified
//! side by side.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use blackbox_log::ChainKey;

use crate::error::{Error, Result};
use crate::remote::Remote;
use crate::ship::runtime;
use crate::verify::{RemoteVerifyReport, verify_remote};

/// One robot's log in a fleet.
#[derive(Debug, Clone)]
pub struct FleetLog {
    /// The robot's name: the prefix under the fleet's, `robot-7` of
    /// `s3://fleet/logs/robot-7`.
    pub name: String,
    /// Where its log was shipped.
    pub remote: Remote,
}

/// The logs under `fleet`: every prefix directly under it (a directory of a directory
/// store), sorted by name. Whether each holds a shipped log is for its verification
/// to say: a robot whose manifest is gone must not drop out of the fleet unseen.
///
/// # Errors
///
/// [`Error::Url`] when `fleet` is itself one shipped log (it holds a manifest), or when
/// nothing is under it; the store's error when it cannot be listed.
pub fn list_fleet(fleet: &Remote) -> Result<Vec<FleetLog>> {
    let rt = runtime()?;
    let listing = rt
        .block_on(fleet.store().list_with_delimiter(Some(fleet.prefix())))
        .map_err(|e| fleet.error(format!("cannot list {}", fleet.url()), e))?;
    if listing
        .objects
        .iter()
        .any(|o| o.location == fleet.manifest_path())
    {
        return Err(Error::Url {
            url: fleet.url().to_owned(),
            why: "it is one shipped log, not a fleet of them (`blackbox verify --dir` verifies it)"
                .to_owned(),
        });
    }
    let mut logs: Vec<FleetLog> = listing
        .common_prefixes
        .iter()
        .filter_map(|p| p.filename())
        .map(|name| FleetLog {
            name: name.to_owned(),
            remote: fleet.child(name),
        })
        .collect();
    if logs.is_empty() {
        return Err(Error::Url {
            url: fleet.url().to_owned(),
            why: "nothing is shipped under it (a fleet holds one prefix per robot, each with a manifest.json)"
                .to_owned(),
        });
    }
    logs.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(logs)
}

/// Verifies every log of `logs` as [`verify_remote`] does, `jobs` at a time, calling
/// `each` as each is done (from the thread that verified it). The results are in the
/// order of `logs`.
pub fn verify_fleet(
    logs: &[FleetLog],
    key: Option<&ChainKey>,
    jobs: usize,
    each: impl Fn(&FleetLog, &Result<RemoteVerifyReport>) + Sync,
) -> Vec<Result<RemoteVerifyReport>> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<RemoteVerifyReport>>>> =
        Mutex::new(logs.iter().map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, logs.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(log) = logs.get(i) else { break };
                    let result = verify_remote(&log.remote, key, None);
                    each(log, &result);
                    if let Ok(mut results) = results.lock() {
                        results[i] = Some(result);
                    }
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .into_iter()
        .zip(logs)
        .map(|(r, log)| {
            r.unwrap_or_else(|| {
                Err(Error::Verify {
                    url: log.remote.url().to_owned(),
                    why: "its verification did not finish".to_owned(),
                })
            })
        })
        .collect()
}
