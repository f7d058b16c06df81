//! `shoal`: operator commands. `shoal ring` answers where keys go under a given client
//! library's hash and distribution, and how many keys move when the server list changes.

use std::io::{self, Write};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use shoal_ring::{
    parse_server_list, Distribution, HashAlgorithm, Ring, RingConfig, RingError, Server,
};

#[derive(Parser, Debug)]
#[command(name = "shoal", version, about = "Shoal operator tools")]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Show which server each key goes to, or how many keys move between two server lists.
    Ring(RingArgs),
}

const DIST_HELP: &str = "Distribution: ketama (libmemcached; weighted when any weight > 1, \
as libmemcached decides), ketama-weighted, ketama-unweighted, ketama-spy, twemproxy-ketama, \
xmemcached-ketama, xmemcached-libmemcached, spymemcached-ketama, election (XMemcached, as a \
real TCP client), election-unweighted, rendezvous (pymemcache), modula, weighted-modula \
(twemproxy, python-memcached, XMemcached array), jump, maglev";

const HASH_HELP: &str = "Key hash (default: the distribution's usual one): one_at_a_time, md5, \
crc, fnv1_32, fnv1a_32, fnv1_64, fnv1a_64, hsieh, murmur, murmur3, jenkins, crc16, crc32a, \
native, java_crc32, java_fnv1_64, java_fnv1a_64, java_fnv1_32, java_fnv1a_32, ketama_hash, \
mysql, elf, rs, lua, election_hash, java_one_at_a_time, murmur3_32, cmemcache_hash";

#[derive(Args, Debug)]
struct RingArgs {
    #[arg(long, short = 'd', default_value = "ketama", help = DIST_HELP)]
    distribution: String,

    #[arg(long = "hash", short = 'H', help = HASH_HELP)]
    hash: Option<String>,

    /// Servers as `host:port[:weight][@java_address]`, comma separated.
    #[arg(long, short = 's', required = true)]
    servers: String,

    /// twemproxy hash tag, two characters such as "{}".
    #[arg(long)]
    hash_tag: Option<String>,

    /// A second server list: report how many keys move from --servers to this list.
    #[arg(long)]
    compare: Option<String>,

    /// How many generated keys ("key:0", "key:1", ...) --compare measures.
    #[arg(long, default_value_t = 100_000)]
    keys: u64,

    /// Keys to locate.
    #[arg(value_name = "KEY")]
    key_list: Vec<String>,
}

fn build(args: &RingArgs, servers: Vec<Server>) -> Result<Ring, RingError> {
    let name = args
        .distribution
        .trim()
        .to_ascii_lowercase()
        .replace('-', "_");
    // Bare "ketama" means what libmemcached does, which depends on the weights.
    let distribution = match name.as_str() {
        "ketama" | "libmemcached_ketama" => Distribution::libmemcached_ketama(&servers, false),
        "ketama_spy" => Distribution::libmemcached_ketama(&servers, true),
        _ => args.distribution.parse()?,
    };
    let mut config = RingConfig::new(distribution);
    if let Some(h) = &args.hash {
        config = config.with_hash(h.parse::<HashAlgorithm>()?);
    }
    if let Some(tag) = &args.hash_tag {
        config = config.with_hash_tag(tag)?;
    }
    Ring::new(config, servers)
}

fn describe(ring: &Ring, index: usize) -> String {
    ring.server(index)
        .map_or_else(|| format!("#{index}"), Server::host_port)
}

fn run_ring(args: &RingArgs, out: &mut impl Write) -> Result<(), String> {
    let servers = parse_server_list(&args.servers).map_err(|e| e.to_string())?;
    let ring = build(args, servers).map_err(|e| e.to_string())?;
    let other = match &args.compare {
        Some(list) => {
            let servers = parse_server_list(list).map_err(|e| e.to_string())?;
            Some(build(args, servers).map_err(|e| format!("--compare: {e}"))?)
        }
        None => None,
    };
    if args.key_list.is_empty() && other.is_none() {
        return Err("give one or more KEYs, or --compare LIST".to_string());
    }
    let io = |e: io::Error| e.to_string();
    let c = ring.config();
    writeln!(out, "# distribution={} hash={}", c.distribution, c.hash).map_err(io)?;
    for key in &args.key_list {
        let here = ring
            .locate(key.as_bytes())
            .map(|i| describe(&ring, i))
            .map_err(|e| format!("key {key:?}: {e}"))?;
        match &other {
            Some(o) => {
                let there = o
                    .locate(key.as_bytes())
                    .map(|i| describe(o, i))
                    .map_err(|e| format!("key {key:?}: {e}"))?;
                let mark = if here == there { "" } else { "\tMOVED" };
                writeln!(out, "{key}\t{here}\t{there}{mark}").map_err(io)?;
            }
            None => writeln!(out, "{key}\t{here}").map_err(io)?,
        }
    }
    if let Some(o) = &other {
        if args.keys == 0 {
            return Err("--keys must be at least 1".to_string());
        }
        let mut moved = 0u64;
        for i in 0..args.keys {
            let key = format!("key:{i}");
            let a = ring.locate(key.as_bytes()).map(|i| describe(&ring, i));
            let b = o.locate(key.as_bytes()).map(|i| describe(o, i));
            if a.map_err(|e| e.to_string())? != b.map_err(|e| e.to_string())? {
                moved += 1;
            }
        }
        let pct = 100.0 * moved as f64 / args.keys as f64;
        writeln!(
            out,
            "moved {moved} of {} keys ({pct:.2}%) from {} to {} live servers",
            args.keys,
            ring.live_count(),
            o.live_count()
        )
        .map_err(io)?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let result = match &cli.command {
        Command::Ring(args) => run_ring(args, &mut out),
    };
    let flushed = out.flush();
    match (result, flushed) {
        (Ok(()), Ok(())) => ExitCode::SUCCESS,
        (Err(e), _) => {
            eprintln!("shoal ring: {e}");
            ExitCode::FAILURE
        }
        (Ok(()), Err(e)) => {
            eprintln!("shoal: writing output: {e}");
            ExitCode::FAILURE
        }
    }
}
