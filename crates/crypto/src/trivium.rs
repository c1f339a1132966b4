//! Trivium (C. De Cannière, B. Preneel, eSTREAM portfolio, profile 2; ISO/IEC 29192-3), the
//! stream cipher seed 001 §8.2 uses for the tag pad R_T. No maintained Rust crate implements
//! it; this one is tested against the published eSTREAM test vectors.
//!
//! State: three shift registers A = (s1..s93), B = (s94..s177), C = (s178..s288). Each round
//!
//!   t1 = s66 + s93,  t2 = s162 + s177,  t3 = s243 + s288,  z = t1 + t2 + t3
//!   t1 += s91·s92 + s171,  t2 += s175·s176 + s264,  t3 += s286·s287 + s69
//!   A ← (t3, s1..s92),  B ← (t1, s94..s176),  C ← (t2, s178..s287)
//!
//! Every tap is at least 66 rounds old, so 64 rounds are computed at once: each register is a
//! 128-bit window with its newest bit at bit 127 (bit 128 − i holds the register's i-th bit),
//! and the 64 values a tap takes over the next 64 rounds are one shifted 64-bit word.
//!
//! Conventions of the eSTREAM reference code and its test vectors: the 10 key bytes read as a
//! little-endian 80-bit integer hold K1 in their top bit and K80 in bit 0 (so K1 is the most
//! significant bit of the last byte), the IV likewise; the first keystream bit is the least
//! significant bit of the first output byte.

#[derive(Clone)]
pub struct Trivium {
    a: u128,
    b: u128,
    c: u128,
    /// Keystream bytes produced but not yet handed out (`left` of them, from the low end).
    buf: u64,
    left: u32,
}

/// Register bit i (1-based) over the next 64 rounds: bit j is its value in round j.
#[inline(always)]
fn tap(r: u128, i: u32) -> u64 {
    (r >> (128 - i)) as u64
}

impl Trivium {
    /// Load key and IV and run the 4·288 = 1152 initialisation rounds.
    pub fn new(key: &[u8; 10], iv: &[u8; 10]) -> Self {
        // K_i sits at bit 80 − i of the little-endian integer and belongs at bit 128 − i.
        let load = |bytes: &[u8; 10]| {
            let mut b = [0u8; 16];
            b[..10].copy_from_slice(bytes);
            u128::from_le_bytes(b) << 48
        };
        // C's last three bits, s286..s288 = c109..c111, are 1.
        let c = (1u128 << (128 - 109)) | (1u128 << (128 - 110)) | (1u128 << (128 - 111));
        let mut t = Trivium { a: load(key), b: load(iv), c, buf: 0, left: 0 };
        for _ in 0..1152 / 64 {
            t.rounds64();
        }
        t
    }

    /// 64 rounds; returns their 64 keystream bits (round j's at bit j).
    #[inline(always)]
    fn rounds64(&mut self) -> u64 {
        let (a, b, c) = (self.a, self.b, self.c);
        let t1 = tap(a, 66) ^ tap(a, 93);
        let t2 = tap(b, 69) ^ tap(b, 84);
        let t3 = tap(c, 66) ^ tap(c, 111);
        let z = t1 ^ t2 ^ t3;
        let t1 = t1 ^ (tap(a, 91) & tap(a, 92)) ^ tap(b, 78);
        let t2 = t2 ^ (tap(b, 82) & tap(b, 83)) ^ tap(c, 87);
        let t3 = t3 ^ (tap(c, 109) & tap(c, 110)) ^ tap(a, 69);
        self.a = (a >> 64) | ((t3 as u128) << 64);
        self.b = (b >> 64) | ((t1 as u128) << 64);
        self.c = (c >> 64) | ((t2 as u128) << 64);
        z
    }

    /// The next 64 keystream bits, the first at bit 0 (byte-aligned calls only).
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        debug_assert_eq!(self.left, 0, "next_u64 after a fill that left bytes over");
        self.rounds64()
    }

    /// Write the next keystream bytes into `out`.
    pub fn fill(&mut self, out: &mut [u8]) {
        let mut i = 0;
        while i < out.len() {
            if self.left == 0 {
                if out.len() - i >= 8 {
                    out[i..i + 8].copy_from_slice(&self.rounds64().to_le_bytes());
                    i += 8;
                    continue;
                }
                self.buf = self.rounds64();
                self.left = 8;
            }
            out[i] = self.buf as u8;
            self.buf >>= 8;
            self.left -= 1;
            i += 1;
        }
    }

    /// XOR the next keystream bytes into `data` (encryption and decryption).
    pub fn apply_keystream(&mut self, data: &mut [u8]) {
        let mut ks = vec![0u8; data.len()];
        self.fill(&mut ks);
        data.iter_mut().zip(ks).for_each(|(d, k)| *d ^= k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    fn arr10(s: &str) -> [u8; 10] {
        hex(s).try_into().unwrap()
    }

    /// The specification's bit-serial description, s[1..=288], one round at a time.
    fn reference(key: &[u8; 10], iv: &[u8; 10], n: usize) -> Vec<u8> {
        let mut s = [0u8; 289];
        let int = |b: &[u8; 10]| b.iter().rev().fold(0u128, |v, &x| (v << 8) | x as u128);
        let (k, v) = (int(key), int(iv));
        for i in 0..80 {
            // K_{i+1} is bit 79 − i.
            s[1 + i] = ((k >> (79 - i)) & 1) as u8;
            s[94 + i] = ((v >> (79 - i)) & 1) as u8;
        }
        s[286] = 1;
        s[287] = 1;
        s[288] = 1;
        let round = |s: &mut [u8; 289]| {
            let mut t1 = s[66] ^ s[93];
            let mut t2 = s[162] ^ s[177];
            let mut t3 = s[243] ^ s[288];
            let z = t1 ^ t2 ^ t3;
            t1 ^= (s[91] & s[92]) ^ s[171];
            t2 ^= (s[175] & s[176]) ^ s[264];
            t3 ^= (s[286] & s[287]) ^ s[69];
            s.copy_within(1..93, 2);
            s[1] = t3;
            s.copy_within(94..177, 95);
            s[94] = t1;
            s.copy_within(178..288, 179);
            s[178] = t2;
            z
        };
        for _ in 0..1152 {
            round(&mut s);
        }
        let mut out = vec![0u8; n];
        for byte in out.iter_mut() {
            for j in 0..8 {
                *byte |= round(&mut s) << j;
            }
        }
        out
    }

    fn stream(key: &str, iv: &str, n: usize) -> Vec<u8> {
        let mut out = vec![0u8; n];
        Trivium::new(&arr10(key), &arr10(iv)).fill(&mut out);
        out
    }

    /// XOR of the stream's 64-byte blocks: the eSTREAM files' `xor-digest`.
    fn xor_digest(s: &[u8]) -> Vec<u8> {
        let mut d = vec![0u8; 64];
        for (i, b) in s.iter().enumerate() {
            d[i % 64] ^= b;
        }
        d
    }

    // The eSTREAM test vectors, file `trivium/unverified.test-vectors` (Primitive Name:
    // TRIVIUM, Profile ___H3, 80-bit key and IV), as distributed with the eSTREAM test suite and
    // mirrored in github.com/cantora/avr-crypto-lib, testvectors/trivium-80.80.test-vectors.

    #[test]
    fn estream_set1_vector0() {
        let s = stream("80000000000000000000", "00000000000000000000", 512);
        let want_0 = "38EB86FF730D7A9CAF8DF13A4420540D BB7B651464C87501552041C249F29A64
                      D2FBF515610921EBE06C8F92CECF7F80 98FF20CCCC6A62B97BE8EF7454FC80F9";
        let want_192 = "EAF2625D411F61E41F6BAEEDDD5FE202 600BD472F6C9CD1E9134A745D900EF6C
                        023E4486538F09930CFD37157C0EB57C 3EF6C954C42E707D52B743AD83CFF297";
        let want_256 = "9A203CF7B2F3F09C43D188AA13A5A202 1EE998C42F777E9B67C3FA221A0AA1B0
                        41AA9E86BC2F5C52AFF11F7D9EE480CB 1187B20EB46D582743A52D7CD080A24A";
        let want_448 = "EBF14772061C210843C18CEA2D2A275A E02FCB18E5D7942455FF77524E8A4CA5
                        1E369A847D1AEEFB9002FCD02342983C EAFA9D487CC2032B10192CD416310FA4";
        let digest = "7AE3A4B53355061766122E04391EA1E6 699B51C21A1F8058D3CF74A209D7E4CB
                      571ED771525CA492552565C10A05E81B 945DE28AAC043DEB349FD438784904D2";
        assert_eq!(s[0..64], hex(want_0)[..]);
        assert_eq!(s[192..256], hex(want_192)[..]);
        assert_eq!(s[256..320], hex(want_256)[..]);
        assert_eq!(s[448..512], hex(want_448)[..]);
        assert_eq!(xor_digest(&s), hex(digest));
    }

    #[test]
    fn estream_set2_and_set5_vector0() {
        // Set 2 #0: all-zero key and IV.
        let s = stream("00000000000000000000", "00000000000000000000", 64);
        let want = "FBE0BF265859051B517A2E4E239FC97F 563203161907CF2DE7A8790FA1B2E9CD
                    F75292030268B7382B4C1A759AA2599A 285549986E74805903801A4CB5A5D4F2";
        assert_eq!(s, hex(want));
        // Set 5 #0: the IV's first byte is 0x80.
        let s = stream("00000000000000000000", "80000000000000000000", 64);
        let want = "F8901736640549E3BA7D42EA2D07B9F4 9233C18D773008BD755585B1A8CBAB86
                    C1E9A9B91F1AD33483FD6EE3696D659C 9374260456A36AAE11F033A519CBD5D7";
        assert_eq!(s, hex(want));
    }

    #[test]
    fn estream_set6_vector0_over_131072_bytes() {
        let s = stream("0053A6F94C9FF24598EB", "0D74DB42A91077DE45AC", 131072);
        let want_0 = "F4CD954A717F26A7D6930830C4E7CF08 19F80E03F25F342C64ADC66ABA7F8A8E
                      6EAA49F23632AE3CD41A7BD290A0132F 81C6D4043B6E397D7388F3A03B5FE358";
        let want_65472 = "C04C24A6938C8AF8A491D5E481271E0E 601338F01067A86A795CA493AA4FF265
                          619B8D448B706B7C88EE8395FC79E5B5 1AB40245BBF7773AE67DF86FCFB71F30";
        let want_65536 = "011A0D7EC32FA102C66C164CFCB189AE D9F6982E8C7370A6A37414781192CEB1
                          55C534C1C8C9E53FDEADF2D3D0577DAD 3A8EB2F6E5265F1E831C86844670BC69";
        let want_131008 = "48107374A9CE3AAF78221AE77789247C F6896A249ED75DCE0CF2D30EB9D889A0
                           C61C9F480E5C07381DED9FAB2AD54333 E82C89BA92E6E47FD828F1A66A8656E0";
        let digest = "F47702F2C8002944966D7C1BEF9BA5EB 9B6D4BD318EACFEDAD25A41E3EF23ABB
                      11CB33BF998995458359B394B399193A FB28EED0AE735F7C1E38CDFE39FE92BF";
        assert_eq!(s[0..64], hex(want_0)[..]);
        assert_eq!(s[65472..65536], hex(want_65472)[..]);
        assert_eq!(s[65536..65600], hex(want_65536)[..]);
        assert_eq!(s[131008..131072], hex(want_131008)[..]);
        assert_eq!(xor_digest(&s), hex(digest));
    }

    #[test]
    fn sixty_four_rounds_at_once_equal_the_bit_serial_specification() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..8 {
            let mut key = [0u8; 10];
            let mut iv = [0u8; 10];
            for b in key.iter_mut().chain(iv.iter_mut()) {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                *b = (x >> 56) as u8;
            }
            let mut out = vec![0u8; 300];
            Trivium::new(&key, &iv).fill(&mut out);
            assert_eq!(out, reference(&key, &iv, 300));
        }
    }

    #[test]
    fn fill_in_odd_pieces_continues_the_stream() {
        let whole = stream("0053A6F94C9FF24598EB", "0D74DB42A91077DE45AC", 100);
        let mut t = Trivium::new(&arr10("0053A6F94C9FF24598EB"), &arr10("0D74DB42A91077DE45AC"));
        let mut parts = vec![0u8; 100];
        let mut at = 0;
        for n in [3, 8, 1, 13, 40, 35] {
            t.fill(&mut parts[at..at + n]);
            at += n;
        }
        assert_eq!(parts, whole);
        let mut data = b"attack at dawn".to_vec();
        let mut t = Trivium::new(&[1; 10], &[2; 10]);
        t.apply_keystream(&mut data);
        assert_ne!(&data[..], b"attack at dawn");
        Trivium::new(&[1; 10], &[2; 10]).apply_keystream(&mut data);
        assert_eq!(&data[..], b"attack at dawn");
    }
}
