//! Placeholder: the stress and fault harness (issue 8) is being written.

fn main() {}
