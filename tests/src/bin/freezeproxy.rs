//! `freezeproxy HOST:PORT [--freeze-on TEXT]`: a [`FreezeProxy`] for tests in other
//! languages (PHP, C), driven by signals: SIGUSR1 freezes it, SIGUSR2 thaws it; with
//! `--freeze-on`, it also freezes by itself once the client sent TEXT. `freezeproxy --stall
//! before-greeting|after-greeting|after-login|unknown-plugin`: a [`StalledServer`] instead.
//!
//! Prints `port N` on its first line once it listens on 127.0.0.1:N, then
//! `frozen`/`thawed` after each signal it handled. Ends with its parent (or on SIGTERM),
//! so a test that dies leaves no proxy behind.

use std::io::Write;

use mysqllock_tests::silence::{FreezeProxy, Stall, StalledServer};

fn main() {
    // Before any thread exists, so every thread inherits the mask and only `sigwait`
    // below takes these signals.
    // SAFETY: plain libc calls on a local, zero-initialised signal set.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGUSR1);
        libc::sigaddset(&mut set, libc::SIGUSR2);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
        set
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (proxy, _server) = match args.as_slice() {
        [flag, stall] if flag == "--stall" => {
            let stall = match stall.as_str() {
                "before-greeting" => Stall::BeforeGreeting,
                "after-greeting" => Stall::AfterGreeting,
                "after-login" => Stall::AfterLogin,
                "unknown-plugin" => Stall::UnknownPlugin,
                other => usage(&format!("unknown stall {other:?}")),
            };
            let server = StalledServer::start(stall);
            say(&format!("port {}", server.port()));
            (None, Some(server))
        }
        [server] | [server, _, _] => {
            let proxy = FreezeProxy::to(server);
            match &args[1..] {
                [flag, text] if flag == "--freeze-on" => proxy.freeze_on(text),
                [] => {}
                _ => usage("expected --freeze-on TEXT after HOST:PORT"),
            }
            say(&format!("port {}", proxy.port()));
            (Some(proxy), None)
        }
        _ => usage("expected HOST:PORT or --stall MODE"),
    };
    loop {
        let mut signal = 0;
        // SAFETY: `set` is a valid signal set; `signal` a writable int.
        if unsafe { libc::sigwait(&set, &mut signal) } != 0 {
            continue;
        }
        match (&proxy, signal) {
            (Some(p), libc::SIGUSR1) => {
                p.freeze();
                say("frozen");
            }
            (Some(p), libc::SIGUSR2) => {
                p.thaw();
                say("thawed");
            }
            _ => {}
        }
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

fn usage(why: &str) -> ! {
    eprintln!("freezeproxy: {why}\nusage: freezeproxy HOST:PORT [--freeze-on TEXT] | freezeproxy --stall before-greeting|after-greeting|after-login|unknown-plugin");
    std::process::exit(64)
}
