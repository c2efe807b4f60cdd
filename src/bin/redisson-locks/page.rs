//! Text built a line at a time, labels aligned: what `show`, `watch` and
//! `force-unlock` print. Growing a `String` cannot fail, so nothing here has
//! an error to handle.

use std::fmt::Display;

/// How wide a label's column is at each depth: values line up under each other.
const LABEL_WIDTH: [usize; 3] = [15, 13, 13];

/// A page of text.
#[derive(Debug, Default)]
pub(crate) struct Page(String);

impl Page {
    /// `label value`, the value in its column, at `depth` (two spaces each).
    pub(crate) fn field(&mut self, depth: usize, label: &str, value: impl Display) {
        let width = LABEL_WIDTH.get(depth).copied().unwrap_or(13);
        self.0.push_str(&format!(
            "{:indent$}{label:<width$}{value}\n",
            "",
            indent = depth * 2
        ));
    }

    /// A line of its own at `depth`.
    pub(crate) fn line(&mut self, depth: usize, text: impl Display) {
        self.0
            .push_str(&format!("{:indent$}{text}\n", "", indent = depth * 2));
    }

    /// The text so far.
    pub(crate) fn into_text(self) -> String {
        self.0
    }
}
