//! The typed boundary between the Python package and the engine: one run specification in,
//! the resolved configuration with the statistics out, and the components' declarations as
//! small objects with named fields. Each is a class (not a tuple) so that a field can be
//! added without touching a caller that reads the others.

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Everything one simulation needs. Keyword-only: a field added later cannot shift another.
#[pyclass(module = "secmem._core", frozen, get_all)]
#[derive(Clone)]
pub struct RunSpec {
    /// A preset name or a .toml file.
    pub preset: String,
    /// Scheme names (None: the preset's); validated by the registry when the run starts.
    pub integrity: Option<String>,
    pub encryption: Option<String>,
    /// `key=value` overrides, applied in order after the schemes.
    pub sets: Vec<String>,
    /// The input: at most one of a built-in workload, a trace file and a program.
    pub workload: Option<String>,
    pub trace: Option<String>,
    pub trace_format: Option<String>,
    pub program: Option<Vec<String>>,
    /// The program's whole environment (with `clear_env`), its directory, stdin and stdout.
    pub program_env: Option<Vec<(String, String)>>,
    pub clear_env: bool,
    pub cwd: Option<String>,
    pub stdin: Option<String>,
    pub stdout: Option<String>,
    pub instructions: u64,
    pub warmup: u64,
    pub skip: u64,
    pub seed: u64,
    /// A sampled run's plan: "" for the defaults, "U:W:D"; None runs in full detail.
    pub sample: Option<String>,
    pub progress: bool,
    /// Statistics of every this many measured instructions (`interval.*`); 0: none.
    pub interval: u64,
}

#[pymethods]
impl RunSpec {
    #[new]
    #[pyo3(signature = (*, preset="suh2003".to_string(), integrity=None, encryption=None, sets=Vec::new(), workload=None, trace=None,
        trace_format=None, program=None, program_env=None, clear_env=false, cwd=None, stdin=None, stdout=None,
        instructions=10_000_000, warmup=1_000_000, skip=0, seed=1, sample=None, progress=false, interval=0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        preset: String,
        integrity: Option<String>,
        encryption: Option<String>,
        sets: Vec<String>,
        workload: Option<String>,
        trace: Option<String>,
        trace_format: Option<String>,
        program: Option<Vec<String>>,
        program_env: Option<Vec<(String, String)>>,
        clear_env: bool,
        cwd: Option<String>,
        stdin: Option<String>,
        stdout: Option<String>,
        instructions: u64,
        warmup: u64,
        skip: u64,
        seed: u64,
        sample: Option<String>,
        progress: bool,
        interval: u64,
    ) -> Self {
        RunSpec {
            preset,
            integrity,
            encryption,
            sets,
            workload,
            trace,
            trace_format,
            program,
            program_env,
            clear_env,
            cwd,
            stdin,
            stdout,
            instructions,
            warmup,
            skip,
            seed,
            sample,
            progress,
            interval,
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "RunSpec(preset={:?}, integrity={:?}, encryption={:?}, sets={:?}, workload={:?}, trace={:?}, program={:?}, \
             instructions={}, warmup={}, skip={}, seed={}, sample={:?}, interval={})",
            self.preset, self.integrity, self.encryption, self.sets, self.workload, self.trace, self.program,
            self.instructions, self.warmup, self.skip, self.seed, self.sample, self.interval
        )
    }
}

/// What a run gives back: its statistics, why it stopped early (None if it did not), and
/// the configuration it ran with (every parameter after the schemes and sets, as text).
#[pyclass(module = "secmem._core", frozen, get_all)]
pub struct RunOutcome {
    pub stats: Py<PyDict>,
    pub error: Option<String>,
    pub config: Py<PyDict>,
}

/// One declared parameter: `default` is None when the preset must give it.
#[pyclass(module = "secmem._core", name = "Param", frozen, get_all)]
#[derive(Clone)]
pub struct ParamDecl {
    pub key: String,
    pub default: Option<String>,
    pub unit: String,
    pub meaning: String,
}

#[pymethods]
impl ParamDecl {
    fn __repr__(&self) -> String {
        format!("Param(key={:?}, default={:?}, unit={:?})", self.key, self.default, self.unit)
    }
}

/// One declared component: a scheme (kind integrity, encryption or codeauth) or a part of
/// the machine (kind machine), with the seed section it implements (`source`) and its
/// parameters. To give Python another declared property (a scheme's guarantees, its
/// coverage), add a field here, fill it in `From<&Component>`, and add its property to
/// `python/secmem/_core.pyi`: the test command's stubtest fails until the two agree, and no
/// caller that reads the other fields changes.
#[pyclass(module = "secmem._core", name = "Component", frozen, get_all)]
pub struct ComponentDecl {
    pub name: String,
    pub kind: String,
    pub summary: String,
    pub source: String,
    pub params: Vec<ParamDecl>,
    /// An integrity or encryption scheme's promises under its default parameters, as
    /// (what, promise) lines; empty for anything else.
    pub guarantees: Vec<(String, String)>,
    /// The roles of the regions it lays out and of those it protects (schemes only).
    pub lays_out: Vec<String>,
    pub protects: Vec<String>,
    /// The statistics it reports, as (key, unit, meaning); a key may be a pattern (`*`: any
    /// text, `#`: a number), see `secmem_core::decl::Statistic`.
    pub stats: Vec<(String, String, String)>,
}

#[pymethods]
impl ComponentDecl {
    fn __repr__(&self) -> String {
        format!("Component(name={:?}, kind={:?}, {} params)", self.name, self.kind, self.params.len())
    }
}

impl From<&secmem_core::decl::Component> for ComponentDecl {
    fn from(c: &secmem_core::decl::Component) -> Self {
        let params = c
            .params
            .iter()
            .map(|d| ParamDecl {
                key: d.key.to_string(),
                default: d.default.value().map(|v| v.to_string()),
                unit: d.unit.to_string(),
                meaning: d.meaning.to_string(),
            })
            .collect();
        let declared = secmem_core::registry::scheme(c.kind, c.name).ok();
        let roles = |r: &[secmem_core::decl::Role]| r.iter().map(|x| x.name().to_string()).collect();
        ComponentDecl {
            name: c.name.to_string(),
            kind: c.kind.name().to_string(),
            summary: c.summary.to_string(),
            source: c.source.to_string(),
            params,
            guarantees: declared.map_or_else(Vec::new, |(_, g, _)| g.describe().into_iter().map(|(k, v)| (k.to_string(), v)).collect()),
            lays_out: declared.map_or_else(Vec::new, |(_, _, cov)| roles(cov.lays_out)),
            protects: declared.map_or_else(Vec::new, |(_, _, cov)| roles(cov.protects)),
            stats: c.stats.iter().map(|d| (d.key.to_string(), d.unit.to_string(), d.meaning.to_string())).collect(),
        }
    }
}

/// Every declared component, in registry order: what `secmem schemes` and `secmem presets
/// NAME` print.
#[pyfunction]
pub fn components() -> Vec<ComponentDecl> {
    secmem_sim::components().into_iter().map(ComponentDecl::from).collect()
}

/// The declaration of statistic `key`: (component, declared key, unit, meaning), or None
/// when no component declares it (the same lookup the Rust test of every run's keys uses).
#[pyfunction]
pub fn stat_declaration(key: &str) -> Option<(String, String, String, String)> {
    let comps = secmem_sim::components();
    secmem_core::decl::find_stat(comps.iter().copied(), key).map(|(c, k, u, m)| (c.name.to_string(), k.to_string(), u.to_string(), m.to_string()))
}

/// A count as every command and the Python API take it ("10M", "1.5k", "2_000_000"), or
/// None: the core's own rule, so no second parser can disagree with it.
#[pyfunction]
pub fn parse_count(text: &str) -> Option<u64> {
    secmem_core::params::parse_count(text)
}

/// A size ("256KiB", "1MB", "4096"), or None: the rule `--set l2.size=…` follows.
#[pyfunction]
pub fn parse_size(text: &str) -> Option<u64> {
    secmem_core::params::parse_size(text)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RunSpec>()?;
    m.add_class::<RunOutcome>()?;
    m.add_class::<ParamDecl>()?;
    m.add_class::<ComponentDecl>()?;
    m.add_function(wrap_pyfunction!(components, m)?)?;
    m.add_function(wrap_pyfunction!(parse_count, m)?)?;
    m.add_function(wrap_pyfunction!(stat_declaration, m)?)?;
    m.add_function(wrap_pyfunction!(parse_size, m)?)?;
    Ok(())
}
