//! Binary requests decoded into typed commands: what the opcode asks for, with the
//! binary-only parts (quietness, opaque, CAS, whether a hit returns its key) kept aside as
//! [`Attrs`] so that a server executes the command the same way whichever protocol
//! carried it, and only the reply framing looks at the attributes.

use super::{opcode as op, BinaryRequest};
use crate::request::{StatsGroup, StoreKind};

/// The request attributes a binary reply is framed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attrs {
    /// The request's opcode, echoed in every reply packet.
    pub opcode: u8,
    /// The request's opaque, echoed in every reply packet.
    pub opaque: u32,
    /// The request's CAS field (0 = none). For storage, delete and arithmetic commands a
    /// non-zero value makes the command conditional on the item's CAS unique.
    pub cas: u64,
    /// A quiet opcode (`GETQ`, `SETQ`, ...): success (and, for gets, a miss) sends nothing.
    pub quiet: bool,
    /// A `GETK`/`GATK` family opcode: a hit, and a loud miss, carry the key.
    pub key_return: bool,
}

impl Attrs {
    /// The CAS unique the command must match, when the request names one.
    pub fn compare_cas(&self) -> Option<u64> {
        (self.cas != 0).then_some(self.cas)
    }
}

/// A binary request's command, borrowing its key and value from the read buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command<'a> {
    /// `GET`, `GETQ`, `GETK`, `GETKQ`.
    Get {
        /// The key.
        key: &'a [u8],
    },
    /// `GAT`, `GATQ`, `GATK`, `GATKQ`, and with `value: false` `TOUCH`: fetch and set a new
    /// expiration time.
    GetAndTouch {
        /// The key.
        key: &'a [u8],
        /// The expiration time as sent.
        exptime: i64,
        /// Whether a hit carries the value (`TOUCH` answers with the flags only).
        value: bool,
    },
    /// `SET`, `ADD`, `REPLACE`, `APPEND`, `PREPEND` and their quiet forms. Never
    /// [`StoreKind::Cas`]: a compare-and-swap is any of these with a CAS attribute.
    Store {
        /// Which storage command.
        kind: StoreKind,
        /// The key.
        key: &'a [u8],
        /// Client flags (0 for append/prepend, which carry no extras).
        flags: u32,
        /// The expiration time as sent (0 for append/prepend).
        exptime: i64,
        /// The value.
        data: &'a [u8],
    },
    /// `DELETE`, `DELETEQ`.
    Delete {
        /// The key.
        key: &'a [u8],
    },
    /// `INCREMENT`, `DECREMENT` and their quiet forms.
    Arithmetic {
        /// The key.
        key: &'a [u8],
        /// Increment (true) or decrement.
        incr: bool,
        /// The amount.
        delta: u64,
        /// The value a missing key is created with.
        initial: u64,
        /// The expiration time of a created key; `None` (expiration `0xffffffff`) means a
        /// missing key is not created.
        create_exptime: Option<i64>,
    },
    /// `QUIT`, `QUITQ`.
    Quit,
    /// `FLUSH`, `FLUSHQ`.
    Flush {
        /// Seconds until the flush takes effect (0 when the extras are absent).
        delay: i64,
    },
    /// `NOOP`.
    Noop,
    /// `VERSION`.
    Version,
    /// `STAT` with the group named by the key.
    Stat {
        /// The group, as the text protocol's `stats` would name it.
        group: StatsGroup<'a>,
        /// The key exactly as sent (`detail dump` is answered as a single packet).
        raw: &'a [u8],
    },
    /// `SASL_LIST_MECHS`.
    SaslListMechs,
    /// `SASL_AUTH` (`step: false`) or `SASL_STEP`.
    SaslAuth {
        /// The mechanism name (the key).
        mechanism: &'a [u8],
        /// The mechanism's data (the value).
        data: &'a [u8],
        /// A `SASL_STEP`.
        step: bool,
    },
    /// An opcode memcached does not serve (`VERBOSITY` among them: memcached 1.6.45
    /// answers it `Unknown command`).
    Unknown,
}

impl Command<'_> {
    /// Whether memcached serves this command to a connection that has not authenticated
    /// yet (the SASL exchange itself, `VERSION` and `QUIT`).
    pub fn allowed_unauthenticated(&self) -> bool {
        matches!(
            self,
            Command::SaslListMechs | Command::SaslAuth { .. } | Command::Version | Command::Quit
        )
    }
}

/// A request whose extras, key and value do not have the shape its opcode takes; memcached
/// answers `Invalid arguments` and closes the connection.
#[derive(thiserror::Error, Debug, Clone, Copy, PartialEq, Eq)]
#[error("binary opcode {:#04x} with a malformed body", .attrs.opcode)]
pub struct Malformed {
    /// The attributes to frame the error reply with.
    pub attrs: Attrs,
}

/// Expiration extra of an incr/decr meaning "do not create a missing key".
const NO_CREATE: u32 = 0xffff_ffff;

fn is_quiet(opcode: u8) -> bool {
    matches!(
        opcode,
        op::GETQ
            | op::GETKQ
            | op::SETQ
            | op::ADDQ
            | op::REPLACEQ
            | op::DELETEQ
            | op::INCREMENTQ
            | op::DECREMENTQ
            | op::QUITQ
            | op::FLUSHQ
            | op::APPENDQ
            | op::PREPENDQ
            | op::GATQ
            | op::GATKQ
    )
}

/// Whether the request's extras/key/value shapes are what the opcode takes.
fn well_formed(r: &BinaryRequest<'_>) -> bool {
    let (e, k, v) = (r.extras.len(), r.key.len(), r.value.len());
    match r.opcode {
        op::GET | op::GETQ | op::GETK | op::GETKQ | op::DELETE | op::DELETEQ => {
            e == 0 && k > 0 && v == 0
        }
        op::SET | op::SETQ | op::ADD | op::ADDQ | op::REPLACE | op::REPLACEQ => e == 8 && k > 0,
        op::APPEND | op::APPENDQ | op::PREPEND | op::PREPENDQ => e == 0 && k > 0,
        op::INCREMENT | op::INCREMENTQ | op::DECREMENT | op::DECREMENTQ => {
            e == 20 && k > 0 && v == 0
        }
        op::QUIT | op::QUITQ | op::NOOP | op::VERSION | op::SASL_LIST_MECHS => {
            e == 0 && k == 0 && v == 0
        }
        op::FLUSH | op::FLUSHQ => (e == 0 || e == 4) && k == 0 && v == 0,
        op::STAT => e == 0 && v == 0,
        op::TOUCH | op::GAT | op::GATQ | op::GATK | op::GATKQ => e == 4 && k > 0 && v == 0,
        op::SASL_AUTH | op::SASL_STEP => e == 0 && k > 0,
        _ => true,
    }
}

/// The `STAT` key as the text protocol's `stats` group.
fn stats_group(key: &[u8]) -> StatsGroup<'_> {
    match key {
        b"" => StatsGroup::General,
        b"settings" => StatsGroup::Settings,
        b"items" => StatsGroup::Items,
        b"slabs" => StatsGroup::Slabs,
        b"sizes" => StatsGroup::Sizes,
        b"conns" => StatsGroup::Conns,
        b"reset" => StatsGroup::Reset,
        other => StatsGroup::Other(other),
    }
}

/// Decodes a framed request (from [`super::parse_binary`]) into its command and reply
/// attributes.
///
/// Guarantees: never panics and never allocates; every slice borrows from `r`. An opcode
/// memcached does not know decodes to [`Command::Unknown`]; a known opcode whose body has
/// the wrong shape is [`Malformed`], exactly where memcached closes the connection.
pub fn decode(r: BinaryRequest<'_>) -> Result<(Attrs, Command<'_>), Malformed> {
    let attrs = Attrs {
        opcode: r.opcode,
        opaque: r.opaque,
        cas: r.cas,
        quiet: is_quiet(r.opcode),
        key_return: matches!(r.opcode, op::GETK | op::GETKQ | op::GATK | op::GATKQ),
    };
    if !well_formed(&r) {
        return Err(Malformed { attrs });
    }
    // `well_formed` has checked every extras length read below, so the defaults are never
    // used; they only keep this free of panics.
    let u32_at = |at| i64::from(r.extra_u32(at).unwrap_or(0));
    let key = r.key;
    let command = match r.opcode {
        op::GET | op::GETQ | op::GETK | op::GETKQ => Command::Get { key },
        op::TOUCH | op::GAT | op::GATQ | op::GATK | op::GATKQ => Command::GetAndTouch {
            key,
            exptime: u32_at(0),
            value: r.opcode != op::TOUCH,
        },
        op::SET | op::SETQ | op::ADD | op::ADDQ | op::REPLACE | op::REPLACEQ => Command::Store {
            kind: match r.opcode {
                op::SET | op::SETQ => StoreKind::Set,
                op::ADD | op::ADDQ => StoreKind::Add,
                _ => StoreKind::Replace,
            },
            key,
            flags: r.extra_u32(0).unwrap_or(0),
            exptime: u32_at(4),
            data: r.value,
        },
        op::APPEND | op::APPENDQ | op::PREPEND | op::PREPENDQ => Command::Store {
            kind: if matches!(r.opcode, op::APPEND | op::APPENDQ) {
                StoreKind::Append
            } else {
                StoreKind::Prepend
            },
            key,
            flags: 0,
            exptime: 0,
            data: r.value,
        },
        op::DELETE | op::DELETEQ => Command::Delete { key },
        op::INCREMENT | op::INCREMENTQ | op::DECREMENT | op::DECREMENTQ => {
            let expiration = r.extra_u32(16).unwrap_or(NO_CREATE);
            Command::Arithmetic {
                key,
                incr: matches!(r.opcode, op::INCREMENT | op::INCREMENTQ),
                delta: r.extra_u64(0).unwrap_or(0),
                initial: r.extra_u64(8).unwrap_or(0),
                create_exptime: (expiration != NO_CREATE).then_some(i64::from(expiration)),
            }
        }
        op::QUIT | op::QUITQ => Command::Quit,
        op::FLUSH | op::FLUSHQ => Command::Flush { delay: u32_at(0) },
        op::NOOP => Command::Noop,
        op::VERSION => Command::Version,
        op::STAT => Command::Stat {
            group: stats_group(key),
            raw: key,
        },
        op::SASL_LIST_MECHS => Command::SaslListMechs,
        op::SASL_AUTH | op::SASL_STEP => Command::SaslAuth {
            mechanism: key,
            data: r.value,
            step: r.opcode == op::SASL_STEP,
        },
        _ => Command::Unknown,
    };
    Ok((attrs, command))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(opcode: u8, extras: &'a [u8], key: &'a [u8], value: &'a [u8]) -> BinaryRequest<'a> {
        BinaryRequest {
            opcode,
            opaque: 7,
            cas: 0,
            extras,
            key,
            value,
        }
    }

    #[test]
    fn quietness_and_key_return_are_attributes() {
        let (a, c) = decode(req(op::GETKQ, &[], b"k", &[])).expect("getkq");
        assert!(a.quiet && a.key_return);
        assert_eq!(c, Command::Get { key: b"k" });
        let (a, _) = decode(req(op::GET, &[], b"k", &[])).expect("get");
        assert!(!a.quiet && !a.key_return);
        assert_eq!(a.compare_cas(), None);
    }

    #[test]
    fn storage_opcodes_carry_flags_and_exptime() {
        let extras = [0, 0, 0, 5, 0, 0, 0, 9];
        let (a, c) = decode(req(op::ADDQ, &extras, b"k", b"v")).expect("addq");
        assert!(a.quiet);
        assert_eq!(
            c,
            Command::Store {
                kind: StoreKind::Add,
                key: b"k",
                flags: 5,
                exptime: 9,
                data: b"v"
            }
        );
        let (_, c) = decode(req(op::PREPEND, &[], b"k", b"v")).expect("prepend");
        assert!(matches!(
            c,
            Command::Store {
                kind: StoreKind::Prepend,
                ..
            }
        ));
    }

    #[test]
    fn arithmetic_without_creation() {
        let mut extras = [0u8; 20];
        extras[7] = 3;
        extras[15] = 10;
        extras[16..].copy_from_slice(&[0xff; 4]);
        let (_, c) = decode(req(op::DECREMENT, &extras, b"k", &[])).expect("decr");
        assert_eq!(
            c,
            Command::Arithmetic {
                key: b"k",
                incr: false,
                delta: 3,
                initial: 10,
                create_exptime: None
            }
        );
    }

    #[test]
    fn wrong_shapes_are_malformed_and_unknown_opcodes_are_not() {
        assert!(decode(req(op::GET, &[1], b"k", &[])).is_err());
        assert!(decode(req(op::SET, &[], b"k", b"v")).is_err());
        assert!(decode(req(op::NOOP, &[], b"k", &[])).is_err());
        let (_, c) = decode(req(0x55, &[1], b"k", b"v")).expect("unknown");
        assert_eq!(c, Command::Unknown);
    }

    proptest::proptest! {
        #[test]
        fn decode_never_panics(
            opcode in proptest::prelude::any::<u8>(),
            extras in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..24),
            key in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..8),
            value in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..8),
        ) {
            let _ = decode(req(opcode, &extras, &key, &value));
        }
    }
}
