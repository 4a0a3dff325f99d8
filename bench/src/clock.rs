//! CLOCK_MONOTONIC in nanoseconds: the clock PHP's `hrtime(true)` reads, so timestamps
//! taken in different processes (Rust or PHP) can be compared.

use std::time::Duration;

pub fn now_ns() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes the timespec we own; CLOCK_MONOTONIC exists on Linux.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// Sleeps until the monotonic clock reads `t`.
pub fn sleep_until(t: i64) {
    loop {
        let left = t - now_ns();
        if left <= 0 {
            return;
        }
        std::thread::sleep(Duration::from_nanos(left.unsigned_abs()));
    }
}

/// Resident set size of this process in kB (`VmRSS` in /proc/self/status).
pub fn vm_rss_kb() -> i64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse().ok()))
        })
        .unwrap_or(-1)
}
