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

impl HubConnection {
    /// Whether `token` is the agent token (false when there is none yet).
    pub(crate) fn agent_token_matches(&self, token: Option<&str>) -> Result<bool> {
        let tokens = self.settings()?.tokens;
        Ok(
            matches!((tokens, token), (Some(t), Some(given)) if constant_time_eq(t.agent.as_bytes(), given.as_bytes())),
        )
    }

    /// Whether `token` is the client token (false when there is none yet).
    pub(crate) fn client_token_matches(&self, token: Option<&str>) -> Result<bool> {
        let tokens = self.settings()?.tokens;
        Ok(
            matches!((tokens, token), (Some(t), Some(given)) if constant_time_eq(t.client.as_bytes(), given.as_bytes())),
        )
    }
}

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
