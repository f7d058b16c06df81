//! `me <key>`: memcached's one-line item dump.

use crate::worker::Worker;
use shoal_protocol::reply::{self, code as meta};
use shoal_protocol::MetaFlags;

/// `me`: `ME <key> exp=<ttl|-1> la=<idle> cas=<cas> fetch=<yes|no> cls=1 size=<bytes>`, or
/// `EN` if absent.
pub fn meta_debug(w: &Worker, raw_key: &[u8], flags: MetaFlags<'_>, out: &mut Vec<u8>) {
    let mut buf = [0u8; 256];
    let Some(key) = super::key(raw_key, &flags, &mut buf, out) else {
        return;
    };
    // Read under the key's lock without fetching it: `me` leaves the item as it was.
    let mut writer = w.writer.borrow_mut();
    let found = w.shared.store.update(&mut writer, key, |e| {
        let e_now = e.now();
        let Some(item) = e.item() else {
            return Ok(None);
        };
        reply::meta_header(out, meta::ME);
        out.push(b' ');
        if flags.base64() {
            shoal_protocol::encode_key_base64(key, out);
        } else {
            out.extend_from_slice(key);
        }
        out.extend_from_slice(b" exp=");
        match item.exptime() {
            0 => out.extend_from_slice(b"-1"),
            // memcached prints the difference as a signed int.
            e => reply::push_i64(out, i64::from(e.wrapping_sub(e_now) as i32)),
        }
        out.extend_from_slice(b" la=");
        reply::push_u32(out, item.idle_seconds());
        out.extend_from_slice(b" cas=");
        reply::push_u64(out, super::cas(w, item.cas()));
        out.extend_from_slice(if item.fetched() {
            b" fetch=yes"
        } else {
            b" fetch=no"
        });
        out.extend_from_slice(b" cls=1 size=");
        reply::push_u64(out, item.size() as u64);
        reply::crlf(out);
        Ok(Some(()))
    });
    if !matches!(found, Ok(Some(()))) {
        out.extend_from_slice(reply::EN);
    }
}
