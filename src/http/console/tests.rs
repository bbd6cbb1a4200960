//! The console's own checks of its request handling (cross-site requests, cookies, forms).

use super::*;

fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.insert(*name, HeaderValue::from_static(value));
    }
    map
}

#[test]
fn cross_site_requests_are_seen() {
    let none: &[String] = &[];
    assert!(!cross_site(&headers(&[]), none));
    assert!(!cross_site(
        &headers(&[
            ("host", "hub:8080"),
            ("origin", "http://hub:8080"),
            ("sec-fetch-site", "same-origin")
        ]),
        none
    ));
    assert!(cross_site(
        &headers(&[("sec-fetch-site", "cross-site")]),
        none
    ));
    assert!(cross_site(
        &headers(&[("sec-fetch-site", "same-site")]),
        none
    ));
    assert!(cross_site(
        &headers(&[("host", "hub:8080"), ("origin", "http://evil.example")]),
        none
    ));
    assert!(cross_site(
        &headers(&[("host", "hub"), ("origin", "null")]),
        none
    ));
    // Behind a proxy that rewrites Host (nginx's default: the upstream's address).
    let proxied = [
        ("host", "127.0.0.1:8740"),
        ("origin", "https://hub.example.com"),
    ];
    assert!(cross_site(&headers(&proxied), none));
    let mut with_fetch = headers(&proxied);
    with_fetch.insert("sec-fetch-site", HeaderValue::from_static("same-origin"));
    assert!(!cross_site(&with_fetch, none));
    let mut forwarded = headers(&proxied);
    forwarded.insert(
        "x-forwarded-host",
        HeaderValue::from_static("hub.example.com"),
    );
    assert!(!cross_site(&forwarded, none));
    let mut standard = headers(&proxied);
    standard.insert(
        "forwarded",
        HeaderValue::from_static("for=10.0.0.1;proto=https;host=hub.example.com"),
    );
    assert!(!cross_site(&standard, none));
    let public = ["https://hub.example.com".to_string()];
    assert!(!cross_site(&headers(&proxied), &public));
    assert!(cross_site(
        &headers(&[
            ("host", "127.0.0.1:8740"),
            ("origin", "https://evil.example")
        ]),
        &public
    ));
}

#[test]
fn sessions_end_by_sign_out_idleness_age_and_rotation() {
    let console = Console::new();
    let start = time::macros::datetime!(2026-11-29 10:00:00 UTC);
    let token = sha256(b"t");
    let id = console.open("t", start).unwrap_or_default();
    assert_eq!(id.len(), 64);
    let csrf = console.session(&id, Some(token), start);
    assert!(csrf.as_deref().is_some_and(|c| c.len() == 64 && c != id));
    assert!(
        console.session(&id, Some(sha256(b"u")), start).is_none(),
        "rotated"
    );
    assert!(
        console.session(&id, Some(token), start).is_none(),
        "and gone"
    );

    let id = console.open("t", start).unwrap_or_default();
    let later = start + SESSION_IDLE - time::Duration::SECOND;
    assert!(console.session(&id, Some(token), later).is_some());
    assert!(
        console
            .session(&id, Some(token), later + SESSION_IDLE)
            .is_none(),
        "idle"
    );

    let id = console.open("t", start).unwrap_or_default();
    let mut now = start;
    while now + SESSION_IDLE / 2 < start + SESSION_LIFE {
        now += SESSION_IDLE / 2;
        assert!(console.session(&id, Some(token), now).is_some());
    }
    assert!(
        console
            .session(&id, Some(token), start + SESSION_LIFE)
            .is_none(),
        "too old"
    );

    let id = console.open("t", start).unwrap_or_default();
    console.close(&id);
    assert!(
        console.session(&id, Some(token), start).is_none(),
        "signed out"
    );
    assert!(same_text("ab", "ab") && !same_text("ab", "ac") && !same_text("ab", "abc"));
}

#[test]
fn wrong_guesses_wait_longer_each_time_per_client() {
    let mut throttle = Throttle::default();
    let start = time::macros::datetime!(2026-11-29 10:00:00 UTC);
    let one: std::net::IpAddr = [10, 0, 0, 1].into();
    let other: std::net::IpAddr = [10, 0, 0, 2].into();
    for n in 1..=FREE_FAILURES + 1 {
        assert_eq!(
            throttle.wrong_guess(one, start),
            None,
            "guess {n} answered 401"
        );
    }
    // Within the wait the sixth set, the guess is counted and told the doubled wait.
    assert_eq!(
        throttle.wrong_guess(one, start),
        Some(2 * time::Duration::SECOND)
    );
    assert_eq!(throttle.wrong_guess(other, start), None, "per client");
    let later = start + 2 * time::Duration::SECOND;
    assert_eq!(throttle.wrong_guess(one, later), None, "the wait is over");
    assert_eq!(
        throttle.wrong_guess(one, later),
        Some(8 * time::Duration::SECOND)
    );
    // Bounded: however many guesses, the wait stays at most the maximum.
    for _ in 0..100 {
        throttle.wrong_guess(one, later);
    }
    assert_eq!(
        throttle.wrong_guess(one, later),
        Some(FAILED_SIGN_IN_MAX_WAIT)
    );
    throttle.succeeded(one);
    assert_eq!(throttle.wrong_guess(one, later), None, "a success forgets");
    // Forgotten after an hour without failures.
    let mut old = Throttle::default();
    for _ in 0..20 {
        old.wrong_guess(one, start);
    }
    assert_eq!(old.wrong_guess(one, start + FAILURE_MEMORY), None);
}

#[test]
fn an_ipv6_client_is_throttled_by_its_64() {
    let mut throttle = Throttle::default();
    let start = time::macros::datetime!(2026-11-29 10:00:00 UTC);
    let address = |last: u16| -> std::net::IpAddr {
        std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, last).into()
    };
    for n in 0..=FREE_FAILURES {
        assert_eq!(throttle.wrong_guess(address(n as u16), start), None);
    }
    assert!(throttle.wrong_guess(address(999), start).is_some());
    let elsewhere: std::net::IpAddr =
        std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, 2, 0, 0, 0, 1).into();
    assert_eq!(throttle.wrong_guess(elsewhere, start), None);
    let mapped: std::net::IpAddr = std::net::Ipv4Addr::new(10, 0, 0, 9).to_ipv6_mapped().into();
    assert_eq!(throttle_key(mapped), std::net::IpAddr::from([10, 0, 0, 9]));
}

#[test]
fn only_pages_of_the_console_are_gone_back_to() {
    assert_eq!(local_page(Some("/ui/failed")), Some("/ui/failed"));
    assert_eq!(local_page(Some("/")), Some("/"));
    assert_eq!(local_page(Some("//evil.example/")), None);
    assert_eq!(local_page(Some("/ui//evil")), None);
    assert_eq!(local_page(Some("https://evil.example/")), None);
    assert_eq!(local_page(Some("/ui/\\evil")), None);
    assert_eq!(local_page(None), None);
}
