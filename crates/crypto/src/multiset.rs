//! Incremental multiset hash functions of Clarke, Devadas, van Dijk, Gassend and Suh,
//! "Incremental Multiset Hash Functions and Their Application to Memory Integrity Checking"
//! (ASIACRYPT 2003), used by the log-hash (LHash) checker of seed 000 §3.2 to keep its
//! READHASH and WRITEHASH in a fixed amount of on-chip storage.
//!
//! A multiset hash maps a multiset to a short value that is updated one element at a time
//! (`add`) and whose equivalence (`same`, the paper's ≡_H) does not depend on the order of
//! the additions. Three of the paper's constructions are provided:
//!
//! | name    | type        | value                                           | security          |
//! |---------|-------------|-------------------------------------------------|-------------------|
//! | `"add"` | [`AddHash`] | H_K(0,r) + Σ_{b∈M} H_K(1,b) mod 2^128            | multiset-collision resistant (keyed) |
//! | `"xor"` | [`XorHash`] | (H_K(0,r) ⊕ ⊕_{b∈M} H_K(1,b), \|M\| mod 2^64, r) | only *set*-collision resistant |
//! | `"mu"`  | [`MuHash`]  | Π_{b∈M} H(b) in GF(2^127 − 1)*                   | unkeyed; toy group size, see [`MuHash`] |
//!
//! `AddHash` is the one seed 000 uses ("one MD5 operation using a secret key in the
//! processor, and one addition") and the LHash default. The keyed function is
//!
//! ```text
//! H_K(tag, x) = MD5(K ‖ tag ‖ x)         (RFC 1321 MD5, with its standard padding)
//!   K   = the 16-byte secret key
//!   tag = one byte, 0x00 for the nonce term, 0x01 for an element
//!   x   = the 8-byte little-endian nonce r (tag 0), or the element's parts concatenated (tag 1)
//! ```
//!
//! and the 16-byte digest is read as a little-endian `u128`. Secret-prefix MD5 is the
//! "one MD5 operation with a secret key" of the seed, not an HMAC: it is open to length
//! extension (from H_K(1, b) anyone can compute H_K(1, b ‖ pad ‖ e)), which is harmless for
//! LHash only because all its elements (address ‖ chunk ‖ time stamp) have one fixed length.
//! These functions compute values for a simulator; the configured hash-engine latency, not
//! this code, decides what an update costs in simulated time.

use md5::Digest;

/// An incremental multiset hash: the hash of a multiset, updated one element at a time, equal
/// for equal multisets whatever the order of additions.
pub trait MultisetHash: Clone + std::fmt::Debug {
    /// Add one occurrence of `element` (given as parts that are concatenated, to avoid copies:
    /// the log-hash checker hashes address ‖ chunk ‖ time stamp).
    fn add(&mut self, parts: &[&[u8]]);
    /// Whether two hashes (made with the same key/nonce) are of the same multiset (≡_H).
    fn same(&self, other: &Self) -> bool;
    /// A hash of the empty multiset with the same key and nonce.
    fn empty_like(&self) -> Self;
}

/// Names accepted by [`Multiset::by_name`].
pub const MULTISET_HASHES: &[&str] = &["add", "xor", "mu"];

const TAG_NONCE: u8 = 0;
const TAG_ELEMENT: u8 = 1;

/// H_K(tag, parts) = MD5(K ‖ tag ‖ parts…) as a little-endian u128.
fn keyed_md5(key: &[u8; 16], tag: u8, parts: &[&[u8]]) -> u128 {
    let mut h = md5::Md5::new();
    h.update(key);
    h.update([tag]);
    for p in parts {
        h.update(p);
    }
    let d = h.finalize();
    let mut b = [0u8; 16];
    b.copy_from_slice(&d);
    u128::from_le_bytes(b)
}

fn nonce_term(key: &[u8; 16], nonce: u64) -> u128 {
    keyed_md5(key, TAG_NONCE, &[&nonce.to_le_bytes()])
}

/// Debug output never shows the key.
struct Redacted;

impl std::fmt::Debug for Redacted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<secret>")
    }
}

// ---------------------------------------------------------------------------------------------
// MSet-Add-Hash
// ---------------------------------------------------------------------------------------------

/// MSet-Add-Hash (Clarke et al. §3.3): h = H_K(0, r) + Σ_{b∈M} H_K(1, b) mod 2^128, with
/// H_K(tag, x) = MD5(K ‖ tag ‖ x) read little-endian (module docs). Multiset-collision
/// resistant when H_K is a PRF; the nonce r makes hashes of different runs unrelated.
///
/// `same` is the paper's equivalence: h − H_K(0, r) = h' − H_K(0, r') (and equal keys), so
/// hashes with different nonces compare correctly too.
#[derive(Clone)]
pub struct AddHash {
    key: [u8; 16],
    nonce: u64,
    /// H_K(0, r), cached.
    base: u128,
    /// The current value h.
    sum: u128,
}

impl AddHash {
    /// The hash of the empty multiset under `key` with nonce `nonce`.
    pub fn new(key: [u8; 16], nonce: u64) -> AddHash {
        let base = nonce_term(&key, nonce);
        AddHash { key, nonce, base, sum: base }
    }

    /// The value h (including the nonce term), as the hardware would store it.
    pub fn digest(&self) -> u128 {
        self.sum
    }

    pub fn nonce(&self) -> u64 {
        self.nonce
    }
}

impl std::fmt::Debug for AddHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AddHash")
            .field("key", &Redacted)
            .field("nonce", &self.nonce)
            .field("sum", &format_args!("{:#034x}", self.sum))
            .finish()
    }
}

impl MultisetHash for AddHash {
    #[inline]
    fn add(&mut self, parts: &[&[u8]]) {
        self.sum = self.sum.wrapping_add(keyed_md5(&self.key, TAG_ELEMENT, parts));
    }

    fn same(&self, other: &Self) -> bool {
        self.key == other.key
            && self.sum.wrapping_sub(self.base) == other.sum.wrapping_sub(other.base)
    }

    fn empty_like(&self) -> Self {
        AddHash { sum: self.base, ..self.clone() }
    }
}

// ---------------------------------------------------------------------------------------------
// MSet-XOR-Hash
// ---------------------------------------------------------------------------------------------

/// MSet-XOR-Hash (Clarke et al. §3.2): (H_K(0, r) ⊕ ⊕_{b∈M} H_K(1, b), |M| mod 2^64, r),
/// same H_K as [`AddHash`].
///
/// **Only set-collision resistant**, as the paper proves and states: an element added twice
/// cancels out of the XOR, so two multisets with the same size whose elements of odd
/// multiplicity form the same set hash equal; e.g. {a, a, b, b} ≡_H {c, c, d, d} (test
/// `xor_is_only_set_collision_resistant`). It is unfit for LHash, whose logs are multisets,
/// unless every element is known to be distinct; it is here for comparison.
///
/// `same`: H_K(0, r) ⊕ h = H_K(0, r') ⊕ h', equal counts and equal keys.
#[derive(Clone)]
pub struct XorHash {
    key: [u8; 16],
    nonce: u64,
    base: u128,
    xor: u128,
    count: u64,
}

impl XorHash {
    pub fn new(key: [u8; 16], nonce: u64) -> XorHash {
        let base = nonce_term(&key, nonce);
        XorHash { key, nonce, base, xor: base, count: 0 }
    }

    /// The XOR component (including the nonce term).
    pub fn digest(&self) -> u128 {
        self.xor
    }

    /// |M| mod 2^64.
    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn nonce(&self) -> u64 {
        self.nonce
    }
}

impl std::fmt::Debug for XorHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XorHash")
            .field("key", &Redacted)
            .field("nonce", &self.nonce)
            .field("xor", &format_args!("{:#034x}", self.xor))
            .field("count", &self.count)
            .finish()
    }
}

impl MultisetHash for XorHash {
    #[inline]
    fn add(&mut self, parts: &[&[u8]]) {
        self.xor ^= keyed_md5(&self.key, TAG_ELEMENT, parts);
        self.count = self.count.wrapping_add(1);
    }

    fn same(&self, other: &Self) -> bool {
        self.key == other.key
            && self.count == other.count
            && self.xor ^ self.base == other.xor ^ other.base
    }

    fn empty_like(&self) -> Self {
        XorHash { xor: self.base, count: 0, ..self.clone() }
    }
}

// ---------------------------------------------------------------------------------------------
// MSet-Mu-Hash
// ---------------------------------------------------------------------------------------------

/// The Mersenne prime 2^127 − 1.
pub const MU_PRIME: u128 = (1u128 << 127) - 1;

/// Multiplication modulo p = 2^127 − 1 for a, b < p.
///
/// The 254-bit product hi·2^128 + lo is folded with 2^127 ≡ 1 (so 2^128 ≡ 2):
/// x ≡ (lo mod 2^127) + ⌊lo / 2^127⌋ + 2·hi, which fits a u128 since hi < 2^126.
#[inline]
fn mulmod_p127(a: u128, b: u128) -> u128 {
    debug_assert!(a < MU_PRIME && b < MU_PRIME);
    let (a0, a1) = (a as u64 as u128, a >> 64);
    let (b0, b1) = (b as u64 as u128, b >> 64);
    // a·b = a1b1·2^128 + (a1b0 + a0b1)·2^64 + a0b0; a1, b1 < 2^63 so the middle sum fits.
    let lo0 = a0 * b0;
    let mid = a1 * b0 + a0 * b1;
    let hi0 = a1 * b1;
    let (lo, carry) = lo0.overflowing_add(mid << 64);
    let hi = hi0 + (mid >> 64) + carry as u128;
    let x = (lo & MU_PRIME) + (lo >> 127) + (hi << 1);
    let x = (x & MU_PRIME) + (x >> 127);
    if x >= MU_PRIME {
        x - MU_PRIME
    } else {
        x
    }
}

/// H(b) ∈ GF(p)* = {1, …, p − 1}: the first 16 bytes of SHA-256(b) as a little-endian u128
/// u, mapped to (u mod (p − 1)) + 1 (never 0, bias ≤ 2^-126).
fn mu_element(parts: &[&[u8]]) -> u128 {
    let mut h = sha2::Sha256::new();
    for p in parts {
        h.update(p);
    }
    let d = h.finalize();
    let mut b = [0u8; 16];
    b.copy_from_slice(&d[..16]);
    u128::from_le_bytes(b) % (MU_PRIME - 1) + 1
}

/// MSet-Mu-Hash (Clarke et al. §3.1): h = Π_{b∈M} H(b) in the multiplicative group of
/// GF(p), p = 2^127 − 1, with H(b) = (first 16 bytes of SHA-256(b) as a little-endian u128
/// mod (p − 1)) + 1. Unkeyed, no nonce. The empty multiset hashes to 1.
///
/// **Simulation-sized group.** Its multiset-collision resistance rests on discrete logs in
/// GF(p)* being hard; a 127-bit prime field is far below that (real deployments need
/// ≥ 2048-bit groups, or an elliptic-curve group). The prime is chosen so that an update is
/// one SHA-256 and one cheap u128 multiplication; the configured hash-engine latency, not
/// this code, times it in the simulator.
#[derive(Clone, PartialEq, Eq)]
pub struct MuHash {
    product: u128,
}

impl MuHash {
    pub fn new() -> MuHash {
        MuHash { product: 1 }
    }

    /// The product, in 1..p.
    pub fn digest(&self) -> u128 {
        self.product
    }
}

impl Default for MuHash {
    fn default() -> Self {
        MuHash::new()
    }
}

impl std::fmt::Debug for MuHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MuHash").field("product", &format_args!("{:#034x}", self.product)).finish()
    }
}

impl MultisetHash for MuHash {
    #[inline]
    fn add(&mut self, parts: &[&[u8]]) {
        self.product = mulmod_p127(self.product, mu_element(parts));
    }

    fn same(&self, other: &Self) -> bool {
        self.product == other.product
    }

    fn empty_like(&self) -> Self {
        MuHash::new()
    }
}

// ---------------------------------------------------------------------------------------------
// Selection by name
// ---------------------------------------------------------------------------------------------

/// One of the multiset hashes, chosen at run time (`--lhash.multiset add|xor|mu` style).
#[derive(Clone, Debug)]
pub enum Multiset {
    Add(AddHash),
    Xor(XorHash),
    Mu(MuHash),
}

impl Multiset {
    /// The empty-multiset hash of the named function (one of [`MULTISET_HASHES`]). `key`
    /// and `nonce` are ignored by `mu`, which is unkeyed.
    pub fn by_name(name: &str, key: [u8; 16], nonce: u64) -> Result<Multiset, String> {
        match name {
            "add" => Ok(Multiset::Add(AddHash::new(key, nonce))),
            "xor" => Ok(Multiset::Xor(XorHash::new(key, nonce))),
            "mu" => Ok(Multiset::Mu(MuHash::new())),
            _ => Err(format!(
                "unknown multiset hash '{}' (choose from {})",
                name,
                MULTISET_HASHES.join(", ")
            )),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Multiset::Add(_) => "add",
            Multiset::Xor(_) => "xor",
            Multiset::Mu(_) => "mu",
        }
    }
}

impl MultisetHash for Multiset {
    #[inline]
    fn add(&mut self, parts: &[&[u8]]) {
        match self {
            Multiset::Add(h) => h.add(parts),
            Multiset::Xor(h) => h.add(parts),
            Multiset::Mu(h) => h.add(parts),
        }
    }

    /// False for hashes of different functions.
    fn same(&self, other: &Self) -> bool {
        match (self, other) {
            (Multiset::Add(a), Multiset::Add(b)) => a.same(b),
            (Multiset::Xor(a), Multiset::Xor(b)) => a.same(b),
            (Multiset::Mu(a), Multiset::Mu(b)) => a.same(b),
            _ => false,
        }
    }

    fn empty_like(&self) -> Self {
        match self {
            Multiset::Add(h) => Multiset::Add(h.empty_like()),
            Multiset::Xor(h) => Multiset::Xor(h.empty_like()),
            Multiset::Mu(h) => Multiset::Mu(h.empty_like()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: [u8; 16] = *b"0123456789abcdef";
    const KEY2: [u8; 16] = *b"0123456789abcdeg";
    const NONCE: u64 = 0x1234_5678_9abc_def0;

    fn all() -> Vec<Multiset> {
        MULTISET_HASHES.iter().map(|n| Multiset::by_name(n, KEY, NONCE).unwrap()).collect()
    }

    /// An LHash-shaped element: 8-byte address ‖ 64-byte chunk ‖ 4-byte time stamp.
    fn elem(i: u64) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        let addr = (i * 64).to_le_bytes().to_vec();
        let chunk: Vec<u8> = (0..64).map(|j| (i as u8).wrapping_mul(31).wrapping_add(j)).collect();
        let ts = ((i % 7) as u32).to_le_bytes().to_vec();
        (addr, chunk, ts)
    }

    fn add_elem<H: MultisetHash>(h: &mut H, i: u64) {
        let (a, c, t) = elem(i);
        h.add(&[&a, &c, &t]);
    }

    fn hash_of<H: MultisetHash>(empty: &H, items: &[u64]) -> H {
        let mut h = empty.empty_like();
        for &i in items {
            add_elem(&mut h, i);
        }
        h
    }

    struct XorShift(u64);
    impl XorShift {
        fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.0 = x;
            x
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        fn shuffle<T>(&mut self, v: &mut [T]) {
            for i in (1..v.len()).rev() {
                let j = self.below(i as u64 + 1) as usize;
                v.swap(i, j);
            }
        }
    }

    #[test]
    fn order_independence_for_all_three() {
        let items: Vec<u64> = (0..200).map(|i| i % 150).collect(); // with repeats
        let mut perm = items.clone();
        XorShift(99).shuffle(&mut perm);
        assert_ne!(items, perm);
        for e in all() {
            let a = hash_of(&e, &items);
            let b = hash_of(&e, &perm);
            assert!(a.same(&b), "{}", e.name());
            assert!(!a.same(&e), "{}: 200 elements vs empty", e.name());
        }
    }

    #[test]
    fn incrementality_and_empty_like() {
        let m: Vec<u64> = (0..50).collect();
        let n: Vec<u64> = (25..90).collect();
        let both: Vec<u64> = m.iter().chain(n.iter()).copied().collect();
        for e in all() {
            let mut cont = hash_of(&e, &m);
            for &i in &n {
                add_elem(&mut cont, i);
            }
            assert!(cont.same(&hash_of(&e, &both)), "{}", e.name());
            let fresh = Multiset::by_name(e.name(), KEY, NONCE).unwrap();
            assert!(cont.empty_like().same(&fresh), "{}", e.name());
            assert!(!cont.same(&fresh), "{}", e.name());
        }
        // empty_like keeps the nonce term, so the raw value equals a fresh one's.
        let a = hash_of(&AddHash::new(KEY, NONCE), &m);
        assert_eq!(a.empty_like().digest(), AddHash::new(KEY, NONCE).digest());
        let x = hash_of(&XorHash::new(KEY, NONCE), &m);
        assert_eq!(x.empty_like().digest(), XorHash::new(KEY, NONCE).digest());
        assert_eq!(x.empty_like().count(), 0);
        assert_eq!(hash_of(&MuHash::new(), &m).empty_like(), MuHash::new());
    }

    #[test]
    fn add_and_mu_are_multiset_sensitive() {
        let big: Vec<u64> = (0..1000).map(|i| i % 400).collect();
        for e in [Multiset::by_name("add", KEY, NONCE).unwrap(), Multiset::Mu(MuHash::new())] {
            let one = hash_of(&e, &[7]);
            let two = hash_of(&e, &[7, 7]);
            assert!(!one.same(&two), "{}: {{a}} vs {{a, a}}", e.name());
            let h = hash_of(&e, &big);
            assert!(!h.same(&hash_of(&e, &big[1..])), "{}: one removed", e.name());
            let mut changed = big.clone();
            changed[500] = 5000;
            assert!(!h.same(&hash_of(&e, &changed)), "{}: one changed", e.name());
            let mut dup = big.clone();
            dup[500] = dup[501]; // multiplicities change, the set of elements barely
            assert!(!h.same(&hash_of(&e, &dup)), "{}: multiplicity changed", e.name());
        }
        // A changed byte inside one part matters too.
        let mut a = AddHash::new(KEY, NONCE);
        let mut b = a.clone();
        a.add(&[b"addr", b"chunk-0", b"ts"]);
        b.add(&[b"addr", b"chunk-1", b"ts"]);
        assert!(!a.same(&b));
    }

    #[test]
    fn keyed_hashes_depend_on_the_key() {
        let items: Vec<u64> = (0..20).collect();
        let a1 = hash_of(&AddHash::new(KEY, NONCE), &items);
        let a2 = hash_of(&AddHash::new(KEY2, NONCE), &items);
        assert_ne!(a1.digest(), a2.digest());
        assert_ne!(
            a1.digest().wrapping_sub(AddHash::new(KEY, NONCE).digest()),
            a2.digest().wrapping_sub(AddHash::new(KEY2, NONCE).digest()),
            "the element sums differ, not only the nonce terms"
        );
        assert!(!a1.same(&a2));
        let x1 = hash_of(&XorHash::new(KEY, NONCE), &items);
        let x2 = hash_of(&XorHash::new(KEY2, NONCE), &items);
        assert_ne!(
            x1.digest() ^ XorHash::new(KEY, NONCE).digest(),
            x2.digest() ^ XorHash::new(KEY2, NONCE).digest()
        );
        assert!(!x1.same(&x2));
    }

    #[test]
    fn different_nonces_compare_by_multiset() {
        let items: Vec<u64> = (0..30).collect();
        let a = hash_of(&AddHash::new(KEY, 1), &items);
        let b = hash_of(&AddHash::new(KEY, 2), &items);
        assert_ne!(a.digest(), b.digest(), "the nonce hides the value");
        assert!(a.same(&b));
        assert!(!a.same(&hash_of(&AddHash::new(KEY, 2), &items[1..])));
        let x = hash_of(&XorHash::new(KEY, 1), &items);
        let y = hash_of(&XorHash::new(KEY, 2), &items);
        assert_ne!(x.digest(), y.digest());
        assert!(x.same(&y));
    }

    /// MD5(K ‖ tag ‖ x) straight from the md5 crate.
    fn md5_le(parts: &[&[u8]]) -> u128 {
        let mut h = md5::Md5::new();
        for p in parts {
            h.update(p);
        }
        u128::from_le_bytes(h.finalize().as_slice().try_into().unwrap())
    }

    #[test]
    fn add_hash_matches_independent_computation() {
        let elems: [&[u8]; 4] = [
            b"alpha",
            b"beta",
            b"alpha",
            b"a considerably longer element, two md5 blocks with the key and tag!",
        ];
        let mut expect = md5_le(&[&KEY, &[0], &NONCE.to_le_bytes()]);
        for e in elems {
            expect = expect.wrapping_add(md5_le(&[&KEY, &[1], e]));
        }
        let mut h = AddHash::new(KEY, NONCE);
        for e in elems {
            // Split each element into two parts: the concatenation is what is hashed.
            let (p, q) = e.split_at(e.len() / 2);
            h.add(&[p, q]);
        }
        assert_eq!(h.digest(), expect);
        // RFC 1321 sanity: the md5 crate is the standard MD5.
        assert_eq!(md5_le(&[b"abc"]).to_le_bytes()[..4], [0x90, 0x01, 0x50, 0x98]);
    }

    #[test]
    fn xor_hash_matches_independent_computation() {
        let elems: [&[u8]; 3] = [b"one", b"two", b"three"];
        let mut expect = md5_le(&[&KEY, &[0], &NONCE.to_le_bytes()]);
        for e in elems {
            expect ^= md5_le(&[&KEY, &[1], e]);
        }
        let mut h = XorHash::new(KEY, NONCE);
        for e in elems {
            h.add(&[e]);
        }
        assert_eq!(h.digest(), expect);
        assert_eq!(h.count(), 3);
    }

    /// Double-and-add modular multiplication: 2·(p − 1) < 2^128, so no overflow.
    fn slow_mulmod(a: u128, b: u128, p: u128) -> u128 {
        let (mut acc, mut a, mut b) = (0u128, a % p, b);
        while b > 0 {
            if b & 1 == 1 {
                acc = (acc + a) % p;
            }
            a = (a + a) % p;
            b >>= 1;
        }
        acc
    }

    #[test]
    fn mu_hash_matches_independent_computation() {
        let p: u128 = 170141183460469231731687303715884105727; // 2^127 − 1, decimal
        assert_eq!(p, MU_PRIME);
        let elems: [&[u8]; 4] = [b"x", b"y", b"x", &[0xff; 76]];
        let mut expect = 1u128;
        for e in elems {
            let d = sha2::Sha256::digest(e);
            let u = u128::from_le_bytes(d[..16].try_into().unwrap());
            expect = slow_mulmod(expect, u % (p - 1) + 1, p);
        }
        let mut h = MuHash::new();
        for e in elems {
            h.add(&[e]);
        }
        assert_eq!(h.digest(), expect);
    }

    #[test]
    fn mulmod_agrees_with_double_and_add_on_edge_and_random_values() {
        let p = MU_PRIME;
        let mut edge =
            vec![0, 1, 2, 3, p - 1, p - 2, p >> 1, (p >> 1) + 1, 1 << 64, (1 << 64) - 1, 1 << 126];
        let mut r = XorShift(0x9e37_79b9_7f4a_7c15);
        for _ in 0..200 {
            edge.push(((r.next() as u128) << 64 | r.next() as u128) % p);
        }
        for &a in &edge {
            for &b in edge.iter().take(40) {
                assert_eq!(mulmod_p127(a, b), slow_mulmod(a, b, p), "{a} * {b}");
            }
        }
        // (p − 1)^2 = 1 and Fermat: a^(p−1) = 1.
        assert_eq!(mulmod_p127(p - 1, p - 1), 1);
        let (mut x, mut base, mut e) = (1u128, 0x1234_5678_9abc_def0_1122_3344u128, p - 1);
        while e > 0 {
            if e & 1 == 1 {
                x = mulmod_p127(x, base);
            }
            base = mulmod_p127(base, base);
            e >>= 1;
        }
        assert_eq!(x, 1);
    }

    #[test]
    fn xor_is_only_set_collision_resistant() {
        // Documented weakness (Clarke et al.): pairs cancel in the XOR, and equal sizes give
        // equal counts, so these two different multisets — with disjoint supports — collide.
        let e = XorHash::new(KEY, NONCE);
        let aabb = hash_of(&e, &[1, 1, 2, 2]);
        let ccdd = hash_of(&e, &[3, 3, 4, 4]);
        assert!(aabb.same(&ccdd), "the XOR collision exists");
        assert_eq!(aabb.digest(), e.digest(), "both equal the empty multiset's XOR part");
        // Only the count separates {a, a} from {}; parity of multiplicities is all XOR sees.
        let aa = hash_of(&e, &[1, 1]);
        assert_eq!(aa.digest(), e.digest());
        assert!(!aa.same(&e));
        // Add and Mu do not have this collision.
        let a = AddHash::new(KEY, NONCE);
        assert!(!hash_of(&a, &[1, 1, 2, 2]).same(&hash_of(&a, &[3, 3, 4, 4])));
        let m = MuHash::new();
        assert!(!hash_of(&m, &[1, 1, 2, 2]).same(&hash_of(&m, &[3, 3, 4, 4])));
    }

    #[test]
    fn random_multisets_property_loop() {
        let mut r = XorShift(0x5eed_1234_abcd_0001);
        let add = Multiset::by_name("add", KEY, NONCE).unwrap();
        let mu = Multiset::by_name("mu", KEY, NONCE).unwrap();
        let xor = Multiset::by_name("xor", KEY, NONCE).unwrap();
        for round in 0..200 {
            let len = 1 + r.below(20) as usize;
            let m: Vec<u64> = (0..len).map(|_| r.below(12)).collect(); // small alphabet: repeats
            let mut n = m.clone();
            match r.below(4) {
                0 => n.push(r.below(12)),
                1 => {
                    n.remove(r.below(len as u64) as usize);
                }
                2 => {
                    let i = r.below(len as u64) as usize;
                    n[i] = (n[i] + 1 + r.below(11)) % 12; // a different element
                }
                _ => {
                    let i = r.below(len as u64) as usize;
                    n.push(n[i]); // one more copy of an existing element
                }
            }
            let (mut sm, mut sn) = (m.clone(), n.clone());
            sm.sort();
            sn.sort();
            assert_ne!(sm, sn, "round {round}: the multisets differ");
            for e in [&add, &mu] {
                assert!(!hash_of(e, &m).same(&hash_of(e, &n)), "round {round} {}", e.name());
            }
            let mut perm = m.clone();
            r.shuffle(&mut perm);
            for e in [&add, &mu, &xor] {
                assert!(hash_of(e, &m).same(&hash_of(e, &perm)), "round {round} {}", e.name());
            }
        }
    }

    #[test]
    fn by_name_and_mixed_variants() {
        for n in MULTISET_HASHES {
            assert_eq!(Multiset::by_name(n, KEY, NONCE).unwrap().name(), *n);
        }
        assert_eq!(
            Multiset::by_name("x", KEY, NONCE).unwrap_err(),
            "unknown multiset hash 'x' (choose from add, xor, mu)"
        );
        let [a, x, m] = <[Multiset; 3]>::try_from(all()).unwrap();
        assert!(!a.same(&x) && !x.same(&m) && !m.same(&a));
        assert!(a.same(&a.empty_like()));
        // The key never shows in Debug output.
        let s = format!("{a:?} {x:?}");
        assert!(!s.contains("0123456789abcdef") && !s.contains("48, 49, 50"), "{s}");
    }
}
