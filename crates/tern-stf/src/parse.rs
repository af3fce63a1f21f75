//! The STF lexer and parser (`stf.md` §2–3): text → [`StfScript`], errors with file:line:column.

use crate::ast::*;
use crate::StfError;

/// Parse a whole STF text. `file` is only used in error messages.
pub fn parse(text: &str, file: &str) -> Result<StfScript, StfError> {
    let mut commands = Vec::new();
    for (i, raw) in text.split('\n').enumerate() {
        let line_no = u32::try_from(i + 1).unwrap_or(u32::MAX);
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let mut cur = Cursor {
            chars: line.chars().collect(),
            at: 0,
            line: line_no,
            file,
        };
        if let Some(cmd) = cur.command()? {
            commands.push(cmd);
        }
    }
    Ok(StfScript {
        file: file.to_string(),
        commands,
    })
}

struct Cursor<'f> {
    chars: Vec<char>,
    at: usize,
    line: u32,
    file: &'f str,
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == '$'
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$'
}

impl Cursor<'_> {
    fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            column: u32::try_from(self.at + 1).unwrap_or(u32::MAX),
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn peek_at(&self, k: usize) -> Option<char> {
        self.chars.get(self.at + k).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t' | '\r')) {
            self.at += 1;
        }
    }

    fn found(&self) -> String {
        match self.peek() {
            None => "end of line".to_string(),
            Some('#') => "a comment".to_string(),
            Some(c) => format!("'{}'", c.escape_default()),
        }
    }

    fn err_at(&self, pos: Pos, msg: impl Into<String>) -> StfError {
        StfError {
            file: self.file.to_string(),
            line: pos.line,
            column: pos.column,
            message: msg.into(),
        }
    }

    fn expected(&self, what: &str) -> StfError {
        self.err_at(
            self.pos(),
            format!("expected {what}, found {}", self.found()),
        )
    }

    /// After whitespace: the end of the line or a comment.
    fn at_end(&mut self) -> bool {
        self.skip_ws();
        matches!(self.peek(), None | Some('#'))
    }

    fn expect_end(&mut self, after: &str) -> Result<(), StfError> {
        if self.at_end() {
            Ok(())
        } else {
            Err(self.expected(&format!("end of line after {after}")))
        }
    }

    fn eat(&mut self, c: char) -> bool {
        self.skip_ws();
        if self.peek() == Some(c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn require(&mut self, c: char, context: &str) -> Result<(), StfError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.expected(&format!("'{c}' {context}")))
        }
    }

    fn word(&mut self) -> String {
        let start = self.at;
        while matches!(self.peek(), Some(c) if is_ident_char(c)) {
            self.at += 1;
        }
        self.chars[start..self.at].iter().collect()
    }

    /// A (qualified) name: identifiers joined with `.`, `[N]` subscripts, or `"quoted text"`.
    fn name(&mut self, what: &str) -> Result<String, StfError> {
        self.skip_ws();
        let start = self.pos();
        match self.peek() {
            Some('"') => {
                self.at += 1;
                let mut s = String::new();
                loop {
                    match self.peek() {
                        None => {
                            return Err(self.err_at(start, format!("unterminated quoted {what}")))
                        }
                        Some('"') => {
                            self.at += 1;
                            break;
                        }
                        Some(c) => {
                            s.push(c);
                            self.at += 1;
                        }
                    }
                }
                if s.is_empty() {
                    return Err(self.err_at(start, format!("empty quoted {what}")));
                }
                Ok(s)
            }
            Some(c) if is_ident_start(c) => {
                let mut s = String::new();
                loop {
                    s.push_str(&self.word());
                    match self.peek() {
                        Some('.') if matches!(self.peek_at(1), Some(c) if is_ident_start(c)) => {
                            self.at += 1;
                            s.push('.');
                        }
                        Some('[') => {
                            self.at += 1;
                            let d0 = self.at;
                            while matches!(self.peek(), Some(c) if c.is_ascii_digit()) {
                                self.at += 1;
                            }
                            if self.at == d0 {
                                return Err(self.expected("a decimal index after '['"));
                            }
                            let digits: String = self.chars[d0..self.at].iter().collect();
                            if self.peek() != Some(']') {
                                return Err(self.expected("']'"));
                            }
                            self.at += 1;
                            s.push('[');
                            s.push_str(&digits);
                            s.push(']');
                        }
                        _ => break,
                    }
                }
                Ok(s)
            }
            _ => Err(self.expected(what)),
        }
    }

    /// A number token: decimal, `0x…` or `0b…` (hex/binary may hold `*` digits).
    fn number(&mut self, what: &str) -> Result<StfNumber, StfError> {
        self.skip_ws();
        let pos = self.pos();
        if !matches!(self.peek(), Some(c) if c.is_ascii_digit()) {
            return Err(self.expected(what));
        }
        let (radix, ok): (Radix, fn(char) -> bool) =
            match (self.peek(), self.peek_at(1).map(|c| c.to_ascii_lowercase())) {
                (Some('0'), Some('x')) => {
                    self.at += 2;
                    (Radix::Hex, |c| c.is_ascii_hexdigit() || c == '*')
                }
                (Some('0'), Some('b')) => {
                    self.at += 2;
                    (Radix::Bin, |c| c == '0' || c == '1' || c == '*')
                }
                _ => (Radix::Dec, |c| c.is_ascii_digit()),
            };
        let d0 = self.at;
        while matches!(self.peek(), Some(c) if ok(c)) {
            self.at += 1;
        }
        let digits: String = self.chars[d0..self.at].iter().collect();
        if digits.is_empty() {
            return Err(self.expected("digits after the radix prefix"));
        }
        if let Some(c) = self.peek() {
            if is_ident_char(c) || c == '*' || c == '.' {
                return Err(self.err_at(
                    self.pos(),
                    format!(
                        "invalid {} digit '{}' in {what}",
                        match radix {
                            Radix::Dec => "decimal",
                            Radix::Hex => "hex",
                            Radix::Bin => "binary",
                        },
                        c.escape_default()
                    ),
                ));
            }
        }
        Ok(StfNumber { radix, digits, pos })
    }

    /// A plain integer (any radix, no `*`), fitting in `u64`.
    fn int(&mut self, what: &str) -> Result<u64, StfError> {
        let n = self.number(what)?;
        number_to_u64(&n).ok_or_else(|| {
            self.err_at(
                n.pos,
                format!("{what} '{}' is not a plain integer below 2^64", n.text()),
            )
        })
    }

    fn int32(&mut self, what: &str) -> Result<u32, StfError> {
        self.skip_ws();
        let pos = self.pos();
        let v = self.int(what)?;
        u32::try_from(v).map_err(|_| self.err_at(pos, format!("{what} {v} does not fit 32 bits")))
    }

    /// Raw text up to whitespace, `,`, `)` or `#` (action parameter values, entry ids).
    fn raw(&mut self, what: &str) -> Result<String, StfError> {
        self.skip_ws();
        let start = self.at;
        while matches!(self.peek(), Some(c) if !matches!(c, ' ' | '\t' | '\r' | ',' | ')' | '(' | '#'))
        {
            self.at += 1;
        }
        if self.at == start {
            return Err(self.expected(what));
        }
        Ok(self.chars[start..self.at].iter().collect())
    }

    fn rate(&mut self) -> Result<RatePair, StfError> {
        self.skip_ws();
        let pos = self.pos();
        let start = self.at;
        while matches!(self.peek(), Some(c) if c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
        {
            self.at += 1;
        }
        let text: String = self.chars[start..self.at].iter().collect();
        let rate: f64 = text
            .parse()
            .ok()
            .filter(|r: &f64| r.is_finite() && *r >= 0.0)
            .ok_or_else(|| {
                if text.is_empty() {
                    self.expected("a meter rate `<rate>:<burst>`")
                } else {
                    self.err_at(pos, format!("invalid meter rate '{text}'"))
                }
            })?;
        if self.peek() != Some(':') {
            return Err(self.expected("':' between rate and burst size"));
        }
        self.at += 1;
        let burst = self.int32("a burst size")?;
        Ok(RatePair { rate, burst })
    }

    fn rates(&mut self) -> Result<Vec<RatePair>, StfError> {
        let mut v = vec![self.rate()?];
        while !self.at_end() {
            v.push(self.rate()?);
        }
        Ok(v)
    }

    fn ports(&mut self) -> Result<Vec<u32>, StfError> {
        let mut v = Vec::new();
        while !self.at_end() {
            v.push(self.int32("a port number")?);
        }
        Ok(v)
    }

    fn action_call(&mut self) -> Result<ActionCall, StfError> {
        self.skip_ws();
        let pos = self.pos();
        let name = self.name("an action name")?;
        self.require('(', "after the action name")?;
        let params = self.params()?;
        Ok(ActionCall { name, params, pos })
    }

    /// After `(`: `name:value, ...)`.
    fn params(&mut self) -> Result<Vec<ParamValue>, StfError> {
        let mut params = Vec::new();
        if self.eat(')') {
            return Ok(params);
        }
        loop {
            self.skip_ws();
            let pos = self.pos();
            let name = self.name("a parameter name")?;
            self.require(':', &format!("after parameter name '{name}'"))?;
            let value = self.raw(&format!("a value for parameter '{name}'"))?;
            params.push(ParamValue { name, value, pos });
            if self.eat(',') {
                continue;
            }
            self.require(')', "or ',' after a parameter")?;
            return Ok(params);
        }
    }

    fn add(&mut self) -> Result<Command, StfError> {
        let table = self.name("a table name")?;
        self.skip_ws();
        let priority = if matches!(self.peek(), Some(c) if c.is_ascii_digit()) {
            let n = self.number("a priority")?;
            if n.radix != Radix::Dec {
                return Err(self.err_at(n.pos, "a priority must be a decimal number"));
            }
            Some(
                n.digits
                    .parse::<u32>()
                    .map_err(|_| self.err_at(n.pos, "priority does not fit 32 bits"))?,
            )
        } else {
            None
        };
        let mut keys = Vec::new();
        loop {
            if self.at_end() {
                return Err(self.expected("a key `<field>:<value>` or an action `<action>(...)`"));
            }
            let pos = self.pos();
            let name = self.name("a key name or an action name")?;
            self.skip_ws();
            match self.peek() {
                Some(':') => {
                    self.at += 1;
                    let value = self.number(&format!("a value for key '{name}'"))?;
                    let prefix_len = if self.peek() == Some('/') {
                        self.at += 1;
                        if !matches!(self.peek(), Some(c) if c.is_ascii_digit()) {
                            return Err(self.expected("a decimal prefix length after '/'"));
                        }
                        let n = self.number("a prefix length")?;
                        if n.radix != Radix::Dec {
                            return Err(self.err_at(n.pos, "a prefix length must be decimal"));
                        }
                        Some(n.digits.parse::<u32>().map_err(|_| {
                            self.err_at(n.pos, "prefix length does not fit 32 bits")
                        })?)
                    } else {
                        None
                    };
                    keys.push(KeyValue {
                        name,
                        value,
                        prefix_len,
                        pos,
                    });
                }
                Some('(') => {
                    self.at += 1;
                    let params = self.params()?;
                    let action = ActionCall { name, params, pos };
                    let entry_id = if self.eat('=') {
                        Some(self.raw("an entry id after '='")?)
                    } else {
                        None
                    };
                    self.expect_end("the action")?;
                    return Ok(Command::Add {
                        table,
                        priority,
                        keys,
                        action,
                        entry_id,
                    });
                }
                _ => {
                    return Err(self.expected(&format!("':' (key) or '(' (action) after '{name}'")))
                }
            }
        }
    }

    fn packet_data(&mut self, is_expect: bool) -> Result<Command, StfError> {
        self.skip_ws();
        let pos = self.pos();
        let start = self.at;
        while matches!(self.peek(), Some(c) if c.is_ascii_digit()) {
            self.at += 1;
        }
        if self.at == start {
            return Err(self.expected("a port number"));
        }
        let text: String = self.chars[start..self.at].iter().collect();
        let port: u32 = text
            .parse()
            .map_err(|_| self.err_at(pos, format!("port {text} does not fit 32 bits")))?;
        if !matches!(self.peek(), None | Some(' ' | '\t' | '\r')) {
            return Err(self.expected("whitespace after the port number"));
        }
        let mut nibbles = String::new();
        let mut exact = false;
        while let Some(c) = self.peek() {
            let here = self.pos();
            match c {
                ' ' | '\t' | '\r' => {}
                c if c.is_ascii_hexdigit() && !exact => nibbles.push(c.to_ascii_uppercase()),
                '*' if is_expect && !exact => nibbles.push('*'),
                '$' if is_expect && !exact => exact = true,
                '*' | '$' if !is_expect => {
                    return Err(self.err_at(
                        here,
                        format!("invalid packet data: '{c}' is only allowed in expect lines"),
                    ))
                }
                '#' => {
                    return Err(self.err_at(
                        here,
                        "invalid packet data: '#' (no comments after packet data)",
                    ))
                }
                c if exact => {
                    return Err(self.err_at(
                        here,
                        format!(
                            "invalid packet data: '{}' after the final '$'",
                            c.escape_default()
                        ),
                    ))
                }
                c => {
                    return Err(self.err_at(
                        here,
                        format!(
                            "invalid packet data: '{}' is not a hex digit",
                            c.escape_default()
                        ),
                    ))
                }
            }
            self.at += 1;
        }
        if is_expect {
            let pattern = if nibbles.is_empty() && !exact {
                None
            } else {
                Some(ExpectPattern {
                    nibbles,
                    exact_length: exact,
                })
            };
            return Ok(Command::Expect { port, pattern });
        }
        // As p4c's runner reads packet data: two digits per byte, a trailing single digit is
        // a byte of its own (`0 20 0` is three bytes, the last 0x00), and no data at all is an
        // empty packet.
        let data = nibbles
            .as_bytes()
            .chunks(2)
            .map(|p| match p {
                [h, l] => (hex_val(*h) << 4) | hex_val(*l),
                [l] => hex_val(*l),
                _ => 0,
            })
            .collect();
        Ok(Command::Packet { port, data })
    }

    fn check_counter(&mut self) -> Result<Command, StfError> {
        let counter = self.name("a counter name")?;
        self.require('(', "after the counter name")?;
        let id = self.raw("an entry id or index")?;
        self.require(')', "after the counter id")?;
        let check = if self.at_end() {
            None
        } else {
            let pos = self.pos();
            let unit = match self.word().to_ascii_lowercase().as_str() {
                "packets" => CounterUnit::Packets,
                "bytes" => CounterUnit::Bytes,
                _ => return Err(self.err_at(pos, "expected 'packets' or 'bytes'")),
            };
            self.skip_ws();
            let op = match (self.peek(), self.peek_at(1)) {
                (Some('='), Some('=')) => CmpOp::Eq,
                (Some('!'), Some('=')) => CmpOp::Ne,
                (Some('<'), Some('=')) => CmpOp::Le,
                (Some('>'), Some('=')) => CmpOp::Ge,
                (Some('<'), _) => CmpOp::Lt,
                (Some('>'), _) => CmpOp::Gt,
                _ => return Err(self.expected("a comparison operator (== != < <= > >=)")),
            };
            self.at += op.as_str().len();
            let value = self.int("a counter value")?;
            Some(CounterCheck { unit, op, value })
        };
        self.expect_end("check_counter")?;
        Ok(Command::CheckCounter { counter, id, check })
    }

    /// One line: `None` for blank and comment lines.
    fn command(&mut self) -> Result<Option<Located>, StfError> {
        if self.at_end() {
            return Ok(None);
        }
        let pos = self.pos();
        if !matches!(self.peek(), Some(c) if c.is_ascii_alphabetic() || c == '_') {
            return Err(self.expected("a command keyword"));
        }
        let kw = self.word();
        let kwl = kw.to_ascii_lowercase();
        if !matches!(self.peek(), None | Some(' ' | '\t' | '\r' | '#')) {
            return Err(self.expected(&format!("whitespace after '{kw}'")));
        }
        let command = match kwl.as_str() {
            "add" => self.add()?,
            "setdefault" => {
                let table = self.name("a table name")?;
                let action = self.action_call()?;
                self.expect_end("the action")?;
                Command::SetDefault { table, action }
            }
            "packet" => self.packet_data(false)?,
            "expect" => self.packet_data(true)?,
            "no_packet" => {
                self.expect_end("no_packet")?;
                Command::NoPacket
            }
            "wait" => {
                self.expect_end("wait")?;
                Command::Wait
            }
            "remove" => {
                self.skip_ws();
                let p = self.pos();
                if !self.word().eq_ignore_ascii_case("all") {
                    return Err(self.err_at(p, "expected 'all' after 'remove'"));
                }
                self.expect_end("remove all")?;
                Command::RemoveAll
            }
            "check_counter" => self.check_counter()?,
            "mirroring_add" => {
                let session = self.int32("a session id")?;
                let port = self.int32("a port number")?;
                self.expect_end("mirroring_add")?;
                Command::MirroringAdd { session, port }
            }
            "mirroring_add_mc" => {
                let session = self.int32("a session id")?;
                let mgid = self.int32("a multicast group id")?;
                self.expect_end("mirroring_add_mc")?;
                Command::MirroringAddMc { session, mgid }
            }
            "mirroring_delete" | "mirroring_get" => {
                let session = self.int32("a session id")?;
                self.expect_end(&kwl)?;
                if kwl == "mirroring_delete" {
                    Command::MirroringDelete { session }
                } else {
                    Command::MirroringGet { session }
                }
            }
            "mc_mgrp_create" => {
                let mgid = self.int32("a multicast group id")?;
                self.expect_end("mc_mgrp_create")?;
                Command::McMgrpCreate { mgid }
            }
            "mc_node_create" => {
                let rid = self.int32("a replication id")?;
                let ports = self.ports()?;
                Command::McNodeCreate { rid, ports }
            }
            "mc_node_update" => {
                let node = self.int32("a node handle")?;
                let ports = self.ports()?;
                Command::McNodeUpdate { node, ports }
            }
            "mc_node_associate" => {
                let mgid = self.int32("a multicast group id")?;
                let node = self.int32("a node handle")?;
                self.expect_end("mc_node_associate")?;
                Command::McNodeAssociate { mgid, node }
            }
            "counter_read" => {
                let counter = self.name("a counter name")?;
                let index = self.int32("an index")?;
                self.expect_end("counter_read")?;
                Command::CounterRead { counter, index }
            }
            "counter_write" => {
                let counter = self.name("a counter name")?;
                let index = self.int32("an index")?;
                let packets = self.int("a packet count")?;
                let bytes = self.int("a byte count")?;
                self.expect_end("counter_write")?;
                Command::CounterWrite {
                    counter,
                    index,
                    packets,
                    bytes,
                }
            }
            "register_read" => {
                let register = self.name("a register name")?;
                let index = if self.at_end() {
                    None
                } else {
                    Some(self.int32("an index")?)
                };
                self.expect_end("register_read")?;
                Command::RegisterRead { register, index }
            }
            "register_write" => {
                let register = self.name("a register name")?;
                let index = self.int32("an index")?;
                let value = self.int("a value")?;
                self.expect_end("register_write")?;
                Command::RegisterWrite {
                    register,
                    index,
                    value,
                }
            }
            "register_reset" => {
                let register = self.name("a register name")?;
                self.expect_end("register_reset")?;
                Command::RegisterReset { register }
            }
            "meter_get_rates" => {
                let meter = self.name("a meter name")?;
                let index = self.int32("an index")?;
                self.expect_end("meter_get_rates")?;
                Command::MeterGetRates { meter, index }
            }
            "meter_set_rates" => {
                let meter = self.name("a meter name")?;
                let index = self.int32("an index")?;
                let rates = self.rates()?;
                Command::MeterSetRates {
                    meter,
                    index,
                    rates,
                }
            }
            "meter_array_set_rates" => {
                let meter = self.name("a meter name")?;
                let rates = self.rates()?;
                Command::MeterArraySetRates { meter, rates }
            }
            _ => {
                return Err(self.err_at(pos, format!("unknown command '{kw}'")));
            }
        };
        Ok(Some(Located { pos, command }))
    }
}

fn hex_val(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        b'A'..=b'F' => b - b'A' + 10,
        _ => 0,
    }
}

/// The value of a number without `*` digits, if it fits `u64`.
pub fn number_to_u64(n: &StfNumber) -> Option<u64> {
    if n.has_wildcards() {
        return None;
    }
    let radix = match n.radix {
        Radix::Dec => 10,
        Radix::Hex => 16,
        Radix::Bin => 2,
    };
    u64::from_str_radix(&n.digits, radix).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(line: &str) -> Command {
        let s = parse(line, "t.stf").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.commands.len(), 1, "{line}");
        s.commands.into_iter().next().unwrap().command
    }

    fn err(text: &str) -> StfError {
        match parse(text, "t.stf") {
            Ok(s) => panic!("{text:?} parsed: {s:?}"),
            Err(e) => e,
        }
    }

    fn num(radix: Radix, digits: &str, line: u32, column: u32) -> StfNumber {
        StfNumber {
            radix,
            digits: digits.to_string(),
            pos: Pos { line, column },
        }
    }

    #[test]
    fn add_with_priority_keys_action_and_id() {
        let c =
            one("add acl 20 type:0x0800 src:0x0a0000** permit(port:2, mac:00:aa:bb:00:00:01) = e1");
        let Command::Add {
            table,
            priority,
            keys,
            action,
            entry_id,
        } = c
        else {
            panic!("{c:?}")
        };
        assert_eq!(table, "acl");
        assert_eq!(priority, Some(20));
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[0].name, "type");
        assert_eq!(keys[0].value, num(Radix::Hex, "0800", 1, 17));
        assert_eq!(keys[1].name, "src");
        assert_eq!(keys[1].value, num(Radix::Hex, "0a0000**", 1, 28));
        assert_eq!(action.name, "permit");
        assert_eq!(
            action.pos,
            Pos {
                line: 1,
                column: 39
            }
        );
        assert_eq!(action.params.len(), 2);
        assert_eq!(action.params[0].name, "port");
        assert_eq!(action.params[0].value, "2");
        assert_eq!(action.params[1].value, "00:aa:bb:00:00:01");
        assert_eq!(entry_id.as_deref(), Some("e1"));
    }

    #[test]
    fn add_names_binary_decimal_stack_and_quoted() {
        let c = one(r#"ADD "my table" hdr.vlan[1].vid:0b1**0 tags$1.tci:42 ingress.a()"#);
        let Command::Add {
            table,
            priority,
            keys,
            action,
            entry_id,
        } = c
        else {
            panic!()
        };
        assert_eq!(table, "my table");
        assert_eq!(priority, None);
        assert_eq!(keys[0].name, "hdr.vlan[1].vid");
        assert_eq!(keys[0].value.radix, Radix::Bin);
        assert_eq!(keys[0].value.digits, "1**0");
        assert_eq!(keys[1].name, "tags$1.tci");
        assert_eq!(keys[1].value.radix, Radix::Dec);
        assert_eq!(keys[1].value.digits, "42");
        assert_eq!(keys[1].prefix_len, None);
        assert_eq!(action.name, "ingress.a");
        assert!(action.params.is_empty());
        assert_eq!(entry_id, None);
    }

    #[test]
    fn lpm_value_with_explicit_length() {
        let Command::Add { keys, .. } = one("add r dst:0x0a000000/8 a()") else {
            panic!()
        };
        assert_eq!(keys[0].value.digits, "0a000000");
        assert_eq!(keys[0].prefix_len, Some(8));
        let e = err("add r dst:0x0a/ a()");
        assert_eq!(e.column, 16);
        assert!(e.message.contains("prefix length"), "{e}");
        let e = err("add r dst:0x0a/0x8 a()");
        assert_eq!(e.column, 16);
    }

    #[test]
    fn setdefault_packet_expect() {
        assert_eq!(
            one("setdefault ipv4_route drop_it()"),
            Command::SetDefault {
                table: "ipv4_route".into(),
                action: ActionCall {
                    name: "drop_it".into(),
                    params: vec![],
                    pos: Pos {
                        line: 1,
                        column: 23
                    }
                }
            }
        );
        assert_eq!(
            one("packet 3 0a 0B\tcD e f"),
            Command::Packet {
                port: 3,
                data: vec![0x0a, 0x0b, 0xcd, 0xef]
            }
        );
        assert_eq!(
            one("expect 12 00 0a** * b $"),
            Command::Expect {
                port: 12,
                pattern: Some(ExpectPattern {
                    nibbles: "000A***B".into(),
                    exact_length: true
                })
            }
        );
        assert_eq!(
            one("Expect 1 ab"),
            Command::Expect {
                port: 1,
                pattern: Some(ExpectPattern {
                    nibbles: "AB".into(),
                    exact_length: false
                })
            }
        );
        assert_eq!(
            one("expect 4"),
            Command::Expect {
                port: 4,
                pattern: None
            }
        );
        assert_eq!(
            one("expect 4 $"),
            Command::Expect {
                port: 4,
                pattern: Some(ExpectPattern {
                    nibbles: String::new(),
                    exact_length: true
                })
            }
        );
    }

    #[test]
    fn simple_commands() {
        assert_eq!(one("wait"), Command::Wait);
        assert_eq!(one("WAIT # pause"), Command::Wait);
        assert_eq!(one("remove all"), Command::RemoveAll);
        assert_eq!(one("no_packet"), Command::NoPacket);
        assert_eq!(
            one("check_counter cnt(e1) packets == 3"),
            Command::CheckCounter {
                counter: "cnt".into(),
                id: "e1".into(),
                check: Some(CounterCheck {
                    unit: CounterUnit::Packets,
                    op: CmpOp::Eq,
                    value: 3
                })
            }
        );
        for (op, want) in [
            ("!=", CmpOp::Ne),
            ("<", CmpOp::Lt),
            ("<=", CmpOp::Le),
            (">", CmpOp::Gt),
            (">=", CmpOp::Ge),
        ] {
            let c = one(&format!("check_counter c(0) bytes {op} 0x10"));
            assert_eq!(
                c,
                Command::CheckCounter {
                    counter: "c".into(),
                    id: "0".into(),
                    check: Some(CounterCheck {
                        unit: CounterUnit::Bytes,
                        op: want,
                        value: 16
                    })
                }
            );
        }
        assert_eq!(
            one("check_counter c(7)"),
            Command::CheckCounter {
                counter: "c".into(),
                id: "7".into(),
                check: None
            }
        );
    }

    #[test]
    fn pass_through_commands() {
        assert_eq!(
            one("mirroring_add 5 3"),
            Command::MirroringAdd {
                session: 5,
                port: 3
            }
        );
        assert_eq!(
            one("mirroring_add_mc 5 0x10"),
            Command::MirroringAddMc {
                session: 5,
                mgid: 16
            }
        );
        assert_eq!(
            one("mirroring_delete 5"),
            Command::MirroringDelete { session: 5 }
        );
        assert_eq!(one("mirroring_get 5"), Command::MirroringGet { session: 5 });
        assert_eq!(one("mc_mgrp_create 7"), Command::McMgrpCreate { mgid: 7 });
        assert_eq!(
            one("mc_node_create 100 4 5"),
            Command::McNodeCreate {
                rid: 100,
                ports: vec![4, 5]
            }
        );
        assert_eq!(
            one("mc_node_update 0 1"),
            Command::McNodeUpdate {
                node: 0,
                ports: vec![1]
            }
        );
        assert_eq!(
            one("mc_node_associate 7 0"),
            Command::McNodeAssociate { mgid: 7, node: 0 }
        );
        assert_eq!(
            one("counter_read ingress.c 3"),
            Command::CounterRead {
                counter: "ingress.c".into(),
                index: 3
            }
        );
        assert_eq!(
            one("counter_write c 3 10 1000"),
            Command::CounterWrite {
                counter: "c".into(),
                index: 3,
                packets: 10,
                bytes: 1000
            }
        );
        assert_eq!(
            one("register_read r 1"),
            Command::RegisterRead {
                register: "r".into(),
                index: Some(1)
            }
        );
        assert_eq!(
            one("register_read r"),
            Command::RegisterRead {
                register: "r".into(),
                index: None
            }
        );
        assert_eq!(
            one("register_write r 1 99"),
            Command::RegisterWrite {
                register: "r".into(),
                index: 1,
                value: 99
            }
        );
        assert_eq!(
            one("register_reset r"),
            Command::RegisterReset {
                register: "r".into()
            }
        );
        assert_eq!(
            one("meter_get_rates m 2"),
            Command::MeterGetRates {
                meter: "m".into(),
                index: 2
            }
        );
        assert_eq!(
            one("meter_set_rates m 2 0.5:10 1:20"),
            Command::MeterSetRates {
                meter: "m".into(),
                index: 2,
                rates: vec![
                    RatePair {
                        rate: 0.5,
                        burst: 10
                    },
                    RatePair {
                        rate: 1.0,
                        burst: 20
                    }
                ]
            }
        );
        assert_eq!(
            one("meter_array_set_rates m 0.000001:1"),
            Command::MeterArraySetRates {
                meter: "m".into(),
                rates: vec![RatePair {
                    rate: 0.000001,
                    burst: 1
                }]
            }
        );
    }

    #[test]
    fn blank_lines_comments_crlf_and_positions() {
        let s = parse(
            "# header\r\n\r\n   \n  wait # trailing\r\npacket 1 00\r\n",
            "f.stf",
        )
        .unwrap();
        assert_eq!(s.file, "f.stf");
        assert_eq!(s.commands.len(), 2);
        assert_eq!(s.commands[0].pos, Pos { line: 4, column: 3 });
        assert_eq!(s.commands[1].pos, Pos { line: 5, column: 1 });
        assert_eq!(s.commands[0].command.keyword(), "wait");
    }

    #[test]
    fn packet_data_reads_like_p4cs_runner() {
        // A trailing single digit is a byte of its own; no data is an empty packet.
        assert_eq!(
            one("packet 1 ab c"),
            Command::Packet {
                port: 1,
                data: vec![0xab, 0x0c]
            }
        );
        assert_eq!(
            one("packet 0 "),
            Command::Packet {
                port: 0,
                data: vec![]
            }
        );
    }

    #[test]
    fn errors_carry_file_line_column() {
        let e = err("wait\nfrobnicate 1 2");
        assert_eq!((e.line, e.column), (2, 1));
        assert!(e.message.contains("unknown command 'frobnicate'"), "{e}");
        assert_eq!(e.to_string(), "t.stf:2:1: unknown command 'frobnicate'");

        let e = err("packet 1 ab # comment");
        assert_eq!((e.line, e.column), (1, 13));
        assert!(e.message.contains("invalid packet data"), "{e}");

        let e = err("packet 1 a*");
        assert_eq!(e.column, 11);
        assert!(e.message.contains("only allowed in expect"), "{e}");

        let e = err("expect 1 ab $ cd");
        assert_eq!(e.column, 15);
        assert!(e.message.contains("after the final '$'"), "{e}");

        let e = err("expect 1 ag");
        assert_eq!(e.column, 11);
        assert!(e.message.contains("'g' is not a hex digit"), "{e}");

        let e = err("packet x 00");
        assert_eq!(e.column, 8);
        assert!(e.message.contains("expected a port number"), "{e}");

        let e = err("add t k:0x1g a()");
        assert_eq!(e.column, 12);
        assert!(e.message.contains("invalid hex digit 'g'"), "{e}");

        let e = err("add t k:1 a(p:1");
        assert_eq!(e.column, 16);
        assert!(e.message.contains("expected ')' or ','"), "{e}");

        let e = err("add t k:1");
        assert_eq!(e.column, 10);
        assert!(e.message.contains("expected a key"), "{e}");

        let e = err("add t k 1 a()");
        assert_eq!(e.column, 9);
        assert!(
            e.message.contains("':' (key) or '(' (action) after 'k'"),
            "{e}"
        );

        let e = err("add t k:1 a() extra");
        assert_eq!(e.column, 15);
        assert!(e.message.contains("end of line"), "{e}");

        let e = err("add t 0x10 k:1 a()");
        assert_eq!(e.column, 7);
        assert!(e.message.contains("decimal"), "{e}");

        let e = err("setdefault t a(p)");
        assert_eq!(e.column, 17);
        assert!(e.message.contains("':'"), "{e}");

        let e = err("remove some");
        assert_eq!(e.column, 8);

        let e = err("mirroring_add 1");
        assert_eq!(e.column, 16);
        assert!(e.message.contains("port number"), "{e}");

        let e = err("mc_mgrp_create 99999999999");
        assert_eq!(e.column, 16);
        assert!(e.message.contains("does not fit 32 bits"), "{e}");

        let e = err("meter_set_rates m 0 x:1");
        assert!(e.message.contains("meter rate"), "{e}");

        let e = err("check_counter c(1) packets ~ 3");
        assert!(e.message.contains("comparison operator"), "{e}");

        let e = err("add \"unterminated k:1 a()");
        assert_eq!(e.column, 5);
        assert!(e.message.contains("unterminated"), "{e}");

        let e = err("add t h[x].f:1 a()");
        assert!(e.message.contains("decimal index"), "{e}");

        let e = err("12 packet");
        assert_eq!(e.column, 1);
        assert!(e.message.contains("command keyword"), "{e}");
    }

    /// A tiny deterministic generator (xorshift64*), so the fuzz loops need no dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
    }

    fn check_no_panic(text: &str) {
        match parse(text, "fuzz") {
            Ok(s) => {
                for c in &s.commands {
                    assert!(c.pos.line >= 1 && c.pos.column >= 1);
                }
            }
            Err(e) => {
                let lines = text.split('\n').count() as u32;
                assert!(e.line >= 1 && e.line <= lines, "{e} for {text:?}");
                assert!(e.column >= 1, "{e}");
                assert!(!e.message.is_empty());
            }
        }
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        for _ in 0..3000 {
            let len = (rng.next() % 200) as usize;
            let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            check_no_panic(&String::from_utf8_lossy(&bytes));
        }
    }

    #[test]
    fn mutated_valid_lines_never_panic() {
        let seeds = [
            "add acl 20 type:0x0800 src:0x0a0000** permit(port:2, mac:00:aa:bb:00:00:01) = e1",
            "setdefault \"t\" a(x:1)",
            "expect 12 00 0a** * b $",
            "packet 3 0a0b",
            "check_counter cnt(e1) packets <= 3",
            "meter_set_rates m 2 0.5:10 1:20",
            "mc_node_create 100 4 5",
            "add t h[1].f$:0b1* tags$1.tci:42 ingress.a()",
        ];
        let alphabet: Vec<char> = " \t:()[]\"*$#.,=<>!0123456789abcdefxXbB_añ\r"
            .chars()
            .collect();
        let mut rng = Rng(42);
        for _ in 0..20000 {
            let seed = seeds[(rng.next() % seeds.len() as u64) as usize];
            let mut chars: Vec<char> = seed.chars().collect();
            for _ in 0..=(rng.next() % 4) {
                let i = (rng.next() % (chars.len() as u64 + 1)) as usize;
                let c = alphabet[(rng.next() % alphabet.len() as u64) as usize];
                match rng.next() % 3 {
                    0 if i < chars.len() => chars[i] = c,
                    1 if i < chars.len() => {
                        chars.remove(i);
                    }
                    _ => chars.insert(i, c),
                }
            }
            let cut = (rng.next() % (chars.len() as u64 + 1)) as usize;
            let text: String = if rng.next() & 3 == 0 {
                chars[..cut].iter().collect()
            } else {
                chars.iter().collect()
            };
            check_no_panic(&text);
        }
    }
}
