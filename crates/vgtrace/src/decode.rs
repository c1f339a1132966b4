//! Registers and op class of one static x86-64 instruction, from its bytes (iced-x86).
//!
//! Valgrind's IR is no source for these: VEX optimises register reads and writes away
//! (flags thunks, redundant PUTs), so the tracer only sends the bytes and they are decoded
//! here, once per static instruction.
//!
//! Register numbers (docs/trace-format.md): 0–15 GPRs in hardware encoding order (rax=0,
//! rcx=1, rdx=2, rbx=3, rsp=4, rbp=5, rsi=6, rdi=7, r8..r15), 16 = rflags, 32–63 =
//! xmm/ymm/zmm 0–31 (a sub-register is its full register). x87 st(i) and mmx mm(i) — which
//! share storage — are 48+i (zmm16–23 never occur: Valgrind does not run AVX-512 code).

use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpAccess, Register};
use secmem_trace::record::{MAX_DST, MAX_SRC};
use secmem_trace::{Branch, OpClass, Reg};

pub const REG_FLAGS: Reg = 16;
pub const REG_VEC0: Reg = 32;
pub const REG_X87_0: Reg = 48;

/// How a control-flow instruction's outcome is derived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Not a control-flow instruction.
    None = 0,
    /// Conditional branch: taken iff the next pc is not pc + len.
    Conditional = 1,
    /// Jumps, calls, returns: always taken (still derived from the next pc).
    Unconditional = 2,
}

impl Flow {
    /// The branch outcome of an execution, `off_path` if the next instruction is not at
    /// pc + len. A table, not a branch on the flow: a transcoder runs it for every
    /// instruction, and which kind comes next is the program's business.
    #[inline(always)]
    pub fn outcome(self, off_path: bool) -> Branch {
        const BY_FLOW: [[Branch; 2]; 3] = [
            [Branch::None, Branch::None],
            [Branch::NotTaken, Branch::Taken],
            [Branch::Taken, Branch::Taken],
        ];
        BY_FLOW[self as usize][off_path as usize]
    }
}

/// The static part of an instruction as decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    pub op: OpClass,
    pub src: Vec<Reg>,
    pub dst: Vec<Reg>,
    pub flow: Flow,
    /// Mnemonic in lower case ("invalid" if iced could not decode the bytes).
    pub mnemonic: String,
}

/// Our number for an iced register, None for registers the timing model does not track
/// (rip, segments, control, mask registers).
pub fn reg_number(r: Register) -> Option<Reg> {
    let f = r.full_register();
    if f.is_gpr() {
        let i = f as u32 - Register::RAX as u32;
        return (i < 16).then_some(i as Reg);
    }
    if f.is_vector_register() {
        return Some(REG_VEC0 + f.number() as Reg);
    }
    if f.is_st() || f.is_mm() {
        return Some(REG_X87_0 + f.number() as Reg);
    }
    None
}

/// Decodes instructions; keeps iced's info factory (it owns reusable buffers).
pub struct X86Decoder {
    factory: InstructionInfoFactory,
}

impl Default for X86Decoder {
    fn default() -> Self {
        X86Decoder::new()
    }
}

fn push_unique(v: &mut Vec<Reg>, r: Reg) {
    if !v.contains(&r) {
        v.push(r);
    }
}

impl X86Decoder {
    pub fn new() -> X86Decoder {
        X86Decoder { factory: InstructionInfoFactory::new() }
    }

    /// Decode the instruction at `pc` encoded by `bytes` (extra trailing bytes are ignored).
    pub fn decode(&mut self, pc: u64, bytes: &[u8]) -> Decoded {
        let mut d = Decoder::with_ip(64, bytes, pc, DecoderOptions::NONE);
        let ins: Instruction = d.decode();
        if ins.is_invalid() {
            return Decoded { op: OpClass::Alu, src: vec![], dst: vec![], flow: Flow::None, mnemonic: "invalid".into() };
        }
        let info = self.factory.info(&ins);
        let mut src = Vec::with_capacity(8);
        let mut dst = Vec::with_capacity(4);
        let mut addr_regs = Vec::with_capacity(2);
        let mut vector = false;
        for m in info.used_memory() {
            for r in [m.base(), m.index()] {
                if let Some(n) = reg_number(r) {
                    push_unique(&mut addr_regs, n);
                }
            }
        }
        for u in info.used_registers() {
            let Some(n) = reg_number(u.register()) else { continue };
            vector |= n >= REG_VEC0;
            match u.access() {
                OpAccess::Read | OpAccess::CondRead => push_unique(&mut src, n),
                OpAccess::Write | OpAccess::CondWrite => push_unique(&mut dst, n),
                OpAccess::ReadWrite | OpAccess::ReadCondWrite => {
                    push_unique(&mut src, n);
                    push_unique(&mut dst, n);
                }
                _ => {}
            }
        }
        let m = ins.mnemonic();
        let name = format!("{m:?}").to_ascii_lowercase();
        let flow = match ins.flow_control() {
            FlowControl::ConditionalBranch => Flow::Conditional,
            FlowControl::UnconditionalBranch
            | FlowControl::IndirectBranch
            | FlowControl::Call
            | FlowControl::IndirectCall
            | FlowControl::Return => Flow::Unconditional,
            _ => Flow::None,
        };
        // Sources beyond the 6 a record holds: keep the data operands first, then the
        // address registers (they gate the access), then flags; drop the rest.
        let mut srcs: Vec<Reg> = src.iter().copied().filter(|r| !addr_regs.contains(r)).collect();
        let flags_in = ins.rflags_read() != 0;
        let mut ordered = Vec::with_capacity(MAX_SRC + 4);
        ordered.append(&mut srcs);
        for &r in &addr_regs {
            if src.contains(&r) {
                push_unique(&mut ordered, r);
            }
        }
        if flags_in {
            // A conditional instruction's flags are its key input: keep them within the limit.
            if ordered.len() >= MAX_SRC {
                ordered.truncate(MAX_SRC - 1);
            }
            push_unique(&mut ordered, REG_FLAGS);
        }
        ordered.truncate(MAX_SRC);
        if ins.rflags_modified() != 0 {
            if dst.len() >= MAX_DST {
                dst.truncate(MAX_DST - 1);
            }
            push_unique(&mut dst, REG_FLAGS);
        }
        dst.truncate(MAX_DST);
        let has_mem = !info.used_memory().is_empty();
        let op = classify(m, &name, flow, has_mem, vector);
        // syscall/int return to the next instruction: not branches for the predictor.
        let flow = if op == OpClass::Barrier { Flow::None } else { flow };
        Decoded { op, src: ordered, dst, flow, mnemonic: name }
    }
}

/// Instructions whose only work is moving data to or from memory.
fn is_move(name: &str) -> bool {
    let n = name.strip_prefix('v').unwrap_or(name);
    n.starts_with("mov")
        || n.starts_with("broadcast")
        || n.starts_with("pbroadcast")
        || n.starts_with("lods")
        || n.starts_with("stos")
        || n.starts_with("prefetch")
        || matches!(n, "push" | "pop" | "lddqu" | "maskmovdqu")
}

fn classify(m: Mnemonic, name: &str, flow: Flow, has_mem: bool, vector: bool) -> OpClass {
    match m {
        // 003 §4.7: effects leave the chip at a system call, so integrity checks must be done.
        Mnemonic::Syscall | Mnemonic::Sysenter | Mnemonic::Int | Mnemonic::Int1 | Mnemonic::Int3 => return OpClass::Barrier,
        Mnemonic::Div | Mnemonic::Idiv => return OpClass::Div,
        Mnemonic::Mul | Mnemonic::Imul | Mnemonic::Mulx => return OpClass::Mul,
        _ => {}
    }
    if flow != Flow::None {
        return OpClass::Branch;
    }
    let base = name.strip_prefix('v').unwrap_or(name);
    let fp_div = ["divs", "divp", "sqrts", "sqrtp", "fdiv", "fidiv", "fsqrt"];
    if fp_div.iter().any(|p| base.starts_with(p)) {
        return OpClass::FpDiv;
    }
    if (has_mem || matches!(base, "push" | "pop")) && is_move(name) {
        return OpClass::Mem;
    }
    let x87 = name.starts_with('f');
    if vector || x87 {
        return OpClass::Fp;
    }
    OpClass::Alu
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(bytes: &[u8]) -> Decoded {
        X86Decoder::new().decode(0x401000, bytes)
    }

    #[test]
    fn add_reg_mem_reads_base_index_and_writes_flags() {
        // add rax, [rbx+rcx*8]
        let d = dec(&[0x48, 0x03, 0x04, 0xcb]);
        assert_eq!(d.op, OpClass::Alu);
        let mut s = d.src.clone();
        s.sort();
        assert_eq!(s, vec![0, 1, 3]);
        assert_eq!(d.dst, vec![0, REG_FLAGS]);
    }

    #[test]
    fn sub_registers_map_to_full_registers() {
        // mov al, [rsi] ; mov r9d, ecx ; movzx r15d, byte [rdi]
        let d = dec(&[0x8a, 0x06]);
        assert_eq!((d.op, d.src.clone(), d.dst.clone()), (OpClass::Mem, vec![6], vec![0]));
        let d = dec(&[0x41, 0x89, 0xc9]);
        assert_eq!((d.op, d.src.clone(), d.dst.clone()), (OpClass::Alu, vec![1], vec![9]));
        let d = dec(&[0x44, 0x0f, 0xb6, 0x3f]);
        assert_eq!((d.src.clone(), d.dst.clone()), (vec![7], vec![15]));
    }

    #[test]
    fn op_classes() {
        assert_eq!(dec(&[0x0f, 0x05]).op, OpClass::Barrier); // syscall
        assert_eq!(dec(&[0x48, 0xf7, 0xf1]).op, OpClass::Div); // div rcx
        assert_eq!(dec(&[0x48, 0x0f, 0xaf, 0xc1]).op, OpClass::Mul); // imul rax, rcx
        assert_eq!(dec(&[0xf2, 0x0f, 0x5e, 0xc1]).op, OpClass::FpDiv); // divsd xmm0, xmm1
        assert_eq!(dec(&[0xf2, 0x0f, 0x51, 0xc1]).op, OpClass::FpDiv); // sqrtsd xmm0, xmm1
        assert_eq!(dec(&[0xf2, 0x0f, 0x58, 0xc1]).op, OpClass::Fp); // addsd xmm0, xmm1
        assert_eq!(dec(&[0xc5, 0xfe, 0x6f, 0x07]).op, OpClass::Mem); // vmovdqu ymm0, [rdi]
        assert_eq!(dec(&[0x50]).op, OpClass::Mem); // push rax
        assert_eq!(dec(&[0xc3]).op, OpClass::Branch); // ret
        assert_eq!(dec(&[0x48, 0x89, 0xc8]).op, OpClass::Alu); // mov rax, rcx
        assert_eq!(dec(&[0xd9, 0xc9]).op, OpClass::Fp); // fxch st1
    }

    #[test]
    fn branches_and_vectors() {
        // jne +0x10: reads flags only, conditional
        let d = dec(&[0x75, 0x10]);
        assert_eq!((d.flow, d.src.clone(), d.dst.clone()), (Flow::Conditional, vec![REG_FLAGS], vec![]));
        // call rel32: unconditional, reads and writes rsp
        let d = dec(&[0xe8, 0, 0, 0, 0]);
        assert_eq!(d.flow, Flow::Unconditional);
        assert!(d.src.contains(&4) && d.dst.contains(&4));
        // vaddps ymm2, ymm3, [rax+8]
        let d = dec(&[0xc5, 0xe4, 0x58, 0x50, 0x08]);
        assert_eq!(d.op, OpClass::Fp);
        assert_eq!(d.dst, vec![REG_VEC0 + 2]);
        let mut s = d.src.clone();
        s.sort();
        assert_eq!(s, vec![0, REG_VEC0 + 3]);
    }

    #[test]
    fn invalid_bytes_decode_as_plain_alu() {
        let d = dec(&[0x0f, 0xff]);
        assert_eq!(d.mnemonic, "invalid");
        assert_eq!(d.op, OpClass::Alu);
    }
}
