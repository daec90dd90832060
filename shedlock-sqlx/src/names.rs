//! Table and column names: the only text that is ever spliced into SQL.

use shedlock_core::Error;

/// Longest identifier part: PostgreSQL truncates longer names (NAMEDATALEN - 1), so a longer
/// name would silently refer to another table there.
pub(crate) const MAX_IDENTIFIER_LEN: usize = 63;

/// Checks a table name: a plain identifier, optionally qualified by one schema (`schema.table`).
///
/// Identifiers are spliced into SQL unquoted (like ShedLock, so existing tables are found with
/// the database's usual case folding); this check is what makes that safe.
pub(crate) fn validate_table(field: &'static str, table: &str) -> Result<(), Error> {
    let mut parts = table.split('.');
    let (first, second, rest) = (parts.next(), parts.next(), parts.next());
    if rest.is_some() {
        return Err(Error::invalid_config(
            field,
            format!("{table:?} has more than one `.`; expected `table` or `schema.table`"),
        ));
    }
    for part in [first, second].into_iter().flatten() {
        validate_part(field, table, part)?;
    }
    Ok(())
}

/// Checks a column name: a plain identifier, no qualification.
pub(crate) fn validate_column(field: &'static str, column: &str) -> Result<(), Error> {
    validate_part(field, column, column)
}

fn validate_part(field: &'static str, whole: &str, part: &str) -> Result<(), Error> {
    let mut chars = part.chars();
    let starts_well = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !starts_well || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(Error::invalid_config(
            field,
            format!(
                "{whole:?} is not a plain SQL identifier \
                 (letters, digits and `_`, not starting with a digit)"
            ),
        ));
    }
    if part.len() > MAX_IDENTIFIER_LEN {
        return Err(Error::invalid_config(
            field,
            format!("{part:?} is longer than {MAX_IDENTIFIER_LEN} characters"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_and_schema_qualified_names() {
        for ok in [
            "shedlock",
            "_x",
            "public.shedlock",
            "S1.T_2",
            &"a".repeat(63),
        ] {
            assert!(validate_table("table", ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn rejects_everything_else_naming_the_field() {
        let too_long = "a".repeat(64);
        let hostile = [
            "",
            ".",
            "a.",
            ".a",
            "a.b.c",
            "1abc",
            "shedlock; DROP TABLE users",
            "shedlock--",
            "\"shedlock\"",
            "shed lock",
            "shedlöck",
            "`x`",
            too_long.as_str(),
        ];
        for bad in hostile {
            match validate_table("table", bad) {
                Err(Error::InvalidConfig { field, .. }) => assert_eq!(field, "table"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        assert!(validate_column("columns.name", "a.b").is_err());
    }
}
