//! Damaged logs, as every subcommand reports them: where the damage is, what was lost
//! (from a salvage of the log), and commands that read what is left, each checked to
//! work before it is advised. With `--key-file`, the salvage checks the chain with the
//! key, and every advised command carries `--key-file` (a keyless salvage of a keyed
//! log would return forged records a keyed one refuses).

use std::path::Path;

use blackbox_replay::{Query, Replay, Salvaged, loses_records, loss_json};
use serde_json::{Value, json};

use super::given_key;

/// What a salvage of the log in `dir` finds: the last intact seq before the first
/// loss, and every loss.
struct Survey {
    before_first_loss: Option<u64>,
    losses: Vec<blackbox::log::Loss>,
    salvaged: u64,
}

fn survey(dir: &Path) -> Option<Survey> {
    let mut s = Survey {
        before_first_loss: None,
        losses: Vec::new(),
        salvaged: 0,
    };
    let mut last = None;
    let q = Query::new()
        .types(blackbox_replay::RecordType::ALL)
        .key(given_key().map(|(_, key)| key.clone()));
    for item in blackbox_replay::salvage(dir, &q).ok()? {
        match item {
            Salvaged::Record(r) => {
                last = Some(r.seq);
                s.salvaged += 1;
            }
            Salvaged::Undecodable { seq, .. } => {
                last = Some(seq);
                s.salvaged += 1;
            }
            Salvaged::Lost(loss) => {
                if s.losses.is_empty() {
                    s.before_first_loss = last;
                }
                s.losses.push(loss);
            }
        }
    }
    Some(s)
}

/// The commands that read what a damaged log still holds, each tried first: the
/// records before the damage (`replay --to-seq`, if that read succeeds), and every
/// intact record (`replay --salvage`); each with the run's `--key-file`, if it was
/// given one.
pub fn advice_commands(dir: &Path) -> Vec<String> {
    let d = shell_word(&dir.display().to_string());
    let key = given_key();
    let key_arg = key.map_or(String::new(), |(path, _)| {
        format!(" --key-file {}", shell_word(&path.display().to_string()))
    });
    let mut commands = Vec::new();
    if let Some(survey) = survey(dir)
        && let Some(last) = survey.before_first_loss
    {
        let q = Query::new()
            .to_seq(last)
            .key(key.map(|(_, key)| key.clone()));
        let works = Replay::open(dir, &q).is_ok_and(|r| r.into_iter().all(|r| r.is_ok()));
        if works {
            commands.push(format!(
                "blackbox replay --dir {d} --to-seq {last}{key_arg}"
            ));
        }
    }
    commands.push(format!("blackbox replay --dir {d} --salvage{key_arg}"));
    commands
}

/// The advice that follows a damage report, as the end of a sentence.
pub fn advice(dir: &Path) -> String {
    let commands = advice_commands(dir);
    match commands.as_slice() {
        [before, all] => format!(
            "read the records before it with `{before}`, or every intact record and what was lost with `{all}`"
        ),
        _ => format!(
            "read every intact record and what was lost with `{}`",
            commands
                .last()
                .map_or("blackbox replay --salvage", String::as_str)
        ),
    }
}

/// A damaged log as one JSON object: `{"intact": false, "error", "damage": {segment,
/// offset, seq, what}, "lost": [loss...], "salvaged_records", "advice": [command...]}`.
pub fn damage_json(dir: &Path, e: &blackbox_log::Error, message: &str) -> Value {
    let damage = e.corruption().map(|c| {
        json!({
            "segment": c.segment.display().to_string(),
            "offset": c.offset,
            "seq": c.seq,
            "what": c.kind.to_string(),
        })
    });
    let survey = survey(dir);
    let lost: Vec<Value> = survey
        .as_ref()
        .map(|s| {
            s.losses
                .iter()
                .filter(|l| loses_records(l) || !l.places.is_empty())
                .map(loss_json)
                .collect()
        })
        .unwrap_or_default();
    json!({
        "intact": false,
        "error": message,
        "damage": damage,
        "lost": lost,
        "salvaged_records": survey.as_ref().map(|s| s.salvaged),
        "advice": advice_commands(dir),
    })
}

/// `text` quoted for a POSIX shell when it needs it.
fn shell_word(text: &str) -> String {
    if !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+,:@%".contains(&b))
    {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// The error a subcommand exits with: for damage of the log in `dir` under `--json`,
/// the damage report as one JSON object on stdout (exit code 1, nothing on stderr);
/// otherwise the one-sentence error.
pub fn fail(dir: &Path, json: bool, e: blackbox_replay::Error) -> super::CliError {
    let log_error = match &e {
        blackbox_replay::Error::Log(l) => Some(l),
        _ => None,
    };
    let damage = log_error.filter(|l| match l {
        blackbox_log::Error::Corrupt(_) => true,
        // An unreadable segment.
        blackbox_log::Error::Io { path, .. } => path.starts_with(dir),
        _ => false,
    });
    match damage {
        Some(l) if json => {
            let message = super::describe_log(l);
            let report = damage_json(dir, l, &message);
            let mut out = std::io::stdout().lock();
            if let Err(e) = super::line(&mut out, report) {
                return e;
            }
            if let Err(e) = std::io::Write::flush(&mut out) {
                return super::stdout_error(e);
            }
            super::CliError::reported()
        }
        _ => e.into(),
    }
}
