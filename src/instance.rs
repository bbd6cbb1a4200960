//! A hub's run as others see it: the name `/ready` repeats (a demo's hub is named so that a
//! second demo recognises it) and the address it listens on, with the words for one that is
//! taken. Below both the CLI (the demo names its hub, and finds a free port) and the daemon
//! (which says why it cannot listen, and whether the hub at an address is a demo's).

/// The start of the name the demo gives its hub: `demo:<random>:<the demo's folder>`.
pub(crate) const INSTANCE_PREFIX: &str = "demo:";

/// Why `serve` cannot listen on `listen`, with the way out: «Порт 127.0.0.1:8740 занят другой
/// программой; укажите свободный адрес: --listen 127.0.0.1:8741» (the OS's words follow, quoted,
/// from the caller). A free port beside it is found as the demo finds one.
pub(crate) fn busy_port_words(listen: &str, error: &std::io::Error) -> String {
    let free = free_port_beside(listen);
    if error.kind() == std::io::ErrorKind::AddrInUse {
        format!("Порт {listen} занят другой программой; укажите свободный адрес: --listen {free}")
    } else {
        format!("Хаб не может слушать {listen}; укажите другой адрес: --listen {free}")
    }
}

/// Whether `instance` (a hub's `/ready` name) is a demo's hub.
pub(crate) fn is_demo_instance(instance: &str) -> bool {
    instance.starts_with(INSTANCE_PREFIX)
}

/// `listen` with the first port after its own that is free now (`127.0.0.1:8741`), or with
/// `PORT` when none of the next hundred is.
pub(crate) fn free_port_beside(listen: &str) -> String {
    let Ok(address) = listen.parse::<std::net::SocketAddr>() else {
        return "127.0.0.1:8741".into();
    };
    (1..=100u16)
        .filter_map(|step| address.port().checked_add(step))
        .map(|port| std::net::SocketAddr::new(address.ip(), port))
        .find(|candidate| std::net::TcpListener::bind(candidate).is_ok())
        .map_or_else(|| format!("{}:PORT", address.ip()), |free| free.to_string())
}
