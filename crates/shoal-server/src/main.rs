//! The `shoald` binary: read the command line as memcached does, prepare the process
//! (resource limits, listener, daemon, pid file, memory locking, identity), run the server.
//!
//! The order matters and differs from memcached in one way: memcached switches to the `-u`
//! user before binding, shoald after, so it can bind ports below 1024 and still serve as
//! the unprivileged user. Everything that needs root (raising limits, binding, the pid
//! file, handing the unix socket to the user, mlockall) happens before the switch; serving
//! happens after it.

use clap::error::ErrorKind;
use shoal_server::config::{ArgsError, EX_NOUSER, EX_OSERR};
use shoal_server::{bind, bind_extra, run_all, Args, Listener, Settings, VERSION};
use std::ffi::CString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// File descriptors shoald needs besides one per connection: listener, event loops,
/// wakers, files. memcached reserves a similar handful.
const RESERVED_FDS: u64 = 64;
/// What shoald may map beyond the item memory and read buffers (index, thread stacks,
/// connection state, code), for the `-k` locked-memory check.
const LOCK_HEADROOM: u64 = 256 << 20;
/// CAP_IPC_LOCK's bit in /proc/self/status' CapEff: locking memory beyond RLIMIT_MEMLOCK.
const CAP_IPC_LOCK: u32 = 14;

/// Why shoald could not start; each maps to memcached's exit status for the same failure.
/// Logged as an error event (whose target names shoald, so the texts do not).
#[derive(Debug, thiserror::Error)]
enum StartupError {
    /// `-r` could not make core files possible.
    #[error("failed to ensure corefile creation")]
    CoreLimit,
    /// Binding failed.
    #[error("failed to listen: {0}")]
    Listen(io::Error),
    /// `-d` could not detach.
    #[error("failed to daemon() in order to daemonize: {0}")]
    Daemon(io::Error),
    /// The pid file could not be written.
    #[error("cannot write pid file {path}: {source}")]
    PidFile {
        /// The `-P` path.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The `-u` user does not exist.
    #[error("can't find the user {0} to switch to")]
    NoUser(String),
    /// The unix socket could not be handed to the `-u` user.
    #[error("failed to give the unix socket {path} to user {user}: {source}")]
    SocketOwner {
        /// The socket.
        path: PathBuf,
        /// The `-u` user.
        user: String,
        /// Why.
        source: io::Error,
    },
    /// Supplementary groups could not be dropped.
    #[error("failed to drop supplementary groups: {0}")]
    Groups(io::Error),
    /// A file the server reads at startup is not readable by the `-u` user.
    #[error(
        "cannot read {path} as user {user} (-u): {source}; shoald reads it after \
         switching user, so it must be readable by {user}"
    )]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The `-u` user.
        user: String,
        /// Why.
        source: io::Error,
    },
    /// setgid/setuid failed.
    #[error("failed to assume identity of user {user}: {source}")]
    Identity {
        /// The `-u` user.
        user: String,
        /// Why.
        source: io::Error,
    },
    /// The server failed.
    #[error("{}", shoal_net::logging::error_text(.0))]
    Run(shoal_server::error::ServeError),
}

impl StartupError {
    /// memcached's exit status for the same failure.
    fn exit_code(&self) -> u8 {
        match self {
            StartupError::NoUser(_) => EX_NOUSER,
            StartupError::CoreLimit
            | StartupError::Listen(_)
            | StartupError::SocketOwner { .. }
            | StartupError::Groups(_)
            | StartupError::Identity { .. } => EX_OSERR,
            StartupError::Daemon(_)
            | StartupError::PidFile { .. }
            | StartupError::Unreadable { .. }
            | StartupError::Run(_) => 1,
        }
    }
}

fn main() -> ExitCode {
    let args = match Args::from_command_line(std::env::args_os().collect()) {
        Ok(a) => a,
        Err(ArgsError::CommandLine(e)) => match e.kind() {
            ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => e.exit(),
            _ => {
                // memcached exits 1 for an unknown or malformed option.
                let _ = e.print();
                return ExitCode::from(1);
            }
        },
        Err(ArgsError::File(e)) => {
            // memcached's wording for a bad option, then the file and line.
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    if args.version {
        println!("shoald {VERSION}");
        return ExitCode::SUCCESS;
    }
    if args.license {
        println!(
            "shoald {VERSION}\n\nLicensed under the {} license.",
            env!("CARGO_PKG_LICENSE")
        );
        return ExitCode::SUCCESS;
    }
    let settings = match args.settings() {
        Ok(s) => s,
        Err(e) => {
            // memcached's own wording, unprefixed, so scripts matching it keep working.
            eprintln!("{e}");
            return ExitCode::from(e.exit_code());
        }
    };
    let level = match settings.verbose {
        0 => tracing::Level::WARN,
        1 => tracing::Level::INFO,
        _ => tracing::Level::DEBUG,
    };
    shoal_net::logging::init(args.log_format, level);
    match start(&args, settings) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Through the log, so it is a JSON line under `--log-format json`; at error
            // level it shows at every verbosity.
            tracing::error!("{e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// Prepares the process in memcached's spirit and runs the server.
fn start(args: &Args, settings: Settings) -> Result<(), StartupError> {
    shoal_net::early_signals::catch_early(&shoal_net::early_signals::STOP_SIGNALS);
    // SIGUSR1 too: an operator (or a deploy script) may ask for a graceful stop while
    // shoald is still starting (restoring a large cache), and that must stop it
    // gracefully, not kill it.
    shoal_net::early_signals::catch_early(&[libc::SIGUSR1]);
    if settings.enable_coredumps {
        raise_core_limit()?;
    }
    raise_nofile_limit(settings.conn_limit);
    if settings.lock_memory {
        // While still root: an unlimited RLIMIT_MEMLOCK survives the -u switch.
        raise_limit(libc::RLIMIT_MEMLOCK);
    }
    let listener = bind(&settings).map_err(StartupError::Listen)?;
    let extra = bind_extra(&settings).map_err(StartupError::Listen)?;
    let udp = shoal_server::udp::bind(&settings).map_err(StartupError::Listen)?;
    if settings.unix_socket.is_none() {
        if let Some(path) = std::env::var_os(PORT_FILE_ENV) {
            let tcp = listener.iter().chain(extra.iter());
            let addrs = tcp.filter_map(Listener::local_addr).map(|a| ("TCP", a));
            let udp_addr = udp.as_ref().and_then(|u| u.local_addr().ok());
            let addrs: Vec<_> = addrs.chain(udp_addr.map(|a| ("UDP", a))).collect();
            if let Err(e) = write_port_file(Path::new(&path), &addrs) {
                // memcached, too, says so and serves on.
                tracing::warn!("{PORT_FILE_ENV} {}: {e}", Path::new(&path).display());
            }
        }
    }
    if args.daemon {
        // After binding, so a port in use is reported to the terminal that started us;
        // before any thread exists, as fork requires.
        daemonize(settings.verbose > 0)?;
    }
    if let Some(pidfile) = &args.pidfile {
        // After daemonizing (the pid changes) and before -u (the directory is often
        // root's, e.g. /run/memcached).
        write_pidfile(pidfile)?;
    }
    if settings.lock_memory {
        lock_memory(&settings);
    }
    // The store (and a `-e` memory file) before -u, as memcached reads its files as root.
    let opened = shoal_server::restart::open_store(&settings).map_err(StartupError::Run)?;
    let switched = switch_user(&settings)?;
    if switched {
        check_readable_after_switch(&settings)?;
    }
    if switched && settings.enable_coredumps {
        // The kernel makes a process that changed identity non-dumpable; -r asks for cores.
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) };
    }
    if settings.large_pages {
        large_pages_note(opened.store.huge_page_advised());
    }
    if let Some(summary) = settings.inert_summary() {
        tracing::warn!("{summary}");
    }
    // Logged once ready to serve: after the identity switch, so whoever waits for this line
    // sees the final process.
    match (
        listener.as_ref().and_then(Listener::local_addr),
        &settings.unix_socket,
    ) {
        (Some(addr), _) => tracing::info!("listening on {addr}"),
        (None, Some(path)) => tracing::info!("listening on unix:{}", path.display()),
        _ => {}
    }
    for addr in extra.iter().filter_map(Listener::local_addr) {
        tracing::info!("listening on {addr}");
    }
    if let Some(addr) = udp.as_ref().and_then(|u| u.local_addr().ok()) {
        tracing::info!("listening on udp {addr}");
    }
    run_all(settings, listener, extra, udp, opened).map_err(StartupError::Run)
}

/// The soft and hard values of a resource limit.
fn get_limit(resource: libc::__rlimit_resource_t) -> Option<libc::rlimit> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct we own.
    (unsafe { libc::getrlimit(resource, &mut rl) } == 0).then_some(rl)
}

fn set_limit(resource: libc::__rlimit_resource_t, cur: u64, max: u64) -> bool {
    let rl = libc::rlimit {
        rlim_cur: cur,
        rlim_max: max,
    };
    // SAFETY: setrlimit reads the struct we own.
    unsafe { libc::setrlimit(resource, &rl) == 0 }
}

/// Raises a limit to unlimited, or failing that (not root) its soft value to the hard one,
/// as memcached does for `-r`.
fn raise_limit(resource: libc::__rlimit_resource_t) {
    if !set_limit(resource, libc::RLIM_INFINITY, libc::RLIM_INFINITY) {
        if let Some(rl) = get_limit(resource) {
            set_limit(resource, rl.rlim_max, rl.rlim_max);
        }
    }
}

/// `-r`: core files as large as allowed; memcached fails startup if none are possible.
fn raise_core_limit() -> Result<(), StartupError> {
    raise_limit(libc::RLIMIT_CORE);
    match get_limit(libc::RLIMIT_CORE) {
        Some(rl) if rl.rlim_cur > 0 => Ok(()),
        _ => Err(StartupError::CoreLimit),
    }
}

/// Makes room for `-c` connections, as memcached does. Unlike memcached (which sets both
/// limits to exactly `-c` and exits when it cannot), this only raises, and only warns:
/// a lower limit costs connections beyond it, not the whole cache.
fn raise_nofile_limit(conn_limit: usize) {
    let want = (conn_limit as u64).saturating_add(RESERVED_FDS);
    let Some(rl) = get_limit(libc::RLIMIT_NOFILE) else {
        return;
    };
    if rl.rlim_cur >= want {
        return;
    }
    if !set_limit(libc::RLIMIT_NOFILE, want, rl.rlim_max.max(want)) {
        set_limit(libc::RLIMIT_NOFILE, rl.rlim_max.min(want), rl.rlim_max);
    }
    if let Some(now) = get_limit(libc::RLIMIT_NOFILE).filter(|rl| rl.rlim_cur < want) {
        tracing::warn!(
            "the open file limit is {}, below -c {conn_limit}: connections beyond about {} \
             will fail (raise it with ulimit -n or LimitNOFILE=)",
            now.rlim_cur,
            now.rlim_cur.saturating_sub(RESERVED_FDS)
        );
    }
}

/// `-d`: detach from the terminal. The working directory is kept so relative paths in
/// the options stay valid; stdio is kept with `-v`, as memcached keeps it.
fn daemonize(verbose: bool) -> Result<(), StartupError> {
    // SAFETY: called before any thread is started.
    if unsafe { libc::daemon(1, i32::from(verbose)) } != 0 {
        return Err(StartupError::Daemon(io::Error::last_os_error()));
    }
    Ok(())
}

/// Writes the pid atomically (a temporary file renamed into place), as memcached does, so
/// a reader never sees an empty file.
fn write_pidfile(path: &Path) -> Result<(), StartupError> {
    let err = |source| StartupError::PidFile {
        path: path.to_path_buf(),
        source,
    };
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, format!("{}\n", std::process::id())).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}

/// memcached's environment variable naming a file to receive the bound ports.
const PORT_FILE_ENV: &str = "MEMCACHED_PORT_FILENAME";

/// Writes memcached's port file: one `TCP INET: <port>` (or `UDP`, `INET6`) line per
/// bound socket, into `<path>.lck` renamed into place, so a reader that waits for the
/// file sees it whole. With no socket bound (`-p 0 -U 0`) the file is empty.
fn write_port_file(path: &Path, addrs: &[(&str, std::net::SocketAddr)]) -> io::Result<()> {
    use std::fmt::Write as _;
    let mut text = String::new();
    for (transport, addr) in addrs {
        let family = if addr.is_ipv6() { "INET6" } else { "INET" };
        let _ = writeln!(text, "{transport} {family}: {}", addr.port());
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".lck");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

/// Whether this process holds CAP_IPC_LOCK (it may then lock beyond RLIMIT_MEMLOCK).
fn has_cap_ipc_lock() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_IPC_LOCK) != 0)
}

/// `-k`: lock current and future memory, so the cache is never swapped.
///
/// With MCL_FUTURE every later allocation must fit under RLIMIT_MEMLOCK; past it the
/// kernel refuses the mapping and shoald would abort, where memcached only fails that
/// allocation. So when the limit (after trying to lift it) is below what shoald may map
/// and the process will not keep CAP_IPC_LOCK, memory is left unlocked, with a warning.
fn lock_memory(s: &Settings) {
    let need = (s.memory_limit as u64)
        .saturating_add(s.read_buffer_budget() as u64)
        .saturating_add(LOCK_HEADROOM);
    let limit = get_limit(libc::RLIMIT_MEMLOCK).map_or(0, |rl| rl.rlim_cur);
    // SAFETY: getuid takes no arguments.
    let stays_root =
        s.user.as_deref().is_none_or(|u| u == "root") || unsafe { libc::getuid() } != 0;
    let exempt = stays_root && has_cap_ipc_lock();
    if limit != libc::RLIM_INFINITY && limit < need && !exempt {
        tracing::warn!(
            "-k ignored: the locked-memory limit ({limit} bytes) is below the \
             {need} bytes shoald may use, and locking would make later allocations fail \
             (raise it with ulimit -l or LimitMEMLOCK=)"
        );
        return;
    }
    // SAFETY: mlockall with flag constants only.
    if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
        tracing::warn!(
            "-k invalid, mlockall() failed: {}",
            io::Error::last_os_error()
        );
    }
}

/// A user's ids, from the password database.
struct Account {
    uid: libc::uid_t,
    gid: libc::gid_t,
}

/// Looks `name` up with getpwnam_r (`None`: no such user).
fn lookup_user(name: &str) -> io::Result<Option<Account>> {
    let Ok(cname) = CString::new(name) else {
        return Ok(None);
    };
    let mut buf = vec![0u8; 1024];
    loop {
        // SAFETY: passwd is plain data; getpwnam_r fills it, pointing into `buf`, which
        // outlives every use of the result below.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is to a live local (`cname`, `pwd`, `buf`, `result`) and
        // `buf.len()` is its real length.
        let rc = unsafe {
            libc::getpwnam_r(
                cname.as_ptr(),
                &mut pwd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut result,
            )
        };
        if rc == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 2, 0);
            continue;
        }
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        if result.is_null() {
            return Ok(None);
        }
        return Ok(Some(Account {
            uid: pwd.pw_uid,
            gid: pwd.pw_gid,
        }));
    }
}

/// `-u`: when started as root, becomes `user` (no supplementary groups, its primary
/// group, its uid), as memcached does; returns whether the identity changed. Not root:
/// `-u` is ignored, as in memcached. Root without `-u`: memcached refuses to start,
/// shoald warns and serves.
fn switch_user(s: &Settings) -> Result<bool, StartupError> {
    // SAFETY: getuid/geteuid take no arguments.
    let root = unsafe { libc::getuid() == 0 || libc::geteuid() == 0 };
    let name = match (&s.user, root) {
        (Some(name), false) => {
            tracing::info!("not running as root: -u {name} ignored");
            return Ok(false);
        }
        (None, false) => return Ok(false),
        (None, true) => {
            tracing::warn!(
                "running as root without -u (memcached refuses to): pass -u USER to drop \
                 privileges after binding"
            );
            return Ok(false);
        }
        (Some(name), true) => name,
    };
    let account = match lookup_user(name) {
        Ok(Some(a)) => a,
        Ok(None) => return Err(StartupError::NoUser(name.clone())),
        Err(e) => {
            tracing::error!("looking up user {name}: {e}");
            return Err(StartupError::NoUser(name.clone()));
        }
    };
    if let Some(path) = &s.unix_socket {
        // memcached binds after switching, so its socket belongs to the user; -a's mode
        // then means the same thing here.
        std::os::unix::fs::chown(path, Some(account.uid), Some(account.gid)).map_err(|source| {
            StartupError::SocketOwner {
                path: path.clone(),
                user: name.clone(),
                source,
            }
        })?;
    }
    // SAFETY: setgroups with an empty list.
    if unsafe { libc::setgroups(0, std::ptr::null()) } != 0 {
        let e = io::Error::last_os_error();
        // EPERM: already without the privilege to change groups; memcached carries on.
        if e.raw_os_error() != Some(libc::EPERM) {
            return Err(StartupError::Groups(e));
        }
        tracing::warn!("failed to drop supplementary groups: {e}");
    }
    let identity = |source| StartupError::Identity {
        user: name.clone(),
        source,
    };
    // Group first: once the uid is no longer root, the gid cannot change.
    // SAFETY: setgid/setuid with ids from the password database.
    if unsafe { libc::setgid(account.gid) } != 0 {
        return Err(identity(io::Error::last_os_error()));
    }
    // SAFETY: as above.
    if unsafe { libc::setuid(account.uid) } != 0 {
        return Err(identity(io::Error::last_os_error()));
    }
    // SAFETY: getters without arguments.
    let (uid, euid) = unsafe { (libc::getuid(), libc::geteuid()) };
    if uid != account.uid || euid != account.uid {
        return Err(identity(io::Error::other("uid did not change")));
    }
    tracing::info!(
        "running as user {name} (uid {}, gid {})",
        account.uid,
        account.gid
    );
    Ok(account.uid != 0)
}

/// Fails early, with the fix in the message, when a file the server loads as it starts
/// (TLS certificate, key and CA, SASL database, `-Y` file) is not readable by the `-u`
/// user. memcached reads its TLS files before switching; shoald's server loads them after
/// the switch, so a root-only key would otherwise fail later with a bare "permission
/// denied".
fn check_readable_after_switch(s: &Settings) -> Result<(), StartupError> {
    let tls = s
        .tls
        .iter()
        .flat_map(|t| [Some(&t.cert), Some(&t.key), t.ca.as_ref()]);
    let files = tls
        .chain([s.sasl_pwdb.as_ref(), s.auth_file.as_ref()])
        .flatten();
    for path in files {
        if let Err(source) = std::fs::File::open(path) {
            if source.kind() == io::ErrorKind::PermissionDenied {
                return Err(StartupError::Unreadable {
                    path: path.clone(),
                    user: s.user.clone().unwrap_or_default(),
                    source,
                });
            }
        }
    }
    Ok(())
}

/// `-L`: the memory limit's worth of segments was made resident at startup (as memcached
/// allocates its whole cache); say whether huge pages back it, which is what `-L` is for.
/// (`-o hugepages` asks for the huge pages without the preallocation.)
fn large_pages_note(advised: bool) {
    let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .find(|w| w.starts_with('['))
                .map(|w| w.trim_matches(['[', ']']).to_string())
        });
    match (advised, mode.as_deref()) {
        (true, Some(m @ ("always" | "madvise"))) => {
            tracing::info!("-L: segment memory preallocated, on transparent huge pages ({m})")
        }
        (true, Some(m)) => tracing::warn!(
            "-L: segment memory preallocated, but transparent huge pages are '{m}' on this \
             system, so it is on ordinary pages"
        ),
        (true, None) => tracing::warn!(
            "-L: segment memory preallocated, but transparent huge pages are not available"
        ),
        (false, _) => tracing::warn!(
            "-L has no effect: segment memory is a memory file (-e), is on the heap \
             (-o no_hugepages), or could not be reserved in one mapping"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_up_users() {
        let root = lookup_user("root").unwrap().expect("root exists");
        assert_eq!((root.uid, root.gid), (0, 0));
        assert!(lookup_user("no-such-user-shoald").unwrap().is_none());
        assert!(lookup_user("nul\0inside").unwrap().is_none());
    }

    #[test]
    fn startup_errors_exit_like_memcached() {
        assert_eq!(StartupError::NoUser("x".into()).exit_code(), 67);
        assert_eq!(StartupError::CoreLimit.exit_code(), 71);
        assert_eq!(
            StartupError::NoUser("bob".into()).to_string(),
            "can't find the user bob to switch to"
        );
    }
}
