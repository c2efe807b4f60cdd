//! `doctor`: the server checked for what in its setup breaks locks, a finding
//! per line, and an exit code a deploy script can stop on.

use redisson_locks::inspect::{Checkup, Verdict};
use redisson_locks::{Client, Durability};

use crate::escape::escaped;
use crate::exit::{Code, Failure};
use crate::out;

/// Prints the findings; exits with [`Code::NeedsFixing`] when one is a
/// problem.
pub(crate) async fn run(
    client: &Client,
    durability: &str,
    replicas: Option<u32>,
    json: bool,
) -> Result<(), Failure> {
    let durability = match durability {
        "aof" => Durability::Aof,
        "replica-aof" => Durability::ReplicaAof,
        _ => Durability::Replicas,
    };
    let checkup = client
        .checkup_for(durability, replicas)
        .await
        .map_err(|e| Failure::of("cannot check the server", &e))?;
    if json {
        out::json(&checkup)?;
    } else {
        out::print(&render(&checkup))?;
    }
    let problems = checkup.problems().count();
    if problems == 0 {
        return Ok(());
    }
    // Said on stdout already: the code alone tells a script.
    Err(Failure::new(
        Code::NeedsFixing,
        format!("{problems} problem(s) found"),
    ))
}

/// A line per finding, its fix indented below it, then a summary.
pub(crate) fn render(checkup: &Checkup) -> String {
    let mut text = String::new();
    for finding in &checkup.findings {
        let verdict = match finding.verdict {
            Verdict::Ok => "OK",
            Verdict::Advice => "ADVICE",
            _ => "PROBLEM",
        };
        text.push_str(&format!(
            "{verdict:<8} {:<15} {}: {}\n",
            finding.check,
            escaped(&finding.node),
            escaped(&finding.detail)
        ));
        if let Some(fix) = &finding.fix {
            text.push_str(&format!("{:<24} fix: {}\n", "", escaped(fix)));
        }
    }
    let count = |verdict: Verdict| {
        checkup
            .findings
            .iter()
            .filter(|f| f.verdict == verdict)
            .count()
    };
    text.push_str(&format!(
        "{} problem(s), {} advice, {} ok.\n",
        count(Verdict::Problem),
        count(Verdict::Advice),
        count(Verdict::Ok)
    ));
    text
}
