//! `--key value` command lines: small enough not to need a parser crate, strict enough that a
//! typo is an error rather than a silently ignored option.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context as _, bail};

/// Parsed `--key value` pairs; each is taken once, and [`finish`](Self::finish) rejects leftovers.
#[derive(Debug, Default)]
pub struct Args {
    values: BTreeMap<String, String>,
}

impl Args {
    /// Parses `--key value` pairs.
    ///
    /// # Errors
    /// On a word that is not `--key`, a key without a value, or a key given twice.
    pub fn parse(words: impl IntoIterator<Item = String>) -> anyhow::Result<Self> {
        let mut values = BTreeMap::new();
        let mut words = words.into_iter();
        while let Some(word) = words.next() {
            let Some(key) = word.strip_prefix("--") else {
                bail!("expected an option like --key, got {word:?}");
            };
            let Some(value) = words.next() else {
                bail!("--{key} needs a value");
            };
            if values.insert(key.to_owned(), value).is_some() {
                bail!("--{key} given twice");
            }
        }
        Ok(Args { values })
    }

    /// The value of `--key`, parsed, or `default`.
    ///
    /// # Errors
    /// When the value does not parse.
    pub fn get<T: FromStr>(&mut self, key: &str, default: T) -> anyhow::Result<T>
    where
        T::Err: std::fmt::Display,
    {
        Ok(self.optional(key)?.unwrap_or(default))
    }

    /// The value of `--key`, parsed, if given.
    ///
    /// # Errors
    /// When the value does not parse.
    pub fn optional<T: FromStr>(&mut self, key: &str) -> anyhow::Result<Option<T>>
    where
        T::Err: std::fmt::Display,
    {
        self.values
            .remove(key)
            .map(|v| {
                v.parse::<T>()
                    .map_err(|e| anyhow::anyhow!("--{key} {v:?}: {e}"))
            })
            .transpose()
    }

    /// The value of `--key`, which must be given.
    ///
    /// # Errors
    /// When missing or unparsable.
    pub fn required<T: FromStr>(&mut self, key: &str) -> anyhow::Result<T>
    where
        T::Err: std::fmt::Display,
    {
        self.optional(key)?
            .with_context(|| format!("--{key} is required"))
    }

    /// A duration in milliseconds, `--key-ms N`.
    ///
    /// # Errors
    /// When the value is not a whole number.
    pub fn millis(&mut self, key: &str, default: Duration) -> anyhow::Result<Duration> {
        Ok(self
            .optional::<u64>(key)?
            .map_or(default, Duration::from_millis))
    }

    /// Fails if any option was not used.
    ///
    /// # Errors
    /// Naming the unknown options.
    pub fn finish(self) -> anyhow::Result<()> {
        if self.values.is_empty() {
            return Ok(());
        }
        let unknown: Vec<_> = self.values.keys().map(|k| format!("--{k}")).collect();
        bail!("unknown option(s): {}", unknown.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> anyhow::Result<Args> {
        Args::parse(line.split_whitespace().map(str::to_owned))
    }

    #[test]
    fn takes_each_value_once_and_rejects_leftovers() {
        let mut a = args("--processes 8 --db postgres --job-ms 250").unwrap();
        assert_eq!(a.get("processes", 3u32).unwrap(), 8);
        assert_eq!(a.get("locks", 10u32).unwrap(), 10);
        assert_eq!(
            a.millis("job-ms", Duration::ZERO).unwrap(),
            Duration::from_millis(250)
        );
        assert!(a.finish().unwrap_err().to_string().contains("--db"));
        assert!(args("--x").is_err());
        assert!(args("x 1").is_err());
        assert!(args("--x 1 --x 2").is_err());
        assert!(args("--n x").unwrap().get("n", 1u32).is_err());
    }
}
