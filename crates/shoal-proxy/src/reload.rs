//! Configuration reload: SIGHUP, `reload` on the stats port, or [`crate::Running::reload`].
//!
//! Guarantees:
//! - the file given at startup is re-read and validated first; a file that does not parse
//!   is refused with the same `line N: field 'F': ...` error as at startup, nothing
//!   changes and the old configuration keeps serving. So is a reload whose new listen
//!   address or ring cannot be set up: everything that can fail is done before anything
//!   is switched;
//! - client connections stay open across a reload. A connection switches to its pool's
//!   new configuration between requests, only when none of its requests is in flight, so
//!   every request finishes on the servers it was sent to. (An idle connection holds on
//!   to the old pool, and so its backends, until its next request or until it closes.)
//! - a pool whose configuration is unchanged keeps its backends and their connections; a
//!   changed one gets a new ring, keeps the backends (and connections) of the servers it
//!   still has when its `timeout`, `server_connections`, `preconnect` and `server_tls`
//!   are unchanged, and new ones otherwise (old ones close once their last request is
//!   answered); it keeps its counters and those of the servers it still has;
//! - `tls:` applies to connections accepted after the reload (its files are re-read with
//!   the configuration); `sasl:` to every connection's next request;
//! - a new pool starts listening; a removed pool stops listening (its open connections
//!   are served until they close); a pool whose `listen` changed binds the new address
//!   first and then closes the old one, without touching the other pools;
//! - every worker thread switches: each changed or new pool gets one instance per worker,
//!   built on that worker's runtime (so its server connections are that worker's), and
//!   every route is rebuilt over the new pools; a pool may become a route or stop being
//!   one, keeping its listener, its client connections and its counters.
//!
//! Starting is the same switch from no pools at all (`Shared::apply`).
//!
//! Pools are matched by name, so a renamed pool is a removed one plus a new one (and its
//! new listener cannot take over the address the old one still holds during the reload).

use std::fmt;
use std::sync::Arc;

use crate::config::{Listen, PoolConfig, ProxyConfig};
use crate::error::ConfigError;
use crate::error::StartError;
use crate::pool::{Pool, PoolShared};
use crate::route::{Router, Target};
use crate::shared::{Bound, Entry, Shared};
use crate::slot::PoolSlot;
use crate::stats::PoolStats;

/// Why a reload was refused. Whatever the reason, nothing changed.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The proxy was started without a configuration file to re-read.
    #[error("no configuration file to reload")]
    NoConfigFile,
    /// The configuration file is invalid (or unreadable).
    #[error("configuration file '{path}' syntax is invalid: {source}")]
    Config {
        /// The file.
        path: String,
        /// What is wrong, and on which line.
        source: ConfigError,
    },
    /// A new listen address could not be bound, or a ring could not be built.
    #[error(transparent)]
    Start(#[from] StartError),
    /// A pool would turn from a cache pool into a queue pool or back. Its open
    /// connections speak one or the other, so it takes a restart (or a new pool name).
    #[error(
        "pool '{pool}': 'queue' cannot change on reload (restart, or give the pool a new name)"
    )]
    QueueToggled {
        /// The pool.
        pool: String,
    },
}

/// What a successful reload changed, one human-readable line per change (pools added,
/// removed or changed; servers added, removed or reweighted; listeners moved).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReloadReport {
    /// The changes, in configuration order; empty when the file changed nothing.
    pub changes: Vec<String>,
}

impl fmt::Display for ReloadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.changes.is_empty() {
            return f.write_str("no changes");
        }
        f.write_str(&self.changes.join("; "))
    }
}

/// One pool's part of a switch, prepared before anything is switched.
struct Step {
    config: PoolConfig,
    stats: Arc<PoolStats>,
    /// A server pool's shared part: the old one if unchanged, else new.
    shared: Option<Arc<PoolShared>>,
    /// The entry serving under this name now, if any.
    old: Option<usize>,
    /// A server pool whose configuration did not change: its targets are kept.
    unchanged: bool,
    /// A new listener to start (new pool, or changed `listen`).
    bound: Option<Bound>,
}

impl Shared {
    /// Reloads the configuration file (see the module documentation), logs and counts
    /// the outcome.
    pub(crate) fn reload(self: &Arc<Self>) -> Result<ReloadReport, ReloadError> {
        let r = self.try_reload();
        self.count_reload(r.is_ok());
        match &r {
            Ok(report) => {
                tracing::info!("shoal-proxy: configuration reloaded: {report}");
            }
            Err(e) => tracing::error!(
                "shoal-proxy: reload refused, the previous configuration keeps serving: {e}"
            ),
        }
        r
    }

    fn try_reload(self: &Arc<Self>) -> Result<ReloadReport, ReloadError> {
        let path = self.config_path().ok_or(ReloadError::NoConfigFile)?;
        let config = ProxyConfig::load(path).map_err(|source| ReloadError::Config {
            path: path.display().to_string(),
            source,
        })?;
        // Held throughout, so reloads never interleave.
        let mut state = self.state();
        for pc in &config.pools {
            if state
                .iter()
                .any(|e| e.config.name == pc.name && e.config.queue.is_some() != pc.queue.is_some())
            {
                return Err(ReloadError::QueueToggled {
                    pool: pc.name.clone(),
                });
            }
        }
        Ok(self.apply(config, &mut state)?)
    }

    /// Switches from the pools serving now (`entries`; none at start) to `config`.
    /// Everything that can fail (building rings, binding new addresses) is done first; if
    /// it fails nothing has changed. Then every worker gets its instance of each new or
    /// changed pool and of every route, and all listeners switch.
    pub(crate) fn apply(
        self: &Arc<Self>,
        config: ProxyConfig,
        entries: &mut Vec<Entry>,
    ) -> Result<ReloadReport, StartError> {
        let mut claimed = vec![false; entries.len()];
        let mut report = ReloadReport::default();
        let mut steps: Vec<Step> = Vec::with_capacity(config.pools.len());
        for pc in config.pools {
            let old =
                (0..entries.len()).find(|&i| !claimed[i] && entries[i].config.name == pc.name);
            let cur = old.map(|i| &entries[i]);
            if let Some(i) = old {
                claimed[i] = true;
            }
            let stats = cur.map_or_else(Arc::default, |e| e.stats.clone());
            stats.set_timed(self.timed);
            let unchanged = cur.is_some_and(|e| e.config == pc);
            match cur {
                None => report.changes.push(format!("pool {} added", pc.name)),
                Some(e) if !unchanged => describe(&e.config, &pc, &mut report.changes),
                Some(_) => {}
            }
            let shared = if pc.route.is_some() {
                None
            } else if let Some(s) = cur.filter(|_| unchanged).and_then(|e| e.shared.clone()) {
                Some(s)
            } else {
                let previous = cur.and_then(|e| e.shared.as_deref());
                let name = pc.name.clone();
                Some(
                    PoolShared::new(
                        pc.clone(),
                        self.verbose,
                        self.timed,
                        stats.clone(),
                        previous,
                    )
                    .map_err(|source| StartError::Ring { pool: name, source })?,
                )
            };
            let rebind = match (&pc.listen, cur) {
                (None, _) => false,
                (Some(l), Some(e)) => e.live.is_none() || e.config.listen.as_ref() != Some(l),
                (Some(_), None) => true,
            };
            let bound = match (&pc.listen, rebind) {
                (Some(l), true) => Some(self.bind(&pc.name, l, pc.backlog)?),
                _ => None,
            };
            steps.push(Step {
                config: pc,
                stats,
                shared,
                old,
                unchanged: unchanged && cur.is_some_and(|e| e.shared.is_some()),
                bound,
            });
        }
        for (e, _) in entries.iter().zip(&claimed).filter(|(_, c)| !**c) {
            report
                .changes
                .push(format!("pool {} removed", e.config.name));
        }
        // Nothing below can fail: the switch is all or nothing.
        let targets = self.targets(&steps, entries);
        let mut old: Vec<Option<Entry>> = entries.drain(..).map(Some).collect();
        for (step, targets) in steps.into_iter().zip(targets) {
            let prev = step.old.and_then(|i| old.get_mut(i).and_then(Option::take));
            if !step.unchanged {
                for t in &targets {
                    if let Target::Pool(p) = t {
                        p.adopt_backends();
                    }
                }
            }
            let prev_live = prev.and_then(|e| e.live);
            let live = match (step.config.listen.is_some(), step.bound, prev_live) {
                (false, _, _) => None,
                (true, Some(bound), prev) => {
                    // New, or moved: the old listener (if any) closes when `prev` drops,
                    // after the new one is bound; its connections keep their slots.
                    let slots = prev.as_ref().map_or_else(
                        || self.new_slots(&targets),
                        |l| {
                            self.store(&l.slots, &targets);
                            l.slots.clone()
                        },
                    );
                    Some(self.listen(&step.config.name, bound, slots))
                }
                (true, None, Some(l)) => {
                    self.store(&l.slots, &targets);
                    Some(l)
                }
                (true, None, None) => None,
            };
            entries.push(Entry {
                config: step.config,
                stats: step.stats,
                shared: step.shared,
                targets,
                live,
            });
        }
        // Whatever is left in `old` was removed: dropping it closes those listeners.
        drop(old);
        Ok(report)
    }

    /// Each step's target on every home runtime: unchanged server pools keep theirs;
    /// changed and new ones get a fresh instance whose backends start on that home's
    /// runtime (reusing the servers they keep); routes are rebuilt over the result.
    fn targets(&self, steps: &[Step], entries: &[Entry]) -> Vec<Vec<Target>> {
        let mut out: Vec<Vec<Target>> = vec![Vec::with_capacity(self.homes.len()); steps.len()];
        for (h, home) in self.homes.iter().enumerate() {
            let _on_home = home.enter();
            let mut built: Vec<Option<Target>> = vec![None; steps.len()];
            for (i, step) in steps.iter().enumerate() {
                let prev = step
                    .old
                    .and_then(|o| entries.get(o))
                    .and_then(|e| e.targets.get(h));
                let Some(shared) = &step.shared else { continue };
                let target = match prev {
                    Some(t @ Target::Pool(_)) if step.unchanged => t.clone(),
                    Some(Target::Pool(p)) => {
                        Target::Pool(Pool::instantiate(shared.clone(), Some(p)))
                    }
                    _ => Target::Pool(Pool::instantiate(shared.clone(), None)),
                };
                built[i] = Some(target);
            }
            for i in 0..steps.len() {
                let t = build_route(i, steps, &mut built);
                if let Some(list) = out.get_mut(i) {
                    list.extend(t);
                }
            }
        }
        out
    }

    /// One slot per worker, each holding its home's target.
    fn new_slots(&self, targets: &[Target]) -> Arc<[Arc<PoolSlot>]> {
        (0..self.threads)
            .filter_map(|w| targets.get(w % targets.len().max(1)))
            .map(|t| Arc::new(PoolSlot::new(t.clone())))
            .collect()
    }

    /// Switches every worker's slot to its home's target.
    fn store(&self, slots: &[Arc<PoolSlot>], targets: &[Target]) {
        for (w, slot) in slots.iter().enumerate() {
            if let Some(t) = targets.get(w % targets.len().max(1)) {
                slot.store(t.clone());
            }
        }
    }
}

/// The target of step `i` on one home: built server pools as they are, routes built
/// (once) over their targets, recursively; a validated configuration has no loops.
fn build_route(i: usize, steps: &[Step], built: &mut Vec<Option<Target>>) -> Option<Target> {
    if let Some(t) = built.get(i).cloned().flatten() {
        return Some(t);
    }
    let step = steps.get(i)?;
    let names: Vec<String> = step
        .config
        .route
        .as_ref()?
        .targets()
        .into_iter()
        .map(str::to_string)
        .collect();
    let mut found: Vec<(String, Target)> = Vec::new();
    for n in names {
        let j = steps.iter().position(|s| s.config.name == n)?;
        if j == i {
            return None;
        }
        found.push((n, build_route(j, steps, built)?));
    }
    let lookup = |name: &str| {
        found
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.clone())
    };
    let router = Router::build(&step.config, step.stats.clone(), &lookup)?;
    let t = Target::Route(router);
    if let Some(slot) = built.get_mut(i) {
        *slot = Some(t.clone());
    }
    Some(t)
}

/// A listen address as the configuration file spells it.
fn shown(listen: &Option<Listen>) -> String {
    match listen {
        Some(Listen::Tcp(addr)) => addr.clone(),
        Some(Listen::Unix { path, .. }) => path.display().to_string(),
        None => "(none)".to_string(),
    }
}

/// Appends what changed between two configurations of one pool.
fn describe(old: &PoolConfig, new: &PoolConfig, out: &mut Vec<String>) {
    let name = &new.name;
    let display = |s: &shoal_ring::Server| s.name.clone().unwrap_or_else(|| s.host_port());
    for s in &new.servers {
        let d = display(s);
        match old.servers.iter().find(|o| display(o) == d) {
            None => out.push(format!("pool {name}: server {d} added")),
            Some(o) if o.host_port() != s.host_port() => {
                out.push(format!(
                    "pool {name}: server {d} moved from {} to {}",
                    o.host_port(),
                    s.host_port()
                ));
            }
            Some(o) if o.weight != s.weight => out.push(format!(
                "pool {name}: server {d} reweighted from {} to {}",
                o.weight, s.weight
            )),
            Some(_) => {}
        }
    }
    for o in &old.servers {
        let d = display(o);
        if !new.servers.iter().any(|s| display(s) == d) {
            out.push(format!("pool {name}: server {d} removed"));
        }
    }
    if old.listen != new.listen {
        out.push(format!(
            "pool {name}: listen changed from {} to {}",
            shown(&old.listen),
            shown(&new.listen)
        ));
    }
    let mut changed = Vec::new();
    macro_rules! compare {
        ($($field:ident),*) => {
            $(if old.$field != new.$field {
                changed.push(stringify!($field));
            })*
        };
    }
    compare!(
        hash,
        hash_tag,
        distribution,
        timeout,
        backlog,
        preconnect,
        auto_eject_hosts,
        server_connections,
        server_retry_timeout,
        server_failure_limit,
        client_connections,
        client_idle_timeout,
        replicas,
        sasl,
        tls,
        server_tls
    );
    if old.route != new.route {
        changed.push("route");
    }
    if !changed.is_empty() {
        out.push(format!("pool {name}: {} changed", changed.join(", ")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(text: &str) -> PoolConfig {
        let c = ProxyConfig::parse(text).expect("valid");
        c.pools.into_iter().next().expect("one pool")
    }

    #[test]
    fn describes_server_and_setting_changes() {
        let old = pool(
            "p:\n  listen: 127.0.0.1:1\n  servers:\n   - 10.0.0.1:11211:1\n   - 10.0.0.2:11211:1\n",
        );
        let new = pool(
            "p:\n  listen: 127.0.0.1:2\n  hash: md5\n  timeout: 100\n  servers:\n   \
             - 10.0.0.1:11211:3\n   - 10.0.0.3:11211:1\n",
        );
        let mut out = Vec::new();
        describe(&old, &new, &mut out);
        assert_eq!(
            out,
            [
                "pool p: server 10.0.0.1:11211 reweighted from 1 to 3",
                "pool p: server 10.0.0.3:11211 added",
                "pool p: server 10.0.0.2:11211 removed",
                "pool p: listen changed from 127.0.0.1:1 to 127.0.0.1:2",
                "pool p: hash, timeout changed",
            ]
        );
        let mut none = Vec::new();
        describe(&old, &old, &mut none);
        assert!(none.is_empty(), "{none:?}");
    }
}
