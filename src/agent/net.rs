//! The agent's HTTP client (ureq, blocking): TLS with the system's roots plus an optional PEM
//! bundle, the proxy from `HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY`, timeouts, and one answer type
//! whatever the status. It also sorts failures into "the request never left" (safe to repeat)
//! and "it may have reached the server" (a write must be checked before it is repeated).

use super::config::AgentConfig;

/// The largest answer body read (a search page of 1,000 issues with every field fits).
pub(crate) const MAX_BODY_BYTES: u64 = 1024 * 1024 * 1024;

/// An HTTP answer, whatever its status.
pub(crate) struct Reply {
    pub status: u16,
    /// `Retry-After`, as sent.
    pub retry_after: Option<String>,
    /// `Content-Type`, as sent: an HTML page from a proxy is not Jira's JSON.
    pub content_type: Option<String>,
    /// The headers the agent reads besides: rate limits (`X-RateLimit-*`, `RateLimit-Reason`,
    /// Cloud's beta `*RateLimit*`), `Location`, `X-Seraph-LoginReason`; names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    /// A header's value (`name` in lower case).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Whether the agent keeps this header of an answer.
fn kept_header(name: &str) -> bool {
    name.contains("ratelimit")
        || name == "location"
        || name == "x-seraph-loginreason"
        || name == "x-authentication-denied-reason"
        || name == "x-ausername"
}

/// Why a request got no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NetError {
    /// The request cannot have reached the server (no connection was made).
    NotSent(String),
    /// The connection dropped or timed out after the request may have been received.
    Ambiguous(String),
}

impl std::fmt::Display for NetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NetError::NotSent(e) => write!(f, "нет соединения: {e}"),
            NetError::Ambiguous(e) => write!(f, "нет ответа: {e}"),
        }
    }
}

/// A configured client, shared by the Jira calls and the hub's HTTP transport.
#[derive(Clone)]
pub(crate) struct Client {
    agent: ureq::Agent,
}

impl Client {
    pub(crate) fn new(config: &AgentConfig) -> anyhow::Result<Client> {
        use ureq::tls::{Certificate, RootCerts, TlsConfig};
        let mut roots: Vec<Certificate<'static>> = Vec::new();
        let native = rustls_native_certs::load_native_certs();
        for error in &native.errors {
            tracing::warn!(%error, "a system root certificate could not be loaded");
        }
        roots.extend(
            native
                .certs
                .iter()
                .map(|der| Certificate::from_der(der.as_ref()).to_owned()),
        );
        let mut pinned: Vec<Certificate<'static>> = Vec::new();
        if let Some(ca_file) = &config.ca_file {
            let pem = std::fs::read(ca_file)
                .map_err(|e| anyhow::anyhow!("ca_file: cannot read {}: {e}", ca_file.display()))?;
            let before = roots.len();
            for item in ureq::tls::parse_pem(&pem) {
                match item {
                    Ok(ureq::tls::PemItem::Certificate(cert)) => {
                        pinned.push(cert.clone());
                        roots.push(cert);
                    }
                    Ok(_) => {}
                    Err(e) => {
                        anyhow::bail!("ca_file: {} is not a PEM bundle: {e}", ca_file.display())
                    }
                }
            }
            if roots.len() == before {
                anyhow::bail!("ca_file: {} holds no certificate", ca_file.display());
            }
        }
        let root_certs = if roots.is_empty() {
            tracing::warn!("no system root certificates found: using the built-in Mozilla roots");
            RootCerts::WebPki
        } else {
            RootCerts::new_with_certs(&roots)
        };
        let tls = TlsConfig::builder().root_certs(root_certs).build();
        let agent_config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .tls_config(tls)
            .proxy(ureq::Proxy::try_from_env())
            .timeout_connect(Some(config.connect_timeout))
            .timeout_global(Some(config.request_timeout))
            .max_redirects(0)
            .user_agent(format!("jira-hub-agent/{}", env!("CARGO_PKG_VERSION")))
            .build();
        let agent = if pinned.is_empty() {
            agent_config.new_agent()
        } else {
            // With a `ca_file`, TLS goes through the agent's own verifier: the usual WebPKI
            // checks against the system's roots and the file's, and besides them, a server
            // that presents exactly a certificate of the file (a self-signed one made the
            // `openssl req -x509` way, which carries `CA:TRUE` and which WebPKI refuses as its
            // own end entity: `CaUsedAsEndEntity`).
            let tls = tls::pinned_config(&roots, &pinned)?;
            use ureq::unversioned::transport::{ConnectProxyConnector, Connector, TcpConnector};
            let connector =
                ().chain(ConnectProxyConnector::default())
                    .chain(TcpConnector::default())
                    .chain(tls::PinnedTlsConnector(tls));
            ureq::Agent::with_parts(
                agent_config,
                connector,
                ureq::unversioned::resolver::DefaultResolver::default(),
            )
        };
        Ok(Client { agent })
    }

    /// Sends one request and reads the whole answer.
    pub(crate) fn send(
        &self,
        method: &str,
        url: &str,
        authorization: &str,
        body: Option<&[u8]>,
    ) -> Result<Reply, NetError> {
        let outcome = match (method, body) {
            ("GET", _) => self
                .agent
                .get(url)
                .header("Authorization", authorization)
                .header("Accept", "application/json")
                .call(),
            ("DELETE", _) => self
                .agent
                .delete(url)
                .header("Authorization", authorization)
                .call(),
            (method, body) => {
                let request = match method {
                    "PUT" => self.agent.put(url),
                    _ => self.agent.post(url),
                };
                request
                    .header("Authorization", authorization)
                    .header("Accept", "application/json")
                    .header("Content-Type", "application/json")
                    .send(body.unwrap_or(b"{}"))
            }
        };
        read_reply(outcome)
    }

    /// A POST to the hub, in the agent's name (`agent_header`: the value of
    /// [`crate::protocol::AGENT_HEADER`]); its answer may take up to `timeout` when given (a
    /// claim the hub holds while it waits for work), the configured request timeout otherwise.
    pub(crate) fn post_to_hub(
        &self,
        url: &str,
        authorization: &str,
        agent_header: &str,
        body: &[u8],
        timeout: Option<std::time::Duration>,
    ) -> Result<Reply, NetError> {
        let request = self.agent.post(url);
        let request = match timeout {
            Some(timeout) => request.config().timeout_global(Some(timeout)).build(),
            None => request,
        };
        let outcome = request
            .header("Authorization", authorization)
            .header(crate::protocol::AGENT_HEADER, agent_header)
            .header("Accept", "application/json")
            .header("Content-Type", "application/json")
            .send(body);
        read_reply(outcome)
    }
}

/// The whole answer of a request, whatever its status.
fn read_reply(
    outcome: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> Result<Reply, NetError> {
    {
        let mut response = outcome.map_err(classify)?;
        let status = response.status().as_u16();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let retry_after = header("retry-after");
        let content_type = header("content-type");
        let headers = response
            .headers()
            .iter()
            .filter(|(name, _)| kept_header(name.as_str()))
            .filter_map(|(name, value)| {
                Some((name.as_str().to_string(), value.to_str().ok()?.to_string()))
            })
            .collect();
        let body = response
            .body_mut()
            .with_config()
            .limit(MAX_BODY_BYTES)
            .read_to_vec()
            .map_err(|e| NetError::Ambiguous(e.to_string()))?;
        Ok(Reply {
            status,
            retry_after,
            content_type,
            headers,
            body,
        })
    }
}

/// TLS with a certificate pinned by `ca_file`.
mod tls {
    use rustls::client::WebPkiServerVerifier;
    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme};
    use rustls::{RootCertStore, StreamOwned};
    use std::io::{Read, Write};
    use std::sync::Arc;
    use ureq::unversioned::transport::{
        Buffers, ConnectionDetails, Connector, Either, LazyBuffers, NextTimeout, Transport,
        TransportAdapter,
    };

    /// WebPKI's verdict, except that a server presenting exactly one of the pinned certificates
    /// may lack a chain to a root: a self-signed certificate is its own issuer, and WebPKI
    /// refuses a CA certificate presented as the server's own (`CaUsedAsEndEntity`) or one it
    /// cannot chain (`UnknownIssuer`). Everything else is checked as for any certificate:
    /// its validity period (WebPKI checks it before the issuer, so an expired or not yet
    /// valid pinned certificate is refused with that reason), the host name it is for (checked
    /// here, as WebPKI checks it only after a chain), and the handshake signature against its
    /// key.
    #[derive(Debug)]
    struct PinnedVerifier {
        webpki: Arc<WebPkiServerVerifier>,
        pinned: Vec<CertificateDer<'static>>,
    }

    impl ServerCertVerifier for PinnedVerifier {
        fn verify_server_cert(
            &self,
            end_entity: &CertificateDer<'_>,
            intermediates: &[CertificateDer<'_>],
            server_name: &ServerName<'_>,
            ocsp_response: &[u8],
            now: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            match self.webpki.verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp_response,
                now,
            ) {
                Ok(verified) => Ok(verified),
                Err(error)
                    if only_the_chain(&error)
                        && self
                            .pinned
                            .iter()
                            .any(|p| p.as_ref() == end_entity.as_ref()) =>
                {
                    let parsed = rustls::server::ParsedCertificate::try_from(end_entity)?;
                    rustls::client::verify_server_name(&parsed, server_name)?;
                    Ok(ServerCertVerified::assertion())
                }
                Err(error) => Err(error),
            }
        }

        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.webpki.verify_tls12_signature(message, cert, dss)
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.webpki.verify_tls13_signature(message, cert, dss)
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.webpki.supported_verify_schemes()
        }
    }

    /// Whether WebPKI refused a certificate only for want of a chain to a root (see
    /// [`PinnedVerifier`]): no issuer known, or a CA certificate used as the server's own.
    fn only_the_chain(error: &rustls::Error) -> bool {
        use rustls::CertificateError;
        match error {
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => true,
            rustls::Error::InvalidCertificate(CertificateError::Other(other)) => matches!(
                other.0.downcast_ref::<webpki::Error>(),
                Some(webpki::Error::CaUsedAsEndEntity)
            ),
            _ => false,
        }
    }

    /// The client config: the roots (system's and the file's) and the pinned certificates.
    pub(super) fn pinned_config(
        roots: &[ureq::tls::Certificate<'static>],
        pinned: &[ureq::tls::Certificate<'static>],
    ) -> anyhow::Result<Arc<ClientConfig>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = pinned_verifier(
            roots.iter().map(|c| CertificateDer::from(c.der())),
            pinned
                .iter()
                .map(|c| CertificateDer::from(c.der().to_vec()))
                .collect(),
            provider.clone(),
        )?;
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| anyhow::anyhow!("TLS: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        Ok(Arc::new(config))
    }

    fn pinned_verifier<'a>(
        roots: impl Iterator<Item = CertificateDer<'a>>,
        pinned: Vec<CertificateDer<'static>>,
        provider: Arc<rustls::crypto::CryptoProvider>,
    ) -> anyhow::Result<PinnedVerifier> {
        let mut store = RootCertStore::empty();
        store.add_parsable_certificates(roots);
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider)
            .build()
            .map_err(|e| anyhow::anyhow!("ca_file: no usable certificate: {e}"))?;
        Ok(PinnedVerifier { webpki, pinned })
    }

    /// The pinned certificate is checked for host name and validity like any
    /// other; only its missing chain is forgiven.
    #[cfg(test)]
    mod tests {
        use super::*;
        use rustls::CertificateError;

        /// A self-signed CA:TRUE certificate for `localhost`, as `openssl req -x509` makes,
        /// valid from `from` to `to` (days from now).
        fn self_signed(from: i64, to: i64) -> CertificateDer<'static> {
            let key = rcgen::KeyPair::generate().unwrap();
            let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
            params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            let now = time::OffsetDateTime::now_utc();
            params.not_before = now + time::Duration::days(from);
            params.not_after = now + time::Duration::days(to);
            params.self_signed(&key).unwrap().der().clone()
        }

        fn verdict(pinned: &CertificateDer<'static>, host: &str) -> Result<(), rustls::Error> {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let verifier =
                pinned_verifier([pinned.clone()].into_iter(), vec![pinned.clone()], provider)
                    .unwrap();
            let name = ServerName::try_from(host.to_string()).unwrap();
            verifier
                .verify_server_cert(pinned, &[], &name, &[], UnixTime::now())
                .map(|_| ())
        }

        #[test]
        fn a_pinned_certificate_is_checked_for_host_and_validity() {
            let good = self_signed(-1, 30);
            assert_eq!(verdict(&good, "localhost"), Ok(()));
            assert!(
                matches!(
                    verdict(&good, "jira.example.org"),
                    Err(rustls::Error::InvalidCertificate(
                        CertificateError::NotValidForName
                            | CertificateError::NotValidForNameContext { .. }
                    ))
                ),
                "another host: {:?}",
                verdict(&good, "jira.example.org")
            );
            let expired = self_signed(-30, -1);
            assert!(
                matches!(
                    verdict(&expired, "localhost"),
                    Err(rustls::Error::InvalidCertificate(
                        CertificateError::Expired | CertificateError::ExpiredContext { .. }
                    ))
                ),
                "{:?}",
                verdict(&expired, "localhost")
            );
            let early = self_signed(2, 30);
            assert!(
                matches!(
                    verdict(&early, "localhost"),
                    Err(rustls::Error::InvalidCertificate(
                        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. }
                    ))
                ),
                "{:?}",
                verdict(&early, "localhost")
            );
            // A certificate that is not the pinned one gets WebPKI's verdict.
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let verifier =
                pinned_verifier([good.clone()].into_iter(), vec![good.clone()], provider).unwrap();
            let stranger = self_signed(-1, 30);
            let name = ServerName::try_from("localhost".to_string()).unwrap();
            assert!(
                verifier
                    .verify_server_cert(&stranger, &[], &name, &[], UnixTime::now())
                    .is_err()
            );
        }
    }

    /// ureq's TLS step (as its own `RustlsConnector`), with the config above.
    #[derive(Debug)]
    pub(super) struct PinnedTlsConnector(pub(super) Arc<ClientConfig>);

    impl<In: Transport> Connector<In> for PinnedTlsConnector {
        type Out = Either<In, PinnedTlsTransport>;

        fn connect(
            &self,
            details: &ConnectionDetails,
            chained: Option<In>,
        ) -> Result<Option<Self::Out>, ureq::Error> {
            let Some(transport) = chained else {
                return Err(ureq::Error::ConnectionFailed);
            };
            if !details.needs_tls() || transport.is_tls() {
                return Ok(Some(Either::A(transport)));
            }
            let host = details
                .uri
                .authority()
                .map(|a| a.host())
                .ok_or(ureq::Error::Tls("no host to verify"))?;
            let host = host
                .strip_prefix('[')
                .and_then(|h| h.strip_suffix(']'))
                .unwrap_or(host);
            let name = ServerName::try_from(host.to_string())
                .map_err(|_| ureq::Error::Tls("the host is not a valid TLS name"))?;
            let mut conn = ClientConnection::new(self.0.clone(), name)?;
            let mut sock = TransportAdapter::new(transport.boxed(), details.current_time.clone());
            sock.set_timeout(details.timeout);
            conn.complete_io(&mut sock)?;
            Ok(Some(Either::B(PinnedTlsTransport {
                buffers: LazyBuffers::new(
                    details.config.input_buffer_size(),
                    details.config.output_buffer_size(),
                ),
                stream: StreamOwned { conn, sock },
            })))
        }
    }

    pub(super) struct PinnedTlsTransport {
        buffers: LazyBuffers,
        stream: StreamOwned<ClientConnection, TransportAdapter>,
    }

    impl std::fmt::Debug for PinnedTlsTransport {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("PinnedTlsTransport")
        }
    }

    impl Transport for PinnedTlsTransport {
        fn buffers(&mut self) -> &mut dyn Buffers {
            &mut self.buffers
        }

        fn transmit_output(
            &mut self,
            amount: usize,
            timeout: NextTimeout,
        ) -> Result<(), ureq::Error> {
            self.stream.get_mut().set_timeout(timeout);
            let output = &self.buffers.output()[..amount];
            self.stream.write_all(output)?;
            Ok(())
        }

        fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
            self.stream.get_mut().set_timeout(timeout);
            let input = self.buffers.input_append_buf();
            let amount = self.stream.read(input)?;
            self.buffers.input_appended(amount);
            Ok(amount > 0)
        }

        fn is_open(&mut self) -> bool {
            self.stream.get_mut().get_mut().is_open()
        }

        fn is_tls(&self) -> bool {
            true
        }
    }
}

/// Sorts a failure into "not sent" and "may have arrived", in words that say exactly what
/// happened (the agent's `last_error` and a command's error show them to operators).
fn classify(error: ureq::Error) -> NetError {
    use ureq::Error as E;
    let text = error.to_string();
    match error {
        E::HostNotFound => NetError::NotSent(format!("имя хоста не найдено (DNS): {text}")),
        E::ConnectionFailed => NetError::NotSent(format!("соединение не установлено: {text}")),
        E::BadUri(_) | E::InvalidProxyUrl => NetError::NotSent(format!("неверный адрес: {text}")),
        E::ConnectProxyFailed(_) => NetError::NotSent(format!("прокси не соединил: {text}")),
        // A TLS handshake fails before the request is written: never ambiguous.
        E::Tls(_) | E::Rustls(_) | E::Pem(_) => {
            NetError::NotSent(format!("TLS: рукопожатие не удалось: {text}"))
        }
        E::Timeout(ureq::Timeout::Resolve) => {
            NetError::NotSent(format!("имя хоста не найдено (DNS): истекло время: {text}"))
        }
        E::Timeout(ureq::Timeout::Connect) => {
            NetError::NotSent(format!("истекло время соединения: {text}"))
        }
        E::Timeout(_) => NetError::Ambiguous(format!("истекло время ответа: {text}")),
        E::Io(io) => match io.kind() {
            std::io::ErrorKind::ConnectionRefused => {
                NetError::NotSent(format!("соединение отвергнуто: {text}"))
            }
            std::io::ErrorKind::AddrNotAvailable
            | std::io::ErrorKind::NotFound
            | std::io::ErrorKind::HostUnreachable
            | std::io::ErrorKind::NetworkUnreachable => {
                NetError::NotSent(format!("сеть недоступна: {text}"))
            }
            // rustls reports a failed handshake as an I/O error of kind InvalidData; a TLS
            // error after the handshake (the request may have been written) is not one.
            std::io::ErrorKind::InvalidData if tls_handshake_error(&io) == Some(true) => {
                NetError::NotSent(format!("TLS: рукопожатие не удалось: {text}"))
            }
            std::io::ErrorKind::InvalidData if tls_handshake_error(&io) == Some(false) => {
                NetError::Ambiguous(format!("TLS: ошибка после отправки запроса: {text}"))
            }
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
                NetError::Ambiguous(format!("истекло время ответа: {text}"))
            }
            _ => NetError::Ambiguous(text),
        },
        _ => NetError::Ambiguous(text),
    }
}

/// Whether an I/O error carries a rustls error of a handshake that failed (`Some(true)`: the
/// certificate, the protocol or the peer refused before any request was written), of a TLS
/// session that failed after it (`Some(false)`: a bad record, an alert mid-stream), or no
/// rustls error at all (`None`).
fn tls_handshake_error(io: &std::io::Error) -> Option<bool> {
    use rustls::{AlertDescription as A, Error as R};
    let error = io.get_ref()?.downcast_ref::<rustls::Error>()?;
    Some(match error {
        R::InvalidCertificate(_)
        | R::NoCertificatesPresented
        | R::UnsupportedNameType
        | R::PeerIncompatible(_)
        | R::InappropriateHandshakeMessage { .. }
        | R::InvalidCertRevocationList(_)
        | R::General(_) => true,
        R::AlertReceived(alert) => matches!(
            alert,
            A::HandshakeFailure
                | A::BadCertificate
                | A::UnsupportedCertificate
                | A::CertificateRevoked
                | A::CertificateExpired
                | A::CertificateUnknown
                | A::UnknownCA
                | A::ProtocolVersion
                | A::InsufficientSecurity
                | A::IllegalParameter
                | A::AccessDenied
                | A::NoApplicationProtocol
                | A::UnrecognisedName
        ),
        _ => false,
    })
}

/// `Authorization: Basic …` for a user and password.
pub(crate) fn basic_auth(user: &str, password: &str) -> String {
    format!("Basic {}", base64(format!("{user}:{password}").as_bytes()))
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_auth_is_base64() {
        assert_eq!(
            basic_auth("Aladdin", "open sesame"),
            "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
    }

    #[test]
    fn a_tls_error_after_the_handshake_is_ambiguous() {
        let io = |e: rustls::Error| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
        let unknown_ca = io(rustls::Error::InvalidCertificate(
            rustls::CertificateError::UnknownIssuer,
        ));
        assert!(matches!(
            classify(ureq::Error::Io(unknown_ca)),
            NetError::NotSent(_)
        ));
        let alert = io(rustls::Error::AlertReceived(
            rustls::AlertDescription::HandshakeFailure,
        ));
        assert!(matches!(
            classify(ureq::Error::Io(alert)),
            NetError::NotSent(_)
        ));
        // A record that does not decrypt, an alert mid-stream: the request may have been read.
        let decrypt = io(rustls::Error::DecryptError);
        assert!(matches!(
            classify(ureq::Error::Io(decrypt)),
            NetError::Ambiguous(_)
        ));
        let closed = io(rustls::Error::AlertReceived(
            rustls::AlertDescription::InternalError,
        ));
        assert!(matches!(
            classify(ureq::Error::Io(closed)),
            NetError::Ambiguous(_)
        ));
    }
}
