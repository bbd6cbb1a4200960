//! The daemon's one stop signal: triggered once (by SIGTERM, SIGINT, or the HTTP server ending),
//! heard by every part, async or not: the HTTP listener and the timers await it, the relay
//! thread checks it between files and is woken by it.

use tokio::sync::watch;

/// A clonable handle on one stop signal (a `tokio::sync::watch` of "stopping").
#[derive(Debug, Clone)]
pub struct Shutdown {
    sender: std::sync::Arc<watch::Sender<bool>>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Shutdown::new()
    }
}

impl Shutdown {
    pub fn new() -> Self {
        Shutdown {
            sender: std::sync::Arc::new(watch::channel(false).0),
        }
    }

    /// Tells every listener to stop; later calls change nothing.
    pub fn trigger(&self) {
        self.sender.send_replace(true);
    }

    /// Whether the stop was asked for (for loops that are not async).
    pub(crate) fn is_triggered(&self) -> bool {
        *self.sender.borrow()
    }

    /// Completes once the stop is asked for (at once if it was).
    pub(crate) async fn triggered(&self) {
        let mut receiver = self.sender.subscribe();
        // The sender lives in `self`, so waiting cannot fail while it is borrowed here.
        let _ = receiver.wait_for(|stopping| *stopping).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_clone_hears_the_one_trigger() {
        let shutdown = Shutdown::new();
        let listener = shutdown.clone();
        let waiting = tokio::spawn(async move { listener.triggered().await });
        assert!(!shutdown.is_triggered());
        shutdown.trigger();
        waiting.await.expect("joined");
        assert!(shutdown.clone().is_triggered());
        shutdown.triggered().await;
    }
}
