//! What the CLI knows about a program (`runtime-cli.md` §1.1) and its name resolution by
//! unique dot-suffixes (§1.2).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use tern_model::{KeyTarget, MatchKind, Program, TableType, VALID_FIELD};

/// A match table as the CLI sees it.
#[derive(Clone, Debug)]
pub struct TableInfo {
    pub name: String,
    pub match_type: MatchKind,
    pub table_type: TableType,
    /// (display name, match kind, bitwidth) in JSON key order.
    pub keys: Vec<(String, MatchKind, u32)>,
    /// Full action names.
    pub actions: BTreeSet<String>,
    pub action_prof: Option<String>,
    pub support_timeout: bool,
}

/// An action and its runtime parameters.
#[derive(Clone, Debug)]
pub struct ActionInfo {
    pub name: String,
    pub params: Vec<(String, u32)>,
}

/// An action profile: its selector and the actions of the tables that use it.
#[derive(Clone, Debug)]
pub struct ProfInfo {
    pub name: String,
    pub with_selection: bool,
    pub actions: BTreeSet<String>,
    pub ref_cnt: usize,
}

/// A counter or meter array (direct ones are bound to a table).
#[derive(Clone, Debug)]
pub struct StatInfo {
    pub name: String,
    pub binding: Option<String>,
    pub rate_count: u32,
}

/// A register array.
#[derive(Clone, Debug)]
pub struct RegisterInfo {
    pub name: String,
}

/// A parser value set.
#[derive(Clone, Debug)]
pub struct VsetInfo {
    pub name: String,
    pub bitwidth: u32,
}

/// Resource kinds of the suffix index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Table,
    ActProf,
    Action,
    Meter,
    Counter,
    Register,
    Vset,
}

/// All named objects of a program plus the suffix index.
#[derive(Clone, Debug, Default)]
pub struct Names {
    pub tables: BTreeMap<String, TableInfo>,
    pub actions: BTreeMap<String, ActionInfo>,
    pub profs: BTreeMap<String, ProfInfo>,
    pub counters: BTreeMap<String, StatInfo>,
    pub meters: BTreeMap<String, StatInfo>,
    pub registers: BTreeMap<String, RegisterInfo>,
    pub vsets: BTreeMap<String, VsetInfo>,
    /// Calculation name → 16 or 32 for `crc16_custom` / `crc32_custom`.
    pub custom_crcs: HashMap<String, u32>,
    suffixes: HashMap<(Kind, String), String>,
}

fn key_display(p: &Program, k: &tern_model::TableKey) -> (String, u32) {
    let header_name = |h: u32| {
        p.headers
            .get(h as usize)
            .map(|h| h.name.clone())
            .unwrap_or_default()
    };
    match k.target {
        KeyTarget::Valid(h) => (format!("{}_valid", header_name(h)), 1),
        KeyTarget::Field(f) if f.field == VALID_FIELD => {
            (format!("{}_valid", header_name(f.header)), 1)
        }
        KeyTarget::Field(f) => {
            let h = p.headers.get(f.header as usize);
            let ht = h.and_then(|h| p.header_types.get(h.header_type as usize));
            let fd = ht.and_then(|t| t.fields.get(f.field as usize));
            match (h, fd) {
                (Some(h), Some(fd)) => {
                    let w = match fd.width {
                        tern_model::FieldWidth::Fixed(w) => w,
                        tern_model::FieldWidth::Variable => 0,
                    };
                    (format!("{}.{}", h.name, fd.name), w)
                }
                _ => (k.name.clone(), 0),
            }
        }
    }
}

impl Names {
    /// Index a program.
    pub fn new(p: &Program) -> Names {
        let mut n = Names::default();
        for a in &p.actions {
            n.actions.insert(
                a.name.clone(),
                ActionInfo {
                    name: a.name.clone(),
                    params: a.runtime_data.clone(),
                },
            );
        }
        let action_name = |i: u32| p.actions.get(i as usize).map(|a| a.name.clone());
        for pipe in &p.pipelines {
            for ap in &pipe.action_profiles {
                n.profs.insert(
                    ap.name.clone(),
                    ProfInfo {
                        name: ap.name.clone(),
                        with_selection: ap.selector.is_some(),
                        actions: BTreeSet::new(),
                        ref_cnt: 0,
                    },
                );
            }
        }
        for pipe in &p.pipelines {
            for t in &pipe.tables {
                let actions: BTreeSet<String> =
                    t.actions.iter().filter_map(|i| action_name(*i)).collect();
                let prof = t
                    .action_profile
                    .and_then(|i| pipe.action_profiles.get(i as usize))
                    .map(|ap| ap.name.clone());
                if let Some(pn) = &prof {
                    if let Some(pi) = n.profs.get_mut(pn) {
                        pi.actions.extend(actions.iter().cloned());
                        pi.ref_cnt += 1;
                    }
                }
                let keys = t
                    .key
                    .iter()
                    .map(|k| {
                        let (name, bw) = key_display(p, k);
                        (name, k.match_kind, bw)
                    })
                    .collect();
                n.tables.insert(
                    t.name.clone(),
                    TableInfo {
                        name: t.name.clone(),
                        match_type: t.match_type,
                        table_type: t.table_type,
                        keys,
                        actions,
                        action_prof: prof,
                        support_timeout: t.support_timeout,
                    },
                );
            }
        }
        for c in &p.counter_arrays {
            n.counters.insert(
                c.name.clone(),
                StatInfo {
                    name: c.name.clone(),
                    binding: if c.is_direct { c.binding.clone() } else { None },
                    rate_count: 0,
                },
            );
        }
        for m in &p.meter_arrays {
            n.meters.insert(
                m.name.clone(),
                StatInfo {
                    name: m.name.clone(),
                    binding: if m.is_direct { m.binding.clone() } else { None },
                    rate_count: m.rate_count,
                },
            );
        }
        for r in &p.register_arrays {
            n.registers.insert(
                r.name.clone(),
                RegisterInfo {
                    name: r.name.clone(),
                },
            );
        }
        for v in &p.parse_vsets {
            n.vsets.insert(
                v.name.clone(),
                VsetInfo {
                    name: v.name.clone(),
                    bitwidth: v.compressed_bitwidth,
                },
            );
        }
        for c in &p.calculations {
            match c.algo.as_str() {
                "crc16_custom" => {
                    n.custom_crcs.insert(c.name.clone(), 16);
                }
                "crc32_custom" => {
                    n.custom_crcs.insert(c.name.clone(), 32);
                }
                _ => {}
            }
        }
        n.build_suffixes();
        n
    }

    fn build_suffixes(&mut self) {
        let mut count: HashMap<(Kind, String), usize> = HashMap::new();
        let mut map = HashMap::new();
        let lists: [(Kind, Vec<&String>); 7] = [
            (Kind::Table, self.tables.keys().collect()),
            (Kind::ActProf, self.profs.keys().collect()),
            (Kind::Action, self.actions.keys().collect()),
            (Kind::Meter, self.meters.keys().collect()),
            (Kind::Counter, self.counters.keys().collect()),
            (Kind::Register, self.registers.keys().collect()),
            (Kind::Vset, self.vsets.keys().collect()),
        ];
        for (kind, names) in lists {
            for name in names {
                let parts: Vec<&str> = name.split('.').collect();
                for i in (0..parts.len()).rev() {
                    let suffix = parts[i..].join(".");
                    *count.entry((kind, suffix.clone())).or_default() += 1;
                    map.insert((kind, suffix), name.clone());
                }
            }
        }
        map.retain(|k, _| count.get(k).copied().unwrap_or(0) <= 1);
        self.suffixes = map;
    }

    /// Resolve a typed name (any unique dot-suffix) to the full name.
    pub fn resolve(&self, kind: Kind, typed: &str) -> Option<&str> {
        self.suffixes
            .get(&(kind, typed.to_string()))
            .map(|s| s.as_str())
    }

    /// An action by typed name if it belongs to `allowed`.
    pub fn action_in(&self, typed: &str, allowed: &BTreeSet<String>) -> Option<&ActionInfo> {
        let full = self.resolve(Kind::Action, typed)?;
        if !allowed.contains(full) {
            return None;
        }
        self.actions.get(full)
    }
}

/// `MatchType.to_str`.
pub fn kind_str(k: MatchKind) -> &'static str {
    k.as_str()
}
