//! The adversary of 001 §2 and §5 against a signed program in untrusted memory: each attack
//! is refused at fetch, by an error naming the block address; the unmodified program runs.

use secmem_codeauth::{sign, Error, Keys, Memory, PadKind, Params, Processor, Program, TagFile, Width};

const TEXT: u64 = 0x40_0000;

/// A program of 16 code blocks at TEXT; `seed` varies its bytes.
fn program(seed: u8, block: u32) -> Program {
    let code: Vec<u8> = (0..16 * block).map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed)).collect();
    Program::from_code(&[(TEXT, &code)], block, TEXT).unwrap()
}

struct World {
    keys: Keys,
    prog: Program,
    tags: TagFile,
    mem: Memory,
    cpu: Processor,
}

fn world(params: Params) -> World {
    let keys = Keys::derive(b"the processor's key");
    let prog = program(1, params.block);
    let tags = sign(&keys, params, &prog, 7, Some(0x80_0000)).unwrap();
    let mut mem = Memory::new();
    mem.load(&prog, &tags);
    let cpu = Processor::start(&keys, &tags).unwrap();
    World { keys, prog, tags, mem, cpu }
}

fn all_params() -> Vec<Params> {
    let mut v = Vec::new();
    for pad in PadKind::ALL {
        for width in Width::ALL {
            for block in [16, 64, 256] {
                v.push(Params::new(pad, width, block).unwrap());
            }
        }
    }
    v
}

/// The refusal names `addr` (in the value and in the message).
fn refused_at(r: Result<Vec<u8>, Error>, addr: u64) {
    let e = r.expect_err("the attack was accepted");
    assert_eq!(e.addr(), Some(addr), "{e}");
    assert!(e.to_string().contains(&format!("{addr:#x}")), "{e}");
}

#[test]
fn the_unmodified_program_runs() {
    for p in all_params() {
        let w = world(p);
        for (addr, block) in w.prog.blocks() {
            assert_eq!(w.cpu.fetch(&w.mem, addr + 3).unwrap(), block, "{p:?}");
        }
    }
}

#[test]
fn code_injection_is_refused() {
    for p in all_params() {
        let mut w = world(p);
        let victim = TEXT + 5 * p.block as u64;
        // One flipped bit, then a whole block of attacker code.
        let mut b = [0u8; 1];
        w.mem.read(victim + 9, &mut b);
        w.mem.write(victim + 9, &[b[0] ^ 0x10]);
        refused_at(w.cpu.fetch(&w.mem, victim), victim);
        w.mem.write(victim, &vec![0xcc; p.block as usize]);
        refused_at(w.cpu.fetch(&w.mem, victim + 1), victim);
        // Neighbours still run.
        w.cpu.fetch(&w.mem, victim + p.block as u64).unwrap();
        // Code placed outside the signed segments has no tag at all.
        w.mem.write(0x90_0000, &[0xcc; 64]);
        refused_at(w.cpu.fetch(&w.mem, 0x90_0000), 0x90_0000);
    }
}

#[test]
fn splicing_a_block_and_its_tag_to_another_address_is_refused() {
    for p in all_params() {
        let mut w = world(p);
        let (b, slot) = (p.block as u64, p.width.slot());
        let (from, to) = (TEXT + 2 * b, TEXT + 9 * b);
        let mut block = vec![0u8; b as usize];
        w.mem.read(from, &mut block);
        let mut tag = vec![0u8; slot];
        w.mem.read(w.tags.tag_for(from).unwrap().1, &mut tag);
        w.mem.write(to, &block);
        w.mem.write(w.tags.tag_for(to).unwrap().1, &tag);
        refused_at(w.cpu.fetch(&w.mem, to), to);
        // Swapping two blocks (and their tags) is two splices.
        let mut w = world(p);
        let (x, y) = (TEXT, TEXT + b);
        let (mut bx, mut by) = (vec![0u8; b as usize], vec![0u8; b as usize]);
        w.mem.read(x, &mut bx);
        w.mem.read(y, &mut by);
        w.mem.write(x, &by);
        w.mem.write(y, &bx);
        let (tx, ty) = (w.tags.tag_for(x).unwrap().1, w.tags.tag_for(y).unwrap().1);
        let (mut sx, mut sy) = (vec![0u8; slot], vec![0u8; slot]);
        w.mem.read(tx, &mut sx);
        w.mem.read(ty, &mut sy);
        w.mem.write(tx, &sy);
        w.mem.write(ty, &sx);
        refused_at(w.cpu.fetch(&w.mem, x), x);
        refused_at(w.cpu.fetch(&w.mem, y), y);
    }
}

#[test]
fn cross_program_replay_is_refused() {
    // Program I' runs at the same addresses under the same key; the adversary replaces one of
    // its blocks and the tag by program I's block and tag for that address.
    for p in all_params() {
        let w = world(p);
        let other = program(99, p.block);
        let other_tags = sign(&w.keys, p, &other, 8, Some(0x80_0000)).unwrap();
        let mut mem = Memory::new();
        mem.load(&other, &other_tags);
        let cpu = Processor::start(&w.keys, &other_tags).unwrap();
        let a = TEXT + 4 * p.block as u64;
        cpu.fetch(&mem, a).unwrap();
        mem.write(a, w.prog.block_at(a).unwrap());
        let (tag, at) = w.tags.tag_for(a).unwrap();
        mem.write(at, &tag.to_slot(p.width));
        refused_at(cpu.fetch(&mem, a), a);
        // Program I's whole image (code and tags) run as program I': nothing authenticates.
        let replayed = Processor::with(&w.keys, p, 8, w.tags.layout.clone()).unwrap();
        for (addr, _) in w.prog.blocks() {
            refused_at(replayed.fetch(&w.mem, addr), addr);
        }
    }
}

#[test]
fn forged_tags_are_refused() {
    for p in all_params() {
        let mut w = world(p);
        let a = TEXT + 3 * p.block as u64;
        let (tag, at) = w.tags.tag_for(a).unwrap();
        // New code with guesses built from what the adversary sees: the old tag, the old tag
        // with the code difference folded in, every single-bit change of the old tag, zero.
        let mut evil = w.prog.block_at(a).unwrap().to_vec();
        evil[0] ^= 0x01;
        w.mem.write(a, &evil);
        let mut guesses = vec![tag.0, tag.0 ^ 1, 0, u128::MAX];
        guesses.extend((0..p.width.bits()).map(|i| tag.0 ^ (1u128 << i)));
        for g in guesses {
            w.mem.write(at, &secmem_codeauth::Tag(g).to_slot(p.width));
            refused_at(w.cpu.fetch(&w.mem, a), a);
        }
        // The untouched code with a damaged tag is refused too.
        let good = w.prog.block_at(a).unwrap().to_vec();
        w.mem.write(a, &good);
        w.mem.write(at, &secmem_codeauth::Tag(tag.0 ^ (1 << 5)).to_slot(p.width));
        refused_at(w.cpu.fetch(&w.mem, a), a);
    }
}

#[test]
fn tags_made_with_another_key_are_refused() {
    let p = Params::default();
    let w = world(p);
    let forged = sign(&Keys::derive(b"mallory"), p, &w.prog, 7, Some(0x80_0000)).unwrap();
    let mut mem = Memory::new();
    mem.load(&w.prog, &forged);
    for (addr, _) in w.prog.blocks() {
        refused_at(w.cpu.fetch(&mem, addr), addr);
    }
}

#[test]
fn a_wrong_tp_target_is_refused() {
    for p in all_params() {
        let mut w = world(p);
        let slot = p.width.slot() as u64;
        let tp = w.tags.layout.tp();
        // TP one tag off: every block meets its neighbour's tag.
        w.cpu.set_tp(tp + slot);
        refused_at(w.cpu.fetch(&w.mem, TEXT), TEXT);
        // TP at memory the adversary filled, and at another program's valid tag table.
        w.cpu.set_tp(0xa0_0000);
        refused_at(w.cpu.fetch(&w.mem, TEXT + p.block as u64), TEXT + p.block as u64);
        let other = sign(&w.keys, p, &program(99, p.block), 8, Some(0xb0_0000)).unwrap();
        w.mem.write(0xb0_0000, &other.table);
        w.cpu.set_tp(0xb0_0000);
        refused_at(w.cpu.fetch(&w.mem, TEXT), TEXT);
        // A verbatim copy of the real table elsewhere holds valid tags: TP may point at it.
        w.mem.write(0xc0_0000, &w.tags.table);
        w.cpu.set_tp(0xc0_0000);
        w.cpu.fetch(&w.mem, TEXT).unwrap();
        // The table itself overwritten where TP points.
        w.cpu.set_tp(tp);
        let (_, at) = w.tags.tag_for(TEXT + 2 * p.block as u64).unwrap();
        w.mem.write(at, &vec![0u8; slot as usize]);
        refused_at(w.cpu.fetch(&w.mem, TEXT + 2 * p.block as u64), TEXT + 2 * p.block as u64);
    }
}

#[test]
fn a_real_elf_signs_and_verifies() {
    // This test's own executable is a real ELF (position-independent on most toolchains).
    let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    let keys = Keys::derive(b"k");
    let prog = Program::from_elf(&exe, 64, 0x5555_5555_0000).or_else(|_| Program::from_elf(&exe, 64, 0)).unwrap();
    assert!(prog.blocks().count() > 100);
    let tags = sign(&keys, Params::default(), &prog, 1, None).unwrap();
    assert_eq!(secmem_codeauth::verify(&keys, &prog, &tags).unwrap().blocks, prog.blocks().count() as u64);
    // Read back for verification without being told the load base: the tags say where.
    assert_eq!(secmem_codeauth::program_for(&exe, &tags).unwrap(), prog);
    let mut mem = Memory::new();
    mem.load(&prog, &tags);
    let cpu = Processor::start(&keys, &tags).unwrap();
    cpu.fetch(&mem, prog.entry).unwrap();
}
