//! Diagnostics: source files, positions and `file:line:col: error: …` messages rendered with the
//! offending source line and a caret.

use std::fmt;

/// A position in a source file (1-based line and column).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pos {
    /// Index into [`Sources::files`].
    pub file: u32,
    pub line: u32,
    pub col: u32,
}

/// All source files seen by one compilation (the main file and every include).
#[derive(Clone, Debug, Default)]
pub struct Sources {
    /// `(display name, text)`.
    pub files: Vec<(String, String)>,
}

impl Sources {
    /// Register a file and return its index.
    pub fn add(&mut self, name: &str, text: &str) -> u32 {
        self.files.push((name.to_string(), text.to_string()));
        (self.files.len() - 1) as u32
    }
    fn name(&self, f: u32) -> &str {
        self.files
            .get(f as usize)
            .map(|x| x.0.as_str())
            .unwrap_or("<unknown>")
    }
    fn line(&self, p: Pos) -> Option<&str> {
        let text = &self.files.get(p.file as usize)?.1;
        text.lines().nth((p.line as usize).checked_sub(1)?)
    }
}

/// One error with its position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub pos: Pos,
    pub message: String,
}

impl Diagnostic {
    pub fn new(pos: Pos, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            pos,
            message: message.into(),
        }
    }
}

/// The errors of a failed compilation, with the sources needed to render them.
#[derive(Clone, Debug)]
pub struct Diagnostics {
    pub errors: Vec<Diagnostic>,
    pub sources: Sources,
}

impl Diagnostics {
    /// `file:line:col` of the first error (handy in tests).
    pub fn first_location(&self) -> String {
        match self.errors.first() {
            Some(d) => format!(
                "{}:{}:{}",
                self.sources.name(d.pos.file),
                d.pos.line,
                d.pos.col
            ),
            None => String::new(),
        }
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.errors {
            if self.sources.files.get(d.pos.file as usize).is_none() {
                writeln!(f, "error: {}", d.message)?;
                continue;
            }
            if d.pos.line == 0 {
                writeln!(f, "{}: error: {}", self.sources.name(d.pos.file), d.message)?;
                continue;
            }
            writeln!(
                f,
                "{}:{}:{}: error: {}",
                self.sources.name(d.pos.file),
                d.pos.line,
                d.pos.col,
                d.message
            )?;
            if let Some(line) = self.sources.line(d.pos) {
                writeln!(f, "{line}")?;
                let pad: String = line
                    .chars()
                    .take((d.pos.col as usize).saturating_sub(1))
                    .map(|c| if c == '\t' { '\t' } else { ' ' })
                    .collect();
                writeln!(f, "{pad}^")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}
