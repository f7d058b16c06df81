//! Options accepted for memcached compatibility that change nothing in shoald: why each is
//! inert, and the one startup line that names them.

/// Why an accepted option changes nothing in shoald.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inert {
    /// It tunes memcached's slab allocator, LRU queues or hash table maintenance, which
    /// shoald's segment store replaces.
    Segments,
    /// It tunes a part of memcached's extstore that shoald's flash tier does without
    /// (the flusher's sleep, slab-page ratios).
    Extstore,
    /// It sizes memcached's log buffers behind `watch`; shoald sizes its own.
    Watch,
    /// It turns on item-size statistics (`stats sizes`), which shoald does not collect.
    Stats,
    /// It enables NIC or socket features shoald does not use.
    Network,
    /// It is an OpenSSL knob with no rustls equivalent.
    Tls,
    /// It controls memcached's seccomp sandbox, which shoald does not have.
    Sandbox,
    /// memcached 1.6 ignores it as well.
    Deprecated,
    /// shoald always behaves as `maxconns_fast` (refuse over-limit connections at once).
    MaxconnsFast,
}

impl Inert {
    /// The explanation printed with the options.
    pub fn reason(self) -> &'static str {
        match self {
            Inert::Segments => {
                "they tune memcached's slab classes, LRU queues and hash table, which \
                 shoald's segment store replaces"
            }
            Inert::Extstore => {
                "they tune parts of memcached's extstore that shoald's flash tier does \
                 without (the flusher's sleep, free-chunk ratios)"
            }
            Inert::Watch => "shoald sizes the buffers behind watch itself",
            Inert::Stats => "shoald does not track item sizes for stats sizes",
            Inert::Network => "shoald does not use NAPI ids or socket marks",
            Inert::Tls => "TLS is rustls: its own cipher suites and buffers, no kernel TLS",
            Inert::Sandbox => "shoald has no seccomp sandbox",
            Inert::Deprecated => "memcached 1.6 ignores it too",
            Inert::MaxconnsFast => {
                "shoald always refuses connections over -c at once (maxconns_fast)"
            }
        }
    }
}

/// One line naming every option in `inert` (name and reason, in the order given), grouped
/// by reason, or `None` when there are none.
pub(super) fn summary(inert: &[(String, Inert)]) -> Option<String> {
    let mut groups: Vec<(Inert, Vec<&str>)> = Vec::new();
    for (name, why) in inert {
        match groups.iter_mut().find(|(w, _)| w == why) {
            Some((_, names)) if names.contains(&name.as_str()) => {}
            Some((_, names)) => names.push(name),
            None => groups.push((*why, vec![name])),
        }
    }
    if groups.is_empty() {
        return None;
    }
    let parts: Vec<String> = groups
        .iter()
        .map(|(why, names)| format!("{} ({})", names.join(", "), why.reason()))
        .collect();
    Some(format!(
        "accepted for memcached compatibility, without effect: {}",
        parts.join("; ")
    ))
}
