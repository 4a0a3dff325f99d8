//! The protocol's unit tests: the waits split for servers that sleep whole seconds.

use super::*;

/// The timeouts `waiting` gives the server for a wait of `wait` that is never granted,
/// and how long it took.
fn never_granted(fractions: bool, wait: Duration) -> (Vec<Duration>, Duration) {
    let (start, mut given) = (Instant::now(), Vec::new());
    let got: Option<()> = waiting(fractions, wait, |timeout| {
        given.push(timeout);
        std::thread::sleep(timeout);
        Ok(None)
    })
    .unwrap();
    assert!(got.is_none());
    (given, start.elapsed())
}

#[test]
fn a_server_that_waits_fractions_gets_the_whole_wait_at_once() {
    let (given, took) = never_granted(true, Duration::from_millis(40));
    assert_eq!(given.len(), 1, "{given:?}");
    assert!(given[0] > Duration::from_millis(35), "{given:?}");
    assert!(took >= Duration::from_millis(40), "{took:?}");
}

#[test]
fn a_server_that_waits_whole_seconds_gets_them_and_the_fraction_is_polled() {
    // 200 ms past the whole second: the first sleep may overrun on a busy machine (one
    // run under load overran 40 ms and left nothing to poll), never by that much.
    let (given, took) = never_granted(false, Duration::from_millis(1200));
    assert_eq!(given[0], Duration::from_secs(1), "{given:?}");
    assert!(given[1..].iter().all(Duration::is_zero), "{given:?}");
    assert!(given.len() >= 2, "the last 200 ms were not polled: {given:?}");
    assert!(took >= Duration::from_millis(1200) && took < Duration::from_millis(1700), "{took:?}");
}

#[test]
fn a_grant_ends_the_wait() {
    let mut tries = 0;
    let got = waiting(false, Duration::from_millis(200), |_| {
        tries += 1;
        Ok((tries == 3).then_some("granted"))
    })
    .unwrap();
    assert_eq!((got, tries), (Some("granted"), 3));
}
