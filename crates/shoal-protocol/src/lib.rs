//! memcached's text, meta and binary protocols: parsing requests in place from a read
//! buffer and encoding replies, with no I/O.
//!
//! The parsers never allocate and never copy: every [`Request`] (text and meta) and every
//! [`binary::Command`] borrows keys and data from the caller's buffer. A binary request
//! decodes into the same vocabulary as text ([`StoreKind`], [`StatsGroup`]) with its
//! quietness, opaque and CAS kept as [`binary::Attrs`], which [`binary::reply`] frames
//! replies from. The caller (the server's connection loop) feeds whatever bytes
//! it has; [`parse()`] either returns one complete request and how many bytes it used, asks
//! for more bytes, or reports the exact error reply memcached would send and what to do
//! with the connection.

pub mod binary;
pub mod binary_client;
mod error;
pub mod kestrel;
pub mod limits;
pub mod meta;
mod num;
pub mod parse;
pub mod reply;
pub mod request;

pub use binary::{parse_binary, BinaryParsed, BinaryRequest};
pub use binary_client::{encode_request, parse_response, BinaryResponse, ResponseParsed};
pub use error::ProtocolError;
pub use limits::Limits;
pub use meta::{decode_key, encode_key_base64, MetaFlags, MetaMode, MetaNumber};
pub use parse::{parse, Parsed};
pub use request::{Keys, Request, StatsGroup, StoreKind};
