//! The result of every fallible step of the bench; messages are shown as they are.

/// Every fallible step; messages are shown as they are.
pub type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;
