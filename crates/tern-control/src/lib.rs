//! Control interfaces: the simple_switch_CLI runtime command language.
//!
//! [`Cli`] interprets the text commands of BMv2's `runtime_CLI.py` / `simple_switch_CLI`
//! (`shared/reference/runtime-cli.md`) against any [`tern_runtime::Runtime`] and returns
//! exactly what the stock CLI prints: a switch in-process, or a remote one through
//! `tern_thrift::ThriftRuntime` (BMv2's own wire protocol), so there is one control path.

mod commands;
pub mod names;
pub mod value;

use std::fmt::Write as _;
use std::io::{self, BufRead, Write};

use tern_model::Program;
use tern_runtime::{Runtime, RuntimeError};

use names::Names;

/// Which packet replication engine the CLI talks to (`--pre`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PreType {
    /// No PRE: `mc_*` commands are refused.
    None,
    /// `SimplePre`: no LAGs (the default of `runtime_CLI.py`).
    SimplePre,
    /// `SimplePreLAG` (what `simple_switch_CLI` always uses).
    #[default]
    SimplePreLag,
}

impl std::str::FromStr for PreType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "None" => Ok(PreType::None),
            "SimplePre" => Ok(PreType::SimplePre),
            "SimplePreLAG" => Ok(PreType::SimplePreLag),
            _ => Err(format!(
                "invalid PRE type '{s}' (expected None, SimplePre or SimplePreLAG)"
            )),
        }
    }
}

/// A command failure, printed the way the stock CLI prints it (§1.5).
#[derive(Clone, Debug)]
pub(crate) enum CmdError {
    /// `Error: <text>`.
    Ui(String),
    /// `Invalid match key: <text>`.
    MatchKey(String),
    /// `Invalid runtime data: <text>`.
    RuntimeData(String),
    /// A server exception, e.g. `Invalid table operation (DUPLICATE_ENTRY)`.
    Rt(RuntimeError),
}

impl From<RuntimeError> for CmdError {
    fn from(e: RuntimeError) -> Self {
        CmdError::Rt(e)
    }
}

impl std::fmt::Display for CmdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CmdError::Ui(s) => write!(f, "Error: {s}"),
            CmdError::MatchKey(s) => write!(f, "Invalid match key: {s}"),
            CmdError::RuntimeData(s) => write!(f, "Invalid runtime data: {s}"),
            CmdError::Rt(e) => write!(f, "{e}"),
        }
    }
}

/// Every command with its one-line help (description and syntax), sorted by name.
pub(crate) const COMMANDS: &[(&str, &str)] = &[
    ("act_prof_add_member_to_group", "Add member to group in action profile: act_prof_add_member_to_group <action profile name> <member handle> <group handle>"),
    ("act_prof_create_group", "Add a group to an action pofile: act_prof_create_group <action profile name>"),
    ("act_prof_create_member", "Add a member to an action profile: act_prof_create_member <action profile name> <action_name> [action parameters]"),
    ("act_prof_delete_group", "Delete a group from an action profile: act_prof_delete_group <action profile name> <group handle>"),
    ("act_prof_delete_member", "Delete a member in an action profile: act_prof_delete_member <action profile name> <member handle>"),
    ("act_prof_dump", "Display entries in an action profile: act_prof_dump <action profile name>"),
    ("act_prof_dump_group", "Display some information about a group: act_prof_dump_group <action profile name> <group handle>"),
    ("act_prof_dump_member", "Display some information about a member: act_prof_dump_member <action profile name> <member handle>"),
    ("act_prof_modify_member", "Modify member in an action profile: act_prof_modify_member <action profile name> <action_name> <member_handle> [action parameters]"),
    ("act_prof_remove_member_from_group", "Remove member from group in action profile: act_prof_remove_member_from_group <action profile name> <member handle> <group handle>"),
    ("counter_read", "Read counter value: counter_read <name> <index>"),
    ("counter_reset", "Reset counter: counter_reset <name>"),
    ("counter_write", "Write counter value: counter_write <name> <index> <packets> <bytes>"),
    ("get_time_elapsed", "Get time elapsed (in microseconds) since the switch started: get_time_elapsed"),
    ("get_time_since_epoch", "Get time elapsed (in microseconds) since the switch clock's epoch: get_time_since_epoch"),
    ("greet", ""),
    ("help", "List available commands with \"help\" or detailed help with \"help cmd\"."),
    ("load_new_config_file", "Load new json config: load_new_config_file <path to .json file>"),
    ("mc_dump", "Dump entries in multicast engine: mc_dump"),
    ("mc_mgrp_create", "Create multicast group: mc_mgrp_create <group id>"),
    ("mc_mgrp_destroy", "Destroy multicast group: mc_mgrp_destroy <group id>"),
    ("mc_node_associate", "Associate node to multicast group: mc_node_associate <group handle> <node handle>"),
    ("mc_node_create", "Create multicast node: mc_node_create <rid> <space-separated port list> [ | <space-separated lag list> ]"),
    ("mc_node_destroy", "Destroy multicast node: mc_node_destroy <node handle>"),
    ("mc_node_dissociate", "Dissociate node from multicast group: mc_node_associate <group handle> <node handle>"),
    ("mc_node_update", "Update multicast node: mc_node_update <node handle> <space-separated port list> [ | <space-separated lag list> ]"),
    ("mc_set_lag_membership", "Set lag membership of port list: mc_set_lag_membership <lag index> <space-separated port list>"),
    ("meter_array_set_rates", "Configure rates for an entire meter array: meter_array_set_rates <name> <rate_1>:<burst_1> <rate_2>:<burst_2> ..."),
    ("meter_get_rates", "Retrieve rates for a meter: meter_get_rates <name> <index>"),
    ("meter_set_rates", "Configure rates for a meter: meter_set_rates <name> <index> <rate_1>:<burst_1> <rate_2>:<burst_2> ...\nRate uses units/microsecond and burst uses units where units is bytes or packets"),
    ("mirroring_add", "Add mirroring session to unicast port: mirroring_add <mirror_id> <egress_port>"),
    ("mirroring_add_mc", "Add mirroring session to multicast group: mirroring_add_mc <mirror_id> <mgrp>"),
    ("mirroring_delete", "Delete mirroring session: mirroring_delete <mirror_id>"),
    ("mirroring_get", "Display mirroring session: mirroring_get <mirror_id>"),
    ("port_add", "Add a port to the switch (behavior depends on device manager used): port_add <iface_name> <port_num> [pcap_path]"),
    ("port_remove", "Removes a port from the switch (behavior depends on device manager used): port_remove <port_num>"),
    ("pvs_add", "Add a value to a parser value set: pvs_add <pvs_name> <value>"),
    ("pvs_clear", "Remove all values from a parser value set: pvs_clear <pvs_name>"),
    ("pvs_get", "Print all values from a parser value set: pvs_get <pvs_name>"),
    ("pvs_remove", "Remove a value from a parser value set: pvs_remove <pvs_name> <value>"),
    ("register_read", "Read register value: register_read <name> [index]"),
    ("register_reset", "Reset all the cells in the register array to 0: register_reset <name>"),
    ("register_write", "Write register value: register_write <name> <index> <value>"),
    ("reset_state", "Reset all state in the switch (table entries, registers, ...), but P4 config is preserved: reset_state"),
    ("serialize_state", "Serialize the switch state and dumps it to user-specified file: serialize_state <file_name>"),
    ("set_crc16_parameters", "Change the parameters for a custom crc16 hash: set_crc16_parameters <name> <polynomial> <initial remainder> <final xor value> <reflect data?> <reflect remainder?>"),
    ("set_crc32_parameters", "Change the parameters for a custom crc32 hash: set_crc32_parameters <name> <polynomial> <initial remainder> <final xor value> <reflect data?> <reflect remainder?>"),
    ("set_queue_depth", "Set depth of one / all egress queue(s): set_queue_depth <nb_pkts> [<egress_port> [<priority>]]"),
    ("set_queue_rate", "Set rate of one / all egress queue(s): set_queue_rate <rate_pps> [<egress_port> [<priority>]]"),
    ("set_toeplitz_hash_key", "Set the key for a Toeplitz hash: set_toeplitz_hash_key <name> <key in hex>"),
    ("show_actions", "List actions defined in the P4 program: show_actions"),
    ("show_ports", "Shows the ports connected to the switch: show_ports"),
    ("show_pvs", "List parser value sets defined in the P4 program: show_pvs"),
    ("show_tables", "List tables defined in the P4 program: show_tables"),
    ("swap_configs", "Swap the 2 existing configs, need to have called load_new_config_file before: swap_configs"),
    ("switch_info", "Show some basic info about the switch: switch_info"),
    ("table_add", "Add entry to a match table: table_add <table name> <action name> <match fields> => <action parameters> [priority]"),
    ("table_clear", "Clear all entries in a match table (direct or indirect), but not the default entry: table_clear <table name>"),
    ("table_delete", "Delete entry from a match table: table_delete <table name> <entry handle>"),
    ("table_dump", "Display entries in a match-table: table_dump <table name>"),
    ("table_dump_entry", "Display some information about a table entry: table_dump_entry <table name> <entry handle>"),
    ("table_dump_entry_from_key", "Display some information about a table entry: table_dump_entry_from_key <table name> <match fields> [priority]"),
    ("table_dump_group", "Display some information about a group: table_dump_group <table name> <group handle>"),
    ("table_dump_member", "Display some information about a member: table_dump_member <table name> <member handle>"),
    ("table_indirect_add", "Add entry to an indirect match table: table_indirect_add <table name> <match fields> => <member handle> [priority]"),
    ("table_indirect_add_member_to_group", "[DEPRECATED!] Add member to group: table_indirect_add_member_to_group <table name> <member handle> <group handle>\nUse 'act_prof_add_member_to_group' instead"),
    ("table_indirect_add_with_group", "Add entry to an indirect match table: table_indirect_add <table name> <match fields> => <group handle> [priority]"),
    ("table_indirect_create_group", "[DEPRECATED!] Add a group to an indirect match table: table_indirect_create_group <table name>\nUse 'act_prof_create_group' instead"),
    ("table_indirect_create_member", "[DEPRECATED!] Add a member to an indirect match table: table_indirect_create_member <table name> <action_name> [action parameters]\nUse 'act_prof_create_member' instead"),
    ("table_indirect_delete", "Delete entry from an indirect match table: table_indirect_delete <table name> <entry handle>"),
    ("table_indirect_delete_group", "[DEPRECATED!] Delete group: table_indirect_delete_group <table name> <group handle>\nUse 'act_prof_delete_group' instead"),
    ("table_indirect_delete_member", "[DEPRECATED!] Delete member from an indirect match table: table_indirect_delete_member <table name> <member handle>\nUse 'act_prof_delete_member' instead"),
    ("table_indirect_modify_member", "[DEPRECATED!] Modify member in an indirect match table: table_indirect_modify_member <table name> <action_name> <member_handle> [action parameters]\nUse 'act_prof_modify_member' instead"),
    ("table_indirect_remove_member_from_group", "[DEPRECATED!] Remove member from group: table_indirect_remove_member_from_group <table name> <member handle> <group handle>\nUse 'act_prof_remove_member_from_group' instead"),
    ("table_indirect_reset_default", "Reset default entry for indirect match table: table_indirect_reset_default <table name>"),
    ("table_indirect_set_default", "Set default member for indirect match table: table_indirect_set_default <table name> <member handle>"),
    ("table_indirect_set_default_with_group", "Set default group for indirect match table: table_indirect_set_default <table name> <group handle>"),
    ("table_info", "Show info about a table: table_info <table_name>"),
    ("table_modify", "Add entry to a match table: table_modify <table name> <action name> <entry handle> [action parameters]"),
    ("table_num_entries", "Return the number of entries in a match table (direct or indirect): table_num_entries <table name>"),
    ("table_reset_default", "Reset default entry for a match table: table_reset_default <table name>"),
    ("table_set_default", "Set default action for a match table: table_set_default <table name> <action name> <action parameters>"),
    ("table_set_timeout", "Set a timeout in ms for a given entry; the table has to support timeouts: table_set_timeout <table_name> <entry handle> <timeout (ms)>"),
    ("table_show_actions", "List one table's actions as per the P4 program: table_show_actions <table_name>"),
    ("write_config_to_file", "Retrieves the JSON config currently used by the switch and dumps it to user-specified file: write_config_to_file <filename>"),
];

/// The runtime command interpreter (one CLI session).
#[derive(Clone, Debug)]
pub struct Cli {
    pub(crate) names: Names,
    pub(crate) pre: PreType,
    pub(crate) stderr: String,
    failed: bool,
}

impl Cli {
    /// A session for `program` with the LAG-capable PRE (as `simple_switch_CLI`).
    pub fn new(program: &Program) -> Cli {
        Cli {
            names: Names::new(program),
            pre: PreType::SimplePreLag,
            stderr: String::new(),
            failed: false,
        }
    }

    /// The same session talking to a different PRE type (`--pre`).
    pub fn with_pre(mut self, pre: PreType) -> Cli {
        self.pre = pre;
        self
    }

    /// Every command name, sorted.
    pub fn command_names() -> &'static [&'static str] {
        const NAMES: [&str; COMMANDS.len()] = {
            let mut out = [""; COMMANDS.len()];
            let mut i = 0;
            while i < COMMANDS.len() {
                out[i] = COMMANDS[i].0;
                i += 1;
            }
            out
        };
        &NAMES
    }

    /// What the stock CLI writes to stderr since the last call (deprecation notices, the
    /// "register index omitted" note).
    pub fn take_stderr(&mut self) -> String {
        std::mem::take(&mut self.stderr)
    }

    /// Whether the last [`Cli::execute`] failed (an error was printed: bad input, unknown
    /// command or a switch exception). The stock CLI exits 0 regardless; scripts may care.
    pub fn last_command_failed(&self) -> bool {
        self.failed
    }

    /// Run one command line; returns exactly what the stock CLI prints on stdout for it.
    /// `EOF` returns a single newline (the CLI then exits).
    pub fn execute(&mut self, rt: &mut dyn Runtime, line: &str) -> String {
        self.failed = false;
        let line = line.trim();
        if line.is_empty() {
            return String::new();
        }
        if line == "EOF" {
            return "\n".to_string();
        }
        let (cmd, arg) = if let Some(rest) = line.strip_prefix('?') {
            ("help", rest.trim())
        } else {
            let end = line
                .char_indices()
                .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_'))
                .map(|(i, _)| i)
                .unwrap_or(line.len());
            (&line[..end], line[end..].trim())
        };
        if cmd.is_empty() || !COMMANDS.iter().any(|(n, _)| *n == cmd) {
            self.failed = true;
            return format!("*** Unknown syntax: {line}\n");
        }
        let args: Vec<&str> = arg.split_whitespace().collect();
        let mut out = String::new();
        if let Err(e) = self.dispatch(rt, cmd, &args, &mut out) {
            self.failed = true;
            let _ = writeln!(out, "{e}");
        }
        out
    }

    /// Run every command of `input` (blank lines and `#` comments skipped), writing the
    /// output to `out`. Stops at `EOF`. Returns the number of commands run.
    pub fn run_script(
        &mut self,
        rt: &mut dyn Runtime,
        input: &mut dyn BufRead,
        out: &mut dyn Write,
    ) -> io::Result<usize> {
        let mut n = 0;
        let mut buf = Vec::new();
        loop {
            buf.clear();
            if input.read_until(b'\n', &mut buf)? == 0 {
                break;
            }
            let line = String::from_utf8_lossy(&buf);
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            n += 1;
            let text = self.execute(rt, t);
            out.write_all(text.as_bytes())?;
            if t == "EOF" {
                break;
            }
        }
        out.flush()?;
        Ok(n)
    }

    /// `help [topic]`: the Python `cmd` module's topic listing, or one command's help.
    pub fn help_text(topic: Option<&str>) -> String {
        match topic {
            Some(t) => match COMMANDS.iter().find(|(n, d)| *n == t && !d.is_empty()) {
                Some((_, doc)) => format!("{doc}\n"),
                None => format!("*** No help on {t}\n"),
            },
            None => {
                let mut documented: Vec<&str> = COMMANDS
                    .iter()
                    .filter(|(_, d)| !d.is_empty())
                    .map(|(n, _)| *n)
                    .collect();
                documented.sort_unstable();
                let mut undocumented: Vec<&str> = COMMANDS
                    .iter()
                    .filter(|(_, d)| d.is_empty())
                    .map(|(n, _)| *n)
                    .chain(std::iter::once("EOF"))
                    .collect();
                undocumented.sort_unstable();
                let mut s = String::from("\n");
                for (header, names) in [
                    ("Documented commands (type help <topic>):", documented),
                    ("Undocumented commands:", undocumented),
                ] {
                    s.push_str(header);
                    s.push('\n');
                    s.push_str(&"=".repeat(header.len()));
                    s.push('\n');
                    s.push_str(&columnize(&names, 79));
                    s.push('\n');
                }
                s
            }
        }
    }
}

/// Python `cmd.Cmd.columnize`.
fn columnize(list: &[&str], width: usize) -> String {
    let size = list.len();
    if size == 0 {
        return "<empty>\n".to_string();
    }
    if size == 1 {
        return format!("{}\n", list[0]);
    }
    let mut layout = None;
    for nrows in 1..size {
        let ncols = size.div_ceil(nrows);
        let mut widths = Vec::new();
        let mut total: isize = -2;
        for col in 0..ncols {
            let w = (0..nrows)
                .map(|r| r + nrows * col)
                .take_while(|i| *i < size)
                .map(|i| list[i].len())
                .max()
                .unwrap_or(0);
            widths.push(w);
            total += w as isize + 2;
            if total > width as isize {
                break;
            }
        }
        if total <= width as isize {
            layout = Some((nrows, ncols, widths));
            break;
        }
    }
    let (nrows, ncols, widths) = layout.unwrap_or((size, 1, vec![0]));
    let mut s = String::new();
    for row in 0..nrows {
        let mut texts: Vec<&str> = (0..ncols)
            .map(|c| list.get(row + nrows * c).copied().unwrap_or(""))
            .collect();
        while texts.last().is_some_and(|t| t.is_empty()) {
            texts.pop();
        }
        let cells: Vec<String> = texts
            .iter()
            .enumerate()
            .map(|(c, t)| value::pad(t, widths.get(c).copied().unwrap_or(0)))
            .collect();
        s.push_str(&cells.join("  "));
        s.push('\n');
    }
    s
}
