//! Who the caller is: the credentials the fake accepts, the 401 for any other, `serverInfo` and
//! the user as each deployment describes it.

use super::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The caller every valid credential authenticates as.
pub const USER: &str = "agent";

pub const PASSWORD: &str = "secret";

pub const TOKEN: &str = "pat-secret";

pub const ACCOUNT_ID: &str = "5b10a2844c20165700ede21g";

pub const DISPLAY_NAME: &str = "Агент синхронизации";

pub fn base64(text: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = text.as_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `Authorization` header values the fake accepts.
pub fn basic_auth() -> String {
    format!("Basic {}", base64(&format!("{USER}:{PASSWORD}")))
}

pub fn bearer_auth() -> String {
    format!("Bearer {TOKEN}")
}

impl StateInner {
    pub(super) fn gate(&mut self, auth: &str) -> Option<Reply> {
        if let Some(limit) = self.rate_limit {
            let now = Instant::now();
            while self
                .window
                .front()
                .is_some_and(|t| now.duration_since(*t) >= Duration::from_secs(1))
            {
                self.window.pop_front();
            }
            if self.window.len() >= limit as usize {
                let mut reply = Reply::error(429, "Rate limit exceeded.");
                reply.headers.push(("retry-after", "1".into()));
                reply.headers.push(("x-ratelimit-limit", limit.to_string()));
                reply.headers.push(("x-ratelimit-remaining", "0".into()));
                return Some(reply);
            }
            self.window.push_back(now);
        }
        if auth != self.basic && auth != self.bearer {
            let mut reply = Reply::error(
                401,
                "You are not authenticated. Authentication required to perform this operation.",
            );
            reply
                .headers
                .push(("www-authenticate", "Basic realm=\"protected-area\"".into()));
            return Some(reply);
        }
        None
    }

    pub(super) fn user_json(&self) -> Value {
        if self.mode == Mode::Cloud {
            // Cloud users have an `accountId` and no `name` or `key` since the privacy changes
            // ("Deprecation notice and migration guide for major changes to Jira Cloud REST APIs
            // to improve user privacy", developer.atlassian.com, 2019).
            return json!({"self": format!("{}/rest/api/2/user?accountId={ACCOUNT_ID}", self.base),
                   "accountId": ACCOUNT_ID, "accountType": "atlassian", "displayName": DISPLAY_NAME,
                   "active": true, "timeZone": "Europe/Moscow"});
        }
        json!({"self": format!("{}/rest/api/2/user?username={USER}", self.base), "name": USER,
               "key": "JIRAUSER10100", "accountId": ACCOUNT_ID, "displayName": DISPLAY_NAME,
               "active": true, "timeZone": "Europe/Moscow"})
    }

    pub(super) fn server_info(&self) -> Reply {
        let (deployment, version) = match self.mode {
            Mode::DataCenter => ("Server", "9.12.15"),
            Mode::Cloud => ("Cloud", "1001.0.0-SNAPSHOT"),
        };
        Reply::json(
            200,
            json!({"baseUrl": self.base, "version": version, "versionNumbers": [9, 12, 15],
                   "deploymentType": deployment, "buildNumber": 9120015,
                   "buildDate": "2026-01-15T00:00:00.000+0300",
                   "serverTime": jira_time(self.jira_now_ms()), "scmInfo": "fake", "serverTitle": "Jira"}),
        )
    }
}
