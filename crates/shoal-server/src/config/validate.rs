//! From the command line to [`Settings`]: memcached's checks, in the order memcached makes
//! them, so the first complaint is the one memcached would make, and the checks that relate
//! several options once all of them are read.

use super::extended::apply_extended;
use super::listen::parse_listen;
use super::tunables::{CHUNK_ALIGN_BYTES, MAX_SLAB_SIZES, SLAB_PAGE_SIZE};
use super::{
    invalid, usage, Args, ConfigError, Extstore, HashAlgorithm, Inert, Protocol, Settings,
    SslOptions, TlsSettings, Tunables,
};
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

impl Args {
    /// Validates the options into [`Settings`], checking what memcached checks in the
    /// order it checks it, so the first complaint is the one memcached would make.
    pub fn settings(&self) -> Result<Settings, ConfigError> {
        // What memcached checks while reading each flag (exit status 1).
        if self.conn_limit == 0 {
            return Err(invalid("Maximum connections must be greater than 0"));
        }
        if self.reqs_per_event == 0 {
            return Err(invalid(
                "Number of requests per event must be greater than 0",
            ));
        }
        let mut tunables = Tunables::default();
        let mut inert = Vec::new();
        if let Some(f) = self.growth_factor {
            // Also refuses NaN and infinity, which atof would let through.
            if !f.is_finite() || f <= 1.0 {
                return Err(invalid("Factor must be greater than 1"));
            }
            tunables.growth_factor = f;
            inert.push(("-f".to_string(), Inert::Segments));
        }
        if let Some(n) = self.slab_min_size {
            if n == 0 {
                return Err(invalid("Chunk size must be greater than 0"));
            }
            tunables.chunk_size = n;
            inert.push(("-n".to_string(), Inert::Segments));
        }
        let threads = self
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(4, |n| n.get()));
        if threads == 0 {
            return Err(invalid("Number of threads must be greater than 0"));
        }
        if threads > 256 {
            return Err(invalid("Number of threads must be at most 256"));
        }
        let (prefix_delimiter, detail_enabled) = match &self.prefix_delimiter {
            // memcached takes the first character of the argument.
            Some(d) => match d.chars().next() {
                Some(c) => (c, true),
                None => return Err(invalid("No delimiter specified")),
            },
            None => (':', false),
        };
        let napi_ids = match self.napi_ids {
            Some(n) if n <= 0 => {
                return Err(invalid("Maximum number of NAPI IDs must be greater than 0"))
            }
            Some(n) => {
                inert.push(("-N".to_string(), Inert::Network));
                Some(u32::try_from(n).unwrap_or(u32::MAX))
            }
            None => None,
        };
        let protocol = match self.protocol.as_deref() {
            None => None,
            Some("auto") => Some(Protocol::Auto),
            Some("ascii") => Some(Protocol::Ascii),
            Some("binary") => Some(Protocol::Binary),
            Some(other) => {
                return Err(usage(format!(
                    "Invalid value for binding protocol: {other}\n -- should be one of auto, binary, or ascii"
                )))
            }
        };
        if self.memory_limit == 0 {
            return Err(usage("memory limit must be at least 1 MB"));
        }
        let memory_limit = usize::try_from(self.memory_limit)
            .ok()
            .and_then(|m| m.checked_mul(1 << 20))
            .ok_or_else(|| usage("memory limit too large"))?;
        // memcached: -U alone moves TCP to the UDP port too; -p 0 and -U 0 turn a
        // transport off, and -1 asks for any free port.
        let port = match (self.port, self.udp_port) {
            (Some(p), _) => p,
            (None, u) if u != 0 => u,
            (None, _) => DEFAULT_PORT,
        };
        let mut s = Settings {
            listen: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: port_setting(port)?,
            extra_listen: Vec::new(),
            unix_socket: self.unix_socket.clone(),
            unix_mask: self.unix_mask,
            memory_limit,
            conn_limit: self.conn_limit,
            threads,
            max_item_size: self.max_item_size,
            cas_enabled: !self.disable_cas,
            evictions: !self.disable_evictions,
            flush_enabled: !self.disable_flush_all,
            shutdown_enabled: self.enable_shutdown,
            verbose: self.verbose,
            backlog: self.backlog,
            reqs_per_event: self.reqs_per_event,
            idle_timeout: 0,
            read_buf_mem_limit: 0,
            lru_crawler: true,
            hashpower: None,
            udp_port: port_setting(self.udp_port)?,
            sasl_pwdb: None,
            auth_file: self.auth_file.clone(),
            tls: None,
            ssl: SslOptions {
                chain_cert: self.tls_cert.clone(),
                key: self.tls_key.clone(),
                ..SslOptions::default()
            },
            protocol: protocol.unwrap_or_default(),
            user: self.user.clone(),
            prefix_delimiter,
            detail_enabled,
            dump_enabled: !self.disable_dumping,
            watch_enabled: !self.disable_watch,
            lock_memory: self.lock_memory,
            enable_coredumps: self.enable_coredumps,
            large_pages: self.large_pages,
            memory_file: self.memory_file.clone(),
            napi_ids,
            hash_algorithm: HashAlgorithm::default(),
            maxconns_fast: true,
            tunables,
            extstore: Extstore::default(),
            inert,
            metrics_listen: self.metrics_listen,
            io_uring: self.io_uring,
            event_loop: shoal_net::Executor::EventLoop,
            zero_copy_min: shoal_net::MIN_REFERENCED_VALUE,
            // memcached uses large pages only with -L; so does shoald unless told.
            huge_pages: self.large_pages,
            debug_time: false,
        };
        for opt in &self.extended {
            apply_extended(&mut s, opt)?;
        }
        check_combinations(&s, protocol.is_some(), self.sasl)?;
        if self.sasl && protocol.is_none() {
            // memcached: SASL authenticates over the binary protocol only.
            s.protocol = Protocol::Binary;
        }
        if s.auth_file.is_some() && protocol.is_none() {
            // memcached: ASCII auth tokens are a text-protocol feature.
            s.protocol = Protocol::Ascii;
        }
        let tcp_port = s.port.unwrap_or(0);
        let mut listen = parse_listen(&self.listen, self.tls, tcp_port)?.into_iter();
        let (addr, first_port) = listen
            .next()
            .unwrap_or((IpAddr::V4(Ipv4Addr::LOCALHOST), tcp_port));
        s.listen = addr;
        // -p 0 turns TCP off, ports named in -l included, as in memcached.
        if s.port.is_some() {
            s.port = Some(first_port);
            s.extra_listen = listen
                .map(|(ip, port)| std::net::SocketAddr::new(ip, port))
                .collect();
        }
        if self.sasl {
            let pwdb = self
                .sasl_pwdb
                .clone()
                .or_else(|| std::env::var_os("MEMCACHED_SASL_PWDB").map(PathBuf::from))
                .ok_or_else(|| {
                    usage("-S needs a password database: --sasl-pwdb FILE or MEMCACHED_SASL_PWDB")
                })?;
            s.sasl_pwdb = Some(pwdb);
        }
        if self.tls {
            let (Some(cert), Some(key)) = (s.ssl.chain_cert.clone(), s.ssl.key.clone()) else {
                return Err(usage(
                    "-Z needs ssl_chain_cert and ssl_key (or --tls-cert and --tls-key)",
                ));
            };
            s.tls = Some(TlsSettings {
                cert,
                key,
                ca: s.ssl.ca_cert.clone(),
                verify_mode: s.ssl.verify_mode,
                min_version: s.ssl.min_version,
            });
        }
        Ok(s)
    }
}

/// memcached's default TCP port.
const DEFAULT_PORT: i32 = 11211;

/// A `-p` or `-U` value as memcached reads it: 0 turns the transport off (`None`), -1
/// asks the kernel for any free port (`Some(0)`), anything else is the port.
fn port_setting(port: i32) -> Result<Option<u16>, ConfigError> {
    match port {
        0 => Ok(None),
        -1 => Ok(Some(0)),
        p => u16::try_from(p)
            .map(Some)
            .map_err(|_| usage(format!("ERROR: Invalid port number {p}."))),
    }
}

/// memcached's checks made once every option is read (EX_USAGE on failure).
fn check_combinations(s: &Settings, protocol_given: bool, sasl: bool) -> Result<(), ConfigError> {
    let item = s.max_item_size;
    if item < 1024 {
        return Err(usage("Item max size cannot be less than 1024 bytes."));
    }
    if item > s.memory_limit / 2 {
        return Err(usage(
            "Cannot set item size limit higher than 1/2 of memory max.",
        ));
    }
    if item > 1 << 30 {
        return Err(usage("Cannot set item size limit higher than a gigabyte."));
    }
    let t = &s.tunables;
    // memcached refuses e.g. `-I 100k` because its default chunk size no longer fits;
    // shoald has no chunks, so only a slab_chunk_max the user gave is checked against -I.
    if let Some(chunk) = t.slab_chunk_max {
        let chunk_usize = chunk as usize;
        if chunk_usize > item {
            return Err(usage(format!(
                "slab_chunk_max (bytes: {chunk}) cannot be larger than -I (item_size_max {item})"
            )));
        }
        if !item.is_multiple_of(chunk_usize) {
            return Err(usage(format!(
                "-I (item_size_max: {item}) must be evenly divisible by slab_chunk_max (bytes: {chunk})"
            )));
        }
        if !SLAB_PAGE_SIZE.is_multiple_of(chunk) {
            return Err(usage(format!(
                "slab_chunk_max (bytes: {chunk}) must divide evenly into {SLAB_PAGE_SIZE} (slab_page_size)"
            )));
        }
    }
    let mut last = 0u32;
    for (i, &size) in t.slab_sizes.iter().enumerate() {
        if size < t.chunk_size || size > t.slab_chunk_max() {
            return Err(usage(format!("slab size {size} is out of valid range")));
        }
        if i > 0 && size <= last {
            return Err(usage(format!(
                "slab size {size} cannot be lower than or equal to a previous class size"
            )));
        }
        if i > 0 && size <= last + CHUNK_ALIGN_BYTES {
            return Err(usage(format!(
                "slab size {size} must be at least {CHUNK_ALIGN_BYTES} bytes larger than previous class"
            )));
        }
        if i + 1 >= MAX_SLAB_SIZES {
            return Err(usage("too many slab classes specified"));
        }
        last = size;
    }
    if t.hot_lru_pct + t.warm_lru_pct > 80 {
        return Err(usage(
            "hot_lru_pct + warm_lru_pct cannot be more than 80% combined",
        ));
    }
    if t.temp_lru && !t.lru_maintainer {
        return Err(usage("temporary_ttl requires lru_maintainer to be enabled"));
    }
    if let Some(n) = s.napi_ids {
        if n as usize > s.threads {
            return Err(usage(format!(
                "Number of napi_ids({n}) cannot be greater than number of threads({})",
                s.threads
            )));
        }
    }
    if sasl {
        if protocol_given && s.protocol != Protocol::Binary {
            return Err(usage(
                "ERROR: You cannot allow the ASCII protocol while using SASL.",
            ));
        }
        if s.udp_port.is_some() {
            return Err(usage(
                "ERROR: Cannot enable UDP while using binary SASL authentication.",
            ));
        }
    }
    if s.auth_file.is_some() {
        if protocol_given && s.protocol != Protocol::Ascii {
            return Err(usage(
                "ERROR: You cannot allow the BINARY protocol while using ascii authentication tokens.",
            ));
        }
        if s.udp_port.is_some() {
            return Err(usage(
                "Cannot use UDP with ascii authentication enabled (-U 0 to disable)",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::testing::{refused, settings};
    use crate::config::Protocol;

    #[test]
    fn memcached_wording_and_exit_statuses() {
        for (args, msg, code) in [
            (&["-o", "foo"][..], "Illegal suboption \"foo\"", 1),
            (&["-o", "idle_timeout=5,foo=1"], "Illegal suboption \"foo=1\"", 1),
            (&["-o", "lru_segmented"], "Illegal suboption \"lru_segmented\"", 1),
            (&["-o", "proxy_config=x"], "Illegal suboption \"proxy_config=x\"", 1),
            (&["-o", "ext_bogus=1"], "Illegal suboption \"ext_bogus=1\"", 1),
            (&["-o", "ext_path=/x:64k"], "must supply size to ext_path, ie: ext_path=/f/e:64m (m|g|t|p supported)\nfailed to parse ext_path argument", 1),
            (&["-o", "ext_path=/x:64m:fast"], "Unknown extstore bucket: fast\nfailed to parse ext_path argument", 1),
            (&["-o", "hashpower=5"], "Initial hashtable multiplier of 5 is too low", 1),
            (&["-o", "hashpower"], "Missing numeric argument for hashpower", 1),
            (&["-o", "slab_automove=3"], "slab_automove must be between 0 and 2", 1),
            (&["-o", "slab_automove_ratio=0"], "slab_automove_ratio must be > 0 and < 1", 1),
            (&["-o", "slab_automove_window=2"], "slab_automove_window must be > 2", 1),
            (&["-o", "tail_repair_time=9"], "Cannot set tail_repair_time to less than 10 seconds", 1),
            (&["-o", "hash_algorithm=md5"], "Unknown hash_algorithm option (jenkins, murmur3, xxh3)", 1),
            (&["-o", "hash_algorithm"], "Missing hash_algorithm argument", 1),
            (&["-o", "lru_crawler_sleep=2000000"], "LRU crawler sleep must be between 0 and 1 second", 1),
            (&["-o", "lru_crawler_tocrawl=x"], "lru_crawler_tocrawl takes a numeric 32bit value", 1),
            (&["-o", "hot_lru_pct=0"], "hot_lru_pct must be > 1 and < 80", 1),
            (&["-o", "hot_max_factor=0"], "hot_max_factor must be > 0", 1),
            (&["-o", "watcher_logbuf_size=x"], "could not parse argument to watcher_logbuf_size", 1),
            (&["-o", "read_buf_mem_limit=x"], "could not parse argument to read_buf_mem_limit", 1),
            (&["-o", "ssl_verify_mode=4"], "Invalid ssl_verify_mode. Use help to see valid options.", 1),
            (&["-o", "ssl_min_version=4"], "Invalid ssl_min_version. Use help to see valid options.", 1),
            (&["-o", "hot_lru_pct=60,warm_lru_pct=30"], "hot_lru_pct + warm_lru_pct cannot be more than 80% combined", 64),
            // slab_chunk_max is in kilobytes, as memcached 1.6 reads it.
            (&["-o", "slab_chunk_max=100"], "-I (item_size_max: 1048576) must be evenly divisible by slab_chunk_max (bytes: 102400)", 64),
            (&["-o", "slab_chunk_max=768", "-I", "3m"], "slab_chunk_max (bytes: 786432) must divide evenly into 1048576 (slab_page_size)", 64),
            (&["-o", "slab_chunk_max=2097152", "-I", "2m"], "slab_chunk_max must be specified in kilobytes.", 1),
            (&["-o", "slab_sizes=100-104"], "slab size 104 must be at least 8 bytes larger than previous class", 64),
            (&["-o", "slab_sizes=200-100"], "slab size 100 cannot be lower than or equal to a previous class size", 64),
            (&["-f", "1"], "Factor must be greater than 1", 1),
            (&["-n", "0"], "Chunk size must be greater than 0", 1),
            (&["-t", "0"], "Number of threads must be greater than 0", 1),
            (&["-c", "0"], "Maximum connections must be greater than 0", 1),
            (&["-R", "0"], "Number of requests per event must be greater than 0", 1),
            (&["-D", ""], "No delimiter specified", 1),
            (&["-N", "0"], "Maximum number of NAPI IDs must be greater than 0", 1),
            (&["-N", "9", "-t", "4"], "Number of napi_ids(9) cannot be greater than number of threads(4)", 64),
            (&["-B", "foo"], "Invalid value for binding protocol: foo\n -- should be one of auto, binary, or ascii", 64),
            (&["-S", "--sasl-pwdb", "/x", "-B", "ascii"], "ERROR: You cannot allow the ASCII protocol while using SASL.", 64),
            (&["-Y", "/x", "-B", "auto"], "ERROR: You cannot allow the BINARY protocol while using ascii authentication tokens.", 64),
            (&["-Y", "/x", "-U", "5"], "Cannot use UDP with ascii authentication enabled (-U 0 to disable)", 64),
            (&["-I", "1000"], "Item max size cannot be less than 1024 bytes.", 64),
            (&["-I", "64m", "-m", "64"], "Cannot set item size limit higher than 1/2 of memory max.", 64),
            (&["-l", "notls:127.0.0.1"], "'notls' option is valid only when SSL is enabled", 64),
            (&["-l", "127.0.0.1:x"], "Invalid port number: \"x\"", 1),
            (&["-l", "[::1"], "Invalid IPV6 address: \"[::1\"", 1),
        ] {
            let (m, c) = refused(args);
            assert_eq!((m.as_str(), c), (msg, code), "{args:?}");
        }
    }

    #[test]
    fn protocol_follows_authentication_as_in_memcached() {
        let s = settings(&["-S", "--sasl-pwdb", "/x"]).unwrap();
        assert_eq!(s.protocol, Protocol::Binary);
        let s = settings(&["-S", "--sasl-pwdb", "/x", "-B", "binary"]).unwrap();
        assert_eq!(s.protocol, Protocol::Binary);
        let s = settings(&["-Y", "/x"]).unwrap();
        assert_eq!(s.protocol, Protocol::Ascii);
        let s = settings(&["-B", "auto"]).unwrap();
        assert_eq!(s.protocol.stat_name(), "auto-negotiate");
    }
}
