//! The hash functions twemproxy (nutcracker) adds to the libhashkit set.
//!
//! twemproxy's `one_at_a_time`, `md5`, `fnv1*`, `hsieh`, `murmur` and `jenkins` are
//! copies of libhashkit's and are served by [`super::libhashkit`]; its `crc32` is
//! libhashkit's 15-bit `crc`.

/// The CRC-16/XMODEM table (polynomial 0x1021, MSB first) of twemproxy 0.5's
/// `nc_crc16.c` (the Redis Cluster CRC; twemproxy 0.4 shipped the reflected ARC table).
const CRC16_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// twemproxy `hash_crc16`: the CRC-16/XMODEM table step, but accumulated in a `uint32_t`
/// that is never masked, so the bits shifted past 16 stay in the result. The low 16 bits
/// are the standard CRC-16/XMODEM; the full value is what twemproxy's ketama compares.
pub fn crc16(key: &[u8]) -> u32 {
    key.iter().fold(0u32, |crc, &b| {
        let idx = ((crc >> 8) ^ u32::from(b)) & 0xff;
        (crc << 8) ^ u32::from(CRC16_TABLE[idx as usize])
    })
}

/// twemproxy `hash_crc32`: identical to libhashkit's 15-bit `crc` (twemproxy keeps it
/// for libmemcached compatibility, not the real CRC-32).
pub fn crc32(key: &[u8]) -> u32 {
    super::libhashkit::crc(key)
}

/// twemproxy `hash_crc32a`: the full, standard CRC-32 (IEEE) of the bytes.
pub fn crc32a(key: &[u8]) -> u32 {
    super::libhashkit::crc32_ieee(key)
}

#[cfg(test)]
mod tests {
    #[test]
    fn crc_check_values() {
        assert_eq!(super::crc16(b"123456789") & 0xffff, 0x31c3);
        assert_eq!(super::crc32a(b"123456789"), 0xcbf4_3926);
    }
}
