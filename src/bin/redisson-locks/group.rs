//! Who is still in a process group, read from `/proc` (Linux): what the
//! guard waits for before the hold is given back.
//!
//! `kill(-group, 0)` cannot tell: the guard is in the group itself, and a
//! zombie (exited, not yet reaped) counts as a member though it runs no more.

use rustix::process::Pid;

/// Whether a process other than this one, alive (not a zombie), is in
/// process group `group`.
pub(crate) fn others_live_in(group: Pid) -> bool {
    let me = std::process::id().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        // Without /proc nothing can be seen: the command alone is waited for.
        return false;
    };
    entries.flatten().any(|entry| {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            return false;
        };
        pid != me
            && std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| live_member_of(&stat))
                == Some(group.as_raw_nonzero().get())
    })
}

/// The process group of a `/proc/<pid>/stat` line, when the process is not
/// a zombie. The command name, in parentheses, may hold spaces and `)`: the
/// fields that follow are read after the last `)`.
fn live_member_of(stat: &str) -> Option<i32> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    let _parent = fields.next()?;
    let group = fields.next()?.parse().ok()?;
    (state != "Z" && state != "X").then_some(group)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_its_group_unless_a_zombie() {
        assert_eq!(
            live_member_of("123 (sleep) S 100 120 120 0 -1 4194304"),
            Some(120)
        );
        assert_eq!(
            live_member_of("123 (a) b (c)) R 100 77 77 0"),
            Some(77),
            "a name with spaces and parentheses"
        );
        assert_eq!(live_member_of("123 (sh) Z 1 120 120"), None);
    }
}
