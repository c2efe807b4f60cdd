//! Child-process lock holders, so a holder's *process* can be killed or frozen.
//!
//! The child is this very test binary, re-run with only the ignored entry test
//! `locks::faults::child_process_entry` and its orders in environment variables.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

pub struct ChildHolder {
    child: Child,
    stdout: BufReader<ChildStdout>,
}

impl ChildHolder {
    /// Starts a child with `orders` (variable name -> value, names without the
    /// `LOCKS_` prefix).
    pub fn spawn(orders: &[(&str, String)]) -> ChildHolder {
        Self::spawn_with_env(orders, &[])
    }

    /// [`spawn`](Self::spawn), with `env` set as it is (no prefix): the
    /// library's own variables, such as `REDISSON_LOCKS_WITHOUT`.
    pub fn spawn_with_env(orders: &[(&str, String)], env: &[(&str, String)]) -> ChildHolder {
        let exe = std::env::current_exe().expect("test binary path");
        let mut cmd = Command::new(exe);
        cmd.args([
            "--ignored",
            "--exact",
            "locks::faults::child_process_entry",
            "--nocapture",
            "--test-threads=1",
        ]);
        let raw = env;
        let env: HashMap<String, String> = orders
            .iter()
            .map(|(k, v)| (format!("LOCKS_{k}"), v.clone()))
            .collect();
        cmd.envs(env)
            .envs(raw.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd.spawn().expect("spawn child holder");
        let stdout = BufReader::new(child.stdout.take().expect("child stdout"));
        ChildHolder { child, stdout }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Reads the child's output until a line equal to `marker`; false when the
    /// child ended first.
    pub fn wait_for_line(&mut self, marker: &str) -> bool {
        let mut line = String::new();
        loop {
            line.clear();
            match self.stdout.read_line(&mut line) {
                Ok(0) | Err(_) => return false,
                // The test harness prints "test <name> ... " before the test runs,
                // without a newline: the marker may end that line.
                Ok(_) if line.trim().ends_with(marker) => return true,
                Ok(_) => {}
            }
        }
    }

    /// Reads the child's output until a line containing `prefix` (the harness
    /// may print "test <name> ... " before it on the same line) and returns
    /// the line from `prefix` on; `None` when the child ended first.
    pub fn line_starting(&mut self, prefix: &str) -> Option<String> {
        let mut line = String::new();
        loop {
            line.clear();
            match self.stdout.read_line(&mut line) {
                Ok(0) | Err(_) => return None,
                Ok(_) => {
                    if let Some(at) = line.find(prefix) {
                        return Some(line[at..].trim().to_owned());
                    }
                }
            }
        }
    }

    /// Waits for the child to exit on its own; its success.
    pub fn wait(&mut self, limit: Duration) -> bool {
        let deadline = std::time::Instant::now() + limit;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    pub fn signal(&self, signal: &str) {
        let _ = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .stderr(Stdio::null())
            .status();
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ChildHolder {
    fn drop(&mut self) {
        self.signal("CONT");
        self.kill();
    }
}
