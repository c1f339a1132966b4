//! tdes: Triple-DES (EDE, three keys; RustCrypto `des`) in a parallelizable direct mode over
//! 64-bit chunks (seed 004 §3.2.1: "the line is divided into 8 64-bit chunks and each chunk is
//! encrypted using parallelizable encryption modes with Triple-DES as the block cipher … all
//! the 8 chunks of the same cache line can be encrypted or decrypted simultaneously").
//!
//! The mode is XE (Rogaway's tweakable construction, the core of OCB): chunk i of the line at
//! `a` is C_i = TDES_K(P_i ⊕ Δ_i) with the whitening offset Δ_i = R ⊕ (i+1)·L in GF(2^64),
//! R = TDES_K'(a/B ‖ ctr_a) and L = TDES_K'(1^64). The per-line counter ctr_a grows on each
//! dirty eviction as 004 does for its nonce, drawn from one on-chip sequence (`NonceCounter`:
//! never the stored counter plus one, which an adversary could roll back); it lives in
//! untrusted memory (4 B, linear layout of 000 §5.1). Equal plaintexts therefore differ across chunks, lines and rewrites, and a
//! chunk is deciphered as soon as it arrives: Δ is XORed after the cipher, off its critical
//! path, so only the last chunk's 96-ns decryption adds to the miss (004 Table 2).
//!
//! The TDES engine is the scheme's own pipelined unit (`tdes.latency`, `tdes.throughput`),
//! replicated `tdes.engines` times (004 §4: "multiple pipelines").
//!
//! Ciphertext speculation (004 §3.2, Figs. 2–3; `speculation.frequent_values`): on a miss,
//! the speculation is posted with the fetch request (`speculation.at_fetch`): its engine
//! encrypts the nonce into R, then every Frequent Value Table entry for every chunk position
//! of the line, after the miss's own decryptions (or on engines of its own,
//! `speculation.engines`) and competing with every later miss's; with `at_fetch` off it
//! starts from the demand path's R, once the counter is read. An arriving chunk equal to one of those ciphertexts (the CAM) needs no decryption:
//! it is usable when both it and its speculation are in. A chunk of ciphertext C_i matches
//! TDES_K(v ⊕ Δ_i) exactly when it deciphers to v (the cipher is a permutation and Δ_i is the
//! line's), so the decision is taken on the deciphered chunk; `speculated_hits` performs the
//! real encryptions and the tests check that both agree.
//!
//! Per-chunk MACs (`tdes.chunk_mac_bytes`, 004 §3.3: "each cipher size chunk to have its own
//! MAC"): T_i = TDES_Km(P_i ⊕ R' ⊕ (i+1)·L') truncated, R' = TDES_Km(a/B ‖ ctr_a), stored in
//! untrusted memory after the counters. A chunk is checked once deciphered (T_i computed and
//! compared with the fetched one); the access is verified when every chunk is. MAC
//! speculation (with `speculation.frequent_values`): the engine also computes the MAC of every
//! table value at every chunk position, so a chunk whose ciphertext and MAC both match needs
//! neither decryption nor a MAC computation: it is verified on arrival. Like mac, the MACs
//! bind address and counter but not freshness (a rolled-back line, counter and MACs pass).
//!
//! The cipher is FIPS 46-3 Triple-DES EDE with three keys: `secmem_crypto::tdes::FastTdes`,
//! checked bit for bit against RustCrypto's `des::TdesEde3` by its tests and at construction.
//!
//! A line whose counter is 0 and whose bytes are all zero is the all-zero initial memory.

use super::{Boot, BootLines, ChunkMacCounts, Encryption, EncryptionScheme, NonceCounter, chunk_macs, derive_key, Seed};
use crate::mem::BootImage;
use std::sync::Arc;
use crate::error::IntegrityError;
use crate::layout::{all_zero, is_initial, Meta, MetaKind, PerLine, B_CTR, MAX_LINE};
use crate::machine::Machine;
use crate::port::chunk_arrivals;
use crate::wordbuf::WordBuffer;
use crate::params::{ConfigError, Params};
use crate::stats::Stats;
use secmem_timing::{Cycle, Pipe};
use secmem_crypto::tdes::{agrees_with_rustcrypto, FastTdes};
use crate::decl::{Component, Coverage, Def, Guarantees, Kind, Role, param, stat};

/// tdes's declaration: its parameters with defaults, units and meanings.
pub const DECL: Component = Component {
    name: "tdes",
    kind: Kind::Encryption,
    summary: "Triple-DES (EDE3) in a parallelizable mode over 64-bit chunks",
    source: "004 §3.2.1",
    params: &[
        param("tdes.latency", Def::Int(96), "cycles", "Triple-DES latency: 96 ns at 1 GHz, 48 stages (004 §4, Table 2)"),
        param("tdes.throughput", Def::Str("2.5GB/s"), "B/s", "pipelined TDES throughput: 20 Gbit/s (004 §4)"),
        param("tdes.chunk_mac_bytes", Def::Int(0), "B", "a MAC of this many bytes (1 to 8) per 64-bit chunk, checked on every read (004 §3.3); 0: none, tdes only encrypts"),
        param("tdes.engines", Def::Int(1), "engines", "replicated TDES pipelines: the throughput is this many times tdes.throughput (004 §3.2, §4)"),
        param("tdes.counter_buffer_entries", Def::Int(32), "entries", "on-chip buffer of 8-B words of per-line counters"),
        param("tdes.counter_bits", Def::Int(32), "bits", "width of the on-chip sequence nonce counters are drawn from"),
    ],
    stats: &[
        stat("tdes.reads", "lines", "lines decrypted on their way in (L2 misses)"),
        stat("tdes.writes", "lines", "lines encrypted on their way out (write-backs)"),
        stat("tdes.counter_bus_reads", "reads", "counter words read from memory (buffer misses)"),
        stat("tdes.counter_buffer_hit_rate", "fraction", "counter reads served by the on-chip buffer"),
        stat("tdes.engine_units", "units", "TDES engine units"),
        stat("tdes.engine_wait_cycles", "cycles", "cycles operations waited for a TDES unit, summed"),
        stat("tdes.decrypt_exposed_cycles", "cycles", "decryption cycles after the data arrived, summed"),
        stat("tdes.decrypt_exposed_per_read", "cycles", "tdes.decrypt_exposed_cycles / tdes.reads"),
        stat("tdes.space_overhead", "fraction", "memory the counters take, per byte of data"),
    ],
};

/// tdes's registration. A block cipher over address and counter: a flipped bit garbles its chunk; per-chunk MACs (address and counter, not freshness) make changes and moves fail.
pub const SCHEME: EncryptionScheme = EncryptionScheme {
    decl: &DECL,
    guarantees: |p| Ok(Guarantees { confidential: true, hides_equal_lines: true, hides_rewrites: true, malleable: false, ..chunk_macs(p.u64_min("tdes.chunk_mac_bytes", 0)? > 0) }),
    coverage: Coverage { lays_out: &[Role::Counters, Role::Macs], protects: Role::LINES, guarded: &[] },
    build: |p, m, c, seed| Ok(Box::new(Tdes::new(p, m, c, seed)?)),
};

const CHUNK: u64 = 8;

/// x·2 in GF(2^64) with x^64 + x^4 + x^3 + x + 1 (the 64-bit-block doubling of OCB/CMAC).
fn dbl(x: u64) -> u64 {
    (x << 1) ^ if x >> 63 == 1 { 0x1B } else { 0 }
}

/// a·b in GF(2^64) for a small multiplier b.
fn gf_mul(a: u64, mut b: u64) -> u64 {
    let (mut acc, mut x) = (0u64, a);
    while b != 0 {
        if b & 1 == 1 {
            acc ^= x;
        }
        x = dbl(x);
        b >>= 1;
    }
    acc
}

/// Per-chunk MACs: their key, offsets (i+1)·L', size and where they live.
#[derive(Clone)]
struct ChunkMacs {
    key: FastTdes,
    offsets: [u64; MAX_LINE / 8],
    bytes: usize,
    store: PerLine,
}

impl ChunkMacs {
    /// The MAC of each 64-bit chunk of `plain` (line `addr`, counter `ctr`), into `out`.
    fn compute(&self, line: u64, addr: u64, ctr: u32, plain: &[u8], out: &mut [u8]) {
        let r = self.key.encrypt_u64(((addr / line) << 32) | ctr as u64);
        for (i, (c, o)) in plain.chunks_exact(8).zip(out.chunks_exact_mut(self.bytes)).enumerate() {
            let t = self.key.encrypt_u64(u64::from_be_bytes(c.try_into().unwrap()) ^ r ^ self.offsets[i]);
            o.copy_from_slice(&t.to_be_bytes()[..self.bytes]);
        }
    }
}

/// The mode's keys: XE over TDES for the data, and the chunk MACs.
#[derive(Clone)]
struct Keys {
    data: FastTdes,
    tweak: FastTdes,
    /// (i+1)·L for chunk i.
    offsets: [u64; MAX_LINE / 8],
    line: u64,
    mac: Option<ChunkMacs>,
}

pub struct Tdes {
    k: Keys,
    /// When the last line read was verified (its chunk MACs), for `take_checked`.
    checked: Option<Cycle>,
    engine: Pipe,
    ctrs: PerLine,
    line: u64,
    /// Never-written program memory, [0, boot_end), holds the boot image (`boot_image`).
    boot_end: u64,
    ctr_buf: WordBuffer,
    nonces: NonceCounter,
    /// Test builds: every (address, counter) encrypted under, which must never repeat.
    #[cfg(test)]
    nonces_used: std::collections::HashSet<(u64, u64)>,
    // statistics
    reads: u64,
    writes: u64,
    exposed: u64,
    macs: ChunkMacCounts,
}

fn key24(seed: Seed, purpose: u64) -> [u8; 24] {
    let (a, b) = (derive_key(seed, purpose), derive_key(seed, purpose + 1));
    let mut k = [0u8; 24];
    k[..16].copy_from_slice(&a);
    k[16..].copy_from_slice(&b[..8]);
    k
}

impl Tdes {
    pub fn new(p: &Params, m: &mut Machine, covered: u64, seed: Seed) -> Result<Tdes, ConfigError> {
        let hz = p.freq("core.clock")?;
        let engines = p.u64_min("tdes.engines", 1)? as f64;
        let engine = Pipe::new(p.u64_min("tdes.latency", 1)?, engines * p.rate("tdes.throughput")? / hz, CHUNK);
        if let Some(fv) = m.spec.fv.as_mut() {
            fv.dedicate(p.u64_min("tdes.latency", 1)?, p.rate("tdes.throughput")? / hz, CHUNK);
        }
        let ctr_buf = WordBuffer::new(p.u64_min("tdes.counter_buffer_entries", 0)?, "tdes.counter_buffer_entries")?;
        let line = m.line();
        let lines = covered.div_ceil(line);
        if lines > u32::MAX as u64 {
            return Err(ConfigError(format!("tdes: {} lines do not fit the 32-bit line number of the nonce", lines)));
        }
        let ctrs = m.layout.per_line(Role::Counters, "tdes counters", covered, B_CTR);
        let (kd, kt) = (key24(seed, 0x7de5), key24(seed, 0x7de7));
        if !agrees_with_rustcrypto(&kd) || !agrees_with_rustcrypto(&kt) {
            return Err(ConfigError("tdes: the table-driven Triple-DES disagrees with RustCrypto's".into()));
        }
        let (data, tweak) = (FastTdes::new(&kd), FastTdes::new(&kt));
        let l = tweak.encrypt_u64(u64::MAX);
        let mut offsets = [0u64; MAX_LINE / 8];
        for (i, o) in offsets.iter_mut().enumerate() {
            *o = gf_mul(l, i as u64 + 1);
        }
        let nonces = NonceCounter::new(p, "tdes")?;
        let mac_bytes = p.u64_min("tdes.chunk_mac_bytes", 0)?;
        if mac_bytes > 8 {
            return Err(ConfigError(format!("tdes.chunk_mac_bytes: {} exceeds the 8-B TDES block", mac_bytes)));
        }
        let mac = (mac_bytes > 0).then(|| {
            let km = key24(seed, 0x7de9);
            let key = FastTdes::new(&km);
            let l = key.encrypt_u64(u64::MAX);
            let mut offsets = [0u64; MAX_LINE / 8];
            for (i, o) in offsets.iter_mut().enumerate() {
                *o = gf_mul(l, i as u64 + 1);
            }
            let store = m.layout.per_line(Role::Macs, "tdes chunk MACs", covered, (line / CHUNK) * mac_bytes);
            ChunkMacs { key, offsets, bytes: mac_bytes as usize, store }
        });
        Ok(Tdes {
            k: Keys { data, tweak, offsets, line, mac },
            checked: None,
            engine,
            ctrs,
            line,
            boot_end: 0,
            ctr_buf,
            nonces,
            #[cfg(test)]
            nonces_used: Default::default(),
            reads: 0,
            writes: 0,
            exposed: 0,
            macs: ChunkMacCounts::default(),
        })
    }

    pub fn ctr_addr(&self, addr: u64) -> u64 {
        self.ctrs.addr(addr)
    }

    /// Encrypt a line in place (XE over TDES).
    pub fn encrypt(&self, addr: u64, ctr: u32, buf: &mut [u8]) {
        self.k.encrypt(addr, ctr, buf)
    }

    pub fn decrypt(&self, addr: u64, ctr: u32, buf: &mut [u8]) {
        self.k.decrypt(addr, ctr, buf)
    }

    /// What the CAM finds (004 Fig. 2 ③–④): bit i is set when chunk i of the fetched
    /// ciphertext `ct` of the line at `addr` (counter `ctr`) equals the real speculative
    /// encryption TDES_K(v ⊕ Δ_i) of one of `values` (64-bit words, little-endian in memory).
    pub fn speculated_hits(&self, addr: u64, ctr: u32, values: &[u64], ct: &[u8]) -> u64 {
        self.k.speculated_hits(addr, ctr, values, ct)
    }
}

/// The boot image (`memory.boot_encrypted`): zeros enciphered under counter 0, and their MACs.
impl BootLines for Keys {
    fn line(&self, addr: u64, out: &mut [u8]) {
        out.fill(0);
        self.encrypt(addr, 0, out);
    }

    fn stores(&self) -> Vec<PerLine> {
        self.mac.iter().map(|c| c.store).collect()
    }

    fn entry(&self, _: usize, addr: u64, out: &mut [u8]) {
        let c = self.mac.as_ref().expect("only the MAC store");
        c.compute(self.line, addr, 0, &[0u8; MAX_LINE][..self.line as usize], out);
    }
}

impl Keys {
    fn r(&self, addr: u64, ctr: u32) -> u64 {
        self.tweak.encrypt_u64(((addr / self.line) << 32) | ctr as u64)
    }

    fn whiten(&self, r: u64, buf: &mut [u8]) {
        for (i, c) in buf.chunks_exact_mut(8).enumerate() {
            let d = (r ^ self.offsets[i]).to_be_bytes();
            for (b, x) in c.iter_mut().zip(d) {
                *b ^= x;
            }
        }
    }

    fn encrypt(&self, addr: u64, ctr: u32, buf: &mut [u8]) {
        self.whiten(self.r(addr, ctr), buf);
        self.data.encrypt_blocks(buf);
    }

    fn decrypt(&self, addr: u64, ctr: u32, buf: &mut [u8]) {
        self.data.decrypt_blocks(buf);
        self.whiten(self.r(addr, ctr), buf);
    }

    fn speculated_hits(&self, addr: u64, ctr: u32, values: &[u64], ct: &[u8]) -> u64 {
        let r = self.r(addr, ctr);
        let mut bits = 0;
        for (i, c) in ct.chunks_exact(8).enumerate() {
            let d = (r ^ self.offsets[i]).to_be_bytes();
            for &v in values {
                let mut b = v.to_le_bytes();
                for (x, y) in b.iter_mut().zip(d) {
                    *x ^= y;
                }
                self.data.encrypt_blocks(&mut b);
                if b == c {
                    bits |= 1 << i;
                }
            }
        }
        bits
    }
}

impl Encryption for Tdes {
    fn name(&self) -> &'static str {
        "tdes"
    }

    fn freeze(&mut self, on: bool) -> bool {
        let was = self.engine.frozen();
        self.engine.freeze(on);
        was
    }

    fn prefetch(&self, m: &Machine, addr: u64) {
        m.port.prefetch(addr);
        m.port.prefetch(self.ctr_addr(addr));
    }

    fn read_line(&mut self, m: &mut Machine, addr: u64, t: Cycle, out: &mut [u8]) -> Result<Cycle, IntegrityError> {
        self.reads += 1;
        let ca = self.ctr_addr(addr);
        // Line and counter are read one after the other: let the host load both at once.
        m.port.prefetch(ca);
        let n = out.len() / CHUNK as usize;
        let mut fetched = [0u8; MAX_LINE];
        let mac_len = self.k.mac.as_ref().map_or(0, |c| n * c.bytes);
        // The chunk MACs come with the line, in its burst (004 §2.2).
        let (tr, t_macs) = match &self.k.mac {
            Some(c) => {
                let (tr, tm) = m.port.read_beside(addr, out, c.store.addr(addr), &mut fetched[..mac_len], t);
                (tr, tm.last)
            }
            None => (m.port.read(addr, out, t), 0),
        };
        // The counter only feeds the whitening, XORed after the cipher: fetched after the line.
        let mut cb = [0u8; B_CTR as usize];
        let t_ctr = self.ctr_buf.read(&mut m.port, ca, &mut cb, t);
        let ctr = u32::from_le_bytes(cb);
        let mut arrive = [0; MAX_LINE / 8];
        chunk_arrivals(m.port.beat(), tr, CHUNK, &mut arrive[..n]);
        let xor = m.xor_latency;
        // Each chunk is deciphered once in; Δ (which needs R) is XORed after the cipher.
        let mut slow = [0; MAX_LINE / 8];
        for (d, &a) in slow.iter_mut().zip(&arrive[..n]) {
            *d = self.engine.run(a, CHUNK);
        }
        let t_r = self.engine.run(t_ctr, CHUNK);
        let t_rm = if self.k.mac.is_some() { self.engine.run(t_ctr, CHUNK) } else { 0 };
        let mut ready = slow[n - 1].max(t_r) + xor;
        for d in &mut slow[..n] {
            *d = (*d).max(t_r) + xor;
        }
        // Never-written memory is raw zeros unless it starts encrypted (the boot image).
        let data_initial = addr >= self.boot_end && is_initial(ctr as u64, out);
        #[cfg(test)]
        let ct: Vec<u8> = out.to_vec();
        if !data_initial {
            self.decrypt(addr, ctr, out);
        }
        // Which chunks the speculation matches (004 §3.2–3.3): decided on the deciphered chunk.
        let mut hits = 0u64;
        let mut frequent = 0u64;
        let (mut vals, mut k) = ([0u64; 64], 0);
        if let Some(fv) = &m.spec.fv {
            for v in fv.table.values() {
                vals[k] = v;
                k += 1;
            }
            frequent = fv.table.frequent_chunks(out);
            // The never-written line is not ciphertext: nothing speculated matches it.
            hits = if data_initial { 0 } else { frequent };
            #[cfg(test)]
            if !data_initial {
                assert_eq!(hits, self.speculated_hits(addr, ctr, &vals[..k], &ct), "plaintext and ciphertext matching disagree");
            }
        }
        // Chunk MACs: checked functionally; a chunk whose ciphertext and MAC both matched the
        // speculation needs no MAC computation (004 §3.3), the others are MACed once deciphered
        // and R' is known. Demand work is booked before this miss's speculation.
        let mut mac_done = [0; MAX_LINE / 8];
        if let Some(c) = &self.k.mac {
            let mut want = [0u8; MAX_LINE];
            if !(data_initial && all_zero(&fetched[..mac_len])) {
                c.compute(self.line, addr, ctr, out, &mut want[..mac_len]);
                if want[..mac_len] != fetched[..mac_len] {
                    self.macs.failures += 1;
                    return Err(IntegrityError::tampered(addr, format!("tdes chunk MAC mismatch (counter {}): line, counter or MACs were changed", ctr)));
                }
            }
            for i in 0..n {
                if hits >> i & 1 == 0 {
                    mac_done[i] = self.engine.run(slow[i].max(t_rm + xor), CHUNK).max(t_macs) + 1;
                }
            }
        }
        // The speculation: every table value for each chunk position (and its MAC), in arrival
        // order, once Δ (R') is known, competing with every later miss's demand work. Work that
        // could not finish before the chunk is deciphered (MACed) anyway is not started: the
        // chunk then takes the ordinary path.
        let mut spec = [0; MAX_LINE / 8];
        let mut spec_mac = [0; MAX_LINE / 8];
        let mut match_latency = 0;
        let mut launched = 0u64;
        if let Some(fv) = m.spec.fv.as_mut() {
            let lat = self.engine.latency();
            let engine = fv.engine.as_mut().unwrap_or(&mut self.engine);
            // Posted with the fetch (004 §3.2 ①-②, Fig. 3), the speculation's engine encrypts
            // the nonce into its own R (and R') from the request on; otherwise it takes the
            // demand path's, known once the counter is read.
            let (s_r, s_rm) = if fv.at_fetch && k > 0 {
                (engine.run(t, CHUNK), if self.k.mac.is_some() { engine.run(t, CHUNK) } else { 0 })
            } else {
                (t_r, t_rm)
            };
            for i in 0..if k > 0 { n } else { 0 } {
                if let Some(d) = engine.run_by(s_r + xor, k as u64 * CHUNK, slow[i]) {
                    spec[i] = d;
                    launched |= 1 << i;
                }
            }
            if self.k.mac.is_some() {
                for i in 0..n {
                    if launched >> i & 1 == 1 {
                        match engine.run_by(s_rm + xor, k as u64 * CHUNK, slow[i] + lat) {
                            Some(d) => spec_mac[i] = d,
                            None => launched &= !(1 << i),
                        }
                    }
                }
                // A frequent chunk whose speculation was not launched is MACed the ordinary way.
                for i in 0..n {
                    if hits >> i & 1 == 1 && launched >> i & 1 == 0 {
                        mac_done[i] = self.engine.run(slow[i].max(t_rm + xor), CHUNK).max(t_macs) + 1;
                    }
                }
            }
            hits &= launched;
            match_latency = fv.match_latency;
            let (mut fast_ready, mut early) = (0, 0);
            for i in 0..n {
                let r = if hits >> i & 1 == 1 {
                    let fast = arrive[i].max(spec[i]) + match_latency;
                    early += (fast < slow[i]) as u64;
                    fast.min(slow[i])
                } else {
                    slow[i]
                };
                fast_ready = fast_ready.max(r);
            }
            let c = &mut fv.counts;
            c.line(n, frequent);
            c.hits += hits.count_ones() as u64;
            c.early += early;
            c.encryptions += (k as u64 * launched.count_ones() as u64) << self.k.mac.is_some() as usize;
            c.saved_cycles += ready.saturating_sub(fast_ready);
            ready = fast_ready;
        }
        self.exposed += ready.saturating_sub(tr.last);
        self.checked = None;
        if self.k.mac.is_some() {
            let mut done = ready;
            for i in 0..n {
                let d = if hits >> i & 1 == 1 {
                    self.macs.speculated += 1;
                    arrive[i].max(spec_mac[i]).max(t_macs) + match_latency
                } else {
                    mac_done[i]
                };
                done = done.max(d);
            }
            self.macs.checks += n as u64;
            self.macs.check_exposed += done - ready;
            m.note_check(done);
            self.checked = Some(done);
        }
        Ok(ready)
    }

    fn take_checked(&mut self) -> Option<Cycle> {
        self.checked.take()
    }

    fn boot_encrypted(&mut self, end: u64) -> Result<Option<Arc<dyn BootImage>>, String> {
        self.boot_end = end;
        Ok(Some(Boot::image(self.k.clone(), end, self.line)))
    }

    fn write_line(&mut self, m: &mut Machine, addr: u64, plain: &[u8], t: Cycle) -> Result<Cycle, IntegrityError> {
        self.writes += 1;
        let ctr = self.nonces.next(addr, "tdes")?;
        #[cfg(test)]
        assert!(self.nonces_used.insert((addr, ctr as u64)), "tdes reused the nonce {:?}", (addr, ctr as u64));
        let mut buf = [0u8; MAX_LINE];
        let ct = &mut buf[..plain.len()];
        ct.copy_from_slice(plain);
        self.encrypt(addr, ctr, ct);
        let t_r = self.engine.run(t, CHUNK);
        let t_enc = self.engine.run(t_r + m.xor_latency, plain.len() as u64);
        let done = match &self.k.mac {
            // The MACs go with the line, in its burst (004 §2.2).
            Some(c) => {
                let mut macs = [0u8; MAX_LINE];
                let k = plain.len() / CHUNK as usize * c.bytes;
                c.compute(self.line, addr, ctr, plain, &mut macs[..k]);
                let t_rm = self.engine.run(t, CHUNK);
                let t_m = self.engine.run(t_rm + m.xor_latency, plain.len() as u64);
                m.port.write_beside(addr, ct, c.store.addr(addr), &macs[..k], t_enc.max(t_m))
            }
            None => m.port.write(addr, ct, t_enc),
        };
        Ok(done.max(self.ctr_buf.write(&mut m.port, self.ctr_addr(addr), &ctr.to_le_bytes(), t_enc)))
    }

    fn drop_cached(&mut self) {
        self.ctr_buf.clear();
    }

    fn metadata_of(&self, addr: u64) -> Vec<Meta> {
        let mut v = vec![Meta::new(MetaKind::Counter("tdes"), self.ctr_addr(addr), B_CTR)];
        if let Some(c) = &self.k.mac {
            v.push(Meta::new(MetaKind::ChunkMacs("tdes"), c.store.addr(addr), (self.line / CHUNK) * c.bytes as u64));
        }
        v
    }

    fn reset_stats(&mut self) {
        (self.reads, self.writes, self.exposed) = (0, 0, 0);
        self.macs = ChunkMacCounts::default();
        self.ctr_buf.reset_stats();
        self.engine.reset_stats();
    }

    fn space_overhead(&self) -> f64 {
        self.ctrs.overhead() + self.k.mac.as_ref().map_or(0.0, |c| c.store.overhead())
    }

    fn stats(&self, _m: &Machine, out: &mut Stats) {
        out.int("tdes.reads", self.reads);
        out.int("tdes.writes", self.writes);
        out.int("tdes.counter_bus_reads", self.ctr_buf.bus_reads());
        let (hits, reads) = self.ctr_buf.hits();
        out.rate("tdes.counter_buffer_hit_rate", hits, reads);
        out.int("tdes.engine_units", self.engine.units);
        out.int("tdes.engine_wait_cycles", self.engine.wait_cycles);
        out.int("tdes.decrypt_exposed_cycles", self.exposed);
        out.rate("tdes.decrypt_exposed_per_read", self.exposed, self.reads);
        out.float("tdes.space_overhead", self.space_overhead());
        if self.k.mac.is_some() {
            self.macs.stats("tdes", self.reads, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{frequent_lines as workload, params, speculated_reads, stat};
    use crate::Engine;

    #[test]
    fn ciphertext_speculation_decides_as_the_real_speculative_encryptions_do() {
        // Every miss below runs `speculated_hits` (the real TDES encryptions of every table
        // value at every chunk position) and asserts it equals the plaintext decision.
        for n in [8, 16, 32] {
            let e = speculated_reads("tdes", &[&format!("speculation.frequent_values={}", n)]);
            let freq = stat(&e, "speculation.fv_frequent_chunks");
            // Every read is issued at cycle 0: the engine is swamped, and speculation that would
            // finish too late is not started (nor is a chunk whose speculation was not a hit).
            let enc = stat(&e, "speculation.fv_encryptions");
            assert!(enc > 0.0 && enc < 300.0 * 8.0 * n as f64, "{} speculative encryptions", enc);
            assert!(stat(&e, "speculation.fv_hits") <= freq);
        }
    }

    #[test]
    fn a_line_of_frequent_values_is_usable_before_its_decryption_would_finish() {
        let mut ready = Vec::new();
        for extra in [&[][..], &["speculation.frequent_values=8"][..]] {
            let mut p = params("none", "tdes", extra);
            p.set("tdes.engines", "4").unwrap();
            // R and then the speculation take two TDES latencies: memory must be slower than that
            // (004 Table 2's DRAM at 1:5 is about 200 cycles to the first beat).
            p.set("memory.latency", "250").unwrap();
            let mut e = Engine::new(&p, 3).unwrap();
            // The zero word becomes frequent; the line is written (real ciphertext) and evicted;
            // reading the neighbour first brings the counter word both lines share on chip, so
            // the speculation for it can start at its request.
            ready.push(crate::testutil::frequent_line_miss(&mut e).ready);
        }
        // Without: the last chunk's 96-cycle decryption follows its arrival; with: a match.
        assert!(ready[1] + 90 < ready[0], "ready after {:?} cycles (off, on)", ready);
    }

    #[test]
    fn chunk_macs_catch_every_change_to_line_counter_or_macs_with_and_without_speculation() {
        for spec in ["speculation.frequent_values=0", "speculation.frequent_values=8"] {
            for what in 0..4 {
                let mut e = Engine::new(&params("none", "tdes", &["tdes.chunk_mac_bytes=4", spec]), 5).unwrap();
                let line = [0u8; 64];
                e.write(0x8000, &line, 0).unwrap();
                e.flush(0).unwrap();
                let mut back = vec![0u8; 64];
                e.read(0x8000, &mut back, 0).unwrap();
                assert_eq!(back, line);
                e.write(0x8000, &[7u8; 8], 0).unwrap();
                e.flush(0).unwrap();
                let md = e.metadata_of(0x8000);
                let macs = md.iter().find(|m| m.kind == MetaKind::ChunkMacs("tdes")).expect("chunk MACs listed");
                let ctr = md.iter().find(|m| matches!(m.kind, MetaKind::Counter(_))).unwrap();
                let flip = |e: &mut Engine, a: u64| {
                    let mut b = [0u8; 1];
                    e.untrusted().read(a, &mut b);
                    e.untrusted().write(a, &[b[0] ^ 1]);
                };
                match what {
                    0 => flip(&mut e, 0x8000 + 20),
                    1 => flip(&mut e, macs.addr + 9),
                    2 => flip(&mut e, ctr.addr),
                    _ => {}
                }
                let r = e.read(0x8000, &mut back, 0);
                if what == 3 {
                    r.unwrap();
                    assert_eq!(back[..8], [7u8; 8]);
                    assert_eq!(stat(&e, "tdes.mac_failures"), 0.0);
                } else {
                    let err = r.expect_err("a change went unnoticed");
                    assert!(err.what.contains("MAC"), "{}", err);
                }
            }
        }
    }

    #[test]
    fn mac_speculation_verifies_a_line_of_frequent_values_on_arrival() {
        // 004 §3.3 with data issued only once authenticated: the line is usable when verified.
        let mut t = Vec::new();
        for extra in [&["tdes.chunk_mac_bytes=4"][..], &["tdes.chunk_mac_bytes=4", "speculation.frequent_values=8"][..]] {
            let mut p = params("none", "tdes", extra);
            for kv in ["tdes.engines=4", "memory.latency=250", "speculation.use_before_verify=false"] {
                p.set_str(kv).unwrap();
            }
            let mut e = Engine::new(&p, 3).unwrap();
            let o = crate::testutil::frequent_line_miss(&mut e);
            assert_eq!(o.ready, o.verified);
            t.push(o.verified);
            if extra.len() == 2 {
                // Both lines' (0x2040's too, whose counter comes from memory: the speculation
                // is posted with the fetch).
                assert_eq!(stat(&e, "tdes.mac_speculated"), 16.0);
            }
        }
        // Without: decryption then a MAC computation after the last chunk (two TDES latencies);
        // with: when the line and its MACs are in.
        assert!(t[1] + 150 < t[0], "verified after {:?} cycles (off, on)", t);
    }

    #[test]
    fn speculation_work_competes_with_demand_decryptions() {
        // A burst of misses: the speculation launched for one line holds the engine while later
        // lines' decryptions wait (004 §6.4).
        let mut r = Vec::new();
        for n in [0, 8, 32] {
            let fv = format!("speculation.frequent_values={}", n);
            let mut e = Engine::new(&params("none", "tdes", &[&fv, "memory.latency=250"]), 3).unwrap();
            workload(&mut e, 64);
            for k in 0..64u64 {
                e.access(0x10_0000 + k * 64, crate::AccessKind::Load, 1_000_000 + k * 40).unwrap();
                e.settle().unwrap();
            }
            let enc = if n > 0 { stat(&e, "speculation.fv_encryptions") } else { 0.0 };
            r.push((stat(&e, "tdes.engine_wait_cycles"), enc));
        }
        // (32 values need not book more: work that cannot finish in time is not started.)
        assert!(r[1].1 > 0.0 && r[2].1 > 0.0, "{:?}", r);
        assert!(r[1].0 > r[0].0 && r[2].0 > r[0].0, "demand work never waited for speculation: {:?}", r);
    }

    #[test]
    fn functional_warming_books_neither_tdes_nor_speculation_engines() {
        // A sampled run's functional warming (`Engine::set_untimed`) is untimed crypto: the
        // a burst that swamps the engine books no TDES engine and no
        // dedicated speculation engine while warming, yet still decrypts and speculates.
        for (extra, wait) in [(&[][..], "tdes.engine_wait_cycles"), (&["speculation.engines=1"][..], "speculation.engine_wait_cycles")] {
            let mut r = Vec::new();
            for warm in [false, true] {
                let mut p = params("none", "tdes", &["speculation.frequent_values=8", "memory.latency=250"]);
                for kv in extra {
                    p.set_str(kv).unwrap();
                }
                let mut e = Engine::new(&p, 3).unwrap();
                workload(&mut e, 64);
                e.reset_stats();
                e.set_untimed(warm);
                // All at once: the engine is swamped unless frozen.
                for k in 0..64u64 {
                    e.access(0x10_0000 + k * 64, crate::AccessKind::Load, 1_000_000).unwrap();
                }
                e.settle().unwrap();
                e.set_untimed(false);
                r.push((stat(&e, wait), stat(&e, "speculation.fv_encryptions")));
            }
            // (Frozen, an operation still starts on the engine's next slot boundary.)
            assert!(r[1].0 * 10.0 < r[0].0, "{extra:?}: warming waited for an engine: {r:?}");
            assert!(r[1].1 > 0.0, "{extra:?}: warming never speculated: {r:?}");
        }
    }

    #[test]
    fn dedicated_speculation_engines_leave_demand_work_alone() {
        // 004 Fig. 2's own "Pipelined Encryption Engines" (speculation.engines): the burst's
        // speculations now wait for each other, the demand decryptions for none of them.
        let mut r = Vec::new();
        for extra in [&["speculation.frequent_values=0"][..], &["speculation.frequent_values=32", "speculation.engines=1"]] {
            let mut p = params("none", "tdes", extra);
            p.set("memory.latency", "250").unwrap();
            let mut e = Engine::new(&p, 3).unwrap();
            workload(&mut e, 64);
            for k in 0..64u64 {
                e.access(0x10_0000 + k * 64, crate::AccessKind::Load, 1_000_000 + k * 40).unwrap();
                e.settle().unwrap();
            }
            let spec = if r.is_empty() { 0.0 } else { stat(&e, "speculation.engine_wait_cycles") };
            r.push((stat(&e, "tdes.engine_wait_cycles"), spec));
        }
        assert_eq!(r[0].0, r[1].0, "{:?}", r);
        assert!(r[1].1 > 0.0, "{:?}", r);
    }

    #[test]
    fn speculation_posted_with_the_fetch_does_not_wait_for_the_counter() {
        // No counter buffer: every counter comes from memory after its line. Posted with the
        // fetch (004 §3.2 ①-②) the speculation is in when the line arrives; waiting for the
        // counter it starts after the line is in and cannot beat the decryption.
        let mut t = Vec::new();
        for at_fetch in ["true", "false"] {
            let mut p = params("none", "tdes", &["speculation.frequent_values=8", "speculation.engines=4"]);
            for kv in ["tdes.engines=4", "memory.latency=250", "tdes.counter_buffer_entries=0", "speculation.use_before_verify=false"] {
                p.set_str(kv).unwrap();
            }
            p.set("speculation.at_fetch", at_fetch).unwrap();
            let mut e = Engine::new(&p, 3).unwrap();
            let o = crate::testutil::frequent_line_miss(&mut e);
            t.push((o.ready, stat(&e, "speculation.fv_early_hits")));
        }
        assert_eq!(t[0].1, 16.0, "both lines' chunks: {:?}", t);
        assert_eq!(t[1].1, 0.0, "{:?}", t);
        assert!(t[0].0 + 90 < t[1].0, "ready after {:?} cycles (at the fetch, after the counter)", t);
    }

    #[test]
    fn gf_doubling_reduces_by_the_64_bit_polynomial() {
        assert_eq!(dbl(1), 2);
        assert_eq!(dbl(1 << 63), 0x1B);
        assert_eq!(gf_mul(0x8000_0000_0000_0001, 3), 0x8000_0000_0000_0001 ^ 0x1B ^ 2);
    }
}
