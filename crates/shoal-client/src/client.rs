//! The cluster client: placement over shoal-ring, one pipelined connection pool per
//! server, typed commands.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use shoal_ring::{RingConfig, Server, SharedRing};

use crate::backend::{Backend, Reply, ReplyRx};
use crate::codec::{Op, Outcome, Protocol, StoreMode};
use crate::error::{BackendError, ClientError};
use crate::frame::ReplyKind;
use crate::health::{EjectPolicy, Health, LockedRing};
use crate::meta::MetaReply;
use crate::stats::ServerStats;
use crate::value::{check_key, Value};

/// How [`Client::cas`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CasOutcome {
    /// Stored: the CAS unique matched.
    Stored,
    /// Someone changed the item since it was read.
    Exists,
    /// The item is gone.
    NotFound,
}

/// Builds a [`Client`].
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    servers: Vec<Server>,
    ring: RingConfig,
    connections: usize,
    timeout: Option<Duration>,
    policy: EjectPolicy,
    max_update_attempts: u32,
    protocol: Protocol,
}

impl ClientBuilder {
    /// The wire protocol for every server (default [`Protocol::Text`]).
    pub fn protocol(mut self, protocol: Protocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// Keys are placed with `ring` (any shoal-ring distribution and hash; default
    /// twemproxy-compatible ketama with md5).
    pub fn ring(mut self, ring: RingConfig) -> Self {
        self.ring = ring;
        self
    }

    /// Connections per server (default 1; each is pipelined).
    pub fn connections_per_server(mut self, n: usize) -> Self {
        self.connections = n.max(1);
        self
    }

    /// Per-request timeout (default 1 s). A server that does not answer in time has its
    /// connection closed, every request on it fails with `Timeout`, and it counts one
    /// failure towards ejection. `None` waits forever.
    pub fn timeout(mut self, t: Option<Duration>) -> Self {
        self.timeout = t;
        self
    }

    /// Auto-eject policy (default: on, 2 failures, 30 s).
    pub fn eject_policy(mut self, p: EjectPolicy) -> Self {
        self.policy = p;
        self
    }

    /// How many compare-and-swap conflicts [`Client::update`] tolerates (default 16).
    pub fn max_update_attempts(mut self, n: u32) -> Self {
        self.max_update_attempts = n.max(1);
        self
    }

    /// Starts the client (connections open lazily, on first use). Must be called inside
    /// a tokio runtime.
    pub fn build(self) -> Result<Client, ClientError> {
        let ring = SharedRing::new(self.ring, self.servers.clone())
            .map_err(|e| ClientError::Config(e.to_string()))?;
        let ring = Arc::new(LockedRing::new(ring));
        let stats: Vec<Arc<ServerStats>> = self
            .servers
            .iter()
            .map(|_| Arc::new(ServerStats::default()))
            .collect();
        let ejected_stats = stats.clone();
        let health = Arc::new(Health::new(
            ring.clone(),
            self.servers.len(),
            self.policy,
            Box::new(move |i| {
                if let Some(s) = ejected_stats.get(i) {
                    crate::stats::incr(&s.server_ejected_at);
                    crate::stats::incr(&s.ejections);
                }
            }),
        ));
        let backends = self
            .servers
            .iter()
            .zip(&stats)
            .enumerate()
            .map(|(i, (s, st))| {
                Backend::start(
                    i,
                    s.host_port(),
                    self.connections,
                    self.timeout,
                    false,
                    health.clone(),
                    st.clone(),
                )
            })
            .collect();
        Ok(Client {
            inner: Arc::new(Inner {
                ring,
                backends,
                names: self.servers.iter().map(Server::host_port).collect(),
                max_update_attempts: self.max_update_attempts,
                protocol: self.protocol,
            }),
        })
    }
}

struct Inner {
    ring: Arc<LockedRing>,
    backends: Vec<Backend>,
    names: Vec<String>,
    max_update_attempts: u32,
    protocol: Protocol,
}

/// An async memcached cluster client over the text, meta or binary protocol
/// ([`ClientBuilder::protocol`]).
///
/// Cheap to clone; clones share connections. Concurrent calls are pipelined over each
/// server's connections. Guarantees: every key goes to the server the configured
/// shoal-ring distribution picks among the live servers; multi-gets are split per server,
/// sent in parallel and merged in request order; a server that fails `failure_limit`
/// times in a row is ejected (its keys move) until the retry timeout passes.
///
/// ```no_run
/// # async fn demo() -> Result<(), shoal_client::ClientError> {
/// use shoal_client::Client;
/// use shoal_ring::{Distribution, RingConfig, Server};
///
/// let client = Client::builder(vec![
///     Server::new("127.0.0.1", 11211),
///     Server::new("127.0.0.1", 11212),
/// ])
/// .ring(RingConfig::new(Distribution::TwemproxyKetama))
/// .build()?;
/// client.set(b"greeting", b"hello", 0, 0).await?;
/// let v = client.get(b"greeting").await?;
/// assert_eq!(v.map(|v| v.data), Some("hello".into()));
/// let counter = client.incr(b"hits", 1).await?; // None: no such key
/// # let _ = counter;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl Client {
    /// A builder for a client over `servers` (default: twemproxy-compatible ketama with
    /// md5, 1 connection per server, 1 s timeout, auto-eject after 2 failures for 30 s).
    pub fn builder(servers: Vec<Server>) -> ClientBuilder {
        ClientBuilder {
            servers,
            ring: RingConfig::new(shoal_ring::Distribution::TwemproxyKetama)
                .with_hash(shoal_ring::HashAlgorithm::Md5),
            connections: 1,
            timeout: Some(Duration::from_secs(1)),
            policy: EjectPolicy::default(),
            max_update_attempts: 16,
            protocol: Protocol::Text,
        }
    }

    /// The index of the server `key` goes to now (among all configured servers).
    pub fn server_for(&self, key: &[u8]) -> Result<usize, ClientError> {
        self.inner
            .ring
            .ring
            .locate(key)
            .map_err(|_| ClientError::NoLiveServers)
    }

    /// Whether server `index` is currently ejected.
    pub fn is_ejected(&self, index: usize) -> bool {
        self.inner.ring.ring.load().is_ejected(index)
    }

    /// Per-server counters, in server order.
    pub fn server_stats(&self, index: usize) -> Option<&ServerStats> {
        self.inner.backends.get(index).map(|b| &**b.stats())
    }

    async fn send(&self, server: usize, bytes: Vec<u8>, kind: ReplyKind) -> Option<ReplyRx> {
        match self.inner.backends.get(server) {
            Some(b) => b.send(bytes, kind).await,
            None => None,
        }
    }

    fn wrap(&self, server: usize, e: BackendError) -> ClientError {
        ClientError::Backend {
            server: self.inner.names.get(server).cloned().unwrap_or_default(),
            source: e,
        }
    }

    async fn wait(&self, server: usize, rx: Option<ReplyRx>) -> Result<Bytes, ClientError> {
        let r: Reply = match rx {
            Some(rx) => rx.await.unwrap_or(Err(BackendError::Closed)),
            None => Err(BackendError::Closed),
        };
        r.map_err(|e| self.wrap(server, e))
    }

    /// Sends one request for `key` and waits for its reply.
    async fn roundtrip(
        &self,
        key: &[u8],
        bytes: Vec<u8>,
        kind: ReplyKind,
    ) -> Result<Bytes, ClientError> {
        check_key(key)?;
        let server = self.server_for(key)?;
        let rx = self.send(server, bytes, kind).await;
        self.wait(server, rx).await
    }

    /// Sends `op` for `key` in the client's protocol and decodes the reply.
    async fn execute(&self, key: &[u8], op: Op<'_>) -> Result<Outcome, ClientError> {
        let protocol = self.inner.protocol;
        let (req, kind) = protocol.encode(&op);
        let reply = self.roundtrip(key, req, kind).await?;
        protocol.decode(&op, &reply)
    }

    /// `get`: the item, or `None` on a miss.
    pub async fn get(&self, key: &[u8]) -> Result<Option<Value>, ClientError> {
        self.retrieve(key, false).await
    }

    /// `gets`: the item with its CAS unique, or `None` on a miss.
    pub async fn gets(&self, key: &[u8]) -> Result<Option<Value>, ClientError> {
        self.retrieve(key, true).await
    }

    async fn retrieve(&self, key: &[u8], cas: bool) -> Result<Option<Value>, ClientError> {
        let protocol = self.inner.protocol;
        let (req, kind) = protocol.encode_get(&[key], cas);
        let reply = self.roundtrip(key, req, kind).await?;
        Ok(protocol.decode_values(&reply, cas)?.into_iter().next())
    }

    /// Multi-get: the hits among `keys`, in the order of `keys` (duplicates repeated,
    /// misses left out). Keys are grouped per server and the groups sent in parallel.
    /// Any server failing fails the whole call.
    pub async fn get_multi<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Value>, ClientError> {
        self.get_multi_cas(keys, false).await
    }

    /// Like [`Client::get_multi`] with CAS uniques (`gets`).
    pub async fn gets_multi<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Value>, ClientError> {
        self.get_multi_cas(keys, true).await
    }

    async fn get_multi_cas<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        cas: bool,
    ) -> Result<Vec<Value>, ClientError> {
        // (server, its keys) per group, and each key's group.
        let mut groups: Vec<(usize, Vec<&[u8]>)> = Vec::new();
        let mut which = Vec::with_capacity(keys.len());
        for k in keys {
            let k = k.as_ref();
            check_key(k)?;
            let s = self.server_for(k)?;
            let g = match groups.iter().position(|(gs, _)| *gs == s) {
                Some(g) => g,
                None => {
                    groups.push((s, Vec::new()));
                    groups.len() - 1
                }
            };
            groups[g].1.push(k);
            which.push(g);
        }
        let protocol = self.inner.protocol;
        let mut pending = Vec::with_capacity(groups.len());
        for (s, group) in &groups {
            let (req, kind) = protocol.encode_get(group, cas);
            pending.push((*s, self.send(*s, req, kind).await));
        }
        let mut per_group = Vec::with_capacity(pending.len());
        for (s, rx) in pending {
            let reply = self.wait(s, rx).await?;
            per_group.push(protocol.decode_values(&reply, cas)?.into_iter().peekable());
        }
        let mut out = Vec::new();
        for (k, g) in keys.iter().zip(which) {
            if let Some(it) = per_group.get_mut(g) {
                if it.peek().is_some_and(|v| &v.key[..] == k.as_ref()) {
                    if let Some(v) = it.next() {
                        out.push(v);
                    }
                }
            }
        }
        Ok(out)
    }

    async fn store(
        &self,
        mode: StoreMode,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: u32,
    ) -> Result<Outcome, ClientError> {
        let op = Op::Store {
            mode,
            key,
            value,
            flags,
            exptime,
            noreply: false,
        };
        self.execute(key, op).await
    }

    /// A storage command whose answer is stored / not stored.
    async fn store_bool(
        &self,
        mode: StoreMode,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: u32,
    ) -> Result<bool, ClientError> {
        match self.store(mode, key, value, flags, exptime).await? {
            Outcome::Stored => Ok(true),
            Outcome::NotStored => Ok(false),
            other => Err(ClientError::Unexpected(format!("{other:?}"))),
        }
    }

    /// `set`: stores unconditionally.
    pub async fn set(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: u32,
    ) -> Result<(), ClientError> {
        self.store_bool(StoreMode::Set, key, value, flags, exptime)
            .await
            .map(|_| ())
    }

    /// `set` without waiting for the answer (`noreply`; quiet mode in the meta and binary
    /// protocols): returns once the request is queued, so failures are not reported.
    pub async fn set_noreply(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: u32,
    ) -> Result<(), ClientError> {
        check_key(key)?;
        let server = self.server_for(key)?;
        let op = Op::Store {
            mode: StoreMode::Set,
            key,
            value,
            flags,
            exptime,
            noreply: true,
        };
        let (req, kind) = self.inner.protocol.encode(&op);
        // The meta and binary forms end with a no-op whose reply the connection reads
        // and drops; nobody waits for it.
        drop(self.send(server, req, kind).await);
        Ok(())
    }

    /// `add`: true if stored (the key was absent).
    pub async fn add(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: u32,
    ) -> Result<bool, ClientError> {
        self.store_bool(StoreMode::Add, key, value, flags, exptime)
            .await
    }

    /// `replace`: true if stored (the key was present).
    pub async fn replace(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: u32,
    ) -> Result<bool, ClientError> {
        self.store_bool(StoreMode::Replace, key, value, flags, exptime)
            .await
    }

    /// `append`: true if stored.
    pub async fn append(&self, key: &[u8], value: &[u8]) -> Result<bool, ClientError> {
        self.store_bool(StoreMode::Append, key, value, 0, 0).await
    }

    /// `prepend`: true if stored.
    pub async fn prepend(&self, key: &[u8], value: &[u8]) -> Result<bool, ClientError> {
        self.store_bool(StoreMode::Prepend, key, value, 0, 0).await
    }

    /// `cas`: stores only if the item's CAS unique is still `cas`.
    pub async fn cas(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: u32,
        cas: u64,
    ) -> Result<CasOutcome, ClientError> {
        match self
            .store(StoreMode::Cas(cas), key, value, flags, exptime)
            .await?
        {
            Outcome::Stored => Ok(CasOutcome::Stored),
            Outcome::Exists => Ok(CasOutcome::Exists),
            Outcome::NotFound => Ok(CasOutcome::NotFound),
            other => Err(ClientError::Unexpected(format!("{other:?}"))),
        }
    }

    /// `delete`: true if the key existed.
    pub async fn delete(&self, key: &[u8]) -> Result<bool, ClientError> {
        match self.execute(key, Op::Delete { key }).await? {
            Outcome::Deleted => Ok(true),
            Outcome::NotFound => Ok(false),
            other => Err(ClientError::Unexpected(format!("{other:?}"))),
        }
    }

    /// `touch`: true if the key existed.
    pub async fn touch(&self, key: &[u8], exptime: u32) -> Result<bool, ClientError> {
        match self.execute(key, Op::Touch { key, exptime }).await? {
            Outcome::Touched => Ok(true),
            Outcome::NotFound => Ok(false),
            other => Err(ClientError::Unexpected(format!("{other:?}"))),
        }
    }

    async fn arith(&self, incr: bool, key: &[u8], delta: u64) -> Result<Option<u64>, ClientError> {
        match self.execute(key, Op::Arith { incr, key, delta }).await? {
            Outcome::Number(n) => Ok(Some(n)),
            Outcome::NotFound => Ok(None),
            other => Err(ClientError::Unexpected(format!("{other:?}"))),
        }
    }

    /// `incr`: the new value, or `None` if the key does not exist. Atomic on the server.
    pub async fn incr(&self, key: &[u8], delta: u64) -> Result<Option<u64>, ClientError> {
        self.arith(true, key, delta).await
    }

    /// `decr`: the new value (floored at 0), or `None` if the key does not exist.
    pub async fn decr(&self, key: &[u8], delta: u64) -> Result<Option<u64>, ClientError> {
        self.arith(false, key, delta).await
    }

    /// Read-modify-write with compare-and-swap: reads the item with `gets`, calls `f`
    /// with its current data (`None` if absent), and stores `f`'s result with `cas` (or
    /// `add` when the key was absent). On a conflict (someone else wrote first) it
    /// re-reads and retries with exponential backoff (1 ms doubling, capped at 100 ms),
    /// up to the builder's `max_update_attempts`. If `f` returns `None`, nothing is
    /// written and `Ok(None)` is returned. Returns the value stored.
    ///
    /// ```no_run
    /// # async fn demo(client: shoal_client::Client) -> Result<(), shoal_client::ClientError> {
    /// // Append to a comma-separated list without losing concurrent appends.
    /// client
    ///     .update(b"list", |old| {
    ///         let mut v = old.map(<[u8]>::to_vec).unwrap_or_default();
    ///         if !v.is_empty() {
    ///             v.push(b',');
    ///         }
    ///         v.extend_from_slice(b"item");
    ///         Some(v)
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn update<F>(&self, key: &[u8], mut f: F) -> Result<Option<Vec<u8>>, ClientError>
    where
        F: FnMut(Option<&[u8]>) -> Option<Vec<u8>>,
    {
        let mut backoff = Duration::from_millis(1);
        for _ in 0..self.inner.max_update_attempts {
            let current = self.gets(key).await?;
            let Some(new) = f(current.as_ref().map(|v| &v.data[..])) else {
                return Ok(None);
            };
            let done = match &current {
                Some(v) => {
                    let cas = v
                        .cas
                        .ok_or_else(|| ClientError::Unexpected("gets without cas".into()))?;
                    self.cas(key, &new, v.flags, 0, cas).await? == CasOutcome::Stored
                }
                None => self.add(key, &new, 0, 0).await?,
            };
            if done {
                return Ok(Some(new));
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_millis(100));
        }
        Err(ClientError::Contended(self.inner.max_update_attempts))
    }

    async fn meta(
        &self,
        cmd: &str,
        key: &[u8],
        flags: &str,
        data: Option<&[u8]>,
    ) -> Result<MetaReply, ClientError> {
        if self.inner.protocol == Protocol::Binary {
            return Err(ClientError::Config(
                "meta commands need Protocol::Text or Protocol::Meta: memcached fixes a \
                 connection's protocol at its first byte"
                    .into(),
            ));
        }
        crate::meta::check_flags(flags)?;
        if flags.split(' ').any(|t| t == "q" || t == "b") {
            return Err(ClientError::Config(
                "the q and b meta flags are managed by the client".into(),
            ));
        }
        let req = crate::meta::request(cmd, key, flags, data);
        let reply = self.roundtrip(key, req, ReplyKind::Meta).await?;
        crate::meta::parse(&reply)
    }

    /// `mg key flags`: e.g. `meta_get(b"k", "v c t")` returns the value, CAS and TTL.
    /// A miss is a reply with code `EN`.
    pub async fn meta_get(&self, key: &[u8], flags: &str) -> Result<MetaReply, ClientError> {
        self.meta("mg", key, flags, None).await
    }

    /// `ms key datalen flags` with `value` (e.g. flags `"T60 C123"` for a TTL and a CAS
    /// check, `"MA"` to append).
    pub async fn meta_set(
        &self,
        key: &[u8],
        value: &[u8],
        flags: &str,
    ) -> Result<MetaReply, ClientError> {
        self.meta("ms", key, flags, Some(value)).await
    }

    /// `md key flags`.
    pub async fn meta_delete(&self, key: &[u8], flags: &str) -> Result<MetaReply, ClientError> {
        self.meta("md", key, flags, None).await
    }

    /// `ma key flags`: atomic arithmetic, e.g. `"N0 J10 D5 v"` (auto-create at 10, add 5,
    /// return the value) or `"MD D1 v"` to decrement.
    pub async fn meta_arithmetic(&self, key: &[u8], flags: &str) -> Result<MetaReply, ClientError> {
        self.meta("ma", key, flags, None).await
    }

    /// `flush_all` on every live server.
    pub async fn flush_all(&self) -> Result<(), ClientError> {
        let ring = self.inner.ring.ring.load();
        let protocol = self.inner.protocol;
        let (req, kind) = protocol.encode(&Op::FlushAll);
        let mut pending = Vec::new();
        for s in 0..self.inner.backends.len() {
            if !ring.is_ejected(s) {
                pending.push((s, self.send(s, req.clone(), kind).await));
            }
        }
        for (s, rx) in pending {
            let reply = self.wait(s, rx).await?;
            match protocol.decode(&Op::FlushAll, &reply)? {
                Outcome::Ok => {}
                other => return Err(ClientError::Unexpected(format!("{other:?}"))),
            }
        }
        Ok(())
    }
}
