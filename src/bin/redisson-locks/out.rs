//! Where output goes: results on stdout (what a script pipes on), notes and
//! warnings on stderr (what only the person sees), and `--json` as one value.

use std::io::Write as _;

use serde::Serialize;

use crate::escape::escaped_lines;
use crate::exit::{Code, Failure};

/// Writes `text` to stdout and flushes it, so that a reader of a pipe (a test,
/// `watch | tee`) sees each frame as it is drawn. A closed pipe ends the
/// command quietly ([`Failure::ReaderGone`]).
pub(crate) fn print(text: &str) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

/// `value` as indented JSON and a newline (`show`, `list`, `force-unlock`).
pub(crate) fn json(value: &impl Serialize) -> Result<(), Failure> {
    print(&format!("{}\n", to_json(value, true)?))
}

/// `value` as JSON on one line (`watch`: one line per frame).
pub(crate) fn json_line(value: &impl Serialize) -> Result<(), Failure> {
    print(&format!("{}\n", to_json(value, false)?))
}

fn to_json(value: &impl Serialize, pretty: bool) -> Result<String, Failure> {
    let text = if pretty {
        serde_json::to_string_pretty(value)
    } else {
        serde_json::to_string(value)
    };
    text.map_err(|e| Failure::new(Code::Failed, format!("cannot write JSON: {e}")))
}

/// A line on stderr: a warning, a prompt's context, what `--json` keeps out of
/// stdout.
/// Escaped as a message of the tool's own lines: it may quote a name or
/// what the server said.
pub(crate) fn note(text: &str) {
    // A closed stderr leaves nobody to tell; the result on stdout and the exit
    // code still say what happened.
    let _ = writeln!(std::io::stderr(), "{}", escaped_lines(text));
}
