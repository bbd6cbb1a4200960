//! The agent's and the clients' secrets: made from the operating system's random source, shown
//! only by `jira-hub tokens`, replaced only by `jira-hub tokens --rotate`.

use super::{HubConnection, Result, ServiceError};
use crate::domain::settings::Tokens;

/// Which of the two tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenRole {
    Agent,
    Client,
}

/// 32 random bytes as 64 hex digits.
pub(super) fn generate_token() -> Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(ServiceError::Random)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

pub(super) fn generate_tokens() -> Result<Tokens> {
    Ok(Tokens {
        agent: generate_token()?,
        client: generate_token()?,
    })
}

impl HubConnection {
    /// The tokens in force; `None` before `init`.
    pub fn tokens(&self) -> Result<Option<Tokens>> {
        Ok(self.settings()?.tokens)
    }

    /// Replaces one token; the old one stops working at once.
    pub(crate) fn rotate_token(&mut self, role: TokenRole) -> Result<Tokens> {
        let fresh = generate_token()?;
        let rotated = self.store.rotate_token(role == TokenRole::Agent, fresh)?;
        let tokens = rotated.ok_or_else(|| {
            ServiceError::NotFound(format!(
                "the database has no tokens yet: run {} init first",
                crate::program()
            ))
        })?;
        let role_name = match role {
            TokenRole::Agent => "agent",
            TokenRole::Client => "client",
        };
        tracing::info!(role = %role_name, "token rotated");
        self.credentials.set(Some(tokens.clone()));
        Ok(tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_hex() {
        let a = generate_token().unwrap();
        let b = generate_token().unwrap();
        assert_eq!(a.len(), 64);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}

/// Compares two secrets in time that depends only on their lengths, not on where they differ.
use crate::domain::constant_time_eq;

#[cfg(test)]
mod compare_tests {
    use super::constant_time_eq;

    #[test]
    fn compares() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(constant_time_eq(b"", b""));
    }
}

/// The tokens in force, kept in memory for the HTTP side: a token is checked
/// against them without a turn at the database. Shared by every connection of the process;
/// loaded when the HTTP pool starts and again whenever the database changed since the last look
/// (the pool's watcher, [`HubConnection::reload_credentials`]), so a rotation or an `init` by
/// another process (the CLI) is in force within a quarter of a second; a rotation in this
/// process sets them at once.
#[derive(Debug, Default)]
pub struct Credentials {
    tokens: std::sync::RwLock<Option<Tokens>>,
}

/// Whose a token is, as [`Credentials::holder`] finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder {
    pub client: bool,
    pub agent: bool,
    /// The hub has tokens at all (it was initialised).
    pub initialised: bool,
}

impl Credentials {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Option<Tokens>> {
        self.tokens
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whose `token` is, compared with both tokens in time that depends only on the lengths.
    pub fn holder(&self, token: &str) -> Holder {
        let tokens = self.read();
        match tokens.as_ref() {
            Some(tokens) => Holder {
                client: constant_time_eq(tokens.client.as_bytes(), token.as_bytes()),
                agent: constant_time_eq(tokens.agent.as_bytes(), token.as_bytes()),
                initialised: true,
            },
            None => Holder {
                client: false,
                agent: false,
                initialised: false,
            },
        }
    }

    /// Whether the hub has tokens (it was initialised).
    pub fn initialised(&self) -> bool {
        self.read().is_some()
    }

    /// What `with` makes of the client token in force (`None` before `init`), without a copy.
    pub(crate) fn with_client<T>(&self, with: impl FnOnce(Option<&str>) -> T) -> T {
        with(self.read().as_ref().map(|tokens| tokens.client.as_str()))
    }

    /// Puts `tokens` in force; whether they differ from those in force.
    pub(crate) fn set(&self, tokens: Option<Tokens>) -> bool {
        let mut slot = self
            .tokens
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let changed = match (slot.as_ref(), tokens.as_ref()) {
            (Some(old), Some(new)) => old.agent != new.agent || old.client != new.client,
            (None, None) => false,
            _ => true,
        };
        *slot = tokens;
        changed
    }
}

impl HubConnection {
    /// The tokens in force as this process keeps them in memory.
    pub fn credentials(&self) -> std::sync::Arc<Credentials> {
        self.credentials.clone()
    }

    /// Reads the tokens from the database into memory; whether they changed.
    pub fn reload_credentials(&self) -> Result<bool> {
        let tokens = self.tokens()?;
        let before = self.credentials.initialised();
        let changed = self.credentials.set(tokens);
        if changed && before {
            tracing::info!("a token was rotated in the database: the new one is in force");
        }
        Ok(changed)
    }

    /// SQLite's `data_version` of this connection: it moves when another connection (of this
    /// process or another) commits. A read of shared memory, no I/O.
    pub(crate) fn data_version(&self) -> Result<i64> {
        Ok(self.store.data_version()?)
    }
}
