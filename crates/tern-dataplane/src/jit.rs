//! Native code for the parser, the match-action pipelines (module `pipeline`) and the deparser's
//! emit loop (also in a second form with the program's checksum updates after it, see
//! [`Native::emit_csum`]), generated at load time with Cranelift.
//!
//! The interpreter in [`crate::exec`] walks the compiled parser ([`CParser`]) op by op and
//! field by field, reading each field's location and width from the layout at packet time;
//! the deparser likewise packs each valid header field by field. Everything they read is fixed
//! when the program loads, so for the common shapes (fixed-size headers, `select` on extracted
//! fields, constant transitions) this module emits native functions in which every offset,
//! width, shift and mask is a constant: a parse state is a basic block, an extract is a bounds
//! check and a few loads, shifts and stores, a `select` is a chain of compares; emitting a
//! header is a validity test and a few loads, shifts and stores.
//!
//! Same semantics as the interpreter, by construction and by test: for every packet the PHV
//! bytes and validity, the error code, the parsed length and the emitted bytes agree
//! ([`compare_with_interpreter`], run on every fixture with random and mutated packets; the
//! conformance suite runs through this code). Parse states may also extract into a header
//! stack's next element (out of elements: StackOutOfBounds, before the length check, as the
//! interpreter) and assign fields from expressions of the pipelines' native subset
//! (`pipeline::NExpr`). A parser or deparser that uses anything else (union stacks,
//! variable-length headers, `lookahead`, value sets, `verify`, primitives in parse states,
//! fields wider than 56 bits outside byte-aligned headers) is left to the interpreter, and
//! [`compile`] says why. A traced packet
//! ([`crate::Switch::set_trace`]) always takes the interpreter, and so does a packet whose
//! stages are timed. `TERN_NO_JIT=1` in the environment turns native code off (for
//! comparisons); [`crate::Switch::use_interpreter`] does it for one switch (differential
//! tests).

use std::sync::Mutex;

mod lane;
mod pipeline;

pub use lane::{LaneCtx, LaneEnd, LaneEntry};
pub use pipeline::{BurstCtx, TablePath};

use cranelift_codegen::ir::{self, condcodes::IntCC, types, AbiParam, InstBuilder, MemFlags};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Linkage, Module};
use tern_model::KeyElem;

use crate::compile::{CParser, ETarget, Engine, GNode, PMatch, POp};
use crate::exec::{Fault, ParserBudget, Pkt, State};
use crate::layout::{FieldLoc, Phv};

/// `(phv bytes, validity bytes, packet bytes, packet length, [parsed length out, states
/// allowed in / left out], header stacks' next indexes) -> error code`.
type ParseFn = unsafe extern "C" fn(*mut u8, *mut u8, *const u8, u64, *mut u64, *mut u32) -> i64;

/// `(phv bytes, validity bytes, output, header start offsets out) -> bytes written`.
type EmitFn = unsafe extern "C" fn(*const u8, *const u8, *mut u8, *mut u32) -> u64;

/// The emit loop with the checksum updates compiled in: `(phv bytes (the targets are stored),
/// validity bytes, output, header start offsets out) -> bytes written`, with [`CSUM_LEFT`] set
/// when the checksums were left to the caller.
type EmitCsumFn = unsafe extern "C" fn(*mut u8, *const u8, *mut u8, *mut u32) -> u64;

/// Flag of [`EmitCsumFn`]'s result: the headers are emitted, the checksums are not (an update
/// whose condition holds sums a header that is not valid: the generic value, computed by the
/// caller).
const CSUM_LEFT: u64 = 1 << 63;

/// A program's native code: the parser and/or the deparser's emit loop, and the code memory
/// they live in.
pub struct Native {
    parser: Option<ParseFn>,
    emit: Option<EmitFn>,
    /// The emit loop followed by the program's checksum updates (see [`Native::emit_csum`]).
    emit_csum: Option<EmitCsumFn>,
    /// Most bytes the emit loop writes (every header of the deparser's order valid).
    emit_max: usize,
    /// The fast lane's body (see [`lane`]): parser, pipelines and emit called from one
    /// generated function.
    lane: Option<lane::LaneFn>,
    /// The lane function resets the PHV of a new packet itself.
    lane_resets: bool,
    /// The match-action pipelines (see [`pipeline`]).
    pipes: pipeline::Pipes,
    /// PHV size, header count and header stack count the code was generated for (checked
    /// before every call).
    phv_bytes: usize,
    headers: usize,
    stacks: usize,
    /// Owns the code; only touched again to free it. (A `Mutex` because the module is `Send`
    /// but not `Sync`, and an engine is shared between threads.)
    module: Mutex<Option<JITModule>>,
}

impl std::fmt::Debug for Native {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Native")
            .field("parser", &self.parser.is_some())
            .field("emit", &self.emit.is_some())
            .field("pipelines", &self.pipes.fns.len())
            .field("lane", &self.lane.is_some())
            .finish_non_exhaustive()
    }
}

impl Drop for Native {
    fn drop(&mut self) {
        let module = match self.module.get_mut() {
            Ok(m) => m.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(m) = module {
            // SAFETY: the function pointers point into this module's memory and die with
            // `self`; nothing else holds a pointer into it.
            unsafe { m.free_memory() };
        }
    }
}

impl Native {
    /// Whether the parser runs as native code.
    pub fn has_parser(&self) -> bool {
        self.parser.is_some()
    }

    /// Whether the deparser's emit loop runs as native code.
    pub fn has_emit(&self) -> bool {
        self.emit.is_some()
    }

    /// Whether the checksum updates are compiled into an emit function ([`Native::emit_csum`]).
    pub fn has_emit_csum(&self) -> bool {
        self.emit_csum.is_some()
    }

    /// Forget the emit function with compiled checksums (the planned Rust path runs them):
    /// for differential tests.
    pub fn drop_emit_csum(&mut self) {
        self.emit_csum = None;
        // The lane function calls the dropped function.
        self.lane = None;
    }

    /// How many pipelines (ingress, egress) run as native code.
    pub fn pipelines(&self) -> usize {
        self.pipes.fns.len()
    }

    /// Whether the pipeline starting at `init` runs as native code.
    pub fn has_pipeline(&self, init: GNode) -> bool {
        self.pipes.fns.iter().any(|(g, _)| *g == init)
    }

    /// How each table is looked up from native code (by table index).
    pub fn table_paths(&self, eng: &Engine) -> Vec<TablePath> {
        (0..eng.tables.len() as u32)
            .map(|t| pipeline::table_path(eng, &self.pipes, t))
            .collect()
    }

    /// How many of the program's actions are inlined in native pipelines (the others run
    /// interpreted, called from the native code).
    pub fn native_actions(&self) -> usize {
        self.pipes.actions.iter().filter(|a| a.is_some()).count()
    }

    /// Run the pipeline starting at `init` as [`Engine::run_pipeline`] does (untraced, without
    /// stage timing); `None` when that pipeline has no native code.
    #[inline]
    pub fn run_pipeline(
        &self,
        eng: &Engine,
        st: &mut State,
        pkt: &mut Pkt,
        init: GNode,
    ) -> Option<Result<(), Fault>> {
        self.check_phv(&pkt.phv);
        self.pipes.run(eng, st, pkt, init)
    }

    /// Where the pipeline starting at `init` is among the native pipelines (resolved once,
    /// when a program loads, for [`Native::run_pipeline_at`]); `None` when it is interpreted.
    pub fn pipeline_index(&self, init: GNode) -> Option<usize> {
        self.pipes.index_of(init)
    }

    /// [`Native::run_pipeline`] of the pipeline at `index` ([`Native::pipeline_index`]) in a
    /// context kept across the calls of a burst ([`BurstCtx`]): no search by first node, no
    /// context set-up beyond its pointers; `None` when there is no such native pipeline.
    #[inline(always)]
    pub fn run_pipeline_at(
        &self,
        ctx: &mut BurstCtx,
        eng: &Engine,
        st: &mut State,
        pkt: &mut Pkt,
        index: usize,
    ) -> Option<Result<(), Fault>> {
        self.check_phv(&pkt.phv);
        self.pipes.run_at_in(ctx, index, eng, st, pkt)
    }

    #[inline(always)]
    fn check_phv(&self, phv: &Phv) {
        assert!(
            phv.bytes.len() == self.phv_bytes && phv.valid.len() == self.headers,
            "PHV does not belong to this program"
        );
    }

    /// Parse `pkt` as [`Engine::parse`] does (fills the PHV, sets `payload_off`, counts the
    /// states in `budget`) and return the error code; `None` when the parser is not native.
    #[inline]
    pub fn parse(&self, pkt: &mut Pkt, budget: &mut ParserBudget) -> Option<i64> {
        let (err, off) = self.parse_bytes(&mut pkt.phv, &pkt.data, budget)?;
        pkt.payload_off = off;
        Some(err)
    }

    /// [`Native::parse`] over `data` (not the packet's own buffer): the error code and the
    /// parsed length; `None` when the parser is not native. At most `budget.max_states`
    /// states are entered (then `ParserTimeout`); the states entered are counted in `budget`.
    ///
    /// The generated parser's fifth argument points at two words: the parsed length (out)
    /// and the states it may enter (in; out: what is left of them, `u64::MAX` when it ran
    /// out: `ParserTimeout`).
    #[inline]
    pub fn parse_bytes(
        &self,
        phv: &mut Phv,
        data: &[u8],
        budget: &mut ParserBudget,
    ) -> Option<(i64, usize)> {
        let f = self.parser?;
        self.check_phv(phv);
        assert!(
            phv.stack_next.len() == self.stacks,
            "PHV does not belong to this program"
        );
        let mut io = [0u64, budget.max_states];
        // SAFETY: the code writes only PHV bytes below `phv_bytes` and validity bytes below
        // `headers` (offsets checked when it was generated, sizes checked just above), and
        // stack indexes below `stacks` (stack numbers checked at generation, count just
        // above); it reads packet bytes only below `data.len()` (every read is bounds-checked
        // against `len`, the length of `data`);
        // `bool` is one byte and the code stores only 0 or 1 into `valid`; `io` is a live
        // local of two words (the code reads and writes only those two). The function is not
        // re-entered and keeps no pointer after returning.
        let err = unsafe {
            f(
                phv.bytes.as_mut_ptr(),
                phv.valid.as_mut_ptr().cast::<u8>(),
                data.as_ptr(),
                data.len() as u64,
                io.as_mut_ptr(),
                phv.stack_next.as_mut_ptr(),
            )
        };
        budget.count(io[1]);
        Some((err, io[0] as usize))
    }

    /// Append the valid headers in deparser order to `out`, as the deparser's emit loop does,
    /// and record in `emit_off[h]` where each emitted header `h` starts (relative to where
    /// this call started appending; `emit_off` is grown to the header count if shorter);
    /// `false` (nothing appended) when that loop is not native.
    #[inline]
    pub fn emit(&self, phv: &Phv, out: &mut Vec<u8>, emit_off: &mut Vec<u32>) -> bool {
        let Some(f) = self.emit else { return false };
        self.check_phv(phv);
        if emit_off.len() < self.headers {
            emit_off.resize(self.headers, 0);
        }
        let start = out.len();
        // The code writes into spare capacity: no zero-fill of the window per packet.
        out.reserve(self.emit_max);
        // SAFETY: the code reads PHV bytes below `phv_bytes` and validity bytes below
        // `headers` (checked at generation and just above), writes at most `emit_max` bytes
        // from the output pointer, which points at `out`'s spare capacity of at least
        // `emit_max` bytes (reserved just above; writing uninitialized bytes through a raw
        // pointer is allowed), never reads the output, and writes `u32`s only at header indexes
        // below `headers` of `emit_off` (at least that long).
        let n = unsafe {
            f(
                phv.bytes.as_ptr(),
                phv.valid.as_ptr().cast::<u8>(),
                out.spare_capacity_mut().as_mut_ptr().cast::<u8>(),
                emit_off.as_mut_ptr(),
            )
        };
        let n = (n as usize).min(self.emit_max);
        // SAFETY: `start + n` is within the capacity (`n <= emit_max`, reserved above), and
        // every byte of `[start, start + n)` was written by the code: the value it returns is
        // the sum of the sizes of the headers it emitted, laid end to end from the output
        // pointer, and for each emitted header it stores every byte of `[pos, pos + size)`
        // (a packed header is copied in chunks covering all its bytes once, see `chunks`; a
        // packed-by-fields header stores full 64-bit words then the remaining bytes, asserted
        // at generation in `Gen::emit` to cover exactly `size` bytes). Bytes are `u8`: any
        // written value is valid.
        unsafe { out.set_len(start + n) };
        true
    }

    /// [`Native::emit`] followed by the program's checksum updates, as
    /// [`Engine::update_checksums_emitted`] does them with the program's plan
    /// ([`crate::csum::native_list`]: every offset, skip and condition fixed at load): each
    /// result stored in the target's PHV slot and patched into the emitted bytes. `None`
    /// (nothing appended) when there is no such function; `Some(false)` when the headers were
    /// emitted but the checksums left to the caller (an update whose condition holds sums a
    /// header that is not valid), `Some(true)` when both are done.
    #[inline(always)]
    pub fn emit_csum(
        &self,
        phv: &mut Phv,
        out: &mut Vec<u8>,
        emit_off: &mut Vec<u32>,
    ) -> Option<bool> {
        let f = self.emit_csum?;
        self.check_phv(phv);
        if emit_off.len() < self.headers {
            emit_off.resize(self.headers, 0);
        }
        let start = out.len();
        out.reserve(self.emit_max);
        // SAFETY: as in `emit` (same emit loop, same bounds); the checksum code after it reads
        // only output bytes the loop wrote in this call (each summed header is valid, so it
        // was emitted, at the offset the loop stored in `emit_off`, `wire.len` bytes long),
        // stores the target's whole-byte slot inside the PHV (offsets checked at generation)
        // and patches bytes inside an emitted valid header.
        let r = unsafe {
            f(
                phv.bytes.as_mut_ptr(),
                phv.valid.as_ptr().cast::<u8>(),
                out.spare_capacity_mut().as_mut_ptr().cast::<u8>(),
                emit_off.as_mut_ptr(),
            )
        };
        let n = ((r & !CSUM_LEFT) as usize).min(self.emit_max);
        // SAFETY: as in `emit`: every byte of `[start, start + n)` was written by the loop.
        unsafe { out.set_len(start + n) };
        Some(r & CSUM_LEFT == 0)
    }
}

/// Compile what can be compiled of the engine's parser and deparser to native code. Returns
/// the code (if any part compiled) and, for each part left to the interpreter, why.
pub fn compile(eng: &Engine) -> (Option<Native>, Vec<String>) {
    let mut notes = Vec::new();
    if std::env::var_os("TERN_NO_JIT").is_some_and(|v| v != "0") {
        notes.push("native code off (TERN_NO_JIT)".to_string());
        return (None, notes);
    }
    let parser = match eng.parser.as_ref() {
        None => Err("parser: none".to_string()),
        Some(p) => check_parser(eng, p)
            .map(|()| p)
            .map_err(|e| format!("parser: {e}")),
    };
    let order = match eng.deparser.as_ref() {
        None => Err("deparser: none".to_string()),
        Some((order, _)) => check_emit(eng, order)
            .map(|()| order)
            .map_err(|e| format!("deparser: {e}")),
    };
    notes.extend(parser.as_ref().err().cloned());
    notes.extend(order.as_ref().err().cloned());
    let mut inits = Vec::new();
    for (name, init) in [("ingress", eng.ingress), ("egress", eng.egress)] {
        let Some(Some(init)) = init else { continue };
        if inits.contains(&init) {
            continue;
        }
        match pipeline::check_graph(eng, init) {
            Ok(()) => inits.push(init),
            Err(e) => notes.push(format!("{name}: {e}")),
        }
    }
    if parser.is_err() && order.is_err() && inits.is_empty() {
        return (None, notes);
    }
    match generate(eng, parser.ok(), order.ok(), &inits) {
        Ok(n) => (Some(n), notes),
        Err(e) => {
            notes.push(format!("code generation: {e}"));
            (None, notes)
        }
    }
}

fn generate(
    eng: &Engine,
    parser: Option<&CParser>,
    order: Option<&Vec<u32>>,
    inits: &[GNode],
) -> Result<Native, String> {
    let cl = |e: &dyn std::fmt::Display| format!("cranelift: {e}");
    let mut flags = settings::builder();
    flags.set("opt_level", "speed").map_err(|e| cl(&e))?;
    let isa = cranelift_native::builder()
        .map_err(|e| format!("no native code generator for this host: {e}"))?
        .finish(settings::Flags::new(flags))
        .map_err(|e| cl(&e))?;
    let mut module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
    let ptr = module.target_config().pointer_type();
    let mut fbc = FunctionBuilderContext::new();
    // `TERN_JIT_DISASM=1`: the generated machine code of every function on stderr (a
    // developer's view of what a table or an action costs).
    let disasm = std::env::var_os("TERN_JIT_DISASM").is_some_and(|v| v != "0");
    let mut define = |module: &mut JITModule,
                      name: &str,
                      params: &[ir::Type],
                      body: &dyn Fn(FunctionBuilder)|
     -> Result<cranelift_module::FuncId, String> {
        let mut ctx = module.make_context();
        for t in params {
            ctx.func.signature.params.push(AbiParam::new(*t));
        }
        ctx.func.signature.returns.push(AbiParam::new(types::I64));
        body(FunctionBuilder::new(&mut ctx.func, &mut fbc));
        let id = module
            .declare_function(name, Linkage::Local, &ctx.func.signature)
            .map_err(|e| cl(&e))?;
        ctx.set_disasm(disasm);
        module
            .define_function(id, &mut ctx)
            .map_err(|e| format!("cranelift: {e:?}"))?;
        if let Some(text) = ctx.compiled_code().and_then(|c| c.vcode.as_ref()) {
            eprintln!("== {name}\n{text}");
        }
        Ok(id)
    };
    let parse_id = match parser {
        Some(p) => Some(define(
            &mut module,
            "tern_parser",
            &[ptr, ptr, ptr, types::I64, ptr, ptr],
            &|b| Gen { eng, b }.parser(p),
        )?),
        None => None,
    };
    let emit_id = match order {
        Some(o) => Some(define(
            &mut module,
            "tern_emit",
            &[ptr, ptr, ptr, ptr],
            &|b| Gen { eng, b }.emit(o, None),
        )?),
        None => None,
    };
    // The same loop with the checksum updates after it, when all of them can be compiled.
    let csums = order.and_then(|o| {
        let list = crate::csum::native_list(eng).ok()?;
        check_csums(eng, o, &list).ok()?;
        Some((o, list))
    });
    let emit_csum_id = match &csums {
        Some((o, list)) => Some(define(
            &mut module,
            "tern_emit_csum",
            &[ptr, ptr, ptr, ptr],
            &|b| Gen { eng, b }.emit(o, Some(list)),
        )?),
        None => None,
    };
    let mut pipes = pipeline::Pipes::plan(eng);
    let mut pipe_ids = Vec::new();
    for (i, init) in inits.iter().enumerate() {
        let id = define(&mut module, &format!("tern_pipeline_{i}"), &[ptr], &|b| {
            Gen { eng, b }.pipeline(*init, &pipes)
        })?;
        pipe_ids.push((*init, id));
    }
    // The lane's body, calling the functions above.
    let mut lane_resets = false;
    let lane_id = match (parse_id, emit_csum_id.or(emit_id)) {
        (Some(_), Some(_)) => {
            let pipe_of = |g: Option<Option<GNode>>| {
                g.flatten()
                    .and_then(|g| pipe_ids.iter().find(|(i, _)| *i == g))
                    .map(|(_, id)| *id)
            };
            let native = |g: Option<Option<GNode>>| g.flatten().is_none() || pipe_of(g).is_some();
            match lane::spec(eng, emit_csum_id.is_some()) {
                Ok(sp) if native(eng.ingress) && native(eng.egress) => {
                    lane_resets = sp.reset.is_some();
                    let mut ctx = module.make_context();
                    ctx.func.signature.params.push(AbiParam::new(ptr));
                    ctx.func.signature.returns.push(AbiParam::new(types::I64));
                    let calls = lane::Calls {
                        parser: parser.expect("a native parser"),
                        ingress: eng.ingress.flatten(),
                        egress: eng.egress.flatten(),
                        pipes: &pipes,
                        order: order.expect("a native emit"),
                        csums: csums.as_ref().map(|(_, l)| l.as_slice()),
                        target: module.target_config(),
                    };
                    Gen {
                        eng,
                        b: FunctionBuilder::new(&mut ctx.func, &mut fbc),
                    }
                    .lane(&sp, &calls);
                    let id = module
                        .declare_function("tern_lane", Linkage::Local, &ctx.func.signature)
                        .map_err(|e| cl(&e))?;
                    ctx.set_disasm(disasm);
                    module
                        .define_function(id, &mut ctx)
                        .map_err(|e| format!("cranelift: {e:?}"))?;
                    if let Some(text) = ctx.compiled_code().and_then(|c| c.vcode.as_ref()) {
                        eprintln!("== tern_lane\n{text}");
                    }
                    Some(id)
                }
                _ => None,
            }
        }
        _ => None,
    };
    module.finalize_definitions().map_err(|e| cl(&e))?;
    // SAFETY: as below, with `LaneFn`'s signature (one pointer, returning i64).
    let lane = lane_id.map(|id| unsafe {
        std::mem::transmute::<*const u8, lane::LaneFn>(module.get_finalized_function(id))
    });
    // SAFETY (both): the pointer is a finalized function just defined with exactly the type's
    // signature (pointers and i64s in that order, returning i64) in the host's default calling
    // convention, which is `extern "C"`.
    let parser = parse_id.map(|id| unsafe {
        std::mem::transmute::<*const u8, ParseFn>(module.get_finalized_function(id))
    });
    let emit = emit_id.map(|id| unsafe {
        std::mem::transmute::<*const u8, EmitFn>(module.get_finalized_function(id))
    });
    // SAFETY: as above, with `EmitCsumFn`'s signature (four pointers, returning i64).
    let emit_csum = emit_csum_id.map(|id| unsafe {
        std::mem::transmute::<*const u8, EmitCsumFn>(module.get_finalized_function(id))
    });
    // SAFETY: as above, with the signature `(pointer) -> i64` of `PipeFn`.
    pipes.fns = pipe_ids
        .into_iter()
        .map(|(init, id)| {
            let f = unsafe {
                std::mem::transmute::<*const u8, pipeline::PipeFn>(
                    module.get_finalized_function(id),
                )
            };
            (init, f)
        })
        .collect();
    let emit_max = order.map_or(0, |o| {
        o.iter()
            .map(|h| eng.layout.headers[*h as usize].fixed_bits.div_ceil(8) as usize)
            .sum()
    });
    Ok(Native {
        parser,
        emit,
        emit_csum,
        emit_max,
        lane,
        lane_resets,
        pipes,
        phv_bytes: eng.layout.total_bytes as usize,
        headers: eng.layout.headers.len(),
        stacks: eng.layout.stacks.len(),
        module: Mutex::new(Some(module)),
    })
}

/// The deparser subset compiled natively: fixed-size headers whose fields fit the 64-bit path.
fn check_emit(eng: &Engine, order: &[u32]) -> Result<(), String> {
    order.iter().try_for_each(|h| check_header(eng, *h))
}

/// A header the generated code can extract and emit: fixed size, inside the PHV, every field
/// within the 64-bit path unless the header is a plain byte copy.
fn check_header(eng: &Engine, h: u32) -> Result<(), String> {
    let hl = eng.layout.headers.get(h as usize).ok_or("unknown header")?;
    if hl.vl_field.is_some() {
        return Err(format!("variable-length header {}", hl.name));
    }
    if hl.off + hl.slot_bytes > eng.layout.total_bytes {
        return Err(format!("header {} outside the PHV", hl.name));
    }
    if !hl.packed && hl.fields.iter().any(|f| f.width > 56) {
        return Err(format!("wide field in {}", hl.name));
    }
    Ok(())
}

/// The parser subset compiled natively (see the module documentation).
fn check_parser(eng: &Engine, p: &CParser) -> Result<(), String> {
    let total = eng.layout.total_bytes;
    for (si, s) in p.states.iter().enumerate() {
        let at = || format!("parse state {si}");
        for op in &s.ops {
            match op {
                POp::Extract(ETarget::Header(h)) => {
                    check_header(eng, *h).map_err(|e| format!("{}: {e}", at()))?;
                }
                POp::Extract(ETarget::Stack(st)) => {
                    let el = eng
                        .layout
                        .stacks
                        .get(*st as usize)
                        .ok_or_else(|| format!("{}: unknown stack", at()))?;
                    for h in el {
                        check_header(eng, *h).map_err(|e| format!("{}: {e}", at()))?;
                    }
                    let size = |h: &u32| eng.layout.headers[*h as usize].fixed_bits;
                    if el.iter().any(|h| size(h) != el.first().map_or(0, size)) {
                        return Err(format!("{}: stack elements of different sizes", at()));
                    }
                }
                POp::Set(dst, e) => {
                    let mut params = 0;
                    let ok = pipeline::dst_ok(eng, dst)
                        && !dst.is_valid_bit
                        && pipeline::nexpr(e)
                            .is_some_and(|e| pipeline::nexpr_ok(eng, &e, &mut params))
                        && params == 0;
                    if !ok {
                        return Err(format!("{}: assignment not compiled natively", at()));
                    }
                }
                POp::Shift(_) => {}
                _ => return Err(format!("{}: operation not compiled natively", at())),
            }
        }
        let mut key_len = 0usize;
        for k in &s.key {
            let KeyElem::Field(f) = k else {
                return Err(format!("{}: select on a stack or lookahead", at()));
            };
            let f = eng.layout.field(*f);
            if !f.is_valid_bit && (f.nbytes > 8 || f.off + f.nbytes > total) {
                return Err(format!("{}: select key field wider than 64 bits", at()));
            }
            key_len += if f.is_valid_bit { 1 } else { f.nbytes as usize };
        }
        for (m, _) in &s.transitions {
            match m {
                PMatch::Default => {}
                PMatch::Value { value, mask } => {
                    if value.len() != key_len || mask.as_ref().is_some_and(|m| m.len() != key_len) {
                        return Err(format!("{}: select value of another width", at()));
                    }
                }
                PMatch::Vset { .. } => return Err(format!("{}: value set", at())),
            }
        }
    }
    Ok(())
}

/// Big-endian integer of `bytes` (at most 8).
/// Checksums the generated emit function can run: every summed header and patched target in
/// the deparser's order (emitted once, the plan's condition) and inside bounds; every target
/// slot inside the PHV.
fn check_csums(
    eng: &Engine,
    order: &[u32],
    list: &[crate::csum::NativeCsum],
) -> Result<(), String> {
    let emitted = |h: u32| order.iter().filter(|&&x| x == h).count() == 1;
    for c in list {
        let hl = eng
            .layout
            .headers
            .get(c.wire.header as usize)
            .ok_or("unknown header")?;
        if !emitted(c.wire.header) || c.wire.len != hl.fixed_bits.div_ceil(8) {
            return Err(format!("checksum over {}: not emitted once", hl.name));
        }
        if c.target_off + c.target_bytes > eng.layout.total_bytes {
            return Err("checksum target outside the PHV".into());
        }
        if let Some((h, p)) = c.patch {
            let th = eng.layout.headers.get(h as usize).ok_or("unknown header")?;
            if !emitted(h) || p + c.target_bytes > th.fixed_bits.div_ceil(8) {
                return Err(format!("checksum target in {}: not patchable", th.name));
            }
        }
        if c.cond
            .is_some_and(|h| h as usize >= eng.layout.headers.len())
        {
            return Err("checksum condition on an unknown header".into());
        }
    }
    Ok(())
}

fn be(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0u64, |a, b| (a << 8) | u64::from(*b))
}

/// Split `n` bytes into power-of-two chunks (8, 4, 2, 1), largest first: `(offset, size)`.
fn chunks(n: u32) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut off = 0;
    while off < n {
        let left = n - off;
        let c = [8, 4, 2, 1].into_iter().find(|c| *c <= left).unwrap_or(1);
        out.push((off, c));
        off += c;
    }
    out
}

/// Flags of every load and store: cannot trap (each address is checked or in bounds by
/// construction), but not aligned (header fields sit at any byte offset).
fn mem() -> MemFlags {
    let mut f = MemFlags::new();
    f.set_notrap();
    f
}

fn int_type(bytes: u32) -> ir::Type {
    match bytes {
        8 => types::I64,
        4 => types::I32,
        2 => types::I16,
        _ => types::I8,
    }
}

/// One piece of a header's wire conversion in generated code (from the layout's
/// [`crate::layout::WireStep`]s): a run of whole bytes copied as is, or a window of 1 to 8
/// whole wire bytes holding bit fields (no other piece touches its bytes), read or written
/// as one big-endian value.
enum Piece {
    Copy {
        wire: u32,
        slot: u32,
        len: u32,
    },
    /// `len` bytes from wire byte `byte`; each field as (bit within the window, width, slot,
    /// slot bytes), in wire order and contiguous from bit 0.
    Bits {
        byte: u32,
        len: u32,
        fields: Vec<BitField>,
    },
}

/// A bit field of a [`Piece::Bits`] window: (bit within the window, width, slot, slot bytes).
type BitField = (u32, u32, u32, u32);

/// The [`Piece`]s of a header with wire steps, `None` when a run of bit fields crosses no
/// byte boundary within 64 bits (the field-by-field path then). Bit-field runs are cut at
/// every byte boundary and adjacent windows merged up to 8 bytes.
fn pieces(hl: &crate::layout::HeaderLayout) -> Option<Vec<Piece>> {
    use crate::layout::WireStep;
    let mut out: Vec<Piece> = Vec::new();
    // The open window: start bit (a byte boundary) and its fields.
    let mut open: Option<(u32, Vec<BitField>)> = None;
    let close = |out: &mut Vec<Piece>, start: u32, end: u32, fields: Vec<BitField>| {
        let (byte, len) = (start / 8, (end - start).div_ceil(8));
        match out.last_mut() {
            Some(Piece::Bits {
                byte: b,
                len: l,
                fields: f,
            }) if *b + *l == byte && *l + len <= 8 => {
                let shift = *l * 8;
                f.extend(
                    fields
                        .into_iter()
                        .map(|(bit, w, s, n)| (bit + shift, w, s, n)),
                );
                *l += len;
            }
            _ => out.push(Piece::Bits { byte, len, fields }),
        }
    };
    let mut end = 0u32;
    for s in hl.wire.as_ref()? {
        match *s {
            WireStep::Copy { wire, slot, len } => {
                if open.is_some() {
                    return None;
                }
                out.push(Piece::Copy { wire, slot, len });
                end = (wire + len) * 8;
            }
            WireStep::Bits {
                bit,
                width,
                slot,
                nbytes,
            } => {
                let (start, fields) = open.get_or_insert_with(|| (bit, Vec::new()));
                if bit != end || bit + width - *start > 64 {
                    return None;
                }
                fields.push((bit - *start, width, slot, nbytes));
                end = bit + width;
                if end.is_multiple_of(8) {
                    let (start, fields) = open.take().expect("open");
                    close(&mut out, start, end, fields);
                }
            }
        }
    }
    if let Some((start, fields)) = open {
        close(&mut out, start, end, fields);
    }
    Some(out)
}

struct Gen<'a, 'f> {
    eng: &'a Engine,
    b: FunctionBuilder<'f>,
}

impl Gen<'_, '_> {
    /// `n` bytes (≤ 8) at `addr + off` as a big-endian i64.
    fn load_be(&mut self, addr: ir::Value, off: u32, n: u32) -> ir::Value {
        let mut acc: Option<ir::Value> = None;
        for (o, c) in chunks(n) {
            let t = int_type(c);
            let mut v = self.b.ins().load(t, mem(), addr, (off + o) as i32);
            if c > 1 {
                v = self.b.ins().bswap(v);
            }
            if c < 8 {
                v = self.b.ins().uextend(types::I64, v);
            }
            acc = Some(match acc {
                None => v,
                Some(a) => {
                    let s = self.b.ins().ishl_imm(a, i64::from(c * 8));
                    self.b.ins().bor(s, v)
                }
            });
        }
        acc.unwrap_or_else(|| self.b.ins().iconst(types::I64, 0))
    }

    /// Store the low `n` bytes (≤ 8) of i64 `v` big-endian at `addr + off`.
    fn store_be(&mut self, addr: ir::Value, off: u32, n: u32, v: ir::Value) {
        for (o, c) in chunks(n) {
            let shift = (n - o - c) * 8;
            let mut x = if shift > 0 {
                self.b.ins().ushr_imm(v, i64::from(shift))
            } else {
                v
            };
            if c < 8 {
                x = self.b.ins().ireduce(int_type(c), x);
            }
            if c > 1 {
                x = self.b.ins().bswap(x);
            }
            self.b.ins().store(mem(), x, addr, (off + o) as i32);
        }
    }

    /// Copy `n` bytes from `src + so` to `dst + doff` (no byte order change).
    fn copy(&mut self, dst: ir::Value, doff: u32, src: ir::Value, so: u32, n: u32) {
        for (o, c) in chunks(n) {
            let v = self.b.ins().load(int_type(c), mem(), src, (so + o) as i32);
            self.b.ins().store(mem(), v, dst, (doff + o) as i32);
        }
    }

    /// Key field `f` as an i64 (validity byte, or the slot's big-endian value).
    fn key_field(&mut self, phv: ir::Value, valid: ir::Value, f: &FieldLoc) -> ir::Value {
        if f.is_valid_bit {
            let v = self.b.ins().load(types::I8, mem(), valid, f.header as i32);
            self.b.ins().uextend(types::I64, v)
        } else if matches!(f.nbytes, 3 | 5 | 6 | 7) && f.off + 8 <= self.eng.layout.total_bytes {
            // A slot of 3, 5, 6 or 7 bytes with 8 PHV bytes from its start: one 8-byte load
            // (the bytes after the slot shifted out) instead of one load per 4, 2, 1 bytes.
            let v = self.b.ins().load(types::I64, mem(), phv, f.off as i32);
            let v = self.b.ins().bswap(v);
            self.b.ins().ushr_imm(v, i64::from(64 - 8 * f.nbytes))
        } else {
            self.load_be(phv, f.off, f.nbytes)
        }
    }

    /// The parser: `(phv, valid, data, len, cursor out, stack next indexes) -> error code`.
    fn parser(mut self, p: &CParser) {
        let entry = self.b.create_block();
        self.b.append_block_params_for_function_params(entry);
        self.b.switch_to_block(entry);
        let params = self.b.block_params(entry).to_vec();
        let (phv, valid, data, len, cursor_out, stack_next) = (
            params[0], params[1], params[2], params[3], params[4], params[5],
        );
        // The switch's bound on states ([`crate::exec::ParserBudget`]): the word after the
        // cursor's; what is left of it is stored back there.
        let max = self.b.ins().load(types::I64, mem(), cursor_out, 8);
        let (code, cur, left) = self.parse_body(p, phv, valid, data, len, stack_next, max);
        self.b.ins().store(mem(), cur, cursor_out, 0);
        self.b.ins().store(mem(), left, cursor_out, 8);
        self.b.ins().return_(&[code]);
        self.b.seal_all_blocks();
        self.b.finalize();
    }

    /// The parser's states in the current function, from the current block, entering at most
    /// `max_states` states: returns the error code, the parsed length and the states left
    /// (`u64::MAX` when it ran out: `ParserTimeout`), with the builder at the block where
    /// parsing ended
    /// (the lane function inlines it; [`Gen::parser`] wraps it as a function).
    #[allow(clippy::too_many_arguments)]
    fn parse_body(
        &mut self,
        p: &CParser,
        phv: ir::Value,
        valid: ir::Value,
        data: ir::Value,
        len: ir::Value,
        stack_next: ir::Value,
        max_states: ir::Value,
    ) -> (ir::Value, ir::Value, ir::Value) {
        let eng = self.eng;
        // The pipeline generator's expression code works on variables: the PHV, validity and
        // (unused: parser expressions have no action parameters) parameter pointers.
        let (phv_v, valid_v, pb_v) = (
            self.b.declare_var(types::I64),
            self.b.declare_var(types::I64),
            self.b.declare_var(types::I64),
        );
        self.b.def_var(phv_v, phv);
        self.b.def_var(valid_v, valid);
        self.b.def_var(pb_v, phv);
        let stack_oob = eng.errors.stack_out_of_bounds;
        let cursor: Variable = self.b.declare_var(types::I64);
        let steps: Variable = self.b.declare_var(types::I64);
        let zero = self.b.ins().iconst(types::I64, 0);
        self.b.def_var(cursor, zero);
        self.b.def_var(steps, max_states);

        let states: Vec<ir::Block> = p.states.iter().map(|_| self.b.create_block()).collect();
        // Exit with an error code (block parameter); the parsed length is the cursor.
        let exit = self.b.create_block();
        self.b.append_block_param(exit, types::I64);
        let no_error = eng.errors.no_error;
        let too_short = eng.errors.packet_too_short;
        // Out of states: ParserTimeout, and `u64::MAX` as the states left (see
        // `Native::parse_bytes`).
        let over = self.b.create_block();

        let jump_to = |g: &mut Gen<'_, '_>, next: Option<u32>| match next {
            Some(n) => {
                g.b.ins().jump(states[n as usize], &[]);
            }
            None => {
                let ok = g.b.ins().iconst(types::I64, no_error);
                g.b.ins().jump(exit, &[ok.into()]);
            }
        };
        jump_to(self, p.init);

        for (si, s) in p.states.iter().enumerate() {
            self.b.switch_to_block(states[si]);
            // The switch's bound on states per packet: none left is ParserTimeout.
            let left = self.b.use_var(steps);
            let body = self.b.create_block();
            self.b.ins().brif(left, body, &[], over, &[]);
            self.b.switch_to_block(body);
            let left = self.b.ins().iadd_imm(left, -1);
            self.b.def_var(steps, left);

            for op in &s.ops {
                if let POp::Set(dst, e) = op {
                    let e = pipeline::nexpr(e).expect("checked by `check_parser`");
                    let v = self.nexpr(pb_v, phv_v, valid_v, &e);
                    self.write_field(phv_v, dst, v);
                    continue;
                }
                // A stack's next element: out of elements is StackOutOfBounds (before the
                // length check, as the interpreter).
                let elem = match op {
                    POp::Extract(ETarget::Stack(st)) => {
                        let el = &eng.layout.stacks[*st as usize];
                        let next =
                            self.b
                                .ins()
                                .load(types::I32, mem(), stack_next, (*st * 4) as i32);
                        let full = self.b.ins().icmp_imm(
                            IntCC::UnsignedGreaterThanOrEqual,
                            next,
                            el.len() as i64,
                        );
                        let room = self.b.create_block();
                        let code = self.b.ins().iconst(types::I64, stack_oob);
                        self.b.ins().brif(full, exit, &[code.into()], room, &[]);
                        self.b.switch_to_block(room);
                        Some((*st, el, next))
                    }
                    _ => None,
                };
                let n = match op {
                    POp::Extract(ETarget::Header(h)) => {
                        let hl = &eng.layout.headers[*h as usize];
                        hl.fixed_bits.div_ceil(8)
                    }
                    POp::Extract(ETarget::Stack(_)) => {
                        let (_, el, _) = elem.as_ref().expect("just set");
                        eng.layout.headers[el[0] as usize].fixed_bits.div_ceil(8)
                    }
                    POp::Shift(n) => *n,
                    _ => unreachable!("checked by `check`"),
                };
                // Bounds check: cursor + n <= len, else PacketTooShort.
                let cur = self.b.use_var(cursor);
                let end = self.b.ins().iadd_imm(cur, i64::from(n));
                let short = self.b.ins().icmp(IntCC::UnsignedGreaterThan, end, len);
                let fits = self.b.create_block();
                let code = self.b.ins().iconst(types::I64, too_short);
                self.b.ins().brif(short, exit, &[code.into()], fits, &[]);
                self.b.switch_to_block(fits);
                if let POp::Extract(ETarget::Header(h)) = op {
                    let base = self.b.ins().iadd(data, cur);
                    self.extract(phv, valid, base, *h);
                }
                if let Some((st, el, next)) = elem {
                    // Into element `next`, one block per element; then `next + 1`.
                    let base = self.b.ins().iadd(data, cur);
                    let done = self.b.create_block();
                    let mut sw = cranelift_frontend::Switch::new();
                    let blocks: Vec<ir::Block> = el.iter().map(|_| self.b.create_block()).collect();
                    for (i, blk) in blocks.iter().enumerate() {
                        sw.set_entry(i as u128, *blk);
                    }
                    let next64 = self.b.ins().uextend(types::I64, next);
                    // `next` is below the element count (checked above): the default is dead.
                    sw.emit(&mut self.b, next64, done);
                    for (h, blk) in el.iter().zip(blocks) {
                        self.b.switch_to_block(blk);
                        self.extract(phv, valid, base, *h);
                        self.b.ins().jump(done, &[]);
                    }
                    self.b.switch_to_block(done);
                    let n1 = self.b.ins().iadd_imm(next, 1);
                    self.b.ins().store(mem(), n1, stack_next, (st * 4) as i32);
                }
                self.b.def_var(cursor, end);
            }

            // select: the first matching value wins, else the first default, else accept.
            let key: Vec<FieldLoc> = s
                .key
                .iter()
                .map(|k| match k {
                    KeyElem::Field(f) => eng.layout.field(*f),
                    _ => unreachable!("checked by `check`"),
                })
                .collect();
            let default = s
                .transitions
                .iter()
                .find(|(m, _)| matches!(m, PMatch::Default))
                .map(|(_, n)| *n);
            let values: Vec<_> = s
                .transitions
                .iter()
                .filter_map(|(m, n)| match m {
                    PMatch::Value { value, mask } => Some((value, mask.as_ref(), *n)),
                    _ => None,
                })
                .collect();
            let fields: Vec<ir::Value> = if values.is_empty() {
                Vec::new()
            } else {
                key.iter().map(|f| self.key_field(phv, valid, f)).collect()
            };
            for (value, mask, next) in values {
                let mut hit: Option<ir::Value> = None;
                let mut at = 0usize;
                for (f, x) in key.iter().zip(&fields) {
                    let w = if f.is_valid_bit { 1 } else { f.nbytes as usize };
                    let v = be(&value[at..at + w]);
                    let m = mask.map(|m| be(&m[at..at + w]));
                    at += w;
                    let lhs = match m {
                        Some(m) => self.b.ins().band_imm(*x, m as i64),
                        None => *x,
                    };
                    let rhs = v & m.unwrap_or(u64::MAX);
                    let eq = self.b.ins().icmp_imm(IntCC::Equal, lhs, rhs as i64);
                    hit = Some(match hit {
                        None => eq,
                        Some(h) => self.b.ins().band(h, eq),
                    });
                }
                let take = self.b.create_block();
                let rest = self.b.create_block();
                match hit {
                    // An empty key matches every value.
                    None => {
                        self.b.ins().jump(take, &[]);
                    }
                    Some(h) => {
                        self.b.ins().brif(h, take, &[], rest, &[]);
                    }
                }
                self.b.switch_to_block(take);
                jump_to(self, next);
                self.b.switch_to_block(rest);
            }
            jump_to(self, default.flatten());
        }

        self.b.switch_to_block(over);
        let all = self.b.ins().iconst(types::I64, -1);
        self.b.def_var(steps, all);
        let code = self.b.ins().iconst(types::I64, eng.errors.parser_timeout);
        self.b.ins().jump(exit, &[code.into()]);

        self.b.switch_to_block(exit);
        let code = self.b.block_params(exit)[0];
        let cur = self.b.use_var(cursor);
        let left = self.b.use_var(steps);
        (code, cur, left)
    }

    /// Extract header `h` from the packet bytes at `base` (already bounds-checked).
    fn extract(&mut self, phv: ir::Value, valid: ir::Value, base: ir::Value, h: u32) {
        let hl = &self.eng.layout.headers[h as usize];
        if hl.packed {
            self.copy(phv, hl.off, base, 0, hl.fixed_bits.div_ceil(8));
        } else if let Some(ps) = pieces(hl) {
            for p in ps {
                match p {
                    Piece::Copy { wire, slot, len } => self.copy(phv, slot, base, wire, len),
                    Piece::Bits { byte, len, fields } => {
                        // The window's bytes once, each field shifted and masked out of it.
                        let x = self.load_be(base, byte, len);
                        for (bit, w, slot, nbytes) in fields {
                            let drop = len * 8 - bit - w;
                            let v = if drop > 0 {
                                self.b.ins().ushr_imm(x, i64::from(drop))
                            } else {
                                x
                            };
                            let v = if bit > 0 {
                                self.b.ins().band_imm(v, ((1u64 << w) - 1) as i64)
                            } else {
                                v
                            };
                            self.store_be(phv, slot, nbytes, v);
                        }
                    }
                }
            }
        } else {
            let mut bit = 0u32;
            for f in &hl.fields {
                let w = f.width;
                if w == 0 {
                    continue;
                }
                let (b0, sh) = (bit / 8, bit % 8);
                let k = (sh + w).div_ceil(8);
                let x = self.load_be(base, b0, k);
                let drop = k * 8 - sh - w;
                let x = if drop > 0 {
                    self.b.ins().ushr_imm(x, i64::from(drop))
                } else {
                    x
                };
                let x = if w < 64 {
                    self.b.ins().band_imm(x, ((1u64 << w) - 1) as i64)
                } else {
                    x
                };
                self.store_be(phv, f.off, f.nbytes, x);
                bit += w;
            }
        }
        let one = self.b.ins().iconst(types::I8, 1);
        self.b.ins().store(mem(), one, valid, h as i32);
        if let Some(u) = hl.union {
            let zero = self.b.ins().iconst(types::I8, 0);
            for m in &self.eng.layout.unions[u as usize] {
                if *m != h {
                    self.b.ins().store(mem(), zero, valid, *m as i32);
                }
            }
        }
    }
}

impl Gen<'_, '_> {
    /// The deparser's emit loop: `(phv, valid, out, emit offsets) -> bytes written`; with
    /// `csums`, the checksum updates after it ([`Gen::checksums`]).
    fn emit(mut self, order: &[u32], csums: Option<&[crate::csum::NativeCsum]>) {
        let entry = self.b.create_block();
        self.b.append_block_params_for_function_params(entry);
        self.b.switch_to_block(entry);
        let params = self.b.block_params(entry).to_vec();
        let (phv, valid, out, offs) = (params[0], params[1], params[2], params[3]);
        // Checksums left to the caller: the bytes written, flagged.
        let left = self.b.create_block();
        self.b.append_block_param(left, types::I64);
        let written = self.emit_body(order, csums, phv, valid, out, offs, left);
        self.b.ins().return_(&[written]);
        self.b.switch_to_block(left);
        let w = self.b.block_params(left)[0];
        let flagged = self.b.ins().bor_imm(w, CSUM_LEFT as i64);
        self.b.ins().return_(&[flagged]);
        self.b.seal_all_blocks();
        self.b.finalize();
    }

    /// The emit loop (and the checksum updates) in the current function, from the current
    /// block: returns the bytes written, with the builder where the emit ended; when the
    /// checksums are left to the caller it jumps to `left` with the bytes written instead.
    #[allow(clippy::too_many_arguments)]
    fn emit_body(
        &mut self,
        order: &[u32],
        csums: Option<&[crate::csum::NativeCsum]>,
        phv: ir::Value,
        valid: ir::Value,
        out: ir::Value,
        offs: ir::Value,
        left: ir::Block,
    ) -> ir::Value {
        let pos: Variable = self.b.declare_var(types::I64);
        let zero = self.b.ins().iconst(types::I64, 0);
        self.b.def_var(pos, zero);
        // Where each header starts in the output, for the checksums (as stored in `offs`).
        let mut starts: std::collections::HashMap<u32, Variable> = Default::default();
        for &h in order {
            starts.entry(h).or_insert_with(|| {
                let var = self.b.declare_var(types::I64);
                self.b.def_var(var, zero);
                var
            });
        }
        // Each emitted header's validity byte, loaded once (nothing here changes it).
        let mut valids: std::collections::HashMap<u32, ir::Value> = Default::default();
        for &h in order {
            let hl = &self.eng.layout.headers[h as usize];
            let n = hl.fixed_bits.div_ceil(8);
            let v = *valids
                .entry(h)
                .or_insert_with(|| self.b.ins().load(types::I8, mem(), valid, h as i32));
            let write = self.b.create_block();
            let next = self.b.create_block();
            self.b.ins().brif(v, write, &[], next, &[]);
            self.b.switch_to_block(write);
            let at = self.b.use_var(pos);
            let at32 = self.b.ins().ireduce(types::I32, at);
            self.b.ins().store(mem(), at32, offs, (h * 4) as i32);
            self.b.def_var(starts[&h], at);
            let base = self.b.ins().iadd(out, at);
            if hl.packed {
                self.copy(base, 0, phv, hl.off, n);
            } else if let Some(ps) = pieces(hl) {
                // Every byte of the header's wire size is stored once (see below).
                let mut stored = 0;
                for p in ps {
                    match p {
                        Piece::Copy { wire, slot, len } => {
                            self.copy(base, wire, phv, slot, len);
                            stored += len;
                        }
                        Piece::Bits { byte, len, fields } => {
                            let mut acc: Option<ir::Value> = None;
                            let mut used = 0;
                            for (_, w, slot, nbytes) in fields {
                                let v = self.load_be(phv, slot, nbytes);
                                let v = if nbytes * 8 > w {
                                    self.b.ins().band_imm(v, ((1u64 << w) - 1) as i64)
                                } else {
                                    v
                                };
                                acc = Some(match acc {
                                    None => v,
                                    Some(a) => {
                                        let s = self.b.ins().ishl_imm(a, i64::from(w));
                                        self.b.ins().bor(s, v)
                                    }
                                });
                                used += w;
                            }
                            let a = acc.expect("a window has fields");
                            let pad = len * 8 - used;
                            let a = if pad > 0 {
                                self.b.ins().ishl_imm(a, i64::from(pad))
                            } else {
                                a
                            };
                            self.store_be(base, byte, len, a);
                            stored += len;
                        }
                    }
                }
                assert_eq!(
                    stored, n,
                    "emit of {} stores {stored} of {n} bytes",
                    hl.name
                );
            } else {
                // `Native::emit` relies on this (it hands the code uninitialized output
                // bytes): every byte of the header's wire size is stored.
                let stored = self.pack(phv, base, h);
                assert_eq!(
                    stored, n,
                    "emit of {} stores {stored} of {n} bytes",
                    hl.name
                );
            }
            let at = self.b.ins().iadd_imm(at, i64::from(n));
            self.b.def_var(pos, at);
            self.b.ins().jump(next, &[]);
            self.b.switch_to_block(next);
        }
        let written = self.b.use_var(pos);
        if let Some(list) = csums {
            self.checksums(phv, (valid, &valids), out, &starts, written, list, left);
        }
        written
    }

    /// The checksum updates of [`crate::csum::native_list`], after the emit loop, as
    /// `Engine::update_checksums_emitted` runs them: first, if any update whose condition
    /// holds would sum a header that is not valid, jump to `left` with `written` (nothing
    /// stored; the caller computes the generic values). Validity does not change during the
    /// updates, so this is decided before any of them runs. Then, in program order, each
    /// update whose condition holds sums its header's emitted bytes (32-bit words where four
    /// bytes are kept, then 16-bit words, a last odd byte as the high half of a word; the
    /// weights 2^16 and 1 agree modulo 0xffff, see `csum16_skip`), folds the sum as many times
    /// as its largest possible value needs, complements it, stores it in the target's PHV slot
    /// and, if the target's header is valid, into its emitted bytes (where a later update
    /// reads it).
    #[allow(clippy::too_many_arguments)]
    fn checksums(
        &mut self,
        phv: ir::Value,
        (valid, valids): (ir::Value, &std::collections::HashMap<u32, ir::Value>),
        out: ir::Value,
        starts: &std::collections::HashMap<u32, Variable>,
        written: ir::Value,
        list: &[crate::csum::NativeCsum],
        left: ir::Block,
    ) {
        // A header's validity byte: the emit loop's value, else loaded.
        let valid_of = |g: &mut Self, h: u32| match valids.get(&h) {
            Some(v) => *v,
            None => g.b.ins().load(types::I8, mem(), valid, h as i32),
        };
        // Any update that would leave the compiled form: condition holds, header invalid.
        let go = self.b.create_block();
        let mut bad: Option<ir::Value> = None;
        for c in list {
            let v = valid_of(self, c.wire.header);
            let invalid = self.b.ins().icmp_imm(IntCC::Equal, v, 0);
            let b = match c.cond {
                Some(h) => {
                    let cv = valid_of(self, h);
                    let holds = self.b.ins().icmp_imm(IntCC::NotEqual, cv, 0);
                    self.b.ins().band(holds, invalid)
                }
                None => invalid,
            };
            bad = Some(match bad {
                None => b,
                Some(a) => self.b.ins().bor(a, b),
            });
        }
        let bad = bad.unwrap_or_else(|| self.b.ins().iconst(types::I8, 0));
        self.b.ins().brif(bad, left, &[written.into()], go, &[]);
        self.b.switch_to_block(go);
        for c in list {
            let next = self.b.create_block();
            if let Some(h) = c.cond {
                let run = self.b.create_block();
                let cv = valid_of(self, h);
                self.b.ins().brif(cv, run, &[], next, &[]);
                self.b.switch_to_block(run);
            }
            let w = &c.wire;
            // Summed headers are valid here (checked above): emitted, at `starts`.
            let at = self.b.use_var(starts[&w.header]);
            let base = self.b.ins().iadd(out, at);
            let kept = |k: u32| !w.skip.iter().any(|&(a, b)| (a..b).contains(&k));
            let mut sum = self.b.ins().iconst(types::I64, 0);
            // Largest value the sum can reach (for the number of folds).
            let mut bound: u128 = 0;
            let mut k = 0;
            while k < w.len {
                let (n, t) = if k + 4 <= w.len && (k..k + 4).all(kept) {
                    (4, types::I32)
                } else if k + 2 <= w.len && kept(k) {
                    (2, types::I16)
                } else if k + 2 > w.len {
                    (1, types::I8)
                } else {
                    // A left-out 16-bit word (the skip ranges are even-aligned, even length).
                    k += 2;
                    continue;
                };
                let mut v = self.b.ins().load(t, mem(), base, k as i32);
                if n > 1 {
                    v = self.b.ins().bswap(v);
                }
                v = self.b.ins().uextend(types::I64, v);
                if n == 1 {
                    v = self.b.ins().ishl_imm(v, 8);
                }
                sum = self.b.ins().iadd(sum, v);
                bound += match n {
                    4 => 0xffff_ffff,
                    2 => 0xffff,
                    _ => 0xff00,
                };
                k += n;
            }
            while bound >> 16 != 0 {
                let lo = self.b.ins().band_imm(sum, 0xffff);
                let hi = self.b.ins().ushr_imm(sum, 16);
                sum = self.b.ins().iadd(lo, hi);
                // Largest `lo + hi` for a sum ≤ bound: either the top `hi` with the low half
                // of `bound`, or one less with a full low half.
                let (h, l) = (bound >> 16, bound & 0xffff);
                bound = (h + l).max(h - 1 + 0xffff);
            }
            let inv = self.b.ins().bnot(sum);
            let v = self.b.ins().band_imm(inv, 0xffff);
            self.store_be(phv, c.target_off, c.target_bytes, v);
            if let Some((th, p)) = c.patch {
                let store = self.b.create_block();
                let tv = valid_of(self, th);
                self.b.ins().brif(tv, store, &[], next, &[]);
                self.b.switch_to_block(store);
                let at = self.b.use_var(starts[&th]);
                let tb = self.b.ins().iadd(out, at);
                self.store_be(tb, p, c.target_bytes, v);
            }
            self.b.ins().jump(next, &[]);
            self.b.switch_to_block(next);
        }
    }

    /// Pack header `h`'s fields (each ≤ 56 bits) into its wire bytes at `base`: fields are
    /// shifted into a 64-bit accumulator, stored big-endian each time it fills. Returns how
    /// many bytes it stores, contiguously from `base` (the code stores to the output and
    /// never loads from it).
    fn pack(&mut self, phv: ir::Value, base: ir::Value, h: u32) -> u32 {
        let hl = &self.eng.layout.headers[h as usize];
        let mut acc: Option<ir::Value> = None;
        let mut bits = 0u32;
        let mut off = 0u32;
        for f in &hl.fields {
            let w = f.width;
            if w == 0 {
                continue;
            }
            let v = self.load_be(phv, f.off, f.nbytes);
            let v = self.b.ins().band_imm(v, ((1u64 << w) - 1) as i64);
            if bits + w <= 64 {
                acc = Some(match acc {
                    None => v,
                    Some(a) => {
                        let s = self.b.ins().ishl_imm(a, i64::from(w));
                        self.b.ins().bor(s, v)
                    }
                });
                bits += w;
            } else {
                // Split: the high `r` bits complete this word, the rest starts the next.
                let r = 64 - bits;
                let hi = self.b.ins().ushr_imm(v, i64::from(w - r));
                let a = acc.expect("a partly filled word");
                let s = self.b.ins().ishl_imm(a, i64::from(r));
                let word = self.b.ins().bor(s, hi);
                self.store_be(base, off, 8, word);
                off += 8;
                acc = Some(self.b.ins().band_imm(v, ((1u64 << (w - r)) - 1) as i64));
                bits = w - r;
            }
            if bits == 64 {
                let word = acc.take().expect("a full word");
                self.store_be(base, off, 8, word);
                off += 8;
                bits = 0;
            }
        }
        if let Some(a) = acc {
            let rem = bits.div_ceil(8);
            let pad = rem * 8 - bits;
            let a = if pad > 0 {
                self.b.ins().ishl_imm(a, i64::from(pad))
            } else {
                a
            };
            self.store_be(base, off, rem, a);
            off += rem;
        }
        off
    }
}

/// Run every packet of `packets` through the native code and through the interpreter, each
/// on its own packet instance reused from packet to packet as the switch reuses them, and
/// compare: error code, parsed length, header validity and every PHV byte after parsing; the
/// emitted header bytes for that PHV; and the emitted bytes for a PHV scrambled from the
/// packet (arbitrary field values and validity). Returns how many packets were compared, or
/// the first difference. (For tests and fuzzing.)
pub fn compare_with_interpreter<'a>(
    eng: &Engine,
    packets: impl IntoIterator<Item = &'a [u8]>,
) -> Result<usize, String> {
    use crate::exec::{PktRegs, State};
    let Some(j) = &eng.jit else {
        return Err(format!("no native code: {:?}", eng.jit_notes));
    };
    let new_pkt = || Pkt {
        phv: Phv::new(&eng.layout),
        data: Vec::new(),
        payload_off: 0,
        ingress_len: 0,
        length_reg: 0,
        ingress_port: 0,
        regs: PktRegs::default(),
        enq_ts: 0,
    };
    let (mut a, mut b) = (new_pkt(), new_pkt());
    let mut st = State::default();
    let (mut out_a, mut out_b) = (Vec::new(), Vec::new());
    let (mut off_a, mut off_b) = (Vec::new(), Vec::new());
    let mut n = 0;
    for data in packets {
        let hex = || data.iter().map(|b| format!("{b:02x}")).collect::<String>();
        for p in [&mut a, &mut b] {
            p.phv.invalidate_headers(&eng.layout);
            p.phv.stack_next.fill(0);
            p.phv.union_stack_next.fill(0);
            p.data.clear();
            p.data.extend_from_slice(data);
        }
        if j.has_parser() {
            let ea = j.parse(&mut a, &mut st.parser).unwrap_or(i64::MIN);
            let eb = eng.parse_interpreted(&mut st, &mut b);
            let differs = if ea != eb {
                Some(format!("error code {ea} (native) vs {eb} (interpreter)"))
            } else if a.payload_off != b.payload_off {
                Some(format!(
                    "parsed length {} (native) vs {} (interpreter)",
                    a.payload_off, b.payload_off
                ))
            } else if a.phv.valid != b.phv.valid {
                Some("header validity differs".to_string())
            } else if a.phv.stack_next != b.phv.stack_next {
                Some(format!(
                    "stack next indexes {:?} (native) vs {:?} (interpreter)",
                    a.phv.stack_next, b.phv.stack_next
                ))
            } else if a.phv.bytes != b.phv.bytes {
                let i = a
                    .phv
                    .bytes
                    .iter()
                    .zip(&b.phv.bytes)
                    .position(|(x, y)| x != y);
                Some(format!("PHV byte {i:?} differs"))
            } else {
                None
            };
            if let Some(d) = differs {
                return Err(format!("packet {n} ({}): parse: {d}", hex()));
            }
        }
        if j.has_emit() {
            let mut phv = b.phv.clone();
            for scrambled in [false, true] {
                if scrambled {
                    // Arbitrary PHV contents: bytes and validity drawn from the packet.
                    let len = data.len().max(1);
                    for (i, x) in phv.bytes.iter_mut().enumerate() {
                        *x = data.get(i % len).copied().unwrap_or(0) ^ (i as u8).wrapping_mul(37);
                    }
                    for (i, v) in phv.valid.iter_mut().enumerate() {
                        *v = (data.get(i % len).copied().unwrap_or(0) >> (i % 8)) & 1 == 1;
                    }
                }
                // Poison the native output's spare capacity (the code writes there without
                // zeroing it first): a byte it failed to write would differ.
                out_a.clear();
                out_a.resize(j.emit_max, 0xa5 ^ (n as u8) ^ (scrambled as u8));
                out_a.clear();
                out_b.clear();
                off_a.clear();
                off_b.clear();
                j.emit(&phv, &mut out_a, &mut off_a);
                eng.emit_interpreted(&phv, &mut out_b, &mut off_b);
                if off_a != off_b {
                    return Err(format!(
                        "packet {n} ({}): emitted header offsets {off_a:?} (native) vs {off_b:?} (interpreter)",
                        hex()
                    ));
                }
                if out_a != out_b {
                    return Err(format!(
                        "packet {n} ({}): emit{}: {:02x?} (native) vs {:02x?} (interpreter)",
                        hex(),
                        if scrambled { " of a scrambled PHV" } else { "" },
                        out_a,
                        out_b
                    ));
                }
            }
        }
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunking_covers_every_byte_once() {
        for n in 0..=16 {
            let c = chunks(n);
            assert_eq!(c.iter().map(|(_, s)| s).sum::<u32>(), n);
            let mut off = 0;
            for (o, s) in c {
                assert_eq!(o, off);
                assert!([1, 2, 4, 8].contains(&s));
                off += s;
            }
        }
    }

    #[test]
    fn big_endian_values() {
        assert_eq!(be(&[0x08, 0x00]), 0x0800);
        assert_eq!(be(&[]), 0);
    }
}
