//! The core model's parameters, declared like the schemes' (see `secmem_core::decl`): the
//! out-of-order core, its L1s and TLBs, and the run loop's sampling.

use secmem_core::decl::{param, Component, Def, Kind};
use secmem_core::{ConfigError, Params};

/// Most cores a run may have (each holds its own caches and TLBs).
pub const MAX_CORES: u64 = 64;

/// The cores a run has (`cores`, at most `MAX_CORES`; several: `multi`).
pub fn cores(p: &Params) -> Result<u64, ConfigError> {
    let n = p.u64_min("cores", 1)?;
    if n > MAX_CORES {
        return Err(ConfigError(format!("cores: {} is more than {}", n, MAX_CORES)));
    }
    Ok(n)
}

pub const CORE: &[Component] = &[
    Component {
        name: "cores",
        kind: Kind::Machine,
        summary: "cores sharing the protected last level, the memory controller and the engine (`multi`)",
        source: "ChampSim's multi-core runs (rate mode: one trace on every core)",
        params: &[param("cores", Def::Int(1), "cores", "out-of-order cores, each with its own trace, L1s, private levels and TLBs (at most 64; docs/multicore.md)")],
    },
    Component {
        name: "pages",
        kind: Kind::Machine,
        summary: "physical frames for the programs' pages (one pool for every core)",
        source: "ChampSim's VirtualMemory (first touch); an OS's scattered free list (random)",
        params: &[param("pages.order", Def::Str("first_touch"), "first_touch|random", "frames given out in first-touch order, or in an order drawn from the seed (spreads copies of one program over the last level's sets)")],
    },
    Component {
        name: "core",
        kind: Kind::Machine,
        summary: "the out-of-order core (a dependence-driven window model)",
        source: "000/003 Table 1; SimpleScalar defaults where the tables are silent",
        params: &[
            param("core.clock", Def::Preset, "Hz", "processor clock (cycles are its cycles)"),
            param("core.fetch_width", Def::Preset, "instructions/cycle", "fetched per cycle"),
            param("core.issue_width", Def::Preset, "instructions/cycle", "issued per cycle (at most 255)"),
            param("core.commit_width", Def::Preset, "instructions/cycle", "committed per cycle"),
            param("core.rob_size", Def::Preset, "entries", "reorder buffer (SimpleScalar's register update unit)"),
            param("core.lsq_size", Def::Preset, "entries", "load/store queue"),
            param("core.branch_predictor_bits", Def::Preset, "bits", "gshare history and table index (at most 24)"),
            param("core.mispredict_penalty", Def::Preset, "cycles", "front-end refill after a mispredicted branch"),
            param("core.mul_latency", Def::Preset, "cycles", "integer multiply"),
            param("core.div_latency", Def::Preset, "cycles", "integer divide"),
            param("core.fp_latency", Def::Preset, "cycles", "floating-point add/multiply"),
            param("core.fpdiv_latency", Def::Preset, "cycles", "floating-point divide"),
            param("core.branch_predictor", Def::Str("gshare"), "gshare|bimodal", "direction predictor (bimodal: ChampSim's, pc mod a prime)"),
            param("core.phys_regs", Def::Int(0), "registers", "physical registers for results in flight (0: no limit)"),
            param("core.sq_size", Def::Int(0), "entries", "store queue (0: stores share the LSQ, as in SimpleScalar's RUU/LSQ)"),
            param("core.memory_dependence", Def::Str("none"), "none|conservative|store_sets|oracle", "when a load may pass older stores (docs/core-model.md); none: never waits, nothing forwarded"),
            param("core.forward_latency", Def::Int(1), "cycles", "a load served from the store queue"),
            param("core.load_result_latency", Def::Int(0), "cycles", "from the L1 delivering a load's data to its dependents' issue"),
            param("core.load_ports", Def::Int(0), "loads/cycle", "loads sent to the L1D per cycle (0: no limit beyond the issue width)"),
            param("core.store_ports", Def::Int(0), "stores/cycle", "store operations per cycle, executing or written to the L1 at commit (0: no limit)"),
            param("core.taken_ends_fetch", Def::Bool(false), "bool", "a taken branch ends its fetch cycle (ChampSim's front end: the next instruction comes from the target, a cycle later)"),
            param("core.syscall_barriers", Def::Bool(false), "bool", "the trace's barrier instructions (the tracer's system calls) are signing barriers: they commit once every pending check is done, and lhash checks all memory at each (003 §4.7); false: ordinary instructions, so lhash checks at the end or every lhash.check_period accesses (000 §6.2.3)"),
        ],
    },
    Component {
        name: "btb",
        kind: Kind::Machine,
        summary: "branch targets: a BTB, a return stack and an indirect-target predictor (ChampSim's basic_btb); without them only directions are predicted",
        source: "ChampSim btb/basic_btb (master 2ff2501)",
        params: &[
            param("btb.sets", Def::Int(0), "sets", "BTB sets, a power of two, indexed by pc/4 (0: no BTB, as in the seeds' machines: a branch is mispredicted only when its direction is)"),
            param("btb.ways", Def::Int(8), "ways", "BTB associativity (LRU)"),
            param("btb.ras_entries", Def::Int(64), "calls", "return stack depth (the oldest call is dropped beyond it)"),
            param("btb.indirect_entries", Def::Int(4096), "targets", "indirect-target predictor, a power of two, indexed by pc/4 xor the last log2(entries) conditional outcomes"),
        ],
    },
    Component {
        name: "l1i",
        kind: Kind::Machine,
        summary: "the L1 instruction cache (inside the L2: inclusion)",
        source: "000/003 Table 1",
        params: &[
            param("l1i.size", Def::Preset, "B", "capacity"),
            param("l1i.ways", Def::Preset, "ways", "associativity (LRU)"),
            param("l1i.line", Def::Preset, "B", "line (at most the L2's)"),
            param("l1i.latency", Def::Preset, "cycles", "hit latency"),
            param("l1i.fill_latency", Def::Int(0), "cycles", "a miss's data written in on its way up"),
            param("l1i.mshrs", Def::Int(0), "misses", "misses in flight at once (0: no limit)"),
            param("l1i.replacement", Def::Str("lru"), "lru|fifo|random", "replacement policy"),
        ],
    },
    Component {
        name: "l1d",
        kind: Kind::Machine,
        summary: "the L1 data cache (inside the L2: inclusion)",
        source: "000/003 Table 1",
        params: &[
            param("l1d.size", Def::Preset, "B", "capacity"),
            param("l1d.ways", Def::Preset, "ways", "associativity (LRU)"),
            param("l1d.line", Def::Preset, "B", "line (at most the L2's)"),
            param("l1d.latency", Def::Preset, "cycles", "hit latency"),
            param("l1d.fill_latency", Def::Int(0), "cycles", "a miss's data written in on its way up"),
            param("l1d.mshrs", Def::Int(0), "misses", "misses in flight at once (0: no limit)"),
            param("l1d.replacement", Def::Str("lru"), "lru|fifo|random", "replacement policy"),
        ],
    },
    Component {
        name: "tlb",
        kind: Kind::Machine,
        summary: "the instruction and data TLBs (one geometry for both)",
        source: "000/003 Table 1",
        params: &[
            param("tlb.entries", Def::Preset, "entries", "translations held"),
            param("tlb.ways", Def::Preset, "ways", "associativity"),
            param("tlb.page", Def::Preset, "B", "page size"),
            param("tlb.miss_latency", Def::Preset, "cycles", "fixed cost of a miss (without tlb.walk)"),
            param("tlb.walk", Def::Bool(false), "bool", "walk the page table through the caches ([ptw]) instead of tlb.miss_latency"),
        ],
    },
    Component {
        name: "caches",
        kind: Kind::Machine,
        summary: "cache levels between the L1s and the protected l2 (each a section with the L1s' keys), and the protected level's own MSHRs and fill",
        source: "ChampSim's cache model (docs/core-model.md)",
        params: &[
            param("caches.private", Def::Str(""), "names", "private levels between the L1s and the protected l2, nearest first (e.g. \"l2c\")"),
            param("l2.fill_latency", Def::Int(0), "cycles", "the protected level's fill on a miss's way up"),
            param("l2.mshrs", Def::Int(0), "misses", "misses in flight at the protected level (0: no limit)"),
            param("l2.replacement", Def::Str("lru"), "lru", "the protected level is the engine's trusted cache: LRU only"),
        ],
    },
    Component {
        name: "stlb",
        kind: Kind::Machine,
        summary: "the second-level TLB (with tlb.walk)",
        source: "ChampSim champsim_config.json STLB",
        params: &[
            param("stlb.entries", Def::Int(0), "entries", "translations held (0: no STLB)"),
            param("stlb.ways", Def::Int(1), "ways", "associativity"),
            param("stlb.latency", Def::Int(0), "cycles", "an L1 TLB miss spends in it, hit or miss"),
        ],
    },
    Component {
        name: "ptw",
        kind: Kind::Machine,
        summary: "the page-table walker (with tlb.walk): tables in protected memory, read through the caches",
        source: "x86-64 four-level tables; ChampSim's PTW and page-structure caches",
        params: &[
            param("ptw.levels", Def::Int(4), "levels", "page-table levels (4: x86-64, 5: LA57)"),
            param("ptw.psc_sets", Def::Str("1,2,4"), "sets", "page-structure caches, from the root's down to the leaf table's parent"),
            param("ptw.psc_ways", Def::Str("4,4,8"), "ways", "their associativity, in the same order"),
            param("ptw.mshrs", Def::Int(5), "walks", "walks in flight at once"),
            param("ptw.fault_latency", Def::Int(0), "cycles", "filling a page-table entry the first time (a minor fault)"),
            param("ptw.layout", Def::Str("radix"), "radix|champsim", "page-table layout: x86-64 radix tables, or ChampSim's (an entry per table, docs/core-model.md)"),
        ],
    },
    Component {
        name: "sample",
        kind: Kind::Machine,
        summary: "series sampled during a run",
        source: "002 Fig. 4",
        params: &[param("sample.ipc_period", Def::Int(0), "cycles", "cycles per IPC sample (the series sample.ipc); 0: off")],
    },
];
