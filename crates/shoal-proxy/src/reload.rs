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
//!   still has when its `timeout`, `server_connections` and `preconnect` are unchanged,
//!   and new ones otherwise (old ones close once their last request is answered); it
//!   keeps its counters and those of the servers it still has;
//! - a new pool starts listening; a removed pool stops listening (its open connections
//!   are served until they close); a pool whose `listen` changed binds the new address
//!   first and then closes the old one, without touching the other pools.
//!
//! Pools are matched by name, so a renamed pool is a removed one plus a new one (and its
//! new listener cannot take over the address the old one still holds during the reload).

use std::fmt;
use std::sync::Arc;

use crate::config::{Listen, PoolConfig, ProxyConfig};
use crate::error::ConfigError;
use crate::pool::{Pool, PoolSlot};
use crate::server::{Bound, Live, Shared, StartError};

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

/// One pool's part of a reload, prepared before anything is switched.
enum Step {
    Keep(usize),
    Swap(usize, Arc<Pool>),
    Rebind(usize, Arc<Pool>, Bound),
    Add(Arc<Pool>, Bound),
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
        let mut live = self.live();
        let current: Vec<Arc<Pool>> = live.iter().map(|l| l.slot.load()).collect();
        let mut claimed = vec![false; current.len()];
        let mut report = ReloadReport::default();
        let mut steps = Vec::new();
        for pc in config.pools {
            let old = current.iter().enumerate().position(|(i, p)| {
                !claimed.get(i).copied().unwrap_or(true) && p.config.name == pc.name
            });
            let Some(i) = old else {
                let bound = self.bind(&pc)?;
                report.changes.push(format!("pool {} added", pc.name));
                steps.push(Step::Add(self.start_pool(pc, None)?, bound));
                continue;
            };
            if let Some(c) = claimed.get_mut(i) {
                *c = true;
            }
            let Some(cur) = current.get(i) else { continue };
            if cur.config == pc {
                steps.push(Step::Keep(i));
                continue;
            }
            describe(&cur.config, &pc, &mut report.changes);
            if cur.config.listen != pc.listen {
                let bound = self.bind(&pc)?;
                steps.push(Step::Rebind(i, self.start_pool(pc, Some(cur))?, bound));
            } else {
                steps.push(Step::Swap(i, self.start_pool(pc, Some(cur))?));
            }
        }
        for (p, _) in current.iter().zip(&claimed).filter(|(_, c)| !**c) {
            report
                .changes
                .push(format!("pool {} removed", p.config.name));
        }
        // Nothing below can fail: the switch is all or nothing.
        let mut old: Vec<Option<Live>> = live.drain(..).map(Some).collect();
        let mut take = |i: usize| old.get_mut(i).and_then(Option::take);
        let mut next = Vec::new();
        for step in steps {
            match step {
                Step::Keep(i) => next.extend(take(i)),
                Step::Swap(i, pool) => {
                    if let Some(l) = take(i) {
                        pool.adopt_backends();
                        l.slot.store(pool);
                        next.push(l);
                    }
                }
                Step::Rebind(i, pool, bound) => {
                    if let Some(l) = take(i) {
                        pool.adopt_backends();
                        l.slot.store(pool);
                        next.push(self.listen(bound, l.slot.clone()));
                        // Dropping `l` closes the old listener; its clients carry on.
                    }
                }
                Step::Add(pool, bound) => {
                    next.push(self.listen(bound, Arc::new(PoolSlot::new(pool))));
                }
            }
        }
        // Whatever is left in `old` was removed: dropping it closes those listeners.
        drop(old);
        *live = next;
        Ok(report)
    }
}

/// A listen address as the configuration file spells it.
fn shown(listen: &Listen) -> String {
    match listen {
        Listen::Tcp(addr) => addr.clone(),
        Listen::Unix { path, .. } => path.display().to_string(),
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
        replicas,
        sasl,
        tls,
        server_tls
    );
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
