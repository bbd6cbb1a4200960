//! The agent's and the clients' secrets: made from the operating system's random source, shown
//! only by `jira-hub tokens`, replaced only by `jira-hub tokens --rotate`.

use super::{Hub, Result, ServiceError};
use crate::domain::settings::Tokens;

/// Which of the two tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenRole {
    Agent,
    Client,
}

/// 32 random bytes as 64 hex digits.
pub(super) fn generate_token() -> Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|error| {
        ServiceError::Internal(crate::store::StoreError::Io {
            context: "cannot read the system's random source".into(),
            source: std::io::Error::other(error.to_string()),
        })
    })?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

pub(super) fn generate_tokens() -> Result<Tokens> {
    Ok(Tokens {
        agent: generate_token()?,
        client: generate_token()?,
    })
}

impl Hub {
    /// The tokens in force; `None` before `init`.
    pub fn tokens(&self) -> Result<Option<Tokens>> {
        Ok(self.settings()?.tokens)
    }

    /// Replaces one token; the old one stops working at once.
    pub fn rotate_token(&mut self, role: TokenRole) -> Result<Tokens> {
        let fresh = generate_token()?;
        let rotated = self.store.rotate_token(role == TokenRole::Agent, fresh)?;
        let tokens = rotated.ok_or_else(|| {
            ServiceError::NotFound("the database has no tokens yet: run jira-hub init first".into())
        })?;
        tracing::info!(role = ?role, "token rotated");
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
