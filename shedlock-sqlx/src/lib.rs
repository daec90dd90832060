//! shedlock lock providers on sqlx (placeholder, see issue 3).
