//! Integration tests, one binary: the real `jira-hub` binary in temp dirs where processes matter
#![allow(clippy::unwrap_used)] // a test that cannot unwrap has failed
//! (migrations racing, a live WAL, exit codes), the service API where they do not.

mod agent_e2e;
mod agent_truth;
mod agent_waits;
mod anonymous;
mod batches;
mod boundaries;
mod budgets;
mod calls;
mod chains;
mod classify;
mod cli;
mod conflicts;
mod connections;
mod console;
mod crash;
mod credentials;
mod db_faults;
mod demo;
mod hostile;
mod http;
mod incremental;
mod install;
mod looks;
mod memory;
mod migrations;
mod mirror;
mod openapi;
mod operator_words;
mod preflight;
mod projects;
mod proof;
mod properties;
mod prune_guard;
mod queue;
mod quiet;
mod relay;
mod release;
mod retry;
mod samples;
mod settings;
mod small_faults;
mod strangers;
mod support;
mod timers;
