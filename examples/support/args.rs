//! The examples' command-line reader: `--flag value` pairs and bare switches,
//! read flag by flag, with errors that name the flag.

use std::str::FromStr;

/// The arguments after the program name.
pub(crate) struct Args {
    rest: std::iter::Skip<std::env::Args>,
    /// Added on a line of its own to the errors about a missing value or an
    /// unknown flag.
    usage: Option<&'static str>,
}

impl Args {
    /// This process's arguments, with the usage text (if any) its errors show.
    pub(crate) fn from_env(usage: Option<&'static str>) -> Args {
        Args {
            rest: std::env::args().skip(1),
            usage,
        }
    }

    /// The next flag, if any is left.
    pub(crate) fn next_flag(&mut self) -> Option<String> {
        self.rest.next()
    }

    /// The value after `flag`.
    pub(crate) fn value(&mut self, flag: &str) -> Result<String, String> {
        self.rest
            .next()
            .ok_or_else(|| self.with_usage(format!("{flag} needs a value")))
    }

    /// The value after `flag`, parsed; `what` names what it must be ("a number").
    pub(crate) fn parsed<T: FromStr>(&mut self, flag: &str, what: &str) -> Result<T, String> {
        let value = self.value(flag)?;
        value
            .parse()
            .map_err(|_| format!("{flag}: '{value}' is not {what}"))
    }

    /// The value after `flag` as a whole number.
    pub(crate) fn number(&mut self, flag: &str) -> Result<u64, String> {
        self.parsed(flag, "a whole number")
    }

    /// The value after `flag` as a count (a whole number that fits a `usize`).
    pub(crate) fn count(&mut self, flag: &str) -> Result<usize, String> {
        usize::try_from(self.number(flag)?).map_err(|_| format!("{flag}: too large"))
    }

    /// The error for a flag the program does not know.
    pub(crate) fn unknown(&self, flag: &str) -> String {
        self.with_usage(format!("unknown option {flag}"))
    }

    fn with_usage(&self, message: String) -> String {
        match self.usage {
            Some(usage) => format!("{message}\n{usage}"),
            None => message,
        }
    }
}
