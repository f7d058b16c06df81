//! Shared driver for the fuzz targets: runs the parser over a whole input the way a
//! connection would, checking the invariants the server relies on.

use shoal_protocol::{meta::decode_key, parse, Limits, MetaFlags, Parsed, Request};

/// Small enough that fuzzed lengths hit the "too large" path often.
const LIMITS: Limits = Limits { max_value_len: 512 };

/// Parses `data` as a stream of requests until the parser needs more bytes or closes the
/// connection, asserting that every step stays in bounds and makes progress, and that
/// feeding the same bytes in two pieces yields the same requests.
pub fn drive(data: &[u8]) {
    let whole = run(data, data.len());
    // Split point chosen from the input itself so the fuzzer can steer it.
    let split = data
        .first()
        .map_or(0, |&b| usize::from(b) * data.len() / 256);
    let pieces = run(data, split);
    assert_eq!(whole, pieces, "split at {split} changed the parse");
}

/// Parses `data`, at first seeing only `data[..visible]` and then everything once the
/// parser asks for more. Returns a rendering of each result.
fn run(data: &[u8], visible: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut off = 0;
    let mut visible = visible.min(data.len());
    loop {
        let buf = &data[off..visible];
        let result = parse(buf, &LIMITS);
        let (consumed, swallow, stop) = match &result {
            Parsed::Request { request, consumed } => {
                assert!(*consumed > 0, "request consumed nothing");
                exercise(request);
                (*consumed, 0, false)
            }
            Parsed::Incomplete { needed } => {
                assert!(
                    *needed == 0 || *needed > buf.len(),
                    "needed {needed} but had {}",
                    buf.len()
                );
                if visible < data.len() {
                    visible = data.len();
                    continue;
                }
                break;
            }
            Parsed::Error {
                consumed,
                swallow,
                close,
                ..
            } => {
                assert!(*close || *consumed > 0, "error consumed nothing");
                (*consumed, *swallow, *close)
            }
            Parsed::TooLarge {
                consumed, swallow, ..
            } => {
                assert!(*consumed > 0 && *swallow >= 2);
                (*consumed, *swallow, false)
            }
        };
        assert!(
            consumed <= buf.len(),
            "consumed {consumed} of {}",
            buf.len()
        );
        // A close decided on a partial view may differ from the whole view only for the
        // over-long-line rule, which depends on how much has arrived; skip comparing it.
        if stop && visible < data.len() {
            visible = data.len();
            continue;
        }
        out.push(format!("{result:?}"));
        if stop {
            break;
        }
        off += consumed;
        off += swallow.min(data.len() - off);
        visible = visible.max(off);
    }
    out
}

/// Calls every accessor the server may use, so their edge cases get fuzzed too.
fn exercise(request: &Request<'_>) {
    let (key, flags): (&[u8], MetaFlags<'_>) = match request {
        Request::MetaGet { key, flags }
        | Request::MetaSet { key, flags, .. }
        | Request::MetaDelete { key, flags }
        | Request::MetaArithmetic { key, flags }
        | Request::MetaDebug { key, flags } => (key, *flags),
        Request::Get { keys, .. } | Request::GetAndTouch { keys, .. } => {
            for k in keys.iter() {
                assert!(!k.is_empty() && k.len() <= 250 && !k.contains(&b' '));
            }
            return;
        }
        _ => return,
    };
    let mut scratch = [0u8; 256];
    let decoded = decode_key(key, flags.base64(), &mut scratch);
    assert!(decoded.is_ok(), "parser accepted a key decode_key rejects");
    let _ = flags.mode();
    for (flag, token) in flags.iter() {
        assert!(flags.has(flag));
        assert!(flags.token(flag).is_some());
        let _ = flags.number::<u64>(flag);
        let _ = flags.number::<i64>(flag);
        let _ = token.len();
    }
}

/// The `main` of a target built without cargo-fuzz: replays the files named on the command
/// line (e.g. a crash artifact) through `run`, so every target compiles and runs on stable.
pub fn replay(run: impl Fn(&[u8])) {
    for path in std::env::args().skip(1) {
        let data = std::fs::read(&path).expect("readable input file");
        run(&data);
        println!("{path}: ok");
    }
}

/// Parses `data` as the key of a queue `get` (Kestrel's `name/t=500/close/open`),
/// checking what shoal-queued and shoal-proxy's queue pools rely on: the queue name is
/// the key's first part, a wait is capped, and no accepted combination conflicts.
pub fn drive_kestrel_key(data: &[u8]) {
    use shoal_protocol::kestrel::{parse_key, MAX_WAIT};
    let Ok(o) = parse_key(data) else { return };
    assert!(data.starts_with(o.queue), "the queue is the key's first part");
    assert!(!o.queue.contains(&b'/'));
    assert!(o.timeout.is_none_or(|t| t <= MAX_WAIT), "wait not capped");
    assert!(!(o.peek && (o.open || o.close)), "peek with open/close accepted");
    assert!(!(o.abort && (o.open || o.close || o.peek)), "abort with more accepted");
    assert_eq!(
        shoal_protocol::kestrel::carries_options(data),
        data.contains(&b'/')
    );
}

/// The flash tier's on-disk formats: a record read back from a page must either check
/// (and then decode to exactly what it says) or be refused, never panic; and a saved page
/// table is used or refused with a reason.
pub fn drive_flash_files(data: &[u8]) {
    use shoal_store::flash::record::{decode, encode, parse, record_len};
    if let Some((key, value)) = parse(data) {
        assert!(!key.is_empty() && key.len() <= 255);
        assert_eq!(decode(data, key, value.len()), Ok(value));
        let mut again = Vec::new();
        encode(&mut again, key, value);
        assert_eq!(again.len(), record_len(key.len(), value.len()));
        assert_eq!(&again[..12 + key.len() + value.len()], &data[..12 + key.len() + value.len()]);
    }
    if let Some((&n, rest)) = data.split_first() {
        let key = rest.get(..usize::from(n).min(rest.len())).unwrap_or_default();
        let _ = decode(rest, key, usize::from(n) * 7);
    }
    for (page_size, pages) in [(1u64 << 20, 2u64), (64 << 20, 16)] {
        let _ = shoal_store::flash::check_meta(data, page_size, pages, "/x:2\n");
    }
}
