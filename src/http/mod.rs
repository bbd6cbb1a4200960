//! The HTTP API (system.md §8): the axum router and the one place that maps errors to status
//! codes. So far the daemon serves `GET /health`; the client and agent endpoints call the same
//! service functions as the relay.

use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

/// The router, separate from the listener so that tests can drive it without a socket.
pub fn router() -> Router {
    Router::new().route("/health", get(health))
}

/// Alive: the process answers. No auth, no database.
async fn health() -> Json<Value> {
    Json(json!({"status": "ok", "schema_version": crate::store::CURRENT_SCHEMA_VERSION}))
}
