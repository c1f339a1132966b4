//! `chase`: mcf-like pointer chasing (latency-bound).
//!
//! 16 MiB of 64-byte nodes on the heap, linked into one random cycle (Sattolo's algorithm,
//! so every node is visited once per lap in an order no prefetcher can follow). Each step
//! loads the node's cost into a running sum, tests the node's orientation and, for the
//! quarter of nodes that point "up", adds the sum to the node's potential (a load and a
//! store: dirty lines, read back on the next lap), then loads `node->next`: the next step's
//! address register is this load's destination.

use super::*;
use crate::record::Instr;

/// Nodes in the heap (16 MiB of 64-byte nodes).
pub const NODES: usize = 16 * 1024 * 1024 / 64;
/// Start of the node array on the heap.
pub const HEAP: u64 = 0x5555_5580_0000;
/// Text of the program: all pcs lie in `TEXT..TEXT + 0x1000`.
pub const TEXT: u64 = 0x5555_5555_7000;

// Node layout, in 8-byte words.
const W_NEXT: usize = 0;
const W_COST: usize = 1;
const W_POTENTIAL: usize = 2;
const W_NUMBER: usize = 3;
const W_ORIENT: usize = 4;
const W_PRED: usize = 5;
const W_FLOW: usize = 6;
const W_ARC: usize = 7;

/// The `chase` workload.
pub struct Chase {
    exec: Exec,
    p: Prog,
}

impl Chase {
    pub fn new(seed: u64) -> Chase {
        let mut asm = Asm::new(TEXT);
        let c = Code::new(&mut asm);
        let mut rng = Rng::new(seed, 0xc4a5e);
        // Sattolo's algorithm: a uniformly random permutation that is a single cycle.
        let mut next: Vec<u32> = (0..NODES as u32).collect();
        for i in (1..NODES).rev() {
            let j = rng.below(i as u64) as usize;
            next.swap(i, j);
        }
        let addr = |n: u32| HEAP + n as u64 * 64;
        let mut mem = vec![0u64; NODES * 8];
        for (n, &nx) in next.iter().enumerate() {
            let w = &mut mem[n * 8..n * 8 + 8];
            w[W_NEXT] = addr(nx);
            w[W_COST] = 1 + rng.below(10_000);
            w[W_POTENTIAL] = rng.below(1_000_000);
            w[W_NUMBER] = n as u64;
            // Low half: orientation (1 = up for a quarter of nodes); high half: depth.
            w[W_ORIENT] = (rng.below(4) == 0) as u64 | (rng.below(64) << 32);
            w[W_FLOW] = rng.below(100);
            w[W_ARC] = addr(rng.below(NODES as u64) as u32) + 8;
        }
        for (n, &nx) in next.iter().enumerate() {
            mem[nx as usize * 8 + W_PRED] = addr(n as u32);
        }
        let mut order = Vec::with_capacity(NODES);
        let mut n = 0;
        for _ in 0..NODES {
            order.push(n);
            n = next[n as usize];
        }
        let p = Prog {
            c,
            mem,
            order,
            node: 0,
            step: 0,
            potential: 0,
            started: false,
        };
        Chase {
            exec: Exec::new(asm),
            p,
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

impl TraceSource for Chase {
    fn next_into(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
        self.step(out);
        Ok(true)
    }

    fn name(&self) -> &str {
        "chase"
    }
}

struct Code {
    setup: [u16; 4],
    ld_cost: u16,
    add_pot: u16,
    cmp_orient: u16,
    je_skip: u16,
    ld_pot: u16,
    add_old: u16,
    st_pot: u16,
    ld_next: u16,
    cmp_root: u16,
    jne_loop: u16,
    lap_add: u16,
    lap_jmp: u16,
}

impl Code {
    fn new(a: &mut Asm) -> Code {
        let setup = [
            a.alu(3, &[RDI], &[R8]),      // mov r8, rdi        (root = nodes)
            a.alu(3, &[R8], &[RAX]),      // mov rax, r8
            a.alu(3, &[], &[RBX, FLAGS]), // xor ebx, ebx       (potential)
            a.alu(3, &[], &[R9, FLAGS]),  // xor r9d, r9d       (laps)
        ];
        a.align(16);
        let c = Code {
            setup,
            ld_cost: a.ld(4, 8, &[RAX], &[RDX]), // mov rdx, [rax+8]
            add_pot: a.alu(3, &[RBX, RDX], &[RBX, FLAGS]), // add rbx, rdx
            cmp_orient: a.ins(4, OpClass::Alu, &[RAX], &[FLAGS], Mem::Load(4)), // cmp dword [rax+32], 0
            je_skip: a.br(6, &[FLAGS]),                                         // je skip
            ld_pot: a.ld(4, 8, &[RAX], &[RSI]),                                 // mov rsi, [rax+16]
            add_old: a.alu(3, &[RSI, RBX], &[RSI, FLAGS]),                      // add rsi, rbx
            st_pot: a.st(4, 8, &[RAX, RSI]),                                    // mov [rax+16], rsi
            ld_next: a.ld(3, 8, &[RAX], &[RAX]), // skip: mov rax, [rax]
            cmp_root: a.alu(3, &[RAX, R8], &[FLAGS]), // cmp rax, r8
            jne_loop: a.br(6, &[FLAGS]),         // jne loop
            lap_add: a.alu(4, &[R9], &[R9, FLAGS]), // add r9, 1
            lap_jmp: a.br(5, &[]),               // jmp loop
        };
        assert!(a.end() < TEXT + 0x1000);
        c
    }
}

struct Prog {
    c: Code,
    /// The node array as 8-byte words (8 per node).
    mem: Vec<u64>,
    /// The nodes in visiting order: lets the generator prefetch its own host memory ahead
    /// of the chase (the simulated program cannot; it has only the pointers).
    order: Vec<u32>,
    /// Current node index (rax = HEAP + 64*node) and its place in the lap.
    node: usize,
    step: usize,
    /// rbx: the running sum of costs.
    potential: u64,
    started: bool,
}

impl Program for Prog {
    fn external(&mut self, k: u32, out: &mut Instr) -> bool {
        let k = k as usize;
        if k >= self.mem.len() * 8 / PAGE {
            return false;
        }
        external_record(out, HEAP + (k * PAGE) as u64, |d| {
            page_of_words(&self.mem, k, d)
        });
        true
    }

    fn run(&mut self, q: &mut Queue) {
        let c = &self.c;
        if !self.started {
            self.started = true;
            for id in c.setup {
                q.op(id);
            }
        }
        // A batch of loop iterations, one node each.
        for _ in 0..32 {
            let n = self.node;
            prefetch(&self.mem[self.order[(self.step + 24) % NODES] as usize * 8]);
            let base = HEAP + n as u64 * 64;
            let w = &mut self.mem[n * 8..n * 8 + 8];
            let cost = w[W_COST];
            q.mem(c.ld_cost, base + 8 * W_COST as u64, cost);
            self.potential = self.potential.wrapping_add(cost);
            q.op(c.add_pot);
            let orient = w[W_ORIENT] & 0xffff_ffff;
            q.mem(c.cmp_orient, base + 8 * W_ORIENT as u64, orient);
            q.br(c.je_skip, orient == 0);
            if orient != 0 {
                let pa = base + 8 * W_POTENTIAL as u64;
                q.mem(c.ld_pot, pa, w[W_POTENTIAL]);
                q.op(c.add_old);
                w[W_POTENTIAL] = w[W_POTENTIAL].wrapping_add(self.potential);
                q.mem(c.st_pot, pa, w[W_POTENTIAL]);
            }
            let next = w[W_NEXT];
            q.mem(c.ld_next, base + 8 * W_NEXT as u64, next);
            self.node = ((next - HEAP) / 64) as usize;
            self.step = (self.step + 1) % NODES;
            debug_assert_eq!(self.node, self.order[self.step] as usize);
            q.op(c.cmp_root);
            q.br(c.jne_loop, self.node != 0);
            if self.node == 0 {
                q.op(c.lap_add);
                q.op(c.lap_jmp);
            }
        }
    }
}

/// Hint the host to fetch a node: the generator's own walk through 16 MiB would otherwise
/// be as latency-bound as the program it describes.
#[inline(always)]
fn prefetch(x: &u64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch hint has no architectural effect; the pointer comes from a reference.
    #[allow(unused_unsafe)]
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(x as *const u64 as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::testutil::*;

    #[test]
    fn deterministic_per_seed() {
        let x = take(&mut Chase::new(7), 100_000);
        assert_eq!(x, take(&mut Chase::new(7), 100_000));
        assert_ne!(x, take(&mut Chase::new(8), 100_000));
    }

    #[test]
    fn nodes_form_one_cycle_through_all_of_the_heap() {
        let ch = Chase::new(3);
        let mut n = 0usize;
        for step in 1..=NODES {
            n = ((ch.p.mem[n * 8 + W_NEXT] - HEAP) / 64) as usize;
            assert!(n < NODES);
            if n == 0 {
                assert_eq!(step, NODES, "cycle closes early");
            }
        }
        assert_eq!(n, 0);
    }

    #[test]
    fn loads_see_the_last_stored_values_across_a_lap() {
        // 4096 external pages, then > 1 lap (262144 nodes × ~7.75 instructions): the second
        // lap reloads potentials stored in the first.
        let sh = replay(&mut Chase::new(1), 4096 + 2_500_000);
        assert_eq!(sh.externals, 4096);
        assert!(sh.stores > 50_000);
    }

    #[test]
    fn next_address_comes_from_the_previous_load() {
        let mut w = Chase::new(5);
        let mut r = Instr::default();
        let mut last_next = None;
        let mut checked = 0;
        for _ in 0..200_000 {
            w.next_into(&mut r).unwrap();
            if r.external || r.accesses.is_empty() {
                continue;
            }
            let a = r.accesses[0];
            if let Some(nx) = last_next.take() {
                // The first access after loading next is at that node (cost field).
                assert_eq!(a.addr, nx + 8);
                checked += 1;
            }
            if r.dsts() == [RAX] && !a.store {
                assert_eq!(r.srcs(), [RAX]);
                last_next = Some(u64::from_le_bytes(r.value(&a).try_into().unwrap()));
            }
        }
        assert!(checked > 10_000);
    }

    #[test]
    fn touches_the_whole_heap_and_misses_a_1mib_l2() {
        let lines = distinct_lines(&mut Chase::new(3), 5_000_000);
        assert!(lines >= NODES, "only {lines} lines");
        let c = &cache_run(&mut Chase::new(3), 100_000, 2_000_000, &[1 << 20])[0];
        // One new line per node, ~3.5 accesses per node.
        assert!(c.miss_rate() > 0.25, "miss rate {}", c.miss_rate());
    }
}
