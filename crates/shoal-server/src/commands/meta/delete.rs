//! `md <key> <flags>*`: delete, compare-and-delete, invalidate (mark stale).

use super::{number, status};
use crate::commands::delete::{self, DeleteSpec, Deleted, Mark};
use crate::commands::storage::Accounting;
use crate::worker::Worker;
use shoal_protocol::reply::{self, code as meta};
use shoal_protocol::MetaFlags;

/// `md`: the shared [`delete::delete`] with meta's accounting; only the reply is meta's.
pub fn meta_delete(w: &Worker, raw_key: &[u8], flags: MetaFlags<'_>, out: &mut Vec<u8>) {
    let mut buf = [0u8; 256];
    let Some(key) = super::key(raw_key, &flags, &mut buf, out) else {
        return;
    };
    let invalidate = flags.has(b'I');
    let clear_value = flags.has(b'x');
    let mark = (invalidate || clear_value).then(|| Mark {
        stale: invalidate,
        clear_value,
        expiry: number::<i64>(&flags, b'T').map(|t| w.shared.store.clock().expiry(t)),
        new_cas: number(&flags, b'E'),
        flags: number(&flags, b'F'),
    });
    let spec = DeleteSpec {
        key,
        compare_cas: number(&flags, b'C'),
        mark,
        accounting: Accounting::Meta,
    };
    let code = match delete::delete(w, &spec) {
        Deleted::Deleted | Deleted::Marked => meta::HD,
        Deleted::NotFound => meta::NF,
        Deleted::Exists => meta::EX,
        Deleted::Failed => {
            out.extend_from_slice(reply::OUT_OF_MEMORY_STORING);
            return;
        }
    };
    // Quiet mode hides only the nominal reply; a miss or a CAS mismatch still answers.
    if flags.quiet() && code == meta::HD {
        return;
    }
    status(out, code, &flags, key);
}
