//! Who holds a lock, as the upgraded tables record it besides the session: this
//! machine's host name (and the process id, which needs no helper). Both lock tables
//! record it, so it lives apart from either.

/// This machine's host name, recorded with each claim on an upgraded table (both kinds) (empty when
/// the system will not tell).
pub(crate) fn holder_host() -> &'static str {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .or_else(|_| std::env::var("HOSTNAME"))
            .unwrap_or_default()
    })
}
