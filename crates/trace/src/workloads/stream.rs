//! `stream`: the STREAM kernels (swim-like, bandwidth-bound) on three 4 MiB f64 arrays.
//!
//! Triad `a[i] = b[i] + s*c[i]`, then copy `c = a`, scale `b = s*c`, add `c = a + b`, and
//! again, forever, with STREAM's scalar 3.0. Every element touched once per kernel and
//! 12 MiB of arrays: with a 1 MiB L2 every line misses and every written line is evicted
//! dirty. Scalar SSE2 code as gcc -O2 emits it (one element per iteration).

use super::*;
use crate::record::Instr;

/// Elements per array (4 MiB of f64).
pub const N: usize = 512 * 1024;
/// Arrays live in their own anonymous mappings, as glibc gives large allocations.
pub const A_BASE: u64 = 0x7f4c_8a20_0000;
pub const B_BASE: u64 = A_BASE + 0x40_1000;
pub const C_BASE: u64 = B_BASE + 0x40_1000;
/// Text of the program: all pcs lie in `TEXT..TEXT + 0x1000`.
pub const TEXT: u64 = 0x5555_5555_6000;
const SCALAR: f64 = 3.0;

/// The `stream` workload.
pub struct Stream {
    exec: Exec,
    p: Prog,
}

impl Stream {
    pub fn new(seed: u64) -> Stream {
        let mut asm = Asm::new(TEXT);
        let c = Code::new(&mut asm);
        // Initial contents: the arrays as a prior initialisation pass left them.
        let mut rng = Rng::new(seed, 0x5157_4ea3);
        let mut init = |_| (0..N).map(|_| 1.0 + rng.unit()).collect::<Vec<f64>>();
        let (a, b, cc) = (init(0), init(1), init(2));
        Stream {
            exec: Exec::new(asm),
            p: Prog {
                c,
                a,
                b,
                cc,
                kernel: 0,
                i: 0,
                started: false,
            },
        }
    }

    /// Next record; true if it was an instruction (not an external record).
    #[inline(always)]
    pub(crate) fn step(&mut self, out: &mut Instr) -> bool {
        self.exec.next(&mut self.p, out)
    }

    /// The next external (loader) record of the initial image; false once it is all out.
    pub(crate) fn load(&mut self, out: &mut Instr) -> bool {
        self.exec.next_external(&mut self.p, out)
    }
}

impl TraceSource for Stream {
    fn next_into(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
        self.step(out);
        Ok(true)
    }

    fn name(&self) -> &str {
        "stream"
    }
}

/// Static instruction ids.
struct Code {
    // start-up
    lea_a: u16,
    lea_b: u16,
    lea_c: u16,
    mov_n: u16,
    mov_3: u16,
    cvt_s: u16,
    // one prologue (xor eax,eax) + loop per kernel
    kernels: [Kernel; 4],
    // outer loop
    outer_add: u16,
    outer_jmp: u16,
}

/// One kernel's code: `body` are the per-element instructions before the loop control.
struct Kernel {
    xor: u16,
    body: [u16; 5],
    nbody: usize,
    inc: u16,
    cmp: u16,
    jne: u16,
}

impl Code {
    fn new(a: &mut Asm) -> Code {
        use OpClass::Fp;
        let lea_a = a.alu(7, &[], &[RDI]);
        let lea_b = a.alu(7, &[], &[RDX]);
        let lea_c = a.alu(7, &[], &[RCX]);
        let mov_n = a.alu(5, &[], &[RSI]);
        let mov_3 = a.alu(5, &[], &[RAX]);
        let cvt_s = a.ins(4, Fp, &[RAX], &[XMM2], Mem::None);
        let kernel = |a: &mut Asm, body: &dyn Fn(&mut Asm) -> Vec<u16>| {
            let xor = a.alu(3, &[], &[RAX, FLAGS]);
            a.align(16);
            let b = body(a);
            let mut k = Kernel {
                xor,
                body: [0; 5],
                nbody: b.len(),
                inc: a.alu(4, &[RAX], &[RAX, FLAGS]),
                cmp: a.alu(3, &[RAX, RSI], &[FLAGS]),
                jne: a.br(6, &[FLAGS]),
            };
            k.body[..b.len()].copy_from_slice(&b);
            k
        };
        // triad: a[i] = b[i] + s*c[i]
        let triad = kernel(a, &|a| {
            vec![
                a.ld(5, 8, &[RCX, RAX], &[XMM0]),
                a.ins(4, Fp, &[XMM0, XMM2], &[XMM0], Mem::None),
                a.ld(5, 8, &[RDX, RAX], &[XMM1]),
                a.ins(4, Fp, &[XMM0, XMM1], &[XMM0], Mem::None),
                a.st(5, 8, &[RDI, RAX, XMM0]),
            ]
        });
        // copy: c[i] = a[i]
        let copy = kernel(a, &|a| {
            vec![
                a.ld(5, 8, &[RDI, RAX], &[XMM0]),
                a.st(5, 8, &[RCX, RAX, XMM0]),
            ]
        });
        // scale: b[i] = s*c[i]
        let scale = kernel(a, &|a| {
            vec![
                a.ld(5, 8, &[RCX, RAX], &[XMM0]),
                a.ins(4, Fp, &[XMM0, XMM2], &[XMM0], Mem::None),
                a.st(5, 8, &[RDX, RAX, XMM0]),
            ]
        });
        // add: c[i] = a[i] + b[i]
        let add = kernel(a, &|a| {
            vec![
                a.ld(5, 8, &[RDI, RAX], &[XMM0]),
                a.ld(5, 8, &[RDX, RAX], &[XMM1]),
                a.ins(4, Fp, &[XMM0, XMM1], &[XMM0], Mem::None),
                a.st(5, 8, &[RCX, RAX, XMM0]),
            ]
        });
        let outer_add = a.alu(4, &[R12], &[R12, FLAGS]);
        let outer_jmp = a.br(5, &[]);
        assert!(a.end() < TEXT + 0x1000);
        Code {
            lea_a,
            lea_b,
            lea_c,
            mov_n,
            mov_3,
            cvt_s,
            kernels: [triad, copy, scale, add],
            outer_add,
            outer_jmp,
        }
    }
}

struct Prog {
    c: Code,
    a: Vec<f64>,
    b: Vec<f64>,
    cc: Vec<f64>,
    /// 0 triad, 1 copy, 2 scale, 3 add.
    kernel: usize,
    i: usize,
    started: bool,
}

impl Program for Prog {
    fn external(&mut self, k: u32, out: &mut Instr) -> bool {
        let per = N * 8 / PAGE;
        let k = k as usize;
        let (arr, base) = match k / per {
            0 => (&self.a, A_BASE),
            1 => (&self.b, B_BASE),
            2 => (&self.cc, C_BASE),
            _ => return false,
        };
        let pg = k % per;
        external_record(out, base + (pg * PAGE) as u64, |d| {
            for x in &arr[pg * PAGE / 8..(pg + 1) * PAGE / 8] {
                d.extend_from_slice(&x.to_le_bytes());
            }
        });
        true
    }

    fn run(&mut self, q: &mut Queue) {
        let c = &self.c;
        if !self.started {
            self.started = true;
            for id in [c.lea_a, c.lea_b, c.lea_c, c.mov_n, c.mov_3, c.cvt_s] {
                q.op(id);
            }
        }
        let k = &c.kernels[self.kernel];
        if self.i == 0 {
            q.op(k.xor);
        }
        // A batch of iterations, exactly as the loop executes them.
        let end = (self.i + 64).min(N);
        for i in self.i..end {
            let off = (i * 8) as u64;
            let b = &k.body;
            match self.kernel {
                0 => {
                    let (bv, cv) = (self.b[i], self.cc[i]);
                    let r = bv + SCALAR * cv;
                    q.mem(b[0], C_BASE + off, cv.to_bits());
                    q.op(b[1]);
                    q.mem(b[2], B_BASE + off, bv.to_bits());
                    q.op(b[3]);
                    q.mem(b[4], A_BASE + off, r.to_bits());
                    self.a[i] = r;
                }
                1 => {
                    let av = self.a[i];
                    q.mem(b[0], A_BASE + off, av.to_bits());
                    q.mem(b[1], C_BASE + off, av.to_bits());
                    self.cc[i] = av;
                }
                2 => {
                    let cv = self.cc[i];
                    let r = SCALAR * cv;
                    q.mem(b[0], C_BASE + off, cv.to_bits());
                    q.op(b[1]);
                    q.mem(b[2], B_BASE + off, r.to_bits());
                    self.b[i] = r;
                }
                _ => {
                    let (av, bv) = (self.a[i], self.b[i]);
                    let r = av + bv;
                    q.mem(b[0], A_BASE + off, av.to_bits());
                    q.mem(b[1], B_BASE + off, bv.to_bits());
                    q.op(b[2]);
                    q.mem(b[3], C_BASE + off, r.to_bits());
                    self.cc[i] = r;
                }
            }
            debug_assert!(k.nbody >= 2);
            q.op(k.inc);
            q.op(k.cmp);
            q.br(k.jne, i + 1 != N);
        }
        self.i = end;
        if end == N {
            self.i = 0;
            self.kernel += 1;
            if self.kernel == 4 {
                self.kernel = 0;
                q.op(c.outer_add);
                q.op(c.outer_jmp);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::testutil::*;

    #[test]
    fn deterministic_per_seed() {
        let x = take(&mut Stream::new(7), 100_000);
        assert_eq!(x, take(&mut Stream::new(7), 100_000));
        assert_ne!(x, take(&mut Stream::new(8), 100_000));
    }

    #[test]
    fn loads_see_the_last_stored_values() {
        // 3 M records cover the external image, triad and half of copy.
        let sh = replay(&mut Stream::new(1), 3_000_000);
        assert_eq!(sh.externals, 3 * (N * 8 / PAGE) as u64);
        assert!(
            sh.loads > 600_000 && sh.stores > 300_000,
            "{} loads {} stores",
            sh.loads,
            sh.stores
        );
    }

    #[test]
    fn every_kernel_runs_and_values_stay_consistent_across_rounds() {
        // One full round of the four kernels plus the start of the next.
        let per_round = N as u64 * (8 + 5 + 6 + 7) + 10;
        let sh = replay(&mut Stream::new(2), 3072 + per_round + 100_000);
        assert!(sh.branches > 4 * N as u64);
    }

    #[test]
    fn streams_megabytes_and_writes_back_dirty_lines_from_a_1mib_l2() {
        let lines = distinct_lines(&mut Stream::new(3), 5_000_000);
        assert!(lines * 64 > 8 << 20, "only {lines} lines");
        let c = &cache_run(&mut Stream::new(3), 100_000, 2_000_000, &[1 << 20])[0];
        // One miss per 8 elements of each array: 1/8 of accesses.
        assert!(c.miss_rate() > 0.1, "miss rate {}", c.miss_rate());
        assert!(
            c.dirty_evictions > 20_000,
            "{} dirty evictions",
            c.dirty_evictions
        );
    }
}
