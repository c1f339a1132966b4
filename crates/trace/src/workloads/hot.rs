//! `hot`: gzip-like LZ77 compression (cache-sensitive).
//!
//! gzip's `deflate_fast` and `longest_match` as in gzip 1.2.4 (the SPEC 164.gzip code) at
//! level 2: a rolling hash of the next 3 bytes, `head[]` (last position per hash value),
//! `prev[]` (hash chains over the window), a chain walk comparing candidate bytes, and
//! literal/match tokens written to a circular token buffer. Input: 512 KiB of generated
//! text with a Zipf vocabulary and repeated passages, compressed again and again (each pass
//! clears `head` as `lm_init` does).
//!
//! The tables are scaled up from gzip's (32-bit entries, 64 Ki hash values, 128 KiB window)
//! so the working set is ~1.4 MiB: input 512 KiB + head 256 KiB + prev 512 KiB + tokens
//! 128 KiB, with head and prev accessed at random. In a 16-way LRU model a 256 KiB L2
//! thrashes (~14 misses per 1000 instructions), 1 MiB misses on the reuse from pass to pass
//! (~0.9; a pass is ~20 M instructions) and 4 MiB holds it all (0).

use super::*;
use crate::record::Instr;

/// Input size.
pub const IN_LEN: usize = 512 * 1024;
/// Zero bytes after the input that the look-ahead may read (as gzip's window slack).
const PAD: usize = 4096;
const HASH_BITS: u32 = 16;
const HASH_SIZE: usize = 1 << HASH_BITS;
const HASH_MASK: u32 = HASH_SIZE as u32 - 1;
const H_SHIFT: u32 = HASH_BITS.div_ceil(3);
const WSIZE: usize = 1 << 17;
const WMASK: u32 = WSIZE as u32 - 1;
const MIN_MATCH: u32 = 3;
const MAX_MATCH: u32 = 258;
const MAX_DIST: u32 = WSIZE as u32 - (MAX_MATCH + MIN_MATCH + 1);
/// gzip -2: max_insert_length (max_lazy), nice_match, max_chain.
const MAX_INSERT: u32 = 5;
const NICE: u32 = 16;
const MAX_CHAIN: u32 = 8;
const TOKENS: usize = 1 << 15;

/// Static arrays in the program's .bss.
pub const WINDOW: u64 = 0x5555_5555_c000;
pub const HEAD: u64 = WINDOW + (IN_LEN + PAD) as u64;
pub const PREV: u64 = HEAD + (HASH_SIZE * 4) as u64;
pub const TOKEN_BUF: u64 = PREV + (WSIZE * 4) as u64;
pub const MATCH_START: u64 = TOKEN_BUF + (TOKENS * 4) as u64;
/// End of the data region.
pub const DATA_END: u64 = MATCH_START + 64;
/// The stack slot `call longest_match` pushes its return address to.
pub const RET_SLOT: u64 = 0x7ffd_c3a1_7e38;
/// Text of the program: all pcs lie in `TEXT..TEXT + 0x1000`.
pub const TEXT: u64 = 0x5555_5555_8000;

/// The `hot` workload.
pub struct Hot {
    exec: Exec,
    p: Prog,
}

impl Hot {
    pub fn new(seed: u64) -> Hot {
        let mut asm = Asm::new(TEXT);
        let c = Code::new(&mut asm);
        let mut win = text(seed);
        win.resize(IN_LEN + PAD, 0);
        let p = Prog {
            c,
            win,
            head: vec![0; HASH_SIZE],
            prev: vec![0; WSIZE],
            tokens: vec![0; TOKENS],
            match_start: 0,
            ret_slot: 0,
            ins_h: 0,
            strstart: 0,
            ntok: 0,
            pass_start: true,
            passes: 0,
        };
        Hot {
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

impl TraceSource for Hot {
    fn next_into(&mut self, out: &mut Instr) -> Result<bool, TraceError> {
        self.step(out);
        Ok(true)
    }

    fn name(&self) -> &str {
        "hot"
    }
}

/// Pseudo-English: Zipf-distributed words from a random vocabulary, sentences and
/// paragraphs, and now and then a passage repeated from earlier (boilerplate).
fn text(seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed, 0x6a1b);
    const LETTERS: &[u8] = b"eeeeeeeeeeeettttttttaaaaaaaoooooooiiiiiiinnnnnnnsssssshhhhhhrrrrrrddddlllluuucccmmmwwffggyyppbbvkjxqz";
    let vocab: Vec<Vec<u8>> = (0..4000)
        .map(|_| {
            let len = 1 + rng.below(4) + rng.below(5) + rng.below(3);
            (0..len)
                .map(|_| LETTERS[rng.below(LETTERS.len() as u64) as usize])
                .collect()
        })
        .collect();
    let mut cum = Vec::with_capacity(vocab.len());
    let mut total = 0.0;
    for r in 0..vocab.len() {
        total += 1.0 / (r as f64 + 1.0);
        cum.push(total);
    }
    let mut out = Vec::with_capacity(IN_LEN + 512);
    while out.len() < IN_LEN {
        if out.len() > 4096 && rng.below(40) == 0 {
            let len = 30 + rng.below(300) as usize;
            let back = len + rng.below((120 * 1024).min(out.len() as u64 - len as u64)) as usize;
            let from = out.len() - back;
            for i in 0..len {
                out.push(out[from + i]);
            }
            continue;
        }
        let words = 4 + rng.below(16);
        for w in 0..words {
            let x = rng.unit() * total;
            let word = &vocab[cum.partition_point(|&c| c < x).min(vocab.len() - 1)];
            if w == 0 {
                out.push(word[0].to_ascii_uppercase());
                out.extend_from_slice(&word[1..]);
            } else {
                out.extend_from_slice(word);
            }
            out.push(if w + 1 == words {
                b'.'
            } else if rng.below(12) == 0 {
                b','
            } else {
                b' '
            });
            if w + 1 < words && out.last() == Some(&b',') {
                out.push(b' ');
            }
        }
        out.extend_from_slice(if rng.below(6) == 0 { b"\n\n" } else { b" " });
    }
    out.truncate(IN_LEN);
    out
}

/// The instructions of INSERT_STRING (gzip's macro: expanded at each use).
type Insert = [u16; 9];

fn insert_code(a: &mut Asm) -> Insert {
    [
        a.ld(6, 1, &[R14, R12], &[RAX]),      // movzx eax, byte [r14+r12+2]
        a.alu(4, &[R13], &[R13, FLAGS]),      // shl r13d, 5
        a.alu(3, &[R13, RAX], &[R13, FLAGS]), // xor r13d, eax
        a.alu(7, &[R13], &[R13, FLAGS]),      // and r13d, 0xffff
        a.ld(4, 4, &[R15, R13], &[RDX]),      // mov edx, [r15+r13*4]   hash_head
        a.alu(3, &[R12], &[RCX]),             // mov ecx, r12d
        a.alu(6, &[RCX], &[RCX, FLAGS]),      // and ecx, 0x1ffff
        a.st(3, 4, &[RBX, RCX, RDX]),         // mov [rbx+rcx*4], edx   prev[]
        a.st(4, 4, &[R15, R13, R12]),         // mov [r15+r13*4], r12d  head[]
    ]
}

struct Code {
    // lm_init: base registers, clear head[], prime the hash.
    init: [u16; 5],
    clr: [u16; 4],
    prime: [u16; 6],
    // deflate_fast main loop.
    ins_top: Insert,
    test_head: u16,
    je_lit: u16,
    dist: [u16; 3],
    ja_lit: u16,
    call: u16,
    ret_addr: u64,
    clamp: [u16; 5],
    jle_lit: u16,
    tally_match: [u16; 10],
    cmp_insert: u16,
    ja_skip: u16,
    set_count: u16,
    ins_inc: u16,
    ins_loop: Insert,
    ins_dec: u16,
    ins_jne: u16,
    ins_last: u16,
    ins_jmp: u16,
    skip: [u16; 6],
    skip_jmp: u16,
    lit: [u16; 6],
    chk_cmp: u16,
    chk_jb: u16,
    pass_jmp: u16,
    // longest_match
    lm_pro: [u16; 8],
    ch_setup: [u16; 2],
    ch_pre: [[u16; 3]; 4],
    ch_adv: [u16; 2],
    cmp_loop: [u16; 7],
    done: [u16; 8],
    next: [u16; 7],
    out: [u16; 2],
}

impl Code {
    fn new(a: &mut Asm) -> Code {
        use OpClass::{Alu, Branch};
        let init = [
            a.alu(7, &[], &[R14]),        // lea r14, [rip+window]
            a.alu(7, &[], &[R15]),        // lea r15, [rip+head]
            a.alu(7, &[], &[RBX]),        // lea rbx, [rip+prev]
            a.alu(3, &[], &[RAX, FLAGS]), // xor eax, eax
            a.alu(3, &[], &[RCX, FLAGS]), // xor ecx, ecx
        ];
        a.align(16);
        let clr = [
            a.st(4, 8, &[R15, RAX, RCX]),    // mov [r15+rax*8], rcx
            a.alu(4, &[RAX], &[RAX, FLAGS]), // add rax, 1
            a.alu(6, &[RAX], &[FLAGS]),      // cmp rax, 32768
            a.br(6, &[FLAGS]),               // jne
        ];
        let prime = [
            a.alu(3, &[], &[R12, FLAGS]),         // xor r12d, r12d
            a.ld(5, 1, &[R14], &[R13]),           // movzx r13d, byte [r14]
            a.ld(5, 1, &[R14], &[RAX]),           // movzx eax, byte [r14+1]
            a.alu(4, &[R13], &[R13, FLAGS]),      // shl r13d, 5
            a.alu(3, &[R13, RAX], &[R13, FLAGS]), // xor r13d, eax
            a.alu(7, &[R13], &[R13, FLAGS]),      // and r13d, 0xffff
        ];
        a.align(16);
        let ins_top = insert_code(a);
        let test_head = a.alu(3, &[RDX], &[FLAGS]); // test edx, edx
        let je_lit = a.br(6, &[FLAGS]); // je literal
        let dist = [
            a.alu(3, &[R12], &[RAX]),             // mov eax, r12d
            a.alu(3, &[RAX, RDX], &[RAX, FLAGS]), // sub eax, edx
            a.alu(5, &[RAX], &[FLAGS]),           // cmp eax, MAX_DIST
        ];
        let ja_lit = a.br(6, &[FLAGS]); // ja literal
        let call = a.ins(5, Branch, &[RSP], &[RSP], Mem::Store(8)); // call longest_match
        let ret_addr = a.next_pc(call);
        let clamp = [
            a.alu(5, &[], &[RCX]),                // mov ecx, IN_LEN
            a.alu(3, &[RCX, R12], &[RCX, FLAGS]), // sub ecx, r12d   (lookahead)
            a.alu(3, &[RAX, RCX], &[FLAGS]),      // cmp eax, ecx
            a.alu(3, &[RAX, RCX, FLAGS], &[RAX]), // cmova eax, ecx
            a.alu(3, &[RAX], &[FLAGS]),           // cmp eax, 2
        ];
        let jle_lit = a.br(6, &[FLAGS]); // jle literal
        let tally_match = [
            a.alu(3, &[RAX], &[RCX]),                           // lea ecx, [rax-3]
            a.alu(3, &[RCX], &[RCX, FLAGS]),                    // shl ecx, 17
            a.alu(3, &[R12], &[RDX]),                           // mov edx, r12d
            a.ins(6, Alu, &[RDX], &[RDX, FLAGS], Mem::Load(4)), // sub edx, [rip+match_start]
            a.alu(3, &[RCX, RDX], &[RCX, FLAGS]),               // or ecx, edx
            a.alu(6, &[RCX], &[RCX, FLAGS]),                    // or ecx, 0x80000000
            a.alu(7, &[], &[RDI]),                              // lea rdi, [rip+tokens]
            a.st(3, 4, &[RDI, RBP, RCX]),                       // mov [rdi+rbp*4], ecx
            a.alu(3, &[RBP], &[RBP, FLAGS]),                    // add ebp, 1
            a.alu(6, &[RBP], &[RBP, FLAGS]),                    // and ebp, 0x7fff
        ];
        let cmp_insert = a.alu(3, &[RAX], &[FLAGS]); // cmp eax, MAX_INSERT
        let ja_skip = a.br(6, &[FLAGS]); // ja skip_insert
        let set_count = a.alu(4, &[RAX], &[R8]); // lea r8d, [rax-1]
        a.align(16);
        let ins_inc = a.alu(4, &[R12], &[R12, FLAGS]); // add r12d, 1
        let ins_loop = insert_code(a);
        let ins_dec = a.alu(4, &[R8], &[R8, FLAGS]); // sub r8d, 1
        let ins_jne = a.br(6, &[FLAGS]); // jne
        let ins_last = a.alu(4, &[R12], &[R12, FLAGS]); // add r12d, 1
        let ins_jmp = a.br(5, &[]); // jmp check
        let skip = [
            a.alu(3, &[R12, RAX], &[R12, FLAGS]), // add r12d, eax
            a.ld(5, 1, &[R14, R12], &[R13]),      // movzx r13d, byte [r14+r12]
            a.ld(6, 1, &[R14, R12], &[RAX]),      // movzx eax, byte [r14+r12+1]
            a.alu(4, &[R13], &[R13, FLAGS]),      // shl r13d, 5
            a.alu(3, &[R13, RAX], &[R13, FLAGS]), // xor r13d, eax
            a.alu(7, &[R13], &[R13, FLAGS]),      // and r13d, 0xffff
        ];
        let skip_jmp = a.br(5, &[]); // jmp check
        let lit = [
            a.ld(5, 1, &[R14, R12], &[RAX]), // movzx eax, byte [r14+r12]
            a.alu(7, &[], &[RDI]),           // lea rdi, [rip+tokens]
            a.st(3, 4, &[RDI, RBP, RAX]),    // mov [rdi+rbp*4], eax
            a.alu(3, &[RBP], &[RBP, FLAGS]), // add ebp, 1
            a.alu(6, &[RBP], &[RBP, FLAGS]), // and ebp, 0x7fff
            a.alu(4, &[R12], &[R12, FLAGS]), // add r12d, 1
        ];
        let chk_cmp = a.alu(7, &[R12], &[FLAGS]); // cmp r12d, IN_LEN
        let chk_jb = a.br(6, &[FLAGS]); // jb top
        let pass_jmp = a.br(5, &[]); // jmp lm_init

        a.align(16);
        let lm_pro = [
            a.alu(6, &[], &[R8]),                 // mov r8d, MAX_CHAIN
            a.alu(4, &[R14, R12], &[RSI]),        // lea rsi, [r14+r12]     scan
            a.alu(6, &[], &[R9]),                 // mov r9d, 2             best_len
            a.alu(3, &[], &[RAX, FLAGS]),         // xor eax, eax
            a.alu(7, &[R12], &[R10]),             // lea r10d, [r12-MAX_DIST]
            a.alu(7, &[R12], &[FLAGS]),           // cmp r12d, MAX_DIST
            a.alu(4, &[R10, RAX, FLAGS], &[R10]), // cmovbe r10d, eax       limit
            a.alu(7, &[RSI], &[R11]),             // lea r11, [rsi+258]     strend
        ];
        a.align(16);
        let ch_setup = [
            a.alu(3, &[RDX], &[RDI]),             // mov edi, edx
            a.alu(3, &[RDI, R14], &[RDI, FLAGS]), // add rdi, r14           match
        ];
        // match[best_len], match[best_len-1], match[0], match[1] against scan's bytes.
        let mut pre = |len_ld: u8, len_cmp: u8, idx: &[Reg]| {
            let mut src_ld = vec![RSI];
            src_ld.extend_from_slice(idx);
            let mut src_cmp = vec![RDI, RAX];
            src_cmp.extend_from_slice(idx);
            [
                a.ld(len_ld, 1, &src_ld, &[RAX]), // movzx eax, byte [rsi+..]
                a.ins(len_cmp, Alu, &src_cmp, &[FLAGS], Mem::Load(1)), // cmp byte [rdi+..], al
                a.br(6, &[FLAGS]),                // jne next
            ]
        };
        let ch_pre = [
            pre(5, 4, &[R9]),
            pre(6, 5, &[R9]),
            pre(4, 3, &[]),
            pre(4, 4, &[]),
        ];
        let ch_adv = [
            a.alu(4, &[RSI], &[RCX]),        // lea rcx, [rsi+2]
            a.alu(4, &[RDI], &[RDI, FLAGS]), // add rdi, 2
        ];
        let cmp_loop = [
            a.alu(4, &[RCX], &[RCX, FLAGS]),                    // add rcx, 1
            a.alu(4, &[RDI], &[RDI, FLAGS]),                    // add rdi, 1
            a.ld(3, 1, &[RCX], &[RAX]),                         // movzx eax, byte [rcx]
            a.ins(3, Alu, &[RAX, RDI], &[FLAGS], Mem::Load(1)), // cmp al, byte [rdi]
            a.br(6, &[FLAGS]),                                  // jne done
            a.alu(3, &[RCX, R11], &[FLAGS]),                    // cmp rcx, r11
            a.br(6, &[FLAGS]),                                  // jb loop
        ];
        let done = [
            a.alu(3, &[RCX], &[RAX]),             // mov rax, rcx
            a.alu(3, &[RAX, RSI], &[RAX, FLAGS]), // sub rax, rsi           len
            a.alu(3, &[RAX, R9], &[FLAGS]),       // cmp eax, r9d
            a.br(6, &[FLAGS]),                    // jle next
            a.st(6, 4, &[RDX]),                   // mov [rip+match_start], edx
            a.alu(3, &[RAX], &[R9]),              // mov r9d, eax
            a.alu(3, &[RAX], &[FLAGS]),           // cmp eax, NICE
            a.br(6, &[FLAGS]),                    // jge out
        ];
        let next = [
            a.alu(3, &[RDX], &[RAX]),        // mov eax, edx
            a.alu(5, &[RAX], &[RAX, FLAGS]), // and eax, 0x1ffff
            a.ld(3, 4, &[RBX, RAX], &[RDX]), // mov edx, [rbx+rax*4]   prev[]
            a.alu(3, &[RDX, R10], &[FLAGS]), // cmp edx, r10d
            a.br(6, &[FLAGS]),               // jbe out
            a.alu(4, &[R8], &[R8, FLAGS]),   // sub r8d, 1
            a.br(6, &[FLAGS]),               // jne chain
        ];
        let out = [
            a.alu(3, &[R9], &[RAX]),                        // mov eax, r9d
            a.ins(3, Branch, &[RSP], &[RSP], Mem::Load(8)), // ret
        ];
        assert!(a.end() < TEXT + 0x1000);
        Code {
            init,
            clr,
            prime,
            ins_top,
            test_head,
            je_lit,
            dist,
            ja_lit,
            call,
            ret_addr,
            clamp,
            jle_lit,
            tally_match,
            cmp_insert,
            ja_skip,
            set_count,
            ins_inc,
            ins_loop,
            ins_dec,
            ins_jne,
            ins_last,
            ins_jmp,
            skip,
            skip_jmp,
            lit,
            chk_cmp,
            chk_jb,
            pass_jmp,
            lm_pro,
            ch_setup,
            ch_pre,
            ch_adv,
            cmp_loop,
            done,
            next,
            out,
        }
    }
}

struct Prog {
    c: Code,
    /// Input followed by `PAD` zero bytes.
    win: Vec<u8>,
    head: Vec<u32>,
    prev: Vec<u32>,
    tokens: Vec<u32>,
    match_start: u32,
    /// The stack word `call` writes and `ret` reads.
    ret_slot: u64,
    ins_h: u32,
    strstart: u32,
    /// Token write index (ebp).
    ntok: u32,
    pass_start: bool,
    /// Completed passes over the input.
    passes: u64,
}

impl Prog {
    #[inline(always)]
    fn load_win(&self, q: &mut Queue, id: u16, pos: u32) -> u32 {
        let v = self.win[pos as usize];
        q.mem(id, WINDOW + pos as u64, v as u64);
        v as u32
    }

    /// INSERT_STRING(pos): roll the hash over window[pos+2], link pos into its chain.
    /// Returns the previous head of the chain (hash_head).
    #[inline(always)]
    fn insert(&mut self, q: &mut Queue, ids: Insert, pos: u32) -> u32 {
        let c = self.load_win(q, ids[0], pos + 2);
        self.ins_h = ((self.ins_h << H_SHIFT) ^ c) & HASH_MASK;
        q.op(ids[1]);
        q.op(ids[2]);
        q.op(ids[3]);
        let h = self.ins_h as usize;
        let hash_head = self.head[h];
        q.mem(ids[4], HEAD + 4 * h as u64, hash_head as u64);
        q.op(ids[5]);
        q.op(ids[6]);
        let slot = (pos & WMASK) as usize;
        self.prev[slot] = hash_head;
        q.mem(ids[7], PREV + 4 * slot as u64, hash_head as u64);
        self.head[h] = pos;
        q.mem(ids[8], HEAD + 4 * h as u64, pos as u64);
        hash_head
    }

    fn token(&mut self, q: &mut Queue, id: u16, t: u32) {
        let i = self.ntok as usize;
        self.tokens[i] = t;
        q.mem(id, TOKEN_BUF + 4 * i as u64, t as u64);
        self.ntok = (self.ntok + 1) & (TOKENS as u32 - 1);
    }

    /// lm_init: clear head[], prime the rolling hash with the first two bytes.
    fn lm_init(&mut self, q: &mut Queue) {
        let c = &self.c;
        for id in c.init {
            q.op(id);
        }
        let words = HASH_SIZE / 2;
        for i in 0..words {
            q.mem(c.clr[0], HEAD + 8 * i as u64, 0);
            q.op(c.clr[1]);
            q.op(c.clr[2]);
            q.br(c.clr[3], i + 1 != words);
        }
        self.head.fill(0);
        let pr = c.prime;
        q.op(pr[0]);
        let b0 = self.load_win(q, pr[1], 0);
        let b1 = self.load_win(q, pr[2], 1);
        for id in &pr[3..] {
            q.op(*id);
        }
        self.ins_h = ((b0 << H_SHIFT) ^ b1) & HASH_MASK;
        self.strstart = 0;
    }

    /// gzip's longest_match: walk the chain from `cur`, return the best length (>= 2).
    fn longest_match(&mut self, q: &mut Queue, mut cur: u32) -> u32 {
        let c = &self.c;
        let w = &self.win;
        let s = self.strstart;
        let scan = s as usize;
        for id in c.lm_pro {
            q.op(id);
        }
        let limit = s.saturating_sub(MAX_DIST);
        let strend = scan + MAX_MATCH as usize;
        let mut best = MIN_MATCH - 1;
        let mut chain = MAX_CHAIN;
        loop {
            q.op(c.ch_setup[0]);
            q.op(c.ch_setup[1]);
            let m = cur as usize;
            let b = best as usize;
            let mut cont = true;
            for (k, off) in [b, b - 1, 0, 1].into_iter().enumerate() {
                let ids = c.ch_pre[k];
                let (x, y) = (w[scan + off], w[m + off]);
                q.mem(ids[0], WINDOW + (scan + off) as u64, x as u64);
                q.mem(ids[1], WINDOW + (m + off) as u64, y as u64);
                q.br(ids[2], x != y);
                if x != y {
                    cont = false;
                    break;
                }
            }
            if cont {
                // The hash guarantees scan[2] == match[2]: gzip skips it.
                debug_assert_eq!(w[scan + 2], w[m + 2]);
                q.op(c.ch_adv[0]);
                q.op(c.ch_adv[1]);
                let (mut sc, mut mt) = (scan + 2, m + 2);
                let l = &c.cmp_loop;
                loop {
                    sc += 1;
                    mt += 1;
                    q.op(l[0]);
                    q.op(l[1]);
                    q.mem(l[2], WINDOW + sc as u64, w[sc] as u64);
                    q.mem(l[3], WINDOW + mt as u64, w[mt] as u64);
                    let differ = w[sc] != w[mt];
                    q.br(l[4], differ);
                    if differ {
                        break;
                    }
                    q.op(l[5]);
                    q.br(l[6], sc < strend);
                    if sc >= strend {
                        break;
                    }
                }
                let len = (sc - scan) as u32;
                let d = &c.done;
                q.op(d[0]);
                q.op(d[1]);
                q.op(d[2]);
                q.br(d[3], len <= best);
                if len > best {
                    self.match_start = cur;
                    q.mem(d[4], MATCH_START, cur as u64);
                    best = len;
                    q.op(d[5]);
                    q.op(d[6]);
                    q.br(d[7], len >= NICE);
                    if len >= NICE {
                        break;
                    }
                }
            }
            let n = &c.next;
            q.op(n[0]);
            q.op(n[1]);
            let slot = (cur & WMASK) as usize;
            cur = self.prev[slot];
            q.mem(n[2], PREV + 4 * slot as u64, cur as u64);
            q.op(n[3]);
            q.br(n[4], cur <= limit);
            if cur <= limit {
                break;
            }
            chain -= 1;
            q.op(n[5]);
            q.br(n[6], chain != 0);
            if chain == 0 {
                break;
            }
        }
        q.op(c.out[0]);
        q.mem(c.out[1], RET_SLOT, self.ret_slot);
        best
    }

    /// One iteration of deflate_fast's loop: one literal or one match.
    fn deflate_step(&mut self, q: &mut Queue) {
        let s = self.strstart;
        let hash_head = self.insert(q, self.c.ins_top, s);
        let c = &self.c;
        q.op(c.test_head);
        q.br(c.je_lit, hash_head == 0);
        let mut len = 0;
        if hash_head != 0 {
            for id in c.dist {
                q.op(id);
            }
            let far = s - hash_head > MAX_DIST;
            q.br(c.ja_lit, far);
            if !far {
                self.ret_slot = c.ret_addr;
                q.mem(c.call, RET_SLOT, c.ret_addr);
                let best = self.longest_match(q, hash_head);
                let c = &self.c;
                for id in c.clamp {
                    q.op(id);
                }
                len = best.min(IN_LEN as u32 - s);
                q.br(c.jle_lit, len < MIN_MATCH);
            }
        }
        let c = &self.c;
        if len >= MIN_MATCH {
            let t = &c.tally_match;
            for id in &t[..3] {
                q.op(*id);
            }
            q.mem(t[3], MATCH_START, self.match_start as u64);
            for id in &t[4..7] {
                q.op(*id);
            }
            let tok = 0x8000_0000 | (len - MIN_MATCH) << 17 | (s - self.match_start);
            let st = t[7];
            self.token(q, st, tok);
            let c = &self.c;
            q.op(c.tally_match[8]);
            q.op(c.tally_match[9]);
            q.op(c.cmp_insert);
            q.br(c.ja_skip, len > MAX_INSERT);
            if len <= MAX_INSERT {
                q.op(c.set_count);
                let (inc, ins, dec, jne) = (c.ins_inc, c.ins_loop, c.ins_dec, c.ins_jne);
                for k in 1..len {
                    q.op(inc);
                    self.insert(q, ins, s + k);
                    q.op(dec);
                    q.br(jne, k + 1 != len);
                }
                let c = &self.c;
                q.op(c.ins_last);
                q.op(c.ins_jmp);
                self.strstart = s + len;
            } else {
                let sk = c.skip;
                q.op(sk[0]);
                let p = s + len;
                let b0 = self.load_win(q, sk[1], p);
                let b1 = self.load_win(q, sk[2], p + 1);
                for id in &sk[3..] {
                    q.op(*id);
                }
                self.ins_h = ((b0 << H_SHIFT) ^ b1) & HASH_MASK;
                q.op(self.c.skip_jmp);
                self.strstart = p;
            }
        } else {
            let l = c.lit;
            let b = self.load_win(q, l[0], s);
            q.op(l[1]);
            self.token(q, l[2], b);
            q.op(l[3]);
            q.op(l[4]);
            q.op(l[5]);
            self.strstart = s + 1;
        }
        let c = &self.c;
        q.op(c.chk_cmp);
        let more = (self.strstart as usize) < IN_LEN;
        q.br(c.chk_jb, more);
        if !more {
            q.op(c.pass_jmp);
            self.pass_start = true;
            self.passes += 1;
        }
    }
}

impl Program for Prog {
    fn external(&mut self, k: u32, out: &mut Instr) -> bool {
        let k = k as usize;
        if k >= IN_LEN / PAGE {
            return false;
        }
        let page = &self.win[k * PAGE..(k + 1) * PAGE];
        external_record(out, WINDOW + (k * PAGE) as u64, |d| {
            d.extend_from_slice(page)
        });
        true
    }

    fn run(&mut self, q: &mut Queue) {
        if self.pass_start {
            self.pass_start = false;
            self.lm_init(q);
        }
        while q.len() < 256 && !self.pass_start {
            self.deflate_step(q);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::testutil::*;

    #[test]
    fn deterministic_per_seed() {
        let x = take(&mut Hot::new(7), 100_000);
        assert_eq!(x, take(&mut Hot::new(7), 100_000));
        assert_ne!(x, take(&mut Hot::new(8), 100_000));
    }

    #[test]
    fn text_repeats_like_text() {
        let t = text(1);
        assert_eq!(t.len(), IN_LEN);
        assert!(t
            .iter()
            .all(|b| b.is_ascii_graphic() || *b == b' ' || *b == b'\n'));
        assert!(t.windows(4).filter(|w| w == b"the ").count() < IN_LEN / 100);
    }

    /// Decode the token stream of one whole pass and check it reproduces the input:
    /// the matcher is a real compressor, not just address noise.
    #[test]
    fn tokens_of_a_pass_decode_to_the_input() {
        let mut h = Hot::new(4);
        let mut r = Instr::default();
        let mut decoded = Vec::with_capacity(IN_LEN);
        let (mut literals, mut matches) = (0u64, 0u64);
        while decoded.len() < IN_LEN {
            h.next_into(&mut r).unwrap();
            if r.external {
                continue;
            }
            for a in &r.accesses {
                if a.store && (TOKEN_BUF..TOKEN_BUF + 4 * TOKENS as u64).contains(&a.addr) {
                    let t = u32::from_le_bytes(r.value(a).try_into().unwrap());
                    if t & 0x8000_0000 == 0 {
                        literals += 1;
                        decoded.push(t as u8);
                    } else {
                        matches += 1;
                        let len = ((t >> 17) & 0xff) as usize + 3;
                        let dist = (t & 0x1ffff) as usize;
                        assert!(dist >= 1 && dist <= decoded.len());
                        for _ in 0..len {
                            decoded.push(decoded[decoded.len() - dist]);
                        }
                    }
                }
            }
        }
        assert_eq!(decoded.len(), IN_LEN);
        assert!(
            decoded == h.p.win[..IN_LEN],
            "decoded pass differs from the input"
        );
        // Text compresses: far fewer tokens than bytes.
        assert!(
            literals + matches < IN_LEN as u64 / 2,
            "{literals} literals {matches} matches"
        );
    }

    #[test]
    fn loads_see_the_last_stored_values_over_more_than_a_pass() {
        // A pass is ~20 M instructions; the second one reuses the stale prev[] chains.
        let mut h = Hot::new(1);
        let sh = replay(&mut h, 24_000_000);
        assert_eq!(h.p.passes, 1);
        assert_eq!(sh.externals, (IN_LEN / PAGE) as u64);
        assert!(sh.loads > 500_000 && sh.stores > 100_000);
    }

    #[test]
    fn footprint_is_about_a_megabyte_and_a_256k_l2_thrashes() {
        let mut h = Hot::new(2);
        let lines = distinct_lines(&mut h, 5_000_000);
        assert!(
            lines * 64 > 400 << 10 && lines * 64 <= (DATA_END - WINDOW) as usize + 64,
            "{lines} lines"
        );
        // Warm up over the first pass (~20 M instructions), measure over the next two.
        let cs = cache_run(
            &mut Hot::new(2),
            25_000_000,
            40_000_000,
            &[256 << 10, 1 << 20, 4 << 20],
        );
        let mpki: Vec<f64> = cs.iter().map(|c| c.misses as f64 / 40_000.0).collect();
        assert!(
            mpki[0] > 5.0 && mpki[0] > 5.0 * mpki[1] && mpki[1] > 0.3 && mpki[2] < 0.05,
            "misses per 1000 instructions at 256K/1M/4M: {mpki:?}"
        );
    }
}
