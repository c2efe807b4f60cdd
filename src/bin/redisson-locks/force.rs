//! `force-unlock NAME`: the one command that changes anything, so it shows
//! what it is about to free, asks a person (never a pipe) unless told `--yes`,
//! and afterwards says what it actually freed.

use std::io::IsTerminal as _;

use redisson_locks::inspect::{Kind, Snapshot};
use redisson_locks::Client;
use serde::Serialize;

use crate::escape::escaped;
use crate::exit::{words, Code, Failure};
use crate::page::Page;
use crate::{out, show};

/// What `--json` prints.
#[derive(Debug, Serialize)]
struct Forced<'a> {
    /// Whether the force freed a hold.
    freed: bool,
    /// What held the name just before the force (as the force itself read it).
    before: &'a Snapshot,
}

/// Frees `name` once confirmed (or with `yes`).
pub(crate) async fn run(client: &Client, name: &str, yes: bool, json: bool) -> Result<(), Failure> {
    let shown_name = escaped(name);
    let shown = client
        .inspect(name)
        .await
        .map_err(|e| Failure::of(&format!("cannot inspect '{name}'"), &e))?;
    if let Some(why) = show::not_found(&shown) {
        if json {
            out::json(&Forced {
                freed: false,
                before: &shown,
            })?;
        }
        return Err(Failure::new(Code::NotFound, why));
    }
    // The library knows which kinds have a holder to force out; a semaphore or
    // a latch is refused there, before anything is asked or changed.
    let refusable = matches!(shown.kind, Kind::Counter | Kind::PermitExpirableSemaphore);
    if !refusable && !shown.is_held() {
        return report(
            &shown,
            false,
            json,
            &format!("Nothing holds '{shown_name}': nothing was changed."),
        );
    }
    if !refusable {
        tell(json, &holding(&shown))?;
        if !yes {
            confirm(name).await?;
        }
    }
    let (before, freed) = client.force_unlock(name).await.map_err(|e| {
        Failure::new(
            Code::Failed,
            format!("cannot force-unlock '{name}': {}", words(&e)),
        )
    })?;
    let mut said = if freed {
        format!("Freed '{shown_name}': {}.", owners(&before))
    } else {
        format!("Nothing held '{shown_name}' any more: nothing was changed.")
    };
    if freed && fields(&before) != fields(&shown) {
        said.push_str(&format!(
            "\nNote: the holders changed after they were shown: it was {} that was freed.",
            owners(&before)
        ));
    }
    report(&before, freed, json, &said)
}

/// Prints the outcome: `said`, or the JSON object.
fn report(before: &Snapshot, freed: bool, json: bool, said: &str) -> Result<(), Failure> {
    if json {
        out::json(&Forced { freed, before })
    } else {
        out::print(&format!("{said}\n"))
    }
}

/// Text for the person deciding: on stdout, or stderr when stdout is JSON.
fn tell(json: bool, text: &str) -> Result<(), Failure> {
    if json {
        out::note(text.trim_end());
        Ok(())
    } else {
        out::print(text)
    }
}

/// What holds the object, as `show` prints it.
fn holding(s: &Snapshot) -> String {
    let mut page = Page::default();
    page.field(0, "Name:", &s.name);
    page.field(0, "Kind:", s.kind.label());
    show::holders(&mut page, s);
    page.into_text()
}

fn fields(s: &Snapshot) -> Vec<&str> {
    let mut fields: Vec<&str> = s.holders.iter().map(|h| h.owner.field.as_str()).collect();
    fields.sort_unstable();
    fields
}

/// `held by <field> (read x2), <field> (...)`.
fn owners(s: &Snapshot) -> String {
    let held: Vec<String> = s
        .holders
        .iter()
        .map(|h| {
            format!(
                "{} ({} x{})",
                escaped(&h.owner.field),
                crate::units::mode(h.mode),
                h.holds
            )
        })
        .collect();
    format!("it was held by {}", held.join(", "))
}

/// Asks `Force-unlock NAME? [y/N]` on the terminal; anything but yes is no.
/// With no terminal on stdin there is nobody to ask, and a `y` piped in by
/// accident must not free a production lock: refused, `--yes` says it.
async fn confirm(name: &str) -> Result<(), Failure> {
    if !std::io::stdin().is_terminal() {
        return Err(Failure::new(
            Code::NotConfirmed,
            format!(
                "not forcing '{name}': stdin is not a terminal, so there is nobody to ask; \
                 run with --yes to force it without asking (nothing was changed)"
            ),
        ));
    }
    let question = format!("Force-unlock {}? [y/N] ", escaped(name));
    let answer = tokio::task::spawn_blocking(move || {
        use std::io::Write as _;
        let mut stderr = std::io::stderr();
        stderr.write_all(question.as_bytes())?;
        stderr.flush()?;
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer)?;
        Ok::<_, std::io::Error>(answer)
    })
    .await
    .map_err(|e| Failure::new(Code::Failed, format!("cannot ask: {e}")))?
    .map_err(|e| Failure::new(Code::Failed, format!("cannot read the answer: {e}")))?;
    if matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
        Ok(())
    } else {
        Err(Failure::new(
            Code::NotConfirmed,
            format!("not forcing '{name}': not confirmed (nothing was changed)"),
        ))
    }
}
