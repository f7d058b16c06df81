//! memcached's `-o key[=value]` options, applied one at a time as memcached's getsubopt
//! loop applies them.

use super::{invalid, parse_size, usage, ConfigError, Extstore, HashAlgorithm, Inert, Settings};

/// One `-o key[=value]`, with memcached's messages for a missing or unreadable value.
struct SubOpt<'a> {
    key: &'a str,
    value: Option<&'a str>,
}

impl SubOpt<'_> {
    /// The value, or memcached's `missing` message.
    fn text(&self, missing: &str) -> Result<&str, ConfigError> {
        self.value.ok_or_else(|| invalid(missing))
    }

    /// The value as a number; memcached's `missing` message without one, and its
    /// "could not parse" message for one that is not a number.
    fn number<T: std::str::FromStr>(&self, missing: &str) -> Result<T, ConfigError> {
        self.text(missing)?
            .trim()
            .parse()
            .map_err(|_| self.unparsable())
    }

    /// A finite float (memcached's atof takes NaN and infinity; nothing sensible does).
    fn float(&self, missing: &str) -> Result<f64, ConfigError> {
        let f: f64 = self.number(missing)?;
        if f.is_finite() {
            Ok(f)
        } else {
            Err(self.unparsable())
        }
    }

    /// A size memcached takes in units of `unit` bytes, as bytes.
    fn scaled(&self, missing: &str, unit: u32) -> Result<u32, ConfigError> {
        let n: u32 = self.number(missing)?;
        n.checked_mul(unit).ok_or_else(|| self.unparsable())
    }

    fn unparsable(&self) -> ConfigError {
        invalid(format!("could not parse argument to {}", self.key))
    }

    fn missing(&self) -> String {
        format!("Missing {} argument", self.key)
    }
}

/// Applies one `-o key[=value]` as memcached's getsubopt loop does: flags ignore a value,
/// the last occurrence of a key wins, and an unknown key is refused with memcached's
/// `Illegal suboption` message. Range checks are memcached's; the checks that relate
/// several options run after all of them (`validate`'s `check_combinations`).
pub(super) fn apply_extended(s: &mut Settings, opt: &str) -> Result<(), ConfigError> {
    let opt = opt.trim();
    if opt.is_empty() {
        return Ok(());
    }
    let (key, value) = match opt.split_once('=') {
        Some((k, v)) => (k, Some(v)),
        None => (opt, None),
    };
    let o = SubOpt { key, value };
    let missing = o.missing();
    let t = &mut s.tunables;
    let mut inert = None;
    match key {
        // Options with an effect in shoald.
        "idle_timeout" => {
            s.idle_timeout = o.number("Missing numeric argument for idle_timeout")?;
        }
        "read_buf_mem_limit" => {
            let mb: u64 = o.number(&missing)?;
            s.read_buf_mem_limit = usize::try_from(mb)
                .ok()
                .and_then(|mb| mb.checked_mul(1024 * 1024))
                .ok_or_else(|| o.unparsable())?;
        }
        "lru_crawler" => s.lru_crawler = true,
        "no_lru_crawler" => s.lru_crawler = false,
        // shoald's own: the io_uring data path (not a memcached option).
        "io_uring" => s.io_uring = true,
        "no_io_uring" => s.io_uring = false,
        // shoald's own: what runs the worker threads (shoal-net's epoll loop by default;
        // tokio's runtime, the earlier data path, for comparison).
        "event_loop" => {
            s.event_loop = match o.text("Missing event_loop argument")? {
                "epoll" => shoal_net::Executor::EventLoop,
                "tokio" => shoal_net::Executor::Tokio,
                _ => return Err(invalid("Unknown event_loop option (epoll, tokio)")),
            };
        }
        // shoald's own: values of this many bytes or more are sent from segment memory.
        "zero_copy_min" => {
            let n: u64 = o.number("Missing numeric argument for zero_copy_min")?;
            s.zero_copy_min = usize::try_from(n).map_err(|_| o.unparsable())?;
        }
        "no_zero_copy" => s.zero_copy_min = usize::MAX,
        // shoald's own: segment memory advised for transparent huge pages (implied by -L).
        "hugepages" => s.huge_pages = true,
        "no_hugepages" => s.huge_pages = false,
        // shoald's own: the `debugtime` command, which moves the server clock (what
        // memcached's debug build has; for tests, never for a cache in service).
        "debug_time" => s.debug_time = true,
        "hashpower" => {
            let hp: i64 = o.number("Missing numeric argument for hashpower")?;
            if hp < 12 {
                return Err(invalid(format!(
                    "Initial hashtable multiplier of {hp} is too low"
                )));
            }
            let hp = u8::try_from(hp)
                .ok()
                .filter(|&hp| hp <= 32)
                .ok_or_else(|| {
                    invalid(format!(
                        "Initial hashtable multiplier of {hp} is too high\n\
                     Choose a value based on \"STAT hash_power_level\" from a running instance"
                    ))
                })?;
            s.hashpower = Some(hp);
        }
        // shoald's own spelling of -I, kept for existing configurations.
        "item_size_max" => {
            s.max_item_size = parse_size(o.text(&missing)?).map_err(|_| o.unparsable())?;
        }
        "maxconns_fast" => s.maxconns_fast = true,
        "no_maxconns_fast" => {
            s.maxconns_fast = false;
            inert = Some(Inert::MaxconnsFast);
        }
        "hash_algorithm" => {
            s.hash_algorithm = match o.text("Missing hash_algorithm argument")? {
                "murmur3" => HashAlgorithm::Murmur3,
                "jenkins" => HashAlgorithm::Jenkins,
                "xxh3" => HashAlgorithm::Xxh3,
                _ => {
                    return Err(invalid(
                        "Unknown hash_algorithm option (jenkins, murmur3, xxh3)",
                    ))
                }
            };
        }
        // No-ops in memcached 1.6 itself.
        "modern" | "inline_ascii_resp" | "no_inline_ascii_resp" => {}
        "no_modern" => {
            // memcached 1.4's defaults. Of these only the background crawler exists in
            // shoald; the rest is reported only.
            if t.slab_chunk_max.is_none() {
                t.no_chunked_items = true;
            }
            t.slab_reassign = false;
            t.slab_automove = 0;
            t.lru_segmented = false;
            t.lru_maintainer = false;
            s.maxconns_fast = false;
            s.hash_algorithm = HashAlgorithm::Jenkins;
            s.lru_crawler = false;
        }
        "resp_obj_mem_limit" => inert = Some(Inert::Deprecated),

        // memcached's slab allocator, LRU and hash table.
        "slab_reassign" => t.slab_reassign = true,
        "no_slab_reassign" => t.slab_reassign = false,
        "slab_automove" => {
            t.slab_automove = match value {
                None => 1,
                Some(_) => {
                    let n: i64 = o.number(&missing)?;
                    u8::try_from(n)
                        .ok()
                        .filter(|&n| n <= 2)
                        .ok_or_else(|| invalid("slab_automove must be between 0 and 2"))?
                }
            };
        }
        "no_slab_automove" => t.slab_automove = 0,
        "slab_automove_ratio" => {
            let r = o.float(&missing)?;
            if r <= 0.0 || r > 1.0 {
                return Err(invalid("slab_automove_ratio must be > 0 and < 1"));
            }
            t.slab_automove_ratio = r;
        }
        "slab_automove_window" => {
            let w: i64 = o.number(&missing)?;
            t.slab_automove_window = u32::try_from(w)
                .ok()
                .filter(|&w| w >= 3)
                .ok_or_else(|| invalid("slab_automove_window must be > 2"))?;
        }
        // In kilobytes, as memcached 1.6 reads it (`slab_chunk_max=16` is 16 KB).
        "slab_chunk_max" => {
            let n: u32 = o.number(&missing)?;
            if n == 0 {
                return Err(invalid("slab_chunk_max must be >= 0"));
            }
            if n > 1 << 10 {
                return Err(invalid("slab_chunk_max must be specified in kilobytes."));
            }
            t.slab_chunk_max = Some(n << 10);
        }
        "slab_sizes" => {
            t.slab_sizes = o
                .text(&missing)?
                .split('-')
                .map(|p| {
                    p.trim()
                        .parse()
                        .map_err(|_| usage(format!("slab size {p} is out of valid range")))
                })
                .collect::<Result<_, _>>()?;
        }
        "no_chunked_items" => t.no_chunked_items = true,
        "lru_maintainer" => {
            t.lru_maintainer = true;
            t.lru_segmented = true;
        }
        "no_lru_maintainer" => {
            t.lru_maintainer = false;
            t.lru_segmented = false;
        }
        "hot_lru_pct" | "warm_lru_pct" => {
            let pct: i64 = o.number(&missing)?;
            let pct = u32::try_from(pct)
                .ok()
                .filter(|p| (1..80).contains(p))
                .ok_or_else(|| invalid(format!("{key} must be > 1 and < 80")))?;
            if key == "hot_lru_pct" {
                t.hot_lru_pct = pct;
            } else {
                t.warm_lru_pct = pct;
            }
        }
        "hot_max_factor" | "warm_max_factor" => {
            let f = o.float(&missing)?;
            if f <= 0.0 {
                return Err(invalid(format!("{key} must be > 0")));
            }
            if key == "hot_max_factor" {
                t.hot_max_factor = f;
            } else {
                t.warm_max_factor = f;
            }
        }
        "temporary_ttl" => {
            t.temporary_ttl = o.number(&missing)?;
            t.temp_lru = true;
        }
        "tail_repair_time" => {
            let secs: i64 = o.number("Missing numeric argument for tail_repair_time")?;
            t.tail_repair_time = u32::try_from(secs)
                .ok()
                .filter(|&s| s >= 10)
                .ok_or_else(|| invalid("Cannot set tail_repair_time to less than 10 seconds"))?;
        }
        "lru_crawler_sleep" => {
            let us: i64 = o.number("Missing lru_crawler_sleep value")?;
            t.lru_crawler_sleep = u32::try_from(us)
                .ok()
                .filter(|&us| us <= 1_000_000)
                .ok_or_else(|| invalid("LRU crawler sleep must be between 0 and 1 second"))?;
        }
        "lru_crawler_tocrawl" => {
            o.text("Missing lru_crawler_tocrawl value")?;
            t.lru_crawler_tocrawl = o
                .number("Missing lru_crawler_tocrawl value")
                .map_err(|_| invalid("lru_crawler_tocrawl takes a numeric 32bit value"))?;
        }
        "no_hashexpand" => t.hash_expand = false,

        // memcached's logging, stats, sandbox and socket extras.
        "watcher_logbuf_size" => {
            t.watcher_logbuf_size = o.scaled(&missing, 1024)?;
            inert = Some(Inert::Watch);
        }
        "worker_logbuf_size" => {
            t.worker_logbuf_size = o.scaled(&missing, 1024)?;
            inert = Some(Inert::Watch);
        }
        "track_sizes" => t.track_sizes = true,
        "drop_privileges" | "no_drop_privileges" => {
            t.drop_privileges = key == "drop_privileges";
            inert = Some(Inert::Sandbox);
        }
        "sock_cookie_id" => {
            t.sock_cookie_id = Some(o.number(&missing)?);
            inert = Some(Inert::Network);
        }

        // TLS.
        "ssl_chain_cert" => s.ssl.chain_cert = Some(o.text(&missing)?.into()),
        "ssl_key" => s.ssl.key = Some(o.text(&missing)?.into()),
        "ssl_ca_cert" => s.ssl.ca_cert = Some(o.text(&missing)?.into()),
        "ssl_verify_mode" => {
            s.ssl.verify_mode = o
                .number(&missing)
                .ok()
                .filter(|&m: &u8| m <= 3)
                .ok_or_else(|| {
                    o.value.map_or_else(
                        || invalid(o.missing()),
                        |_| invalid("Invalid ssl_verify_mode. Use help to see valid options."),
                    )
                })?;
        }
        "ssl_min_version" => {
            let v = o
                .number(&missing)
                .ok()
                .filter(|&v: &u8| v <= 3)
                .ok_or_else(|| {
                    o.value.map_or_else(
                        || invalid(o.missing()),
                        |_| invalid("Invalid ssl_min_version. Use help to see valid options."),
                    )
                })?;
            // Enforced by tls.rs: rustls never negotiates below TLS 1.2, so 0..=2 mean
            // "1.2 or 1.3" and 3 means TLS 1.3 only.
            s.ssl.min_version = v;
        }
        "ssl_keyformat" => {
            let f: u8 = o.number(&missing)?;
            if f != 1 {
                return Err(invalid(format!(
                    "ssl_keyformat={f} is not supported: shoald reads PEM keys only (ssl_keyformat=1)"
                )));
            }
            s.ssl.keyformat = f;
        }
        "ssl_ciphers" => {
            s.ssl.ciphers = Some(o.text(&missing)?.to_string());
            inert = Some(Inert::Tls);
        }
        "ssl_wbuf_size" => {
            s.ssl.wbuf_size = o.scaled(&missing, 1024)?;
            inert = Some(Inert::Tls);
        }
        // rustls keeps a server-side session cache anyway.
        "ssl_session_cache" => s.ssl.session_cache = true,
        "ssl_kernel_tls" => {
            s.ssl.kernel_tls = true;
            inert = Some(Inert::Tls);
        }

        // extstore.
        k if k.starts_with("ext_") || k == "slab_automove_freeratio" => {
            apply_extstore(&mut s.extstore, &o)?;
            // ext_threads counts: flash readers and write buffers scale with it.
            if matches!(key, "ext_max_sleep" | "slab_automove_freeratio") {
                inert = Some(Inert::Extstore);
            }
        }
        _ => return Err(ConfigError::IllegalSuboption(opt.to_string())),
    }
    let segments = matches!(
        key,
        "slab_reassign"
            | "no_slab_reassign"
            | "slab_automove"
            | "no_slab_automove"
            | "slab_automove_ratio"
            | "slab_automove_window"
            | "slab_chunk_max"
            | "slab_sizes"
            | "no_chunked_items"
            | "lru_maintainer"
            | "no_lru_maintainer"
            | "hot_lru_pct"
            | "warm_lru_pct"
            | "hot_max_factor"
            | "warm_max_factor"
            | "temporary_ttl"
            | "tail_repair_time"
            | "lru_crawler_sleep"
            | "lru_crawler_tocrawl"
            | "no_hashexpand"
    );
    if segments {
        inert = Some(Inert::Segments);
    }
    if let Some(why) = inert {
        s.note_inert(key, why);
    }
    Ok(())
}

/// Applies one extstore option with memcached's (storage.c) validation.
fn apply_extstore(e: &mut Extstore, o: &SubOpt<'_>) -> Result<(), ConfigError> {
    let missing = o.missing();
    match o.key {
        "ext_path" => {
            let v = o
                .value
                .ok_or_else(|| invalid("missing argument to ext_path, ie: ext_path=/d/file:5G"))?;
            if let Err(why) = check_ext_path(v) {
                // memcached prints what was wrong, then this line.
                return Err(invalid(format!("{why}\nfailed to parse ext_path argument")));
            }
            e.paths.push(v.to_string());
        }
        "ext_page_size" => e.page_size = o.scaled(&missing, 1024 * 1024)?,
        "ext_wbuf_size" => e.wbuf_size = o.scaled(&missing, 1024 * 1024)?,
        "ext_threads" => e.threads = o.number(&missing)?,
        "ext_io_depth" => e.io_depth = o.number(&missing)?,
        "ext_item_size" => e.item_size = o.number(&missing)?,
        "ext_item_age" => e.item_age = o.number(&missing)?,
        "ext_low_ttl" => e.low_ttl = o.number(&missing)?,
        "ext_recache_rate" => e.recache_rate = o.number(&missing)?,
        "ext_compact_under" => e.compact_under = o.number(&missing)?,
        "ext_drop_under" => e.drop_under = o.number(&missing)?,
        "ext_max_sleep" => e.max_sleep = o.number(&missing)?,
        "ext_max_frag" => e.max_frag = o.float(&missing)?,
        "slab_automove_freeratio" => e.slab_automove_freeratio = o.float(&missing)?,
        "ext_drop_unread" => e.drop_unread = true,
        _ => {
            let whole = match o.value {
                Some(v) => format!("{}={v}", o.key),
                None => o.key.to_string(),
            };
            return Err(ConfigError::IllegalSuboption(whole));
        }
    }
    e.configured = true;
    Ok(())
}

/// memcached's page buckets, by the names `ext_path=PATH:SIZE:BUCKET` gives them.
const EXT_BUCKETS: [&str; 6] = [
    "default",
    "compact",
    "lowttl",
    "chunked",
    "coldcompact",
    "old",
];

/// `PATH:SIZE[:BUCKET]` as memcached's `storage_conf_parse` reads it: SIZE a number with
/// an `m`, `g`, `t` or `p` suffix (either case), BUCKET one of [`EXT_BUCKETS`]. The error
/// is memcached's line for what is wrong.
fn check_ext_path(v: &str) -> Result<(), String> {
    // strtok: empty fields are skipped, so ":1G" is a path without a size.
    let mut parts = v.split(':').filter(|p| !p.is_empty());
    let _path = parts.next();
    let Some(size) = parts.next() else {
        return Err(
            "must supply size to ext_path, ie: ext_path=/f/e:64m (M|G|T|P supported)".into(),
        );
    };
    let digits = size.trim_end_matches(['m', 'M', 'g', 'G', 't', 'T', 'p', 'P']);
    if digits.is_empty()
        || digits.len() + 1 != size.len()
        || !digits.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(
            "must supply size to ext_path, ie: ext_path=/f/e:64m (m|g|t|p supported)".into(),
        );
    }
    match parts.next() {
        Some(bucket) if !EXT_BUCKETS.contains(&bucket) => {
            Err(format!("Unknown extstore bucket: {bucket}"))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::check_ext_path;
    use crate::config::testing::{refused, settings};
    use crate::config::{HashAlgorithm, EX_USAGE};

    #[test]
    fn extended_options() {
        let s = settings(&["-o", "idle_timeout=5,no_lru_crawler,hashpower=20"]).unwrap();
        assert_eq!(s.idle_timeout, 5);
        assert!(!s.lru_crawler);
        assert_eq!(s.hashpower, Some(20));
        assert!(s.inert.is_empty(), "these all have an effect");
        assert!(settings(&["-o", "bogus=1"]).is_err());
        assert!(settings(&["-o", "idle_timeout=x"]).is_err());
    }

    #[test]
    fn data_path_options() {
        let s = settings(&[]).unwrap();
        assert!(!s.io_uring);
        assert_eq!(s.zero_copy_min, shoal_net::MIN_REFERENCED_VALUE);
        let s = settings(&["-o", "io_uring,zero_copy_min=1000"]).unwrap();
        assert!(s.io_uring);
        assert_eq!(s.zero_copy_min, 1000);
        assert!(settings(&["--io-uring"]).unwrap().io_uring);
        assert_eq!(
            settings(&[]).unwrap().event_loop,
            shoal_net::Executor::EventLoop
        );
        let s = settings(&["-o", "event_loop=tokio"]).unwrap();
        assert_eq!(s.event_loop, shoal_net::Executor::Tokio);
        assert!(settings(&["-o", "event_loop=kqueue"]).is_err());
        let s = settings(&["--io-uring", "-o", "no_io_uring,no_zero_copy"]).unwrap();
        assert!(!s.io_uring);
        assert_eq!(s.zero_copy_min, usize::MAX);
        assert!(settings(&["-o", "zero_copy_min=lots"]).is_err());
        assert!(s.inert.is_empty(), "these all have an effect");
        assert!(!settings(&[]).unwrap().huge_pages);
        assert!(settings(&["-L"]).unwrap().huge_pages);
        let s = settings(&["-o", "hugepages"]).unwrap();
        assert!(s.huge_pages);
        assert!(s.inert.is_empty());
        assert!(!settings(&["-L", "-o", "no_hugepages"]).unwrap().huge_pages);
    }

    #[test]
    fn memcached_tunables_are_stored_and_reported_inert() {
        let s = settings(&[
            "-o",
            "slab_reassign,slab_automove=2,slab_automove_ratio=0.5,slab_automove_window=10,\
             slab_chunk_max=16,slab_sizes=100-200-300,lru_maintainer,hot_lru_pct=10,\
             warm_lru_pct=50,hot_max_factor=0.5,warm_max_factor=3,temporary_ttl=30,\
             tail_repair_time=60,lru_crawler_sleep=50,lru_crawler_tocrawl=9,no_hashexpand,\
             watcher_logbuf_size=10,worker_logbuf_size=20,track_sizes,hash_algorithm=xxh3,\
             ext_path=/mnt/x:1G,ext_wbuf_size=8,ext_max_frag=0.5,ext_drop_unread,ext_max_sleep=5,\
             ssl_ciphers=HIGH,ssl_min_version=3,ssl_wbuf_size=32,ssl_session_cache,\
             drop_privileges,sock_cookie_id=7,no_maxconns_fast,read_buf_mem_limit=5,modern,\
             inline_ascii_resp,no_inline_ascii_resp,resp_obj_mem_limit=5",
        ])
        .unwrap();
        let t = &s.tunables;
        assert_eq!((t.slab_automove, t.slab_automove_window), (2, 10));
        assert_eq!(t.slab_chunk_max(), 16384);
        assert_eq!(t.slab_sizes, [100, 200, 300]);
        assert_eq!((t.hot_lru_pct, t.warm_lru_pct), (10, 50));
        assert!(t.temp_lru && t.temporary_ttl == 30 && t.tail_repair_time == 60);
        assert_eq!((t.lru_crawler_sleep, t.lru_crawler_tocrawl), (50, 9));
        assert!(!t.hash_expand && t.track_sizes && t.drop_privileges);
        assert_eq!(
            (t.watcher_logbuf_size, t.worker_logbuf_size),
            (10240, 20480)
        );
        assert_eq!(s.hash_algorithm, HashAlgorithm::Xxh3);
        assert!(s.extstore.configured);
        assert_eq!(s.extstore.wbuf_size, 8 << 20);
        assert_eq!(s.ssl.min_version_name(), "tlsv1.3");
        assert_eq!(s.ssl.wbuf_size, 32 << 10);
        assert_eq!(s.read_buf_mem_limit, 5 << 20);
        assert!(!s.maxconns_fast);
        let summary = s.inert_summary().unwrap();
        for name in [
            "slab_automove",
            "hot_lru_pct",
            "temporary_ttl",
            "no_hashexpand",
            "ext_max_sleep",
            "ssl_ciphers",
            "drop_privileges",
            "no_maxconns_fast",
            "resp_obj_mem_limit",
            "watcher_logbuf_size",
        ] {
            assert!(summary.contains(name), "{name} missing from {summary}");
        }
        for name in [
            "track_sizes",
            "read_buf_mem_limit",
            "modern",
            "hash_algorithm",
            "ssl_session_cache",
            "ssl_min_version",
            "ext_path",
            "ext_max_frag",
        ] {
            assert!(
                !summary.contains(&format!(" {name}")),
                "{name} in {summary}"
            );
        }
        assert_eq!(summary.matches("segment store").count(), 1, "{summary}");
    }

    #[test]
    fn no_modern_restores_memcached_14_defaults() {
        let s = settings(&["-o", "no_modern"]).unwrap();
        let t = &s.tunables;
        assert!(!t.slab_reassign && t.slab_automove == 0 && !t.lru_maintainer);
        assert!(!t.lru_segmented && !s.maxconns_fast && !s.lru_crawler);
        assert_eq!(t.slab_chunk_max(), 1 << 20);
        assert_eq!(s.hash_algorithm, HashAlgorithm::Jenkins);
        // Without the maintainer memcached has no temporary LRU.
        let (msg, code) = refused(&["-o", "no_modern,temporary_ttl=30"]);
        assert_eq!(msg, "temporary_ttl requires lru_maintainer to be enabled");
        assert_eq!(code, EX_USAGE);
    }

    #[test]
    fn flag_options_ignore_a_value_as_getsubopt_does() {
        let s = settings(&["-o", "no_lru_crawler=1,maxconns_fast=0,modern=yes"]).unwrap();
        assert!(!s.lru_crawler && s.maxconns_fast);
    }

    #[test]
    fn ext_path_syntax() {
        assert_eq!(check_ext_path("/mnt/d1/extstore:1G"), Ok(()));
        assert_eq!(check_ext_path("/x:64m:compact"), Ok(()));
        assert_eq!(check_ext_path("/x:2p:old"), Ok(()));
        let no_size =
            Err("must supply size to ext_path, ie: ext_path=/f/e:64m (M|G|T|P supported)".into());
        let bad_unit =
            Err("must supply size to ext_path, ie: ext_path=/f/e:64m (m|g|t|p supported)".into());
        assert_eq!(check_ext_path("/x"), no_size);
        assert_eq!(check_ext_path("/x:"), no_size);
        assert_eq!(check_ext_path(":1G"), no_size);
        assert_eq!(check_ext_path("/x:1GB"), bad_unit);
        assert_eq!(
            check_ext_path("/x:1024"),
            bad_unit,
            "memcached wants a unit"
        );
        assert_eq!(check_ext_path("/x:64k"), bad_unit);
        assert_eq!(
            check_ext_path("/x:64m:fast"),
            Err("Unknown extstore bucket: fast".into())
        );
    }
}
