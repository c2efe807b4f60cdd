//! Redisson's `${NAME}` / `${NAME:-default}` references in a config file's text.

use std::env::VarError;

/// A config file's text with its references replaced, and what came from the
/// environment, so that errors can leave it out.
pub(super) struct Resolved {
    text: String,
    /// The non-empty values taken from the environment (not the defaults:
    /// those are in the file), longest first, each once.
    from_env: Vec<String>,
}

impl Resolved {
    /// The text after substitution.
    pub(super) fn text(&self) -> &str {
        &self.text
    }

    /// `message` with every value that came from the environment replaced by
    /// `***`, as written and as `{:?}` writes it (escaped): a variable set to a
    /// password and put where a number belongs must not come back in the error.
    /// Longest first, so that a value holding another is masked whole. A very
    /// short value may mask a piece of the message's own words too: legible
    /// errors matter less than secrets.
    pub(super) fn scrub(&self, message: &str) -> String {
        let mut message = message.to_owned();
        for value in &self.from_env {
            let escaped = format!("{value:?}");
            let escaped = &escaped[1..escaped.len() - 1];
            for form in [value.as_str(), escaped] {
                if message.contains(form) {
                    message = message.replace(form, "***");
                }
            }
        }
        message
    }
}

/// Replaces every `${NAME}` and `${NAME:-default}` in `text` by the value `lookup`
/// gives for `NAME`, as Redisson does before it parses a config file
/// (`ConfigSupport.resolveEnvParams`).
///
/// The rule is Redisson's, read from its implementation: a name is one or more of
/// `A-Z a-z 0-9 _ .`; a variable that is set is used as it is, even when empty (a
/// shell's `:-` would take the default there); the default runs to the first `}` on
/// the same line; a `${` that does not start such a reference is left as it is, and
/// substituted text is not scanned again. Two differences: a reference to an unset
/// variable without a default, which Redisson leaves in the text, is an error
/// naming the variable, and an empty default (`${NAME:-}`) is allowed.
///
/// Linear in the length of `text`: each byte is looked at a bounded number of
/// times, however many `${` a line holds that never close (see [`Stops`]).
pub(super) fn substitute(
    text: &str,
    lookup: impl Fn(&str) -> Result<String, VarError>,
) -> Result<Resolved, String> {
    let mut out = String::with_capacity(text.len());
    let mut from_env = Vec::new();
    let mut stops = Stops::default();
    // `text[..copied]` is accounted for in `out`; `${` is looked for from `search`.
    let (mut copied, mut search) = (0, 0);
    while let Some(found) = text[search..].find("${") {
        let start = search + found;
        let Some(reference) = Reference::parse(text, start + 2, &mut stops) else {
            // Not a reference: left as it is, and the next `${` may start inside it.
            search = start + 2;
            continue;
        };
        out.push_str(&text[copied..start]);
        match lookup(reference.name) {
            Ok(value) => {
                out.push_str(&value);
                if !value.is_empty() {
                    from_env.push(value);
                }
            }
            Err(VarError::NotPresent) => match reference.default {
                Some(default) => out.push_str(default),
                None => {
                    let line = text[..start].matches('\n').count() + 1;
                    return Err(format!(
                        "environment variable {name} is not set (line {line}); set it, or \
                         give a default: ${{{name}:-value}}",
                        name = reference.name
                    ));
                }
            },
            Err(VarError::NotUnicode(_)) => {
                return Err(format!(
                    "environment variable {} is not valid UTF-8",
                    reference.name
                ));
            }
        }
        copied = reference.end;
        search = reference.end;
    }
    out.push_str(&text[copied..]);
    from_env.sort_unstable_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    from_env.dedup();
    Ok(Resolved {
        text: out,
        from_env,
    })
}

/// Where a default's search for its closing `}` stops: the first `}` or
/// newline at or after an offset, remembered for the next reference.
///
/// A line of `${A:-x` repeated has no `}`: every reference's default runs to the
/// line's end and fails. Searched afresh for each, that is quadratic (a 256 KiB
/// line took 6.8 s); but there is no `}` or newline in `[from, at)`, so every
/// search starting there ends at `at`, and as references are parsed left to
/// right each byte is searched once.
#[derive(Default)]
struct Stops {
    from: usize,
    at: usize,
    known: bool,
}

impl Stops {
    /// The offset of the first `}` or `\n` in `text` at or after `offset`
    /// (`text.len()` when there is none).
    fn next(&mut self, text: &str, offset: usize) -> usize {
        if !(self.known && self.from <= offset && offset <= self.at) {
            self.from = offset;
            self.at = text[offset..]
                .find(['}', '\n'])
                .map_or(text.len(), |i| offset + i);
            self.known = true;
        }
        self.at
    }
}

/// One `${...}` reference.
struct Reference<'a> {
    name: &'a str,
    default: Option<&'a str>,
    /// The offset just after its closing `}`.
    end: usize,
}

impl<'a> Reference<'a> {
    /// The reference whose `${` ends at `body` in `text`, if one starts there.
    fn parse(text: &'a str, body: usize, stops: &mut Stops) -> Option<Self> {
        let after = &text[body..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(after.len());
        if name_len == 0 {
            return None;
        }
        let name = &after[..name_len];
        let tail = &after[name_len..];
        if tail.starts_with('}') {
            return Some(Reference {
                name,
                default: None,
                end: body + name_len + 1,
            });
        }
        if !tail.starts_with(":-") {
            return None;
        }
        let default_at = body + name_len + 2;
        let stop = stops.next(text, default_at);
        if !text[stop..].starts_with('}') {
            return None;
        }
        Some(Reference {
            name,
            default: Some(&text[default_at..stop]),
            end: stop + 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The substituted text, with `env` (or `lookup`) as the environment.
    fn resolve(
        text: &str,
        lookup: impl Fn(&str) -> Result<String, VarError>,
    ) -> Result<String, String> {
        substitute(text, lookup).map(|resolved| resolved.text)
    }

    fn env(name: &str) -> Result<String, VarError> {
        match name {
            "PORT" => Ok("6380".into()),
            "EMPTY" => Ok(String::new()),
            "dotted.name_1" => Ok("x".into()),
            _ => Err(VarError::NotPresent),
        }
    }

    #[test]
    fn set_variables_replace_their_references_anywhere() {
        assert_eq!(
            resolve("address: \"redis://h:${PORT}\" # ${PORT}", env).unwrap(),
            "address: \"redis://h:6380\" # 6380"
        );
        assert_eq!(resolve("${dotted.name_1}", env).unwrap(), "x");
        // A set variable wins over the default, even when it is empty (Redisson's rule).
        assert_eq!(resolve("a${PORT:-1}b", env).unwrap(), "a6380b");
        assert_eq!(resolve("a${EMPTY:-1}b", env).unwrap(), "ab");
    }

    #[test]
    fn defaults_stand_in_for_unset_variables() {
        assert_eq!(
            resolve("redis://h:${NOPE:-6379}/${NOPE:-a:b c}", env).unwrap(),
            "redis://h:6379/a:b c"
        );
        assert_eq!(resolve("x${NOPE:-}y", env).unwrap(), "xy");
    }

    #[test]
    fn an_unset_variable_without_default_is_an_error_naming_it_and_its_line() {
        let err = resolve("a: 1\nb: ${MISSING_VAR}\n", env).unwrap_err();
        assert!(
            err.contains("MISSING_VAR") && err.contains("line 2"),
            "{err}"
        );
    }

    #[test]
    fn text_that_is_no_reference_is_left_alone() {
        for text in [
            "${}",
            "${ PORT}",
            "${PORT",
            "${PORT-1}",
            "${NOPE:-no end\n}",
            "$PORT",
            "{PORT}",
            "$${",
        ] {
            assert_eq!(resolve(text, env).unwrap(), text);
        }
        // Substituted text is not scanned again.
        let nested = |name: &str| match name {
            "A" => Ok("${B}".to_owned()),
            _ => Err(VarError::NotPresent),
        };
        assert_eq!(resolve("${A}", nested).unwrap(), "${B}");
    }

    /// A line of unclosed references, 1 MiB long: every reference's default
    /// looks for its `}` to the end of the line. Linear, so it is quick; what is
    /// checked is the result.
    #[test]
    fn a_long_line_of_unclosed_references_is_left_as_it_is() {
        const MIB: usize = 1 << 20;
        let unit = "${A:-x";
        let line = unit.repeat(MIB / unit.len());
        let started = std::time::Instant::now();
        assert_eq!(resolve(&line, env).unwrap(), line);
        eprintln!("a 1 MiB line of `${{A:-x`: {:?}", started.elapsed());
        // Closed at the very end: the first default runs to that `}` and holds
        // every other `${` unscanned.
        let closed = format!("{line}}}\n{line}");
        let expected = format!("x{}\n{line}", &line[unit.len()..]);
        assert_eq!(resolve(&closed, env).unwrap(), expected);
        // Long names that never close, and `${` that starts nothing.
        let names = format!("${{{}", "N".repeat(MIB / 2)).repeat(2);
        assert_eq!(resolve(&names, env).unwrap(), names);
        let dollars = "$${".repeat(MIB / 3);
        assert_eq!(resolve(&dollars, env).unwrap(), dollars);
    }

    #[test]
    fn values_from_the_environment_are_scrubbed_from_messages() {
        let lookup = |name: &str| match name {
            "PW" => Ok("S3cr3t\"x".to_owned()),
            "SHORT" => Ok("S3".to_owned()),
            "EMPTY" => Ok(String::new()),
            _ => Err(VarError::NotPresent),
        };
        let resolved = substitute(
            "a: ${PW}\nb: ${SHORT}\nc: ${EMPTY}\nd: ${UNSET:-kept}\ne: ${PW}",
            lookup,
        )
        .unwrap();
        assert_eq!(
            resolved.text(),
            "a: S3cr3t\"x\nb: S3\nc: \nd: kept\ne: S3cr3t\"x"
        );
        assert_eq!(
            resolved.scrub(r#"a: S3cr3t"x, as written "S3cr3t\"x"; S3; kept"#),
            r#"a: ***, as written "***"; ***; kept"#
        );
    }
}
