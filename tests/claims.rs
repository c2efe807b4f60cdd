//! What the documents claim about the code, checked against the code: the
//! README's list of errors against `Error`'s variants, the metrics table of
//! `docs/operating.md` against the names `src/metrics.rs` registers, and the
//! README's shape (its two commands and its example near the top). The tool's
//! subcommands and exit codes are checked the same way beside its command
//! line (`src/bin/redisson-locks/args.rs`), where clap's view of them is.

use std::collections::BTreeSet;

fn read(path: &str) -> String {
    let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// The variants of `pub enum Error` in `src/error.rs`: the lines inside it
/// indented by four spaces that begin with a capital.
fn error_variants() -> BTreeSet<String> {
    let source = read("src/error.rs");
    let (_, body) = source
        .split_once("pub enum Error {\n")
        .expect("src/error.rs declares pub enum Error");
    let (body, _) = body.split_once("\n}\n").expect("the enum ends");
    body.lines()
        .filter(|line| line.starts_with("    ") && !line.starts_with("     "))
        .map(str::trim_start)
        .filter(|line| line.starts_with(|c: char| c.is_ascii_uppercase()))
        .map(|line| {
            line.split(|c: char| !c.is_ascii_alphanumeric())
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

/// The variants the README's "Errors" section lists, one item each, as
/// `- `Error::Name`: ...`.
fn readme_errors() -> BTreeSet<String> {
    let readme = read("README.md");
    let (_, section) = readme
        .split_once("## Errors\n")
        .expect("the README has an Errors section");
    let section = section.split("\n## ").next().unwrap_or_default();
    section
        .lines()
        .filter_map(|line| line.strip_prefix("- `Error::"))
        .filter_map(|rest| rest.split('`').next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_readmes_error_list_names_every_variant_of_error_and_no_other() {
    let variants = error_variants();
    assert!(variants.len() >= 10, "parsed the enum: {variants:?}");
    assert_eq!(readme_errors(), variants);
}

/// The metric names `src/metrics.rs` registers: its string constants.
fn registered_metrics() -> BTreeSet<String> {
    read("src/metrics.rs")
        .split('"')
        .skip(1)
        .step_by(2)
        .filter(|literal| literal.starts_with("redisson_locks_"))
        .map(str::to_owned)
        .collect()
}

/// The first column of every row of `docs/operating.md`'s metrics table.
fn documented_metrics() -> BTreeSet<String> {
    read("docs/operating.md")
        .lines()
        .filter_map(|line| line.strip_prefix("| `redisson_locks_"))
        .filter_map(|rest| rest.split('`').next())
        .map(|name| format!("redisson_locks_{name}"))
        .collect()
}

#[test]
fn the_metrics_table_names_every_metric_the_crate_registers_and_no_other() {
    let registered = registered_metrics();
    assert!(registered.len() >= 14, "parsed the names: {registered:?}");
    assert_eq!(documented_metrics(), registered);
}

#[test]
fn the_readme_reaches_its_two_commands_and_its_example_within_sixty_lines() {
    let readme = read("README.md");
    let lines: Vec<&str> = readme.lines().collect();
    let at = |what: &str| {
        lines
            .iter()
            .position(|line| line.starts_with(what))
            .unwrap_or_else(|| panic!("the README has a line starting {what:?}"))
    };
    assert!(
        at("scripts/demo") < 60,
        "scripts/demo at line {}",
        at("scripts/demo") + 1
    );
    assert!(
        at("scripts/test") < 60,
        "scripts/test at line {}",
        at("scripts/test") + 1
    );
    let example = at("```rust");
    let end = example
        + lines[example..]
            .iter()
            .skip(1)
            .position(|line| line.starts_with("```"))
            .expect("the example ends")
        + 1;
    assert!(end < 60, "the first example ends at line {}", end + 1);
    assert!(lines.len() <= 200, "the README has {} lines", lines.len());
}

#[test]
fn the_scripts_the_readme_names_exist_and_the_ci_runs_its_test_command() {
    let ci = read(".ci/run");
    assert!(
        ci.lines().any(|line| line.trim() == "scripts/test"),
        ".ci/run calls scripts/test"
    );
    for script in ["scripts/demo", "scripts/test"] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(script);
        assert!(path.is_file(), "{script} exists");
    }
}
