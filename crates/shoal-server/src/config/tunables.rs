//! memcached's knobs for mechanisms shoald does not have (slab classes, LRU queues, the
//! crawler, log buffers, extstore): validated as memcached validates them and reported in
//! `stats settings`, without effect.

/// memcached's slab page size, which its `slab_chunk_max` checks refer to.
pub(super) const SLAB_PAGE_SIZE: u32 = 1024 * 1024;
/// memcached's default `slab_chunk_max`: half a slab page.
pub(super) const SLAB_CHUNK_MAX_DEFAULT: u32 = SLAB_PAGE_SIZE / 2;
/// memcached's slab class alignment: consecutive `slab_sizes` differ by more than this.
pub(super) const CHUNK_ALIGN_BYTES: u32 = 8;
/// memcached's MAX_NUMBER_OF_SLAB_CLASSES (64) less the class it keeps for itself.
pub(super) const MAX_SLAB_SIZES: usize = 62;

/// memcached's slab, LRU, crawler and logging tunables. shoald has none of these
/// mechanisms; the values are validated as memcached validates them and reported in
/// `stats settings` under memcached's names, so tools and configuration management see
/// what they set.
#[derive(Debug, Clone, PartialEq)]
pub struct Tunables {
    /// `-f`: slab chunk growth factor.
    pub growth_factor: f64,
    /// `-n`: smallest slab chunk for key, value and flags.
    pub chunk_size: u32,
    /// `slab_chunk_max`, when given (bytes).
    pub slab_chunk_max: Option<u32>,
    /// `no_chunked_items` (or `no_modern`): chunk max is a whole slab page.
    pub no_chunked_items: bool,
    /// `slab_sizes`: explicit slab class sizes.
    pub slab_sizes: Vec<u32>,
    /// `slab_reassign`.
    pub slab_reassign: bool,
    /// `slab_automove` (0..=2).
    pub slab_automove: u8,
    /// `slab_automove_ratio`.
    pub slab_automove_ratio: f64,
    /// `slab_automove_window`.
    pub slab_automove_window: u32,
    /// `lru_maintainer`: memcached's LRU maintainer thread.
    pub lru_maintainer: bool,
    /// Segmented (hot/warm/cold) LRU, on with the maintainer.
    pub lru_segmented: bool,
    /// `hot_lru_pct`.
    pub hot_lru_pct: u32,
    /// `warm_lru_pct`.
    pub warm_lru_pct: u32,
    /// `hot_max_factor`.
    pub hot_max_factor: f64,
    /// `warm_max_factor`.
    pub warm_max_factor: f64,
    /// Whether `temporary_ttl` was given (memcached's temp LRU).
    pub temp_lru: bool,
    /// `temporary_ttl` in seconds.
    pub temporary_ttl: u32,
    /// `tail_repair_time` in seconds (0: off).
    pub tail_repair_time: u32,
    /// `lru_crawler_sleep` in microseconds.
    pub lru_crawler_sleep: u32,
    /// `lru_crawler_tocrawl` (0: unlimited).
    pub lru_crawler_tocrawl: u32,
    /// Hash table expansion (`no_hashexpand` turns it off).
    pub hash_expand: bool,
    /// `watcher_logbuf_size` in bytes.
    pub watcher_logbuf_size: u32,
    /// `worker_logbuf_size` in bytes.
    pub worker_logbuf_size: u32,
    /// `track_sizes`.
    pub track_sizes: bool,
    /// `drop_privileges` (memcached's seccomp sandbox).
    pub drop_privileges: bool,
    /// `sock_cookie_id`.
    pub sock_cookie_id: Option<u32>,
}

impl Default for Tunables {
    /// memcached 1.6's defaults.
    fn default() -> Tunables {
        Tunables {
            growth_factor: 1.25,
            chunk_size: 48,
            slab_chunk_max: None,
            no_chunked_items: false,
            slab_sizes: Vec::new(),
            slab_reassign: true,
            slab_automove: 1,
            slab_automove_ratio: 0.8,
            slab_automove_window: 30,
            lru_maintainer: true,
            lru_segmented: true,
            hot_lru_pct: 20,
            warm_lru_pct: 40,
            hot_max_factor: 0.2,
            warm_max_factor: 2.0,
            temp_lru: false,
            temporary_ttl: 61,
            tail_repair_time: 0,
            lru_crawler_sleep: 100,
            lru_crawler_tocrawl: 0,
            hash_expand: true,
            watcher_logbuf_size: 256 * 1024,
            worker_logbuf_size: 64 * 1024,
            track_sizes: false,
            drop_privileges: false,
            sock_cookie_id: None,
        }
    }
}

impl Tunables {
    /// `slab_chunk_max` as memcached reports it: as given, else a whole page with
    /// `no_chunked_items`, else half a page.
    pub fn slab_chunk_max(&self) -> u32 {
        match (self.slab_chunk_max, self.no_chunked_items) {
            (Some(n), _) => n,
            (None, true) => SLAB_PAGE_SIZE,
            (None, false) => SLAB_CHUNK_MAX_DEFAULT,
        }
    }
}

/// memcached's extstore options (`ext_*`, `slab_automove_freeratio`). shoald has no
/// extstore; they are validated and, once any is given, shown in `stats settings` as an
/// extstore build of memcached shows them.
#[derive(Debug, Clone, PartialEq)]
pub struct Extstore {
    /// Whether any extstore option was given (a memcached built without extstore prints
    /// none of them, which is what shoald shows otherwise).
    pub configured: bool,
    /// `ext_path` values, `PATH:SIZE[:...]`.
    pub paths: Vec<String>,
    /// `ext_page_size` in bytes.
    pub page_size: u32,
    /// `ext_wbuf_size` in bytes.
    pub wbuf_size: u32,
    /// `ext_threads`.
    pub threads: u32,
    /// `ext_io_depth`.
    pub io_depth: u32,
    /// `ext_item_size`.
    pub item_size: u32,
    /// `ext_item_age`.
    pub item_age: u32,
    /// `ext_low_ttl`.
    pub low_ttl: u32,
    /// `ext_recache_rate`.
    pub recache_rate: u32,
    /// `ext_compact_under`.
    pub compact_under: u32,
    /// `ext_drop_under`.
    pub drop_under: u32,
    /// `ext_max_sleep` in microseconds.
    pub max_sleep: u32,
    /// `ext_max_frag`.
    pub max_frag: f64,
    /// `ext_drop_unread`.
    pub drop_unread: bool,
    /// `slab_automove_freeratio`.
    pub slab_automove_freeratio: f64,
}

impl Default for Extstore {
    /// memcached 1.6's defaults.
    fn default() -> Extstore {
        Extstore {
            configured: false,
            paths: Vec::new(),
            page_size: 64 * 1024 * 1024,
            wbuf_size: 4 * 1024 * 1024,
            threads: 1,
            io_depth: 1,
            item_size: 512,
            item_age: u32::MAX,
            low_ttl: 0,
            recache_rate: 2000,
            compact_under: 0,
            drop_under: 0,
            max_sleep: 1_000_000,
            max_frag: 0.8,
            drop_unread: false,
            slab_automove_freeratio: 0.01,
        }
    }
}
