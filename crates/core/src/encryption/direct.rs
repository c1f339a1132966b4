//! direct: AES-CBC over the L2 line (seed 000 §4.2, Fig. 4).
//!
//! A line of B bytes is B/16 chunks, EB[i] = AES_K(B[i] ⊕ EB[i−1]) with EB[−1] = IV, and
//! IV = (line address ‖ RV ‖ zeros) as in the paper: RV is a random vector chosen afresh on
//! every write-back and stored in untrusted memory with the line, at the linear layout of
//! 000 §5.1 (`RV_base + addr/B·B_RV`). The CBC mode itself is RustCrypto's `cbc`.
//!
//! Timing (Fig. 7a): each 16-B chunk is decrypted as soon as it has arrived off the bus; the
//! line is usable when the last chunk's decryption (and the XOR with the previous chunk or
//! the IV) is done, so the whole AES latency adds to every miss. Encryption is sequential (a
//! chunk's input needs the previous chunk's output) and happens in the write buffer.
//!
//! Memory is all-zero plaintext at power-on: a line whose RV is 0 and whose bytes are all zero
//! is that initial state (fresh RVs are never 0).

use super::{chunk_arrivals, derive_key, Encryption, Rng};
use crate::wordbuf::WordBuffer;
use crate::integrity::chash::MAX_LINE;
use crate::machine::Machine;
use crate::params::{ConfigError, Params};
use crate::stats::{ratio, Stats};
use aes::cipher::array::Array;
use aes::cipher::consts::U16;
use aes::cipher::{BlockModeDecrypt, BlockModeEncrypt, InnerIvInit, KeyInit};
use secmem_timing::Cycle;

type Block = Array<u8, U16>;

/// CBC-encrypt `buf` (a whole number of 16-B blocks) in place under `aes` with `iv`.
pub fn cbc_encrypt(aes: &aes::Aes128, iv: &[u8; 16], buf: &mut [u8]) {
    let (blocks, rest) = Block::slice_as_chunks_mut(buf);
    debug_assert!(rest.is_empty());
    cbc::Encryptor::<aes::Aes128>::inner_iv_init(aes.clone(), iv.into()).encrypt_blocks(blocks);
}

/// CBC-decrypt `buf` in place.
pub fn cbc_decrypt(aes: &aes::Aes128, iv: &[u8; 16], buf: &mut [u8]) {
    let (blocks, rest) = Block::slice_as_chunks_mut(buf);
    debug_assert!(rest.is_empty());
    cbc::Decryptor::<aes::Aes128>::inner_iv_init(aes.clone(), iv.into()).decrypt_blocks(blocks);
}

pub struct Direct {
    aes: aes::Aes128,
    rng: Rng,
    rv_bytes: u64,
    rv_mask: u64,
    rv_base: u64,
    line: u64,
    rv_buf: WordBuffer,
    // statistics
    reads: u64,
    writes: u64,
    exposed: u64,
}

impl Direct {
    pub fn new(p: &Params, m: &mut Machine, covered: u64, seed: u64) -> Result<Direct, ConfigError> {
        let rv_bytes = p.u64_min("direct.rv_bytes", 1)?;
        if !matches!(rv_bytes, 1 | 2 | 4 | 8) {
            return Err(ConfigError(format!("direct.rv_bytes: {} is not 1, 2, 4 or 8", rv_bytes)));
        }
        let rv_buf = WordBuffer::new(p.u64_min("direct.rv_buffer_entries", 0)?, 8, "direct.rv_buffer_entries")?;
        let line = m.line();
        if line % 16 != 0 {
            return Err(ConfigError(format!("l2.line: {} B is not a whole number of 16-B AES chunks", line)));
        }
        let rv_base = m.layout.alloc("direct random vectors", covered.div_ceil(line) * rv_bytes);
        Ok(Direct {
            aes: aes::Aes128::new(&derive_key(seed, 0xd1ec7).into()),
            rng: Rng::new(seed, 0xd1ec7),
            rv_bytes,
            rv_mask: if rv_bytes == 8 { u64::MAX } else { (1u64 << (8 * rv_bytes)) - 1 },
            rv_base,
            line,
            rv_buf,
            reads: 0,
            writes: 0,
            exposed: 0,
        })
    }

    pub fn rv_addr(&self, addr: u64) -> u64 {
        self.rv_base + addr / self.line * self.rv_bytes
    }

    /// The random vector stored at `ra` (an `rv_addr`).
    fn read_rv(&self, m: &Machine, ra: u64) -> u64 {
        let mut b = [0u8; 8];
        m.mem.read(ra, &mut b[..self.rv_bytes as usize]);
        u64::from_le_bytes(b)
    }

    /// IV = address ‖ RV, padded with zeros to 128 bits (000 §4.2).
    fn iv(&self, addr: u64, rv: u64) -> [u8; 16] {
        let mut iv = [0u8; 16];
        iv[..8].copy_from_slice(&addr.to_le_bytes());
        iv[8..8 + self.rv_bytes as usize].copy_from_slice(&rv.to_le_bytes()[..self.rv_bytes as usize]);
        iv
    }
}

impl Encryption for Direct {
    fn name(&self) -> &'static str {
        "direct"
    }

    fn prefetch(&self, m: &Machine, addr: u64) {
        m.mem.prefetch(addr);
        m.mem.prefetch(self.rv_addr(addr));
    }

    fn read_line(&mut self, m: &mut Machine, addr: u64, t: Cycle, out: &mut [u8]) -> Cycle {
        self.reads += 1;
        let ra = self.rv_addr(addr);
        // Line and random vector are read one after the other: let the host load both at once.
        m.mem.prefetch(ra);
        let tr = m.bus.read(t, out.len() as u64);
        m.mem.read(addr, out);
        // The RV is needed only for the first chunk's final XOR: fetched after the line.
        let t_rv = self.rv_buf.read(m, ra, self.rv_bytes, t);
        let rv = self.read_rv(m, ra);
        let mut arrive = [0; MAX_LINE / 16];
        let n = out.len() / 16;
        chunk_arrivals(m, tr, 16, &mut arrive[..n]);
        let t_dec = m.aes.run_each(arrive[..n].iter().copied());
        if !(rv == 0 && out.iter().all(|&b| b == 0)) {
            cbc_decrypt(&self.aes, &self.iv(addr, rv), out);
        }
        let ready = t_dec.max(t_rv) + m.xor_latency;
        self.exposed += ready.saturating_sub(tr.last);
        ready
    }

    fn write_line(&mut self, m: &mut Machine, addr: u64, plain: &[u8], t: Cycle) -> Cycle {
        self.writes += 1;
        let rv = loop {
            let r = self.rng.next_u64() & self.rv_mask;
            if r != 0 {
                break r;
            }
        };
        let mut buf = [0u8; MAX_LINE];
        let ct = &mut buf[..plain.len()];
        ct.copy_from_slice(plain);
        cbc_encrypt(&self.aes, &self.iv(addr, rv), ct);
        m.mem.write(addr, ct);
        let ra = self.rv_addr(addr);
        m.mem.write(ra, &rv.to_le_bytes()[..self.rv_bytes as usize]);
        // Chaining: each chunk's AES starts when the previous one is done.
        let mut tc = t;
        for _ in 0..plain.len() / 16 {
            tc = m.aes.run(tc + m.xor_latency, 16);
        }
        self.rv_buf.wrote(ra);
        let done = m.bus.write(tc, plain.len() as u64);
        done.max(m.bus.write(tc, self.rv_bytes))
    }

    fn drop_cached(&mut self) {
        self.rv_buf.clear();
    }

    fn metadata_of(&self, addr: u64) -> Vec<(String, u64)> {
        vec![("direct random vector".to_string(), self.rv_addr(addr))]
    }

    fn reset_stats(&mut self) {
        (self.reads, self.writes, self.exposed) = (0, 0, 0);
        self.rv_buf.reset_stats();
    }

    fn space_overhead(&self) -> f64 {
        self.rv_bytes as f64 / self.line as f64
    }

    fn stats(&self, _m: &Machine, out: &mut Stats) {
        out.int("direct.reads", self.reads);
        out.int("direct.writes", self.writes);
        out.int("direct.rv_bytes", self.rv_bytes);
        out.int("direct.rv_bus_reads", self.rv_buf.bus_reads());
        out.float("direct.rv_buffer_hit_rate", self.rv_buf.hit_rate());
        out.int("direct.decrypt_exposed_cycles", self.exposed);
        out.float("direct.decrypt_exposed_per_read", ratio(self.exposed, self.reads));
        out.float("direct.space_overhead", self.space_overhead());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::hex;


    /// NIST SP 800-38A, F.2.1/F.2.2 CBC-AES128.
    #[test]
    fn sp800_38a_cbc_aes128_vectors() {
        let key: [u8; 16] = hex("2b7e151628aed2a6abf7158809cf4f3c").try_into().unwrap();
        let iv: [u8; 16] = hex("000102030405060708090a0b0c0d0e0f").try_into().unwrap();
        let plain = hex(
            "6bc1bee22e409f96e93d7e117393172a ae2d8a571e03ac9c9eb76fac45af8e51
             30c81c46a35ce411e5fbc1191a0a52ef f69f2445df4f9b17ad2b417be66c3710",
        );
        let cipher = hex(
            "7649abac8119b246cee98e9b12e9197d 5086cb9b507219ee95db113a917678b2
             73bed6b8e3c1743b7116e69e22229516 3ff1caa1681fac09120eca307586e1a7",
        );
        let aes = aes::Aes128::new(&key.into());
        let mut buf = plain.clone();
        cbc_encrypt(&aes, &iv, &mut buf);
        assert_eq!(buf, cipher);
        cbc_decrypt(&aes, &iv, &mut buf);
        assert_eq!(buf, plain);
    }
}
