//! The agent's waits on the injected clock: the real agent loop
//! (`jira_hub::run_agent_for_test`) against the simulated Jira and the real hub served over
//! HTTP in this process, both on one `ManualClock`. A `Retry-After: 240` or a lease of a minute
//! takes no wall time: the agent's sleeps move the clock forward, and the hub sees the same time.

use crate::support::*;
use jira_hub::clock::{Clock, ManualClock};
use jira_hub::domain::command::CommandStatus;
use jira_hub::service::HubConnection;
use jira_hub::sim::jira::{Endpoint, FakeJira, Fault, Mode, PROJECT};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The hub (example config) served over HTTP on a port of its own, on `clock`.
pub(crate) struct Hub {
    pub(crate) dir: TestDir,
    pub(crate) clock: Arc<ManualClock>,
    pub(crate) address: String,
    pub(crate) agent_token: String,
    pub(crate) client_token: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Hub {
    pub(crate) fn start(settings: Value, batch_commands: Value) -> Hub {
        Hub::start_with(settings, batch_commands, |router| router)
    }

    /// [`Hub::start`], its router wrapped by `wrap` (a layer that stands for another hub).
    pub(crate) fn start_with(
        settings: Value,
        batch_commands: Value,
        wrap: fn(axum::Router) -> axum::Router,
    ) -> Hub {
        let dir = TestDir::new();
        // The clock starts at the wall time: Jira's own reset times (`X-RateLimit-Reset`) are
        // wall times.
        let clock = Arc::new(ManualClock::new(time::OffsetDateTime::now_utc()));
        let mut hub = ready_hub(&dir, &clock);
        set_settings(&mut hub, settings);
        let tokens = hub.tokens().unwrap().unwrap();
        let (agent_token, client_token) = (tokens.agent, tokens.client);
        if batch_commands.as_array().is_some_and(|c| !c.is_empty()) {
            hub.enqueue_batch(&batch(
                json!({"title": "t", "author": "a", "commands": batch_commands}),
            ))
            .unwrap();
        }
        let state = jira_hub::http::AppState {
            pool: Arc::new(jira_hub::http::HubPool::new(hub)),
            options: jira_hub::http::HttpOptions::default(),
        };
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let serve = axum::serve(listener, wrap(jira_hub::http::router(state)));
                tokio::select! {
                    _ = serve.into_future() => {}
                    _ = stopped => {}
                }
            });
            runtime.shutdown_background();
        });
        Hub {
            dir,
            clock,
            address,
            agent_token,
            client_token,
            stop: Some(stop),
        }
    }

    /// A second connection to the same database, for the test's own reads.
    pub(crate) fn read(&self) -> HubConnection {
        HubConnection::open(&self.dir.db(), self.clock.clone())
            .unwrap()
            .0
    }

    pub(crate) fn commands(&self) -> Vec<jira_hub::service::CommandView> {
        let mut hub = self.read();
        let batches = hub.batches(None).unwrap();
        batches
            .iter()
            .flat_map(|b| hub.batch(b.id).unwrap().commands)
            .collect()
    }

    /// Reports the hub received (keep-alives included).
    fn reports(&self) -> i64 {
        let conn = rusqlite::Connection::open(self.dir.db()).unwrap();
        count(
            &conn,
            "SELECT count(*) FROM agent_request WHERE kind = 'report'",
        )
    }

    /// The hub's `/metrics`, as a scraper reads it.
    pub(crate) fn metrics(&self) -> String {
        let (status, text) = crate::support::http(&self.address, "GET", "/metrics", None, None);
        assert_eq!(status, 200, "{text}");
        text.as_str().unwrap_or_default().to_string()
    }

    pub(crate) fn agent_config(&self, jira_url: &str, extra: Value) -> String {
        let mut config = json!({
            "jira_url": jira_url, "jira_user": "agent", "jira_password": "secret",
            "agent_token": self.agent_token, "name": "agent-1",
            "hub_url": format!("http://{}", self.address),
            "idle_poll_ms": 100, "request_timeout_seconds": 5, "max_retries": 2,
        });
        for (k, v) in extra.as_object().unwrap() {
            config[k] = v.clone();
        }
        config.to_string()
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A datagram socket standing in for systemd's `NOTIFY_SOCKET`, read all along as systemd
/// reads it.
struct NotifySocket {
    _dir: TestDir,
    path: PathBuf,
    reader: std::thread::JoinHandle<usize>,
}

impl NotifySocket {
    fn new() -> NotifySocket {
        let dir = TestDir::new();
        let path = dir.path().join("notify");
        let socket = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 256];
            let mut pings = 0;
            while let Ok(n) = socket.recv(&mut buf) {
                match &buf[..n] {
                    b"WATCHDOG=1" => pings += 1,
                    b"END" => break,
                    _ => {}
                }
            }
            pings
        });
        NotifySocket {
            _dir: dir,
            path,
            reader,
        }
    }

    /// `WATCHDOG=1` datagrams received.
    fn watchdog_pings(self) -> usize {
        let end = std::os::unix::net::UnixDatagram::unbound().unwrap();
        end.send_to(b"END", &self.path).unwrap();
        self.reader.join().unwrap()
    }
}

pub(crate) fn run_agent(hub: &Hub, config: &str, notify: Option<PathBuf>, claims: u32) {
    jira_hub::run_agent_for_test(
        config,
        hub.clock.clone(),
        notify,
        Arc::new(AtomicBool::new(false)),
        Some(claims),
    )
    .unwrap();
}

fn comments_on(key: &str, n: usize) -> Value {
    (0..n)
        .map(|i| json!({"type": "comment", "params": {"key": key, "body": format!("комментарий {i}")}}))
        .collect()
}

pub(crate) fn seed(fake: &FakeJira) -> String {
    fake.seed_issue(
        PROJECT,
        json!({"summary": "Задача", "issuetype": {"id": "10002", "name": "Задача"}, "labels": ["AWPCA"]}),
    )
}

/// Item 5: a `Retry-After: 240` inside a command (WatchdogSec=180 in the unit) is waited out
/// with the watchdog fed all along, on the clock: 240 s pass for the agent and the hub, none
/// on the wall.
#[test]
fn the_watchdog_is_fed_through_a_long_retry_after() {
    let fake = FakeJira::start(Mode::DataCenter);
    let key = seed(&fake);
    let hub = Hub::start(
        json!({"pacing": {"min_interval_ms": 0}}),
        comments_on(&key, 1),
    );
    fake.fault(
        Endpoint::AddComment,
        Fault::TooManyRequests {
            retry_after: Some(240),
            html: true,
        },
        1,
    );
    let notify = NotifySocket::new();
    let started = hub.clock.monotonic();
    run_agent(
        &hub,
        &hub.agent_config(&fake.url(), json!({})),
        Some(notify.path.clone()),
        1,
    );
    let waited = hub.clock.monotonic() - started;
    assert!(waited >= Duration::from_secs(240), "{waited:?}");
    let pings = notify.watchdog_pings();
    // At least one ping every 2 s of the clock across the wait (the unit's WatchdogSec is 180).
    assert!(
        pings as u64 >= waited.as_secs() / 2,
        "{pings} pings over {waited:?}"
    );
    assert_eq!(fake.comments(&key).len(), 1);
    let commands = hub.commands();
    assert_eq!(commands[0].status, CommandStatus::Done, "{commands:?}");
    assert_eq!(commands[0].rate_limited, 1);
}

/// Item 4: a wait longer than the lease gives the commands back (no write, no failure, the hub
/// hands them out again); a wait within it keeps the running command's lease alive with a
/// page-less progress.
#[test]
fn leases_are_respected_during_long_waits() {
    let fake = FakeJira::start(Mode::DataCenter);
    let key = seed(&fake);
    let hub = Hub::start(
        json!({"pacing": {"min_interval_ms": 0, "claim_timeout_seconds": 60}}),
        comments_on(&key, 3),
    );
    // Longer than the whole lease: given back, nothing written, nothing failed.
    fake.fault(
        Endpoint::AddComment,
        Fault::CloudRateLimit {
            retry_after: Some(240),
            reset_in: None,
            reason: "jira-per-issue-on-write",
        },
        1,
    );
    let config = hub.agent_config(&fake.url(), json!({}));
    run_agent(&hub, &config, None, 1);
    assert!(fake.comments(&key).is_empty());
    let commands = hub.commands();
    // Given back at once: queued again, no delivery spent, not before the wait
    // Jira asked for.
    assert!(
        commands.iter().all(|c| c.status == CommandStatus::Queued
            && c.deliveries == 0
            && c.error.as_deref().is_some_and(|e| e.contains("240"))),
        "{commands:?}"
    );
    // The claim was sized by the lease and the pacing: 60 s holds all three.
    assert_eq!(
        commands.iter().filter(|c| c.claimed_by.is_some()).count(),
        3
    );
    // Jira's wait ends; the next claim hands them out again.
    hub.clock.advance(time::Duration::seconds(241));
    // 45 s fits a lease of 60 s but passes its half: the lease is renewed meanwhile.
    fake.fault(
        Endpoint::AddComment,
        Fault::DataCenterRateLimit { retry_after: 45 },
        1,
    );
    let reports = hub.reports();
    run_agent(&hub, &config, None, 1);
    let commands = hub.commands();
    assert!(
        commands
            .iter()
            .all(|c| c.status == CommandStatus::Done && c.deliveries == 1),
        "{commands:?}"
    );
    assert_eq!(fake.comments(&key).len(), 3, "each comment once");
    assert!(
        hub.reports() - reports > 3,
        "a keep-alive besides the three results"
    );
}

/// Item 6: a 429 on the heartbeat's `serverInfo` is honoured (the next call waits for Cloud's
/// `X-RateLimit-Reset`), and Jira is reported up with a note, not unreachable.
#[test]
fn a_rate_limited_heartbeat_waits_and_reports_jira_up() {
    let fake = FakeJira::start(Mode::Cloud);
    let key = seed(&fake);
    let hub = Hub::start(
        json!({"pacing": {"min_interval_ms": 0}}),
        comments_on(&key, 1),
    );
    fake.fault(
        Endpoint::ServerInfo,
        Fault::CloudRateLimit {
            retry_after: None,
            reset_in: Some(120),
            reason: "jira-burst-based",
        },
        1,
    );
    let started = hub.clock.monotonic();
    run_agent(&hub, &hub.agent_config(&fake.url(), json!({})), None, 1);
    let agents = hub.read().agents().unwrap();
    assert_eq!(agents[0].jira_ok, Some(true), "{agents:?}");
    let note = agents[0].last_error.clone().unwrap_or_default();
    assert!(
        note.contains("429") && note.contains("jira-burst-based"),
        "{note}"
    );
    // The comment went out only after the reset (to the minute: 120 to 180 s later).
    assert!(hub.clock.monotonic() - started >= Duration::from_secs(120));
    assert_eq!(fake.comments(&key).len(), 1);
    let seen = fake.requests();
    let limited = seen.iter().position(|r| r.status == 429).unwrap();
    assert!(
        seen[limited + 1..].iter().all(|r| r.status != 429),
        "nothing was sent into the limit again: {seen:?}"
    );
}

/// Item 12: a Jira that cannot be reached holds the queue: the agent claims nothing, and its
/// heartbeat says exactly why (refused, 401, a 302 to a login page, a CAPTCHA).
#[test]
fn an_unreachable_jira_holds_the_queue_and_says_why() {
    // A port nobody listens on: connections are refused.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let fake = FakeJira::start(Mode::DataCenter);
    let key = seed(&fake);
    let cases: Vec<(String, Value, Option<Fault>, &str)> = vec![
        (closed, json!({}), None, "соединение отвергнуто"),
        (
            fake.url(),
            json!({"jira_password": "wrong"}),
            None,
            "HTTP 401",
        ),
        (
            fake.url(),
            json!({}),
            Some(Fault::RedirectToLogin),
            "login.jsp",
        ),
        (
            fake.url(),
            json!({}),
            Some(Fault::CaptchaRequired),
            "AUTHENTICATED_FAILED",
        ),
    ];
    for (url, extra, fault, reason) in cases {
        fake.clear_faults();
        if let Some(fault) = fault {
            fake.fault(Endpoint::Any, fault, 10_000);
        }
        let hub = Hub::start(
            json!({"pacing": {"min_interval_ms": 0}}),
            comments_on(&key, 2),
        );
        let config = hub.agent_config(&url, extra);
        let stop = Arc::new(AtomicBool::new(false));
        let agent = {
            let (clock, stop) = (hub.clock.clone(), stop.clone());
            std::thread::spawn(move || {
                jira_hub::run_agent_for_test(&config, clock, None, stop, None).unwrap()
            })
        };
        // Until the hub hears why (socket I/O only: the agent's own waits take no wall time).
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let agent_view = loop {
            let agents = hub.read().agents().unwrap();
            if let Some(a) = agents.into_iter().find(|a| a.jira_ok == Some(false)) {
                break a;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no heartbeat: {reason}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        // Several probes later, still nothing claimed.
        let probes = hub.clock.monotonic() + Duration::from_secs(300);
        while hub.clock.monotonic() < probes {
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, Ordering::SeqCst);
        agent.join().unwrap();
        let error = agent_view.last_error.unwrap_or_default();
        assert!(error.contains(reason), "{reason}: {error}");
        let commands = hub.commands();
        assert!(
            commands
                .iter()
                .all(|c| c.status == CommandStatus::Queued && c.deliveries == 0),
            "{reason}: {commands:?}"
        );
    }
    assert!(fake.comments(&key).is_empty());
    assert_eq!(fake.calls(Endpoint::AddComment), 0);
}

/// A TLS front for the simulated Jira (`https://localhost:<port>` → the fake's plain port),
/// serving `cert`: what a Jira behind a reverse proxy with its own certificate looks like.
struct TlsFront {
    url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl TlsFront {
    fn start(backend: &str, cert: &rcgen::Certificate, key: &rcgen::KeyPair) -> TlsFront {
        use tokio_rustls::rustls;
        let backend = backend.trim_start_matches("http://").to_string();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!(
            "https://localhost:{}",
            listener.local_addr().unwrap().port()
        );
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let accept = async {
                    loop {
                        let Ok((tcp, _)) = listener.accept().await else {
                            continue;
                        };
                        let (acceptor, backend) = (acceptor.clone(), backend.clone());
                        tokio::spawn(async move {
                            // A handshake the client refuses just ends the connection.
                            let Ok(mut tls) = acceptor.accept(tcp).await else {
                                return;
                            };
                            let Ok(mut plain) = tokio::net::TcpStream::connect(&backend).await
                            else {
                                return;
                            };
                            let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                        });
                    }
                };
                tokio::select! {
                    _ = accept => {}
                    _ = stopped => {}
                }
            });
            runtime.shutdown_background();
        });
        TlsFront {
            url,
            stop: Some(stop),
        }
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A self-signed certificate as `openssl req -x509 -newkey … -subj /CN=localhost` makes it: its
/// own issuer, and `basicConstraints = critical, CA:TRUE` (openssl.cnf's `v3_ca`, which `req
/// -x509` applies).
fn self_signed_ca() -> (rcgen::Certificate, rcgen::KeyPair) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "localhost");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    (params.self_signed(&key).unwrap(), key)
}

/// Item 12: a self-signed CA:TRUE certificate given as `ca_file` is accepted as the server's
/// own (WebPKI alone refuses it: `CaUsedAsEndEntity`); a server presenting another certificate
/// fails the handshake, which is "not sent": the queue is held and the reason says TLS.
#[test]
fn a_self_signed_certificate_in_ca_file_is_accepted_and_a_wrong_one_holds_the_queue() {
    let fake = FakeJira::start(Mode::DataCenter);
    let key = seed(&fake);
    let (cert, cert_key) = self_signed_ca();
    let front = TlsFront::start(&fake.url(), &cert, &cert_key);
    let pem_dir = TestDir::new();
    let ca_file = pem_dir.path().join("jira.pem");
    std::fs::write(&ca_file, cert.pem()).unwrap();

    let hub = Hub::start(
        json!({"pacing": {"min_interval_ms": 0}}),
        comments_on(&key, 1),
    );
    let config = hub.agent_config(&front.url, json!({"ca_file": ca_file}));
    let stop = Arc::new(AtomicBool::new(false));
    let agent = {
        let (clock, stop) = (hub.clock.clone(), stop.clone());
        std::thread::spawn(move || {
            jira_hub::run_agent_for_test(&config, clock, None, stop, None).unwrap()
        })
    };
    // Until the command is done (socket I/O only); a refused certificate never gets there.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while hub.commands()[0].status != CommandStatus::Done && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::SeqCst);
    agent.join().unwrap();
    let agents = hub.read().agents().unwrap();
    assert_eq!(fake.comments(&key).len(), 1, "{agents:?}");
    assert_eq!(agents[0].jira_ok, Some(true), "{agents:?}");
    assert_eq!(hub.commands()[0].status, CommandStatus::Done);

    // Another certificate than the pinned one: refused, before anything is sent.
    let (other, other_key) = self_signed_ca();
    let impostor = TlsFront::start(&fake.url(), &other, &other_key);
    let hub = Hub::start(
        json!({"pacing": {"min_interval_ms": 0}}),
        comments_on(&key, 1),
    );
    let config = hub.agent_config(&impostor.url, json!({"ca_file": ca_file}));
    let stop = Arc::new(AtomicBool::new(false));
    let agent = {
        let (clock, stop) = (hub.clock.clone(), stop.clone());
        std::thread::spawn(move || {
            jira_hub::run_agent_for_test(&config, clock, None, stop, None).unwrap()
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let error = loop {
        let agents = hub.read().agents().unwrap();
        if let Some(a) = agents.into_iter().find(|a| a.jira_ok == Some(false)) {
            break a.last_error.unwrap_or_default();
        }
        assert!(std::time::Instant::now() < deadline, "no heartbeat");
        std::thread::sleep(Duration::from_millis(20));
    };
    stop.store(true, Ordering::SeqCst);
    agent.join().unwrap();
    assert!(error.contains("TLS"), "{error}");
    assert!(error.contains("нет соединения"), "not sent: {error}");
    let commands = hub.commands();
    assert!(
        commands
            .iter()
            .all(|c| c.status == CommandStatus::Queued && c.deliveries == 0),
        "{commands:?}"
    );
    assert_eq!(fake.comments(&key).len(), 1, "nothing more was written");
}
