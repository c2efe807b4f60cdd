//! Text built a line at a time, labels aligned: what `show`, `watch` and
//! `force-unlock` print. Every value is [`escaped`]: it holds names, owners
//! and identities read from Redis, and a page's lines are the page's own.
//! Growing a `String` cannot fail, so nothing here has an error to handle.

use std::fmt::Display;

use crate::escape::escaped;

/// How wide a label's column is at each depth: values line up under each other.
const LABEL_WIDTH: [usize; 3] = [15, 13, 13];

/// A page of text.
#[derive(Debug, Default)]
pub(crate) struct Page(String);

impl Page {
    /// `label value`, the value in its column, at `depth` (two spaces each).
    pub(crate) fn field(&mut self, depth: usize, label: &str, value: impl Display) {
        let width = LABEL_WIDTH.get(depth).copied().unwrap_or(13);
        let value = value.to_string();
        self.0.push_str(&format!(
            "{:indent$}{label:<width$}{}\n",
            "",
            escaped(&value),
            indent = depth * 2
        ));
    }

    /// A line of its own at `depth`.
    pub(crate) fn line(&mut self, depth: usize, text: impl Display) {
        let text = text.to_string();
        self.0.push_str(&format!(
            "{:indent$}{}\n",
            "",
            escaped(&text),
            indent = depth * 2
        ));
    }

    /// The text so far.
    pub(crate) fn into_text(self) -> String {
        self.0
    }
}
