//! Redisson's `${NAME}` / `${NAME:-default}` references in a config file's text.

use std::env::VarError;

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
pub(super) fn substitute(
    text: &str,
    lookup: impl Fn(&str) -> Result<String, VarError>,
) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(reference) = Reference::parse(after) else {
            out.push_str("${");
            rest = after;
            continue;
        };
        match lookup(reference.name) {
            Ok(value) => out.push_str(&value),
            Err(VarError::NotPresent) => match reference.default {
                Some(default) => out.push_str(default),
                None => {
                    let line = text[..text.len() - rest.len() + start]
                        .matches('\n')
                        .count()
                        + 1;
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
        rest = &after[reference.len..];
    }
    out.push_str(rest);
    Ok(out)
}

/// One `${...}` reference, parsed from the text after its `${`.
struct Reference<'a> {
    name: &'a str,
    default: Option<&'a str>,
    /// Bytes after `${` up to and including the closing `}`.
    len: usize,
}

impl<'a> Reference<'a> {
    fn parse(after: &'a str) -> Option<Self> {
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
                len: name_len + 1,
            });
        }
        let body = tail.strip_prefix(":-")?;
        let end = body.find(['}', '\n'])?;
        if !body[end..].starts_with('}') {
            return None;
        }
        Some(Reference {
            name,
            default: Some(&body[..end]),
            len: name_len + 2 + end + 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            substitute("address: \"redis://h:${PORT}\" # ${PORT}", env).unwrap(),
            "address: \"redis://h:6380\" # 6380"
        );
        assert_eq!(substitute("${dotted.name_1}", env).unwrap(), "x");
        // A set variable wins over the default, even when it is empty (Redisson's rule).
        assert_eq!(substitute("a${PORT:-1}b", env).unwrap(), "a6380b");
        assert_eq!(substitute("a${EMPTY:-1}b", env).unwrap(), "ab");
    }

    #[test]
    fn defaults_stand_in_for_unset_variables() {
        assert_eq!(
            substitute("redis://h:${NOPE:-6379}/${NOPE:-a:b c}", env).unwrap(),
            "redis://h:6379/a:b c"
        );
        assert_eq!(substitute("x${NOPE:-}y", env).unwrap(), "xy");
    }

    #[test]
    fn an_unset_variable_without_default_is_an_error_naming_it_and_its_line() {
        let err = substitute("a: 1\nb: ${MISSING_VAR}\n", env).unwrap_err();
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
            assert_eq!(substitute(text, env).unwrap(), text);
        }
        // Substituted text is not scanned again.
        let nested = |name: &str| match name {
            "A" => Ok("${B}".to_owned()),
            _ => Err(VarError::NotPresent),
        };
        assert_eq!(substitute("${A}", nested).unwrap(), "${B}");
    }
}
