//! Redis's glob patterns (`SCAN … MATCH`), matched in the client for the one
//! case the server cannot: a fair queue's key names its lock inside a hash
//! tag, and the operator's pattern is about the lock's name.
//!
//! The match takes time proportional to the name's length times the
//! pattern's, whatever either holds: anyone who can write a key chooses the
//! names a scan meets, so trying every split at each `*` (exponential in the
//! number of stars) would let one long name stall the task, and every task on
//! its worker thread, for minutes.

/// One step of a pattern; every step but [`Step::AnyRun`] consumes exactly
/// one character, which is what lets a failed match resume from the last
/// `*` alone.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// `*`: any run of characters, the empty one included.
    AnyRun,
    /// `?`: any one character.
    AnyOne,
    /// A character as it is (`\x` makes any `x` one).
    Literal(char),
    /// `[...]` or `[^...]`: one character of (or not of) a set.
    Class { negate: bool, items: Vec<ClassItem> },
    /// `[` never closed: as in Redis, no character matches it.
    Unclosed,
}

/// One member of a character class: a character, or an inclusive range.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ClassItem {
    One(char),
    Range(char, char),
}

impl Step {
    /// Does this step, one that consumes a character, take `c`?
    fn takes(&self, c: char) -> bool {
        match self {
            Step::AnyOne => true,
            Step::Literal(l) => *l == c,
            Step::Class { negate, items } => {
                let found = items.iter().any(|item| match *item {
                    ClassItem::One(x) => x == c,
                    ClassItem::Range(lo, hi) => (lo..=hi).contains(&c),
                });
                found != *negate
            }
            Step::AnyRun | Step::Unclosed => false,
        }
    }
}

/// The steps of `pattern`, runs of `*` folded into one.
fn compile(pattern: &str) -> Vec<Step> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut steps = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let step = match chars[i] {
            '*' => {
                i += 1;
                if steps.last() == Some(&Step::AnyRun) {
                    continue;
                }
                Step::AnyRun
            }
            '?' => {
                i += 1;
                Step::AnyOne
            }
            '[' => {
                let (step, next) = class(&chars, i + 1);
                i = next;
                step
            }
            '\\' if i + 1 < chars.len() => {
                i += 2;
                Step::Literal(chars[i - 1])
            }
            c => {
                i += 1;
                Step::Literal(c)
            }
        };
        steps.push(step);
    }
    steps
}

/// The class whose body starts at `chars[start]` (just after its `[`), and
/// where the pattern goes on after its `]`.
fn class(chars: &[char], start: usize) -> (Step, usize) {
    let negate = chars.get(start) == Some(&'^');
    let mut i = start + usize::from(negate);
    let mut items = Vec::new();
    loop {
        match chars.get(i..) {
            None | Some([]) => return (Step::Unclosed, chars.len()),
            Some([']', ..]) => return (Step::Class { negate, items }, i + 1),
            Some(['\\', x, ..]) => {
                items.push(ClassItem::One(*x));
                i += 2;
            }
            Some([a, '-', b, ..]) if *b != ']' => {
                items.push(ClassItem::Range(*a.min(b), *a.max(b)));
                i += 3;
            }
            Some([x, ..]) => {
                items.push(ClassItem::One(*x));
                i += 1;
            }
        }
    }
}

/// Whether `text` matches the glob `pattern` as Redis's MATCH reads it: `*`,
/// `?`, `[abc]`, `[^a-z]`, and `\` escaping the next character.
///
/// Greedy with one point to resume from: when a step fails, the latest `*`
/// takes one more character and the steps after it are tried again. Only the
/// latest `*` needs resuming (a match found with an earlier one taking more
/// is found with the latest taking more too), so each character of `text` is
/// tried against each step at most once per start: O(text × pattern).
pub(crate) fn glob_match(pattern: &str, text: &str) -> bool {
    let steps = compile(pattern);
    let text: Vec<char> = text.chars().collect();
    let (mut s, mut t) = (0, 0);
    // The step after the latest `*`, and where in `text` its run ends now.
    let mut resume: Option<(usize, usize)> = None;
    while t < text.len() {
        match steps.get(s) {
            Some(Step::AnyRun) => {
                s += 1;
                resume = Some((s, t));
                continue;
            }
            Some(step) if step.takes(text[t]) => {
                s += 1;
                t += 1;
                continue;
            }
            _ => {}
        }
        let Some((after_star, run_end)) = resume else {
            return false;
        };
        s = after_star;
        t = run_end + 1;
        resume = Some((after_star, t));
    }
    steps[s..].iter().all(|step| *step == Step::AnyRun)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The obvious matcher, every split at each `*`: exponential, so only for
    /// short inputs, as the reference the linear one is checked against.
    fn by_every_split(p: &[char], t: &[char]) -> bool {
        match p.split_first() {
            None => t.is_empty(),
            Some(('*', rest)) => (0..=t.len()).any(|skip| by_every_split(rest, &t[skip..])),
            Some(('?', rest)) => !t.is_empty() && by_every_split(rest, &t[1..]),
            Some(('[', _)) => {
                // Classes are read by `class` in both: compare one character.
                let chars: Vec<char> = p.to_vec();
                let (step, next) = class(&chars, 1);
                t.first().is_some_and(|&c| step.takes(c)) && by_every_split(&p[next..], &t[1..])
            }
            Some(('\\', rest)) if !rest.is_empty() => {
                t.first() == rest.first() && by_every_split(&rest[1..], &t[1..])
            }
            Some((c, rest)) => t.first() == Some(c) && by_every_split(rest, &t[1..]),
        }
    }

    #[test]
    fn globs_match_as_redis_reads_them() {
        for (pattern, text, expected) in [
            ("*", "anything", true),
            ("*", "", true),
            ("", "", true),
            ("", "x", false),
            ("orders:*", "orders:42", true),
            ("orders:*", "order:42", false),
            ("h?llo", "hello", true),
            ("h?llo", "hllo", false),
            ("h[ae]llo", "hallo", true),
            ("h[^e]llo", "hello", false),
            ("h[a-c]llo", "hbllo", true),
            ("h[c-a]llo", "hbllo", true),
            ("h[\\]]llo", "h]llo", true),
            ("a\\*b", "a*b", true),
            ("a\\*b", "axb", false),
            ("a\\", "a\\", true),
            ("*:42", "orders:42", true),
            ("**a**", "bab", true),
            ("*a*b", "aXbYb", true),
            ("*a*b", "aXbYc", false),
            ("[", "[", false),
            ("*[ab", "xa", false),
            ("über*", "überall", true),
        ] {
            assert_eq!(glob_match(pattern, text), expected, "{pattern} ~ {text}");
        }
    }

    #[test]
    fn the_linear_match_agrees_with_every_split_on_short_inputs() {
        // A small deterministic generator (xorshift): no dependency, and the
        // same cases on every run.
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            usize::try_from(state % n as u64).unwrap_or(0)
        };
        let pattern_chars = ['a', 'b', '*', '?', '[', ']', '^', '-', '\\'];
        for _ in 0..20_000 {
            let pattern: String = (0..next(8)).map(|_| pattern_chars[next(9)]).collect();
            let text: String = (0..next(8)).map(|_| ['a', 'b', '-'][next(3)]).collect();
            let p: Vec<char> = pattern.chars().collect();
            let t: Vec<char> = text.chars().collect();
            assert_eq!(
                glob_match(&pattern, &text),
                by_every_split(&p, &t),
                "{pattern:?} ~ {text:?}"
            );
        }
    }

    #[test]
    fn long_names_against_many_stars_finish() {
        // Each of these took seconds to forever by trying every split: a
        // name of 8,000 bytes (about the longest a lock can have) against
        // patterns that almost match. The bound is far above what the match
        // takes (milliseconds), and far below what the old one did.
        let name = "a".repeat(8_000);
        let cases = [
            ("*a*a*b", false),
            ("*a*a*a*a*a*a*a*a*a*a*a*a*b", false),
            ("*a*a*a*a*", true),
            ("*?*?*?*?*?*[^a]", false),
            (
                "a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*",
                true,
            ),
        ];
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for (pattern, expected) in cases {
                assert_eq!(glob_match(pattern, &name), expected, "{pattern}");
            }
            let _ = done.send(());
        });
        finished
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("matching long names against many stars did not finish within 60 s");
    }
}
