//! sqlx
