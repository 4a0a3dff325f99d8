//! What the driver reads in /proc: a process's state and group, and which process holds
//! a database session.
//!
//! On an upgraded lock table a row names its holder's pid (`holder_pid`); the original
//! table names only the session (`connection_id`). The driver then finds the holder the
//! way an operator would: the session's client address in the server's process list
//! (`information_schema.PROCESSLIST.HOST`, `127.0.0.1:PORT`, or `localhost:PORT` where the
//! server resolves names), the TCP socket of this machine with that local port and the
//! server's port as remote port (`/proc/net/tcp`, `/proc/net/tcp6`: its inode), and the
//! process that has that socket open (`/proc/PID/fd/* -> socket:[INODE]`), looked for only
//! among the processes of the driver's own worker process groups, so nothing else on the
//! machine is ever named.

use std::fs;

/// The fields of /proc/PID/stat after "pid (comm)" (comm may hold spaces and
/// parentheses): state, ppid, pgrp, ...
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    Some(after.split_whitespace().map(str::to_owned).collect())
}

/// The process group of `pid` (None once it is gone).
pub fn pgid_of(pid: i32) -> Option<i32> {
    stat_fields(pid)?.get(2)?.parse().ok()
}

/// The parent of `pid`.
fn ppid_of(pid: i32) -> Option<i32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

/// The state letter of `pid` (R, S, T, Z, ...).
pub fn process_state(pid: i32) -> Option<char> {
    stat_fields(pid)?.first()?.chars().next()
}

/// A process that died: gone from /proc, or a zombie not yet reaped.
pub fn process_gone(pid: i32) -> bool {
    matches!(process_state(pid), None | Some('Z' | 'X'))
}

/// The client port of a process-list HOST (`127.0.0.1:54321`, `localhost:54321`,
/// `[::1]:54321`); None for a session over a Unix socket (`localhost`) or anything else.
pub fn client_port(host: &str) -> Option<u16> {
    let (address, port) = host.rsplit_once(':')?;
    if address.is_empty() {
        return None;
    }
    port.parse().ok().filter(|p| *p != 0)
}

/// The inodes of the TCP sockets in a /proc/net/tcp(6) text whose local port is `local`
/// and remote port `remote` (the client side of a session to the server on `remote`).
fn inodes_in(text: &str, local: u16, remote: u16) -> Vec<u64> {
    let port = |field: &str| field.rsplit_once(':').and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
    text.lines()
        .skip(1)
        .filter_map(|line| {
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 10 || port(f[1])? != local || port(f[2])? != remote {
                return None;
            }
            f[9].parse::<u64>().ok().filter(|inode| *inode != 0)
        })
        .collect()
}

/// The inodes of this machine's TCP sockets from local port `local` to remote port
/// `remote`, IPv4 and IPv6.
fn socket_inodes(local: u16, remote: u16) -> Vec<u64> {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|path| fs::read_to_string(path).ok())
        .flat_map(|text| inodes_in(&text, local, remote))
        .collect()
}

/// Every process whose process group is one of `groups`.
fn members_of(groups: &[i32]) -> Vec<i32> {
    let Ok(entries) = fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| pgid_of(*pid).is_some_and(|g| groups.contains(&g)))
        .collect()
}

/// Whether `pid` has a descriptor open on one of the socket `inodes`.
fn has_socket(pid: i32, inodes: &[u64]) -> bool {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else { return false };
    fds.filter_map(|fd| fs::read_link(fd.ok()?.path()).ok()).any(|target| {
        let target = target.to_string_lossy();
        target
            .strip_prefix("socket:[")
            .and_then(|t| t.strip_suffix(']'))
            .and_then(|inode| inode.parse::<u64>().ok())
            .is_some_and(|inode| inodes.contains(&inode))
    })
}

/// The process of one of `groups` that holds the session whose process-list HOST is
/// `host`, on the server listening on `server_port`. A socket a child inherited is open
/// in both: the one whose parent does not have it open is the holder (its parent, a
/// worker's shell, never has it). None when no process of ours has it, or the answer is
/// not unique.
pub fn session_holder(host: &str, server_port: u16, groups: &[i32]) -> Option<i32> {
    let port = client_port(host)?;
    let inodes = socket_inodes(port, server_port);
    if inodes.is_empty() {
        return None;
    }
    let having: Vec<i32> = members_of(groups).into_iter().filter(|pid| has_socket(*pid, &inodes)).collect();
    let roots: Vec<i32> =
        having.iter().copied().filter(|pid| ppid_of(*pid).is_none_or(|parent| !having.contains(&parent))).collect();
    match roots.as_slice() {
        [pid] => Some(*pid),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_port_is_read_from_every_host_form() {
        assert_eq!(client_port("127.0.0.1:54321"), Some(54321));
        assert_eq!(client_port("localhost:40000"), Some(40000));
        assert_eq!(client_port("[::1]:40001"), Some(40001));
        assert_eq!(client_port("localhost"), None);
        assert_eq!(client_port(":5"), None);
        assert_eq!(client_port("h:notaport"), None);
    }

    #[test]
    fn only_the_socket_from_that_port_to_the_server_is_found() {
        // Ports in hex: 0xD431 = 54321, 0x0CEA = 3306; the server's own accepted socket
        // (local 3306, remote 54321) must not be taken for the client's.
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:0CEA 0100007F:D431 01 00000000:00000000 00:00000000 00000000   106        0 9001 1 0 20 4 30 10 -1\n\
   1: 0100007F:D431 0100007F:0CEA 01 00000000:00000000 00:00000000 00000000     0        0 9002 1 0 20 4 30 10 -1\n\
   2: 0100007F:D431 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 9003 1 0 20 4 30 10 -1\n";
        assert_eq!(inodes_in(text, 54321, 3306), vec![9002]);
        assert_eq!(inodes_in(text, 54322, 3306), Vec::<u64>::new());
    }

    #[test]
    fn a_session_of_this_very_process_is_found_through_its_socket() {
        // A real connection within this process: the client end is found, the accepted
        // end (local port = the server's) is not taken for it.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server_port = listener.local_addr().unwrap().port();
        let client = std::net::TcpStream::connect(("127.0.0.1", server_port)).unwrap();
        let (_accepted, _) = listener.accept().unwrap();
        let local = client.local_addr().unwrap().port();
        let me = std::process::id() as i32;
        let group = pgid_of(me).unwrap();
        assert_eq!(session_holder(&format!("127.0.0.1:{local}"), server_port, &[group]), Some(me));
        assert_eq!(session_holder(&format!("localhost:{local}"), server_port, &[group]), Some(me));
        assert_eq!(session_holder(&format!("127.0.0.1:{local}"), server_port, &[]), None, "no group of ours");
        assert_eq!(session_holder(&format!("127.0.0.1:{}", local ^ 1), server_port, &[group]), None);
    }
}
