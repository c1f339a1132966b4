//! Property tests where a coverage-guided fuzzer is overkill: value parsing and the
//! untrusted memory's bookkeeping against plain models.

use std::collections::HashMap;

use proptest::prelude::*;
use secmem_core::mem::PAGE;
use secmem_core::params::{parse_count, parse_size, MAX_SIZE};
use secmem_core::{Params, UntrustedMemory};

const UNITS: [(&str, u64); 8] =
    [("B", 1), ("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("TiB", 1 << 40), ("kB", 1000), ("MB", 1_000_000), ("GB", 1_000_000_000)];

proptest! {
    #[test]
    fn a_size_with_a_unit_is_exactly_its_value_or_refused(v in any::<u64>(), u in 0..UNITS.len()) {
        let (unit, mult) = UNITS[u];
        prop_assert_eq!(parse_size(&format!("{v}{unit}")), v.checked_mul(mult));
    }

    #[test]
    fn a_fractional_count_is_whole_or_refused(int in 0u64..1_000_000, frac in 1u64..1000, k in 0usize..4) {
        let (suffix, mult) = [("", 1u64), ("k", 1_000), ("M", 1_000_000), ("G", 1_000_000_000)][k];
        let text = format!("{int}.{frac:03}{suffix}");
        let exact = (int * 1000 + frac) as u128 * mult as u128;
        let want = (exact % 1000 == 0).then(|| (exact / 1000) as u64);
        prop_assert_eq!(parse_count(&text), want, "{}", text);
    }

    #[test]
    fn no_accepted_size_exceeds_the_ceiling(text in "[0-9]{1,16}(\\.[0-9]{1,3})?(B|KiB|MiB|GiB|TiB|kB|MB|GB)?") {
        let mut p = Params::from_toml("[memory]\nsize = 1\n", "t").unwrap();
        p.set("memory.size", &text).unwrap();
        if let Ok(b) = p.size("memory.size") {
            prop_assert!(b > 0 && b <= MAX_SIZE);
        }
    }

    /// Writes, snapshots and restores against a byte map: contents, touched pages and
    /// resident bytes always agree with the model.
    #[test]
    fn untrusted_memory_matches_a_byte_map(ops in prop::collection::vec((0u8..4, 0u64..(1 << 22), prop::collection::vec(any::<u8>(), 1..300)), 1..40)) {
        let size = 1u64 << 22;
        let mut m = UntrustedMemory::new(size);
        let mut model: HashMap<u64, u8> = HashMap::new();
        let mut saved: Option<(secmem_core::Snapshot, HashMap<u64, u8>)> = None;
        for (op, addr, bytes) in ops {
            match op {
                0 | 1 => {
                    let n = (bytes.len() as u64).min(size - addr) as usize;
                    m.write(addr, &bytes[..n]);
                    for (i, b) in bytes[..n].iter().enumerate() {
                        model.insert(addr + i as u64, *b);
                    }
                }
                2 => saved = Some((m.snapshot(), model.clone())),
                _ => {
                    if let Some((s, old)) = &saved {
                        m.restore(s).unwrap();
                        model = old.clone();
                    }
                }
            }
        }
        let mut pages: Vec<u64> = model.keys().map(|a| a / PAGE * PAGE).collect();
        pages.sort();
        pages.dedup();
        prop_assert_eq!(m.touched_pages(0, size), pages.clone());
        prop_assert_eq!(m.resident_bytes(), pages.len() as u64 * PAGE);
        for p in pages {
            let mut b = vec![0u8; PAGE as usize];
            m.read(p, &mut b);
            for (i, v) in b.iter().enumerate() {
                prop_assert_eq!(*v, model.get(&(p + i as u64)).copied().unwrap_or(0));
            }
        }
    }

}

proptest! {
    // Random operations and adversary pokes on every registered scheme pair (the selector
    // byte picks it), beyond the committed corpus: a scheme registered since the corpus was
    // made is exercised here at once. The oracle is the engine target's (its declarations).
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]
    #[test]
    fn random_operations_on_every_scheme_pair_keep_what_the_pair_declares(data in prop::collection::vec(any::<u8>(), 1..600)) {
        secmem_fuzz::engine::engine(&data);
    }
}
