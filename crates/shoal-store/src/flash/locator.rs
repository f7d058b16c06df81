//! Where a flash-resident value is: the 16 bytes a stub item carries in place of its value.

/// Bytes a [`Locator`] takes in a stub item.
pub const LOCATOR_LEN: usize = 16;

/// The place of one value on flash: page, the page's version when the value was written
/// (a page reused since has another, and the value reads as a miss), the record's offset
/// in the page, and the value's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Locator {
    /// Page number in the file.
    pub page: u32,
    /// The page's version at the write.
    pub version: u32,
    /// Offset of the record in the page.
    pub offset: u32,
    /// Length of the value (the record adds its header and the key).
    pub len: u32,
}

impl Locator {
    /// The little-endian bytes a stub stores.
    pub fn to_bytes(self) -> [u8; LOCATOR_LEN] {
        let mut b = [0u8; LOCATOR_LEN];
        b[0..4].copy_from_slice(&self.page.to_le_bytes());
        b[4..8].copy_from_slice(&self.version.to_le_bytes());
        b[8..12].copy_from_slice(&self.offset.to_le_bytes());
        b[12..16].copy_from_slice(&self.len.to_le_bytes());
        b
    }

    /// Reads a locator back from a stub's bytes; `None` if there are not
    /// [`LOCATOR_LEN`] of them.
    pub fn from_bytes(b: &[u8]) -> Option<Locator> {
        let word = |i: usize| super::record::le_u32(b, i);
        if b.len() != LOCATOR_LEN {
            return None;
        }
        Some(Locator {
            page: word(0)?,
            version: word(4)?,
            offset: word(8)?,
            len: word(12)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrips_and_refuses_short_input() {
        let l = Locator {
            page: 7,
            version: u32::MAX,
            offset: 1 << 30,
            len: 20_000,
        };
        assert_eq!(Locator::from_bytes(&l.to_bytes()), Some(l));
        assert_eq!(Locator::from_bytes(&[0u8; 15]), None);
    }
}
