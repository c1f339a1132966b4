//! Key IDs: which key of a multi-key memory encryption engine protects each page.
//!
//! Intel MKTME puts a KeyID in the upper bits of the physical address, chosen per page by the
//! page tables the OS or hypervisor sets (Intel, "Memory Encryption Technologies
//! Specification", rev. 1.5, §6); AMD SEV picks the key by the guest's ASID and the C-bit. The
//! processor's request carries the KeyID, so the map lives on chip with the rest of the
//! trusted state: the adversary of untrusted memory cannot change it, but the software that
//! owns the page tables can (what a cross-domain read is). Addresses outside every range have
//! KeyID 0 (MKTME's KeyID 0 is the platform's TME key).

use crate::params::{parse_size, ConfigError};

/// The KeyID of every page: ranges set later override earlier ones.
#[derive(Clone, Debug, Default)]
pub struct KeyIds {
    /// Number of key IDs (a power of two): log2 of it is the address bits they take.
    count: u32,
    /// (first byte, end, key ID), latest last.
    ranges: Vec<(u64, u64, u32)>,
}

/// Granularity of the map: a KeyID is a page attribute.
pub const KEYID_PAGE: u64 = 4096;

impl KeyIds {
    /// One key for everything: what a machine without a multi-key engine has.
    pub fn single() -> KeyIds {
        KeyIds { count: 1, ranges: Vec::new() }
    }

    /// `count` key IDs (a power of two) taking log2(count) of `address_bits` physical address
    /// bits, which must leave room for `memory` bytes; `map` is `START+SIZE:ID,...` (sizes
    /// with units, START may be hex), as `xts.key_map` gives it.
    pub fn new(count: u64, address_bits: u64, memory: u64, map: &str, key: &str) -> Result<KeyIds, ConfigError> {
        if count == 0 || !count.is_power_of_two() || count > 1 << 15 {
            return Err(ConfigError(format!("{}.key_ids: {} is not a power of two from 1 to 32768 (MKTME's KeyID field)", key, count)));
        }
        let bits = count.trailing_zeros() as u64;
        if !(12..=64).contains(&address_bits) {
            return Err(ConfigError(format!("{}.address_bits: {} is not from 12 to 64", key, address_bits)));
        }
        let left = address_bits.saturating_sub(bits);
        if left < 64 && memory > 1u64 << left {
            return Err(ConfigError(format!(
                "{}.key_ids: {} key IDs take {} of the {} physical address bits, leaving {} B of addressable memory < memory.size = {} B",
                key, count, bits, address_bits, 1u64 << left, memory
            )));
        }
        let mut k = KeyIds { count: count as u32, ranges: Vec::new() };
        for item in map.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let bad = || ConfigError(format!("{}.key_map: '{}' is not START+SIZE:ID (e.g. 0x100000+1MiB:2)", key, item));
            let (range, id) = item.rsplit_once(':').ok_or_else(bad)?;
            let (start, size) = range.split_once('+').ok_or_else(bad)?;
            let start = parse_addr(start).ok_or_else(bad)?;
            let size = parse_size(size).ok_or_else(bad)?;
            let id: u32 = id.trim().parse().map_err(|_| bad())?;
            k.set(start, size, id).map_err(|e| ConfigError(format!("{}.key_map: {}", key, e)))?;
        }
        Ok(k)
    }

    /// Give the pages of [addr, addr + size) key ID `id`.
    pub fn set(&mut self, addr: u64, size: u64, id: u32) -> Result<(), String> {
        if id >= self.count {
            return Err(format!("key ID {} is not below the {} key IDs configured", id, self.count));
        }
        if addr % KEYID_PAGE != 0 || size % KEYID_PAGE != 0 || size == 0 {
            return Err(format!("0x{:x}+{}: key IDs are set per whole {}-B page", addr, size, KEYID_PAGE));
        }
        let end = addr.checked_add(size).ok_or_else(|| format!("0x{:x}+{} overflows", addr, size))?;
        self.ranges.push((addr, end, id));
        Ok(())
    }

    /// The key ID of the line at `addr`.
    #[inline]
    pub fn of(&self, addr: u64) -> u32 {
        self.ranges.iter().rev().find(|(lo, hi, _)| addr >= *lo && addr < *hi).map_or(0, |r| r.2)
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    /// Physical address bits the key IDs take (MKTME's KeyID width).
    pub fn bits(&self) -> u32 {
        self.count.trailing_zeros()
    }
}

fn parse_addr(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(&h.replace('_', ""), 16).ok(),
        None => parse_size(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_map_pages_to_key_ids_later_ones_win() {
        let mut k = KeyIds::new(8, 46, 1 << 30, "0x100000+1MiB:3, 2MiB+8KiB:5", "xts").unwrap();
        assert_eq!((k.of(0), k.of(0x100000), k.of(0x1fffff), k.of(0x200000), k.of(0x201fff), k.of(0x202000)), (0, 3, 3, 5, 5, 0));
        k.set(0x100000, 4096, 1).unwrap();
        assert_eq!((k.of(0x100fc0), k.of(0x101000)), (1, 3));
        assert_eq!(k.bits(), 3);
    }

    #[test]
    fn bad_maps_and_counts_are_named() {
        let e = |c, map: &str| KeyIds::new(c, 46, 1 << 30, map, "xts").unwrap_err().0;
        assert!(e(6, "").contains("not a power of two"), "{}", e(6, ""));
        assert!(e(4, "0x1000+4KiB:4").contains("not below the 4 key IDs"));
        assert!(e(4, "0x1000:1").contains("START+SIZE:ID"));
        assert!(e(4, "0x1001+4KiB:1").contains("whole 4096-B page"));
        // 2^10 key IDs of 40 address bits leave 1 GiB: 2 GiB of memory does not fit.
        let big = KeyIds::new(1024, 40, 2 << 30, "", "xts").unwrap_err().0;
        assert!(big.contains("take 10 of the 40 physical address bits"), "{}", big);
        assert!(KeyIds::new(1024, 40, 1 << 30, "", "xts").is_ok());
    }
}
