//! The program model: BMv2 JSON as typed Rust, its loader and validator.
