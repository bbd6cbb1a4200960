//! The simulated Jira: the one the tests, the benchmarks and `jira-hub demo` use; built on Jira's
//! documented behaviour, each behaviour with its source beside it. It is an outside system: it
//! shares no code with the hub or the agent (`tests/it/boundaries.rs`), and only the command
//! line's `demo`, the tests and the benchmarks use it.

pub mod jira;
