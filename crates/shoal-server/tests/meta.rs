//! The meta protocol (mg, ms, md, ma, mn, me) with memcached's exact replies. Expected
//! bytes were checked against memcached 1.6.45, the reference (quiet mode hides only the
//! nominal reply: `HD`, an `ma`'s value, an `mg` miss).

mod common;

use common::{Conn, Server};

/// The CAS unique `mg <key> c u` reports (u: without marking the item fetched).
fn cas_of(c: &mut Conn, key: &str) -> u64 {
    c.send(format!("mg {key} c u\r\n").as_bytes());
    let line = common::show(&c.read_line());
    line.trim_end()
        .strip_prefix("HD c")
        .unwrap_or_else(|| panic!("unexpected {line:?}"))
        .parse()
        .expect("cas")
}

#[test]
fn mg_return_flags() {
    let s = Server::start();
    let mut c = s.conn();
    c.rt(b"ms foo 2 F5 T100\r\nhi\r\n", b"HD\r\n");
    let cas = cas_of(&mut c, "foo");
    c.rt(
        b"mg foo v k c f s t h l O123\r\n",
        format!("VA 2 kfoo c{cas} f5 s2 t100 h0 l0 O123\r\nhi\r\n").as_bytes(),
    );
    // Flags come back in request order.
    c.rt(b"mg foo O9 s f\r\n", b"HD O9 s2 f5\r\n");
    c.rt(b"mg foo v\r\n", b"VA 2\r\nhi\r\n");
    // h: fetched before.
    c.rt(b"mg foo h l\r\n", b"HD h1 l0\r\n");
    c.rt(b"mg foo\r\n", b"HD\r\n");
    // Misses: EN, echoing only O and k.
    c.rt(b"mg miss v\r\n", b"EN\r\n");
    c.rt(b"mg miss v O9 k\r\n", b"EN O9 kmiss\r\n");
    // q hides EN but not hits.
    c.send(b"mg miss v q\r\n");
    c.rt(b"mg foo q k\r\n", b"HD kfoo\r\n");
    c.rt(b"mn\r\n", b"MN\r\n");
    // Errors.
    c.rt(b"mg foo v v\r\n", b"CLIENT_ERROR duplicate flag\r\n");
    c.rt(
        b"mg foo Tx\r\n",
        b"CLIENT_ERROR bad token in command line format\r\n",
    );
    c.rt(b"mg foo z\r\n", b"CLIENT_ERROR invalid flag\r\n");
    // A flag starting with neither a letter nor a digit fails memcached's tokenizer.
    c.rt(b"mg foo !\r\n", b"CLIENT_ERROR bad command line format\r\n");
    c.rt(b"mg\r\n", b"CLIENT_ERROR bad command line format\r\n");
    c.rt(
        format!("mg {} v\r\n", "k".repeat(251)).as_bytes(),
        b"CLIENT_ERROR bad command line format\r\n",
    );
    let st = c.stats("");
    assert_eq!(st["get_hits"], "7");
    assert_eq!(st["get_misses"], "3");
}

#[test]
fn mg_vivify_and_win_flags() {
    let s = Server::start();
    let mut c = s.conn();
    // N on a miss creates an empty placeholder and hands this client the win.
    c.send(b"mg viv N30 v c t\r\n");
    let first = common::show(&c.read_line());
    assert!(
        first.starts_with("VA 0 c") && first.ends_with(" t30 W\r\n"),
        "{first:?}"
    );
    c.expect(b"\r\n");
    // The next client sees Z (a win was already handed out), not W.
    let mut c2 = s.conn();
    c2.rt(b"mg viv N30 v\r\n", b"VA 0 Z\r\n\r\n");
    c2.rt(b"mg viv v\r\n", b"VA 0 Z\r\n\r\n");
    // The winner fills it in; then it is an ordinary hit.
    c.rt(b"ms viv 3 T60\r\nabc\r\n", b"HD\r\n");
    c2.rt(b"mg viv v\r\n", b"VA 3\r\nabc\r\n");
}

#[test]
fn mg_recache_and_touch() {
    let s = Server::start();
    let mut c = s.conn();
    c.rt(b"ms rc 1 T10\r\nx\r\n", b"HD\r\n");
    // TTL 10 < R30: the first fetch wins the recache, later ones see Z.
    c.rt(b"mg rc R30 v\r\n", b"VA 1 W\r\nx\r\n");
    c.rt(b"mg rc R30 v\r\n", b"VA 1 Z\r\nx\r\n");
    // T touches.
    c.rt(b"mg rc T100 t v\r\n", b"VA 1 t100 Z\r\nx\r\n");
    c.rt(b"mg rc t\r\n", b"HD t100 Z\r\n");
    // A long TTL is not in the recache window.
    c.rt(b"ms far 1 T1000\r\ny\r\n", b"HD\r\n");
    c.rt(b"mg far R30 v\r\n", b"VA 1\r\ny\r\n");
    // Touch on a miss: memcached never reaches the T, so it counts a get miss.
    c.rt(b"mg none T10\r\n", b"EN\r\n");
    let st = c.stats("");
    assert_eq!(st["touch_hits"], "1");
    assert_eq!(st["touch_misses"], "0");
    // Flags act in request order: t before T shows the TTL from before the touch.
    c.rt(b"mg rc t T500\r\n", b"HD t100 Z\r\n");
    c.rt(b"mg rc T600 t\r\n", b"HD t600 Z\r\n");
    // h shows the item as it was before this fetch, even with T.
    c.rt(b"ms fresh 1\r\nx\r\n", b"HD\r\n");
    c.rt(b"mg fresh h T60\r\n", b"HD h0\r\n");
    c.rt(b"mg fresh h\r\n", b"HD h1\r\n");
}

#[test]
fn ms_modes_and_flags() {
    let s = Server::start();
    let mut c = s.conn();
    // E mode = add, A append, P prepend, R replace, S set.
    c.rt(b"ms m 1 ME\r\na\r\n", b"HD\r\n");
    c.rt(b"ms m 1 ME\r\nb\r\n", b"NS\r\n");
    c.rt(b"ms m 1 MA\r\nc\r\n", b"HD\r\n");
    c.rt(b"ms m 1 MP\r\nd\r\n", b"HD\r\n");
    c.rt(b"mg m v\r\n", b"VA 3\r\ndac\r\n");
    c.rt(b"ms nope 1 MA\r\nx\r\n", b"NS\r\n");
    c.rt(b"ms nope 1 MP\r\nx\r\n", b"NS\r\n");
    c.rt(b"ms nope 1 MR\r\nx\r\n", b"NS\r\n");
    c.rt(b"mg nope\r\n", b"EN\r\n");
    c.rt(b"ms m 1 MR F3\r\nr\r\n", b"HD\r\n");
    c.rt(b"mg m v f\r\n", b"VA 1 f3\r\nr\r\n");
    // q suppresses HD.
    c.send(b"ms m 1 MS q\r\ns\r\n");
    c.rt(b"mn\r\n", b"MN\r\n");
    c.rt(b"mg m v\r\n", b"VA 1\r\ns\r\n");
    // NS is not suppressed by q.
    c.rt(b"ms m 1 ME q\r\nx\r\n", b"NS\r\n");
    // An invalid mode is an error and its data is swallowed.
    c.rt(
        b"ms m 1 MX\r\nx\r\n",
        b"CLIENT_ERROR invalid mode for ms M token\r\n",
    );
    c.rt(b"mg m v\r\n", b"VA 1\r\ns\r\n");
    // T sets the TTL; T-1 stores an already expired item.
    c.rt(b"ms t 1 T100\r\nx\r\n", b"HD\r\n");
    c.rt(b"mg t t\r\n", b"HD t100\r\n");
    c.rt(b"ms t 1 T-1\r\nx\r\n", b"HD\r\n");
    c.rt(b"mg t\r\n", b"EN\r\n");
    // Errors.
    c.rt(b"ms k\r\n", b"CLIENT_ERROR bad command line format\r\n");
    c.rt(b"ms k -1\r\n", b"CLIENT_ERROR bad command line format\r\n");
    // memcached reads exactly len + 2 bytes; the leftover \r\n is a line too short to
    // be a command.
    c.rt(
        b"ms k 2\r\nabcd\r\n",
        b"CLIENT_ERROR bad data chunk\r\nCLIENT_ERROR bad command line format\r\n",
    );
    c.rt(b"mg k\r\n", b"EN\r\n");
}

#[test]
fn ms_cas_compare_explicit_and_invalidate() {
    let s = Server::start();
    let mut c = s.conn();
    c.rt(b"ms e 1 C5\r\nx\r\n", b"NF\r\n");
    // E sets the new CAS explicitly.
    c.rt(b"ms e 1 E12345\r\nx\r\n", b"HD\r\n");
    assert_eq!(cas_of(&mut c, "e"), 12345);
    c.rt(b"ms e 1 C12345 E777 c\r\ny\r\n", b"HD c777\r\n");
    c.rt(b"mg e c v\r\n", b"VA 1 c777\r\ny\r\n");
    // Compare failure: EX, with O and k echoed and c0 (nothing stored).
    c.rt(b"ms e 1 C1 k O5 c\r\nz\r\n", b"EX ke O5 c0\r\n");
    c.rt(b"mg e v\r\n", b"VA 1\r\ny\r\n");
    // I with an older CAS stores the value, but stale: the next fetch sees X and wins.
    c.rt(b"ms e 1 C700 I\r\nw\r\n", b"HD\r\n");
    c.rt(b"mg e v\r\n", b"VA 1 X W\r\nw\r\n");
    c.rt(b"mg e v\r\n", b"VA 1 Z X\r\nw\r\n");
    // A fresh set clears the stale state.
    c.rt(b"ms e 1\r\nf\r\n", b"HD\r\n");
    c.rt(b"mg e v\r\n", b"VA 1\r\nf\r\n");
    c.rt(
        b"ms e 1 Cx\r\nf\r\n",
        b"CLIENT_ERROR bad token in command line format\r\n",
    );
    let st = c.stats("");
    assert_eq!(st["cas_misses"], "1");
    assert_eq!(st["cas_badval"], "1");
    assert_eq!(st["cas_hits"], "2");
}

#[test]
fn md_delete_compare_quiet_invalidate() {
    let s = Server::start();
    let mut c = s.conn();
    c.rt(b"md nope\r\n", b"NF\r\n");
    c.rt(b"md nope O1 k\r\n", b"NF O1 knope\r\n");
    c.rt(b"ms d 1\r\nx\r\n", b"HD\r\n");
    c.rt(b"md d\r\n", b"HD\r\n");
    c.rt(b"mg d v\r\n", b"EN\r\n");
    // q suppresses HD, not NF.
    c.rt(b"ms d 1\r\nx\r\n", b"HD\r\n");
    c.send(b"md d q\r\nmd d q\r\n");
    c.rt(b"mn\r\n", b"NF\r\nMN\r\n");
    c.rt(b"mg d\r\n", b"EN\r\n");
    // C compares; EX is never suppressed.
    c.rt(b"ms d 1\r\nx\r\n", b"HD\r\n");
    c.rt(b"md d C1\r\n", b"EX\r\n");
    c.rt(b"md d C1 q\r\n", b"EX\r\n");
    let cas = cas_of(&mut c, "d");
    c.rt(format!("md d C{cas}\r\n").as_bytes(), b"HD\r\n");
    c.rt(b"mg d\r\n", b"EN\r\n");
    // I marks stale (with a new TTL) instead of deleting.
    c.rt(b"ms s 2 T100\r\nhi\r\n", b"HD\r\n");
    c.rt(b"md s I T30\r\n", b"HD\r\n");
    c.rt(b"mg s v t\r\n", b"VA 2 t30 X W\r\nhi\r\n");
    c.rt(b"mg s v t\r\n", b"VA 2 t30 Z X\r\nhi\r\n");
    // A stale item's old CAS no longer matches.
    c.rt(b"ms s 3 C1\r\nnew\r\n", b"EX\r\n");
    // The winner recaches it.
    c.rt(b"ms s 3 T100\r\nnew\r\n", b"HD\r\n");
    c.rt(b"mg s v\r\n", b"VA 3\r\nnew\r\n");
    let st = c.stats("");
    // Only removals are hits (not the I mark); CAS mismatches count as misses.
    assert_eq!(st["delete_hits"], "3");
    assert_eq!(st["delete_misses"], "5");
    // x replaces the item with an empty one (flags from F, expiry from T, else none).
    c.rt(b"ms x 2 F5 T100\r\nhi\r\n", b"HD\r\n");
    c.rt(b"md x x F7\r\n", b"HD\r\n");
    c.rt(b"mg x v f t\r\n", b"VA 0 f7 t-1\r\n\r\n");
}

#[test]
fn ma_arithmetic() {
    let s = Server::start();
    let mut c = s.conn();
    c.rt(b"ma n\r\n", b"NF\r\n");
    c.rt(b"ma n O7 k\r\n", b"NF O7 kn\r\n");
    // q hides HD (and a value), never NF.
    c.send(b"ma n q\r\n");
    c.rt(b"mn\r\n", b"NF\r\nMN\r\n");
    // N vivifies with J as the initial value.
    c.rt(b"ma n N0 J10\r\n", b"HD\r\n");
    c.rt(b"ma n v\r\n", b"VA 2\r\n11\r\n");
    c.rt(b"ma n MD D3 v\r\n", b"VA 1\r\n8\r\n");
    c.rt(b"ma n M- v\r\n", b"VA 1\r\n7\r\n");
    c.rt(b"ma n M+ D100 v t\r\n", b"VA 3 t-1\r\n107\r\n");
    c.rt(b"ma n MI v\r\n", b"VA 3\r\n108\r\n");
    c.rt(
        b"ma n MX\r\n",
        b"CLIENT_ERROR invalid mode for ma M token\r\n",
    );
    c.send(b"ma n MI D5 q v\r\n");
    c.rt(b"mg n v\r\n", b"VA 3\r\n113\r\n");
    // decr floors at 0, incr wraps.
    c.rt(b"ma n MD D1000 v\r\n", b"VA 1\r\n0\r\n");
    c.rt(
        b"ma n D18446744073709551615 v\r\n",
        b"VA 20\r\n18446744073709551615\r\n",
    );
    c.rt(b"ma n D2 v\r\n", b"VA 1\r\n1\r\n");
    // Non-numeric.
    c.rt(b"set s 0 0 1\r\nx\r\n", b"STORED\r\n");
    c.rt(
        b"ma s\r\n",
        b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
    );
    // C compare: EX on mismatch, applied on match; c returns the new CAS.
    c.rt(b"ma n C1 v\r\n", b"EX\r\n");
    let cas = cas_of(&mut c, "n");
    c.send(format!("ma n C{cas} c\r\n").as_bytes());
    let line = common::show(&c.read_line());
    let new: u64 = line
        .trim_end()
        .strip_prefix("HD c")
        .unwrap_or_else(|| panic!("{line:?}"))
        .parse()
        .unwrap();
    assert_ne!(new, cas);
    assert_eq!(cas_of(&mut c, "n"), new);
    // T sets the TTL.
    c.rt(b"ma n T50 t v\r\n", b"VA 1 t50\r\n3\r\n");
    c.rt(b"ma fresh N0 J5 v t\r\n", b"VA 1 t-1\r\n5\r\n");
    // E sets the CAS.
    c.rt(b"ma fresh E999 c\r\n", b"HD c999\r\n");
    c.rt(
        b"ma n Dabc\r\n",
        b"CLIENT_ERROR invalid or duplicate flag\r\n",
    );
    c.rt(
        b"ma n Jx\r\n",
        b"CLIENT_ERROR invalid or duplicate flag\r\n",
    );
    // n shrank from 20 digits in place, so it is space-padded as in memcached.
    c.rt(
        b"get n fresh\r\n",
        b"VALUE n 0 20\r\n3                   \r\nVALUE fresh 0 1\r\n6\r\nEND\r\n",
    );
}

#[test]
fn mn_me_and_base64_keys() {
    let s = Server::start();
    let mut c = s.conn();
    c.rt(b"mn\r\n", b"MN\r\n");
    c.rt(b"set foo 0 0 2\r\nhi\r\n", b"STORED\r\n");
    let cas = cas_of(&mut c, "foo");
    c.send(b"me foo\r\n");
    let line = common::show(&c.read_line());
    let prefix = format!("ME foo exp=-1 la=0 cas={cas} fetch=no cls=1 size=");
    assert!(line.starts_with(&prefix), "{line:?}");
    c.rt(b"me nope\r\n", b"EN\r\n");
    // b: keys are base64 ("Zm9v" is "foo") and echoed encoded.
    c.rt(b"ms Zm9v 2 b\r\nyo\r\n", b"HD\r\n");
    c.rt(b"get foo\r\n", b"VALUE foo 0 2\r\nyo\r\nEND\r\n");
    c.rt(b"mg Zm9v b k v\r\n", b"VA 2 kZm9v b\r\nyo\r\n");
    c.rt(b"mg Zm9vYmFy b k v\r\n", b"EN kZm9vYmFy b\r\n");
    c.rt(b"mg !!!! b v\r\n", b"CLIENT_ERROR error decoding key\r\n");
    // Binary keys are possible with b.
    // The length comes before the flags; a bad one leaves the data line to be a command.
    c.rt(
        b"ms AAEC/w== b 1\r\nz\r\n",
        b"CLIENT_ERROR bad command line format\r\nCLIENT_ERROR bad command line format\r\n",
    );
    c.rt(b"ms AAEC/w== 1 b\r\nz\r\n", b"HD\r\n");
    c.rt(b"mg AAEC/w== b v k\r\n", b"VA 1 kAAEC/w== b\r\nz\r\n");
    c.rt(b"md Zm9v b\r\n", b"HD\r\n");
    c.rt(b"get foo\r\n", b"END\r\n");
    c.rt(b"ma Y250 b N0 J3 v k\r\n", b"VA 1 kY250 b\r\n3\r\n");
    c.rt(b"get cnt\r\n", b"VALUE cnt 0 1\r\n3\r\nEND\r\n");
}

#[test]
fn meta_pipeline_with_quiet_mode() {
    // The classic quiet multi-get: many mg q, then mn marks the end.
    let s = Server::start();
    let mut c = s.conn();
    c.rt(b"ms a 1\r\n1\r\nms c 1\r\n3\r\n", b"HD\r\nHD\r\n");
    c.rt(
        b"mg a v k q\r\nmg b v k q\r\nmg c v k q\r\nmn\r\n",
        b"VA 1 ka\r\n1\r\nVA 1 kc\r\n3\r\nMN\r\n",
    );
}

#[test]
fn quiet_batch_longer_than_a_turn_is_answered_whole_and_in_order() {
    // `-R 5`: the 300-command batch spans 60 turns; replies held across turns must come
    // out complete, in order, and a second connection is served meanwhile.
    let s = Server::with_args(&["-R", "5"]);
    let mut c = s.conn();
    let mut other = s.conn();
    let mut batch = Vec::new();
    let mut want = Vec::new();
    for i in 0..300 {
        if i % 3 != 0 {
            c.rt(
                format!("ms k{i} 2 q\r\nv{}\r\nmn\r\n", i % 10).as_bytes(),
                b"MN\r\n",
            );
            want.extend_from_slice(format!("VA 2 kk{i}\r\nv{}\r\n", i % 10).as_bytes());
        }
        batch.extend_from_slice(format!("mg k{i} v k q\r\n").as_bytes());
    }
    batch.extend_from_slice(b"mn\r\n");
    want.extend_from_slice(b"MN\r\n");
    c.send(&batch);
    other.rt(b"mn\r\n", b"MN\r\n");
    c.expect(&want);
    c.rt(b"mn\r\n", b"MN\r\n");
    // Each turn given up with input waiting counts in conn_yields, as in memcached.
    let yields = other.stat("conn_yields");
    assert!((10..=70).contains(&yields), "conn_yields {yields}");
}

/// Every `ms` mode goes through the shared storage path with meta's accounting: a
/// compare-and-swap (a set or replace with `C`) counts in `cas_hits`/`cas_badval`/
/// `cas_misses`, an add with `C` is a plain add (`NS` on a present key, counted in no CAS
/// counter), and every store that was tried counts in `cmd_set`.
#[test]
fn ms_modes_count_cas_and_sets() {
    let s = Server::start();
    let mut c = s.conn();
    c.rt(b"ms k 1\r\na\r\n", b"HD\r\n");
    let cas = cas_of(&mut c, "k");
    c.rt(
        format!("ms k 1 C{}\r\nb\r\n", cas + 1).as_bytes(),
        b"EX\r\n",
    );
    c.rt(format!("ms k 1 C{cas}\r\nb\r\n").as_bytes(), b"HD\r\n");
    c.rt(b"ms none 1 C5\r\nb\r\n", b"NF\r\n");
    let cas = cas_of(&mut c, "k");
    c.rt(format!("ms k 1 ME C{cas}\r\nc\r\n").as_bytes(), b"NS\r\n");
    c.rt(b"ms k 1 MA\r\nd\r\n", b"HD\r\n");
    c.rt(b"ms new 1 MA\r\ne\r\n", b"NS\r\n");
    c.rt(b"ms new 1 MA N100\r\ne\r\n", b"HD\r\n");
    c.rt(b"mg k v\r\n", b"VA 2\r\nbd\r\n");
    c.rt(b"mg new v\r\n", b"VA 1\r\ne\r\n");
    let st = c.stats("");
    assert_eq!(st["cas_hits"], "1");
    assert_eq!(st["cas_badval"], "1");
    assert_eq!(st["cas_misses"], "1");
    assert_eq!(st["cmd_set"], "8");
    // An add with a CAS stores a missing key.
    c.rt(b"ms added 1 ME C5\r\nf\r\n", b"HD\r\n");
}
