//! `blackbox release`: asks the recorder writing a log to stop keeping an incident's
//! window against its disk budget.

use std::io::{self, Write};
use std::os::unix::fs::DirBuilderExt;

use blackbox_replay::{Body, Query, RecordType, Replay};

use super::{CliError, DirArg, line};

/// Release an incident (by its trigger's seq): a recorder writing the log under a disk
/// budget stops keeping its window from its next segment on.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    dir: DirArg,
    /// The incident: its trigger's seq (`trigger_seq` in `blackbox replay --type incident`).
    #[arg(value_name = "INCIDENT")]
    incident: u64,
}

/// Runs `blackbox release`.
pub fn run(args: Args) -> Result<(), CliError> {
    let dir = &args.dir.dir;
    super::local_only(dir, "release")?;
    blackbox_replay::open_log_dir(dir).map_err(|e| super::damage::fail(dir, false, e))?;
    let query = Query::new().types([RecordType::Incident]);
    let mut found = false;
    for r in Replay::open(dir, &query).map_err(|e| super::damage::fail(dir, false, e))? {
        let r = r.map_err(|e| super::damage::fail(dir, false, e))?;
        if let Body::Incident(i) = r.body
            && i.trigger_seq == args.incident
        {
            found = true;
            break;
        }
    }
    if !found {
        return Err(CliError::new(format!(
            "log {} holds no incident whose trigger is seq {}: `blackbox replay --dir {} --type incident` lists them (`trigger_seq`)",
            dir.display(),
            args.incident,
            dir.display()
        )));
    }
    request(dir, args.incident)?;
    let stdout = io::stdout();
    let mut out = stdout.lock();
    line(
        &mut out,
        format!(
            "released incident {}: a recorder writing {} stops keeping its window from its next segment on (it is pruned when the disk budget needs its space)",
            args.incident,
            dir.display()
        ),
    )?;
    out.flush().map_err(super::stdout_error)
}

/// Leaves the request to release incident `trigger_seq` in the log directory, for the
/// recorder writing it (`blackbox::RELEASE_DIR`).
pub fn request(dir: &std::path::Path, trigger_seq: u64) -> Result<(), CliError> {
    let requests = dir.join(blackbox::RELEASE_DIR);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&requests)
        .map_err(|e| {
            CliError::new(format!(
                "cannot create {}: {e}: check the log directory's permissions",
                requests.display()
            ))
        })?;
    let request = requests.join(trigger_seq.to_string());
    std::fs::File::create(&request).map_err(|e| {
        CliError::new(format!(
            "cannot create {}: {e}: check the log directory's permissions",
            request.display()
        ))
    })?;
    Ok(())
}
