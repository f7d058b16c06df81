//! memcached's text and meta protocols: parsing requests in place from a read buffer and
//! encoding replies, with no I/O.
//!
//! The parser never allocates and never copies: every [`Request`] borrows keys and data
//! from the caller's buffer. The caller (the server's connection loop) feeds whatever bytes
//! it has; [`parse()`] either returns one complete request and how many bytes it used, asks
//! for more bytes, or reports the exact error reply memcached would send and what to do
//! with the connection.

pub mod binary;
pub mod binary_client;
mod error;
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
