//! What the binary's test files share: a finished run and its output, and finding a lock in
//! `locks list --json`.

#![allow(dead_code)] // each test binary uses a different part

use std::process::Output;

use serde_json::Value;

/// A finished run of the binary.
pub(crate) struct Run(pub(crate) Output);

impl Run {
    pub(crate) fn code(&self) -> i32 {
        self.0.status.code().expect("exited, not killed")
    }

    pub(crate) fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.0.stdout).into_owned()
    }

    pub(crate) fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.0.stderr).into_owned()
    }

    /// Asserts the exit code, showing both streams when it differs.
    pub(crate) fn expect(self, code: i32) -> Self {
        assert_eq!(
            self.code(),
            code,
            "stdout:\n{}\nstderr:\n{}",
            self.stdout(),
            self.stderr()
        );
        self
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.stdout()).expect("JSON on stdout")
    }
}

/// The lock named `name` in a `locks list --json` array.
pub(crate) fn find<'a>(locks: &'a Value, name: &str) -> &'a Value {
    let locks = locks.as_array().expect("a JSON array");
    locks
        .iter()
        .find(|lock| lock["name"] == name)
        .unwrap_or_else(|| panic!("{name} in {locks:?}"))
}
