//! Compile-error tests (exact locations and messages) and a loop-fuzz test: random and mutated
//! sources must give diagnostics, never a panic.

use tern_p4::{compile_str, Options};

const BASIC: &str = include_str!("../../../p4/tutorials/basic.p4");

fn errors(src: &str) -> (String, String) {
    match compile_str(src, "t.p4", &Options::default()) {
        Ok(_) => panic!("expected a compile error"),
        Err(d) => (d.first_location(), d.to_string()),
    }
}

fn with_ingress_body(body: &str) -> String {
    BASIC.replace(
        "        if (hdr.ipv4.isValid()) {\n            ipv4_lpm.apply();\n        }",
        body,
    )
}

fn line_of(src: &str, needle: &str) -> usize {
    src.lines()
        .position(|l| l.contains(needle))
        .expect("needle")
        + 1
}

#[test]
fn syntax_error_location_and_caret() {
    let src = BASIC.replace("bit<16>   etherType;", "bit<16>   etherType");
    let (loc, text) = errors(&src);
    let l = line_of(&src, "bit<16>   etherType") + 1;
    assert_eq!(loc, format!("t.p4:{l}:1"));
    assert!(text.contains("error: expected `;`, found `}`"), "{text}");
    assert!(text.contains("\n^\n"), "caret under the column: {text}");
}

#[test]
fn type_mismatch_is_reported_where_it_happens() {
    let src = with_ingress_body("        hdr.ipv4.ttl = hdr.ethernet.dstAddr;");
    let (loc, text) = errors(&src);
    let l = line_of(&src, "hdr.ipv4.ttl = hdr.ethernet.dstAddr");
    assert_eq!(loc, format!("t.p4:{l}:9"));
    assert!(
        text.contains("cannot assign a value of type bit<48> to a bit<8>"),
        "{text}"
    );
}

#[test]
fn undeclared_names_and_fields() {
    let src = with_ingress_body("        hdr.ipv4.nosuch = 1;");
    let (_, text) = errors(&src);
    assert!(
        text.contains("header `ipv4_t` has no field `nosuch`"),
        "{text}"
    );
    let src = with_ingress_body("        foo = 1;");
    let (loc, text) = errors(&src);
    assert!(text.contains("`foo` is not declared"), "{text}");
    assert_eq!(loc, format!("t.p4:{}:9", line_of(&src, "foo = 1;")));
    let src = with_ingress_body("        nosuch_table.apply();");
    let (_, text) = errors(&src);
    assert!(text.contains("`nosuch_table` is not declared"), "{text}");
}

#[test]
fn table_errors() {
    let src = BASIC.replace("default_action = drop();", "default_action = nothere();");
    let (_, text) = errors(&src);
    assert!(text.contains("action `nothere` is not declared"), "{text}");
    let src = BASIC.replace("hdr.ipv4.dstAddr: lpm;", "hdr.ipv4.dstAddr: fuzzy;");
    let (_, text) = errors(&src);
    assert!(text.contains("unknown match kind `fuzzy`"), "{text}");
    let src = with_ingress_body("        ipv4_lpm.apply();\n        ipv4_lpm.apply();");
    let (_, text) = errors(&src);
    assert!(text.contains("applied more than once"), "{text}");
}

/// Table and extern sizes go up to the data plane's 2^24 slots (a 2M-entry table compiles);
/// a constant beyond a bound says so instead of calling it negative or not constant.
#[test]
fn sizes_up_to_the_data_planes_limit() {
    let src = BASIC.replace("size = 1024;", "size = 2000000;");
    let c = compile_str(&src, "t.p4", &Options::default()).expect("a 2M-entry table compiles");
    let json: String = c.json.split_whitespace().collect();
    assert!(
        json.contains("\"max_size\":2000000"),
        "max_size in the JSON"
    );
    let src = BASIC.replace("size = 1024;", "size = 20000000;");
    let (loc, text) = errors(&src);
    assert!(
        text.contains("the table size is 20000000: at most 16777216"),
        "{text}"
    );
    assert_eq!(
        loc,
        format!("t.p4:{}:16", line_of(&src, "size = 20000000;"))
    );
    let src = BASIC.replace(
        "typedef bit<48> macAddr_t;",
        "typedef bit<2000000> macAddr_t;",
    );
    assert_ne!(src, BASIC);
    let (_, text) = errors(&src);
    assert!(
        text.contains("a bit width is 2000000: at most 1048576"),
        "{text}"
    );
}

#[test]
fn parser_errors() {
    let src = BASIC.replace("TYPE_IPV4: parse_ipv4;", "TYPE_IPV4: parse_ipv6;");
    let (loc, text) = errors(&src);
    assert!(
        text.contains("parser state `parse_ipv6` is not declared"),
        "{text}"
    );
    let l = line_of(&src, "TYPE_IPV4: parse_ipv6;");
    assert_eq!(loc, format!("t.p4:{l}:24"));
}

#[test]
fn preprocessor_errors_point_into_the_file() {
    let src = format!("{BASIC}\n#if 1\n");
    let (loc, text) = errors(&src);
    assert!(text.contains("unterminated #if"), "{text}");
    assert_eq!(loc, format!("t.p4:{}:1", BASIC.lines().count() + 2));
    let (_, text) = errors("#include \"missing.p4\"\n");
    assert!(
        text.contains("cannot find include file `missing.p4`"),
        "{text}"
    );
    let (_, text) = errors("#error stop here\n");
    assert!(text.contains("#error stop here"), "{text}");
}

#[test]
fn several_errors_per_run() {
    let src = "header a { bit<8> x }\nheader b { bit<8> y }\nstruct c { bit<8> z; }\n";
    let d = compile_str(src, "m.p4", &Options::default()).unwrap_err();
    assert!(d.errors.len() >= 2, "{d}");
}

/// What issue 22's constructs still refuse, with the place and the reason.
#[test]
fn issue22_constructs_refused_with_reasons() {
    // `@pragma` needs a name on its own line.
    let src = BASIC.replace("table ipv4_lpm {", "@pragma\n    table ipv4_lpm {");
    let (loc, text) = errors(&src);
    assert!(
        text.contains("`@pragma` needs a name on its line"),
        "{text}"
    );
    assert_eq!(loc, format!("t.p4:{}:6", line_of(&src, "@pragma")));
    // A type without a fixed width cannot be looked ahead.
    let src = BASIC.replace(
        "packet.extract(hdr.ethernet);",
        "packet.extract(hdr.ethernet);\n        packet.lookahead<varbit<8>>();",
    );
    let (_, text) = errors(&src);
    assert!(
        text.contains("lookahead of type varbit<8> is not supported (it has no fixed width)"),
        "{text}"
    );
    // A varbit variable takes only a varbit of its width.
    let src = with_ingress_body("        varbit<16> v;\n        v = hdr.ipv4.ttl;");
    let (loc, text) = errors(&src);
    assert!(
        text.contains("a varbit<16> can only be assigned a varbit<16> (found bit<8>)"),
        "{text}"
    );
    assert_eq!(loc, format!("t.p4:{}:9", line_of(&src, "v = hdr.ipv4.ttl")));
    // A struct field of a header must hold header-field types (not headers).
    let src = BASIC.replace(
        "struct metadata {",
        "struct inner_t { ethernet_t e; }\nheader outer_t { inner_t i; }\nstruct metadata {",
    );
    let (_, text) = errors(&src);
    assert!(
        text.contains("header field `i_e` has type ethernet_t"),
        "{text}"
    );
    // Flattened struct members must not collide with other fields.
    let src = BASIC.replace(
        "struct metadata {",
        "struct pair_t { bit<8> lo; }\nheader clash_t { pair_t p; bit<8> p_lo; }\nstruct metadata {",
    );
    let (_, text) = errors(&src);
    assert!(
        text.contains("header `clash_t` has two fields named `p_lo`"),
        "{text}"
    );
    // A struct used in a header must be declared before it (the parser knows types in order).
    let src = BASIC.replace(
        "struct metadata {",
        "header outer_t { later_t i; }\nstruct later_t { bit<8> x; }\nstruct metadata {",
    );
    let (_, text) = errors(&src);
    assert!(text.contains("unknown type `later_t`"), "{text}");
    // An extract into `_` needs the header type.
    let src = BASIC.replace(
        "packet.extract(hdr.ethernet);",
        "packet.extract(_);\n        packet.extract(hdr.ethernet);",
    );
    let (_, text) = errors(&src);
    assert!(
        text.contains("`extract(_)` needs the header type, e.g. extract<H>(_)"),
        "{text}"
    );
}

#[test]
fn no_main_is_an_error() {
    let (_, text) = errors("#include <v1model.p4>\n");
    assert!(text.contains("no `main` package instance"), "{text}");
}

/// A tiny deterministic generator (xorshift).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[test]
fn fuzz_mutated_and_random_sources_never_panic() {
    let mut rng = Rng(0x9e3779b97f4a7c15);
    let pieces = [
        "{",
        "}",
        "(",
        ")",
        "<",
        ">",
        ";",
        "=",
        "bit<8>",
        "header",
        "struct",
        "control",
        "parser",
        "state",
        "transition",
        "select",
        "apply",
        "table",
        "key",
        "actions",
        "#if",
        "#define X",
        "#endif",
        "\n",
        "0x",
        "8w",
        "..",
        "&&&",
        "@name(",
        "\"",
        "/*",
        "hdr.ipv4",
        "[",
        "]",
        ":",
        ",",
        "++",
        ">>",
        "-",
        "!",
        "default",
        "if",
        "else",
        "switch",
        "exit",
        "return",
        "1",
        "4294967296999",
        "int<2>",
        "varbit<8>",
        "error",
        "extern",
        "action",
        ".",
    ];
    let seeds = [
        BASIC,
        include_str!("../../../p4/tests/ops.p4"),
        include_str!("../../../p4/tests/externs.p4"),
        include_str!("../../../p4/tests/parser.p4"),
        include_str!("../../../p4/tests/semantics.p4"),
        include_str!("../../../p4/tutorials/mri.p4"),
    ];
    let n: usize = std::env::var("TERN_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    for i in 0..n {
        let seed = seeds[rng.below(seeds.len())];
        let bytes = seed.as_bytes();
        let src = match i % 4 {
            0 => {
                // Delete a random span.
                let a = rng.below(bytes.len());
                let b = (a + rng.below(40)).min(bytes.len());
                let mut v = bytes[..a].to_vec();
                v.extend_from_slice(&bytes[b..]);
                String::from_utf8_lossy(&v).into_owned()
            }
            1 => {
                // Insert random tokens.
                let mut s = seed.to_string();
                for _ in 0..3 {
                    let mut at = rng.below(s.len());
                    while !s.is_char_boundary(at) {
                        at -= 1;
                    }
                    s.insert_str(at, pieces[rng.below(pieces.len())]);
                }
                s
            }
            2 => {
                // Random token soup.
                (0..rng.below(200))
                    .map(|_| pieces[rng.below(pieces.len())])
                    .collect::<Vec<_>>()
                    .join(" ")
            }
            _ => {
                // Swap two lines.
                let mut lines: Vec<&str> = seed.lines().collect();
                let a = rng.below(lines.len());
                let b = rng.below(lines.len());
                lines.swap(a, b);
                lines.join("\n")
            }
        };
        let r = std::panic::catch_unwind(|| {
            let _ = compile_str(&src, "fuzz.p4", &Options::default()).map_err(|d| d.to_string());
        });
        assert!(r.is_ok(), "panic on input #{i}:\n{src}");
    }
}

#[test]
fn several_type_errors_in_one_apply_block() {
    let src = with_ingress_body(
        "        hdr.ipv4.ttl = true;\n        hdr.ipv4.nosuch = 1;\n        ipv4_lpm.apply();",
    );
    let d = compile_str(&src, "t.p4", &Options::default()).unwrap_err();
    assert_eq!(d.errors.len(), 2, "{d}");
    let text = d.to_string();
    assert!(text.contains("expected bit<8>, found bool"), "{text}");
    assert!(text.contains("has no field `nosuch`"), "{text}");
}

#[test]
fn unsupported_hash_algorithm_is_reported_at_the_call() {
    let src = BASIC.replace("HashAlgorithm.csum16", "HashAlgorithm.random");
    let (loc, text) = errors(&src);
    assert!(
        text.contains("hash algorithm `random` is not supported"),
        "{text}"
    );
    assert_eq!(
        loc,
        format!("t.p4:{}:13", line_of(&src, "HashAlgorithm.random"))
    );
}

const EFFECTS: &str = include_str!("../../../p4/tests/effects.p4");

#[test]
fn directional_action_parameters_must_be_bound_in_the_actions_list() {
    let src = EFFECTS.replace("actions = { add_to(h.e.b); }", "actions = { add_to; }");
    assert_ne!(src, EFFECTS);
    let (loc, text) = errors(&src);
    let l = line_of(&src, "action add_to(inout bit<8> x");
    assert_eq!(loc, format!("t.p4:{l}:19"));
    assert!(
        text.contains(
            "directional parameter `x` of action `add_to` must be bound in the table's actions list"
        ),
        "{text}"
    );
    let src = EFFECTS.replace(
        "actions = { add_to(h.e.b); }",
        "actions = { add_to(h.e.b + 1); }",
    );
    let (loc, text) = errors(&src);
    let l = line_of(&src, "actions = { add_to(h.e.b + 1); }");
    assert_eq!(loc, format!("t.p4:{l}:28"));
    assert!(
        text.contains("argument for `x` must be an l-value"),
        "{text}"
    );
}

#[test]
fn nested_slice_writes_are_range_checked() {
    let src = EFFECTS.replace("x[7:4][2:1] = 2w0;", "x[7:4][5:1] = 5w0;");
    assert_ne!(src, EFFECTS);
    let (loc, text) = errors(&src);
    let l = line_of(&src, "x[7:4][5:1] = 5w0;");
    assert_eq!(loc, format!("t.p4:{l}:13"));
    assert!(
        text.contains("slice [5:1] is out of range of slice [7:4]"),
        "{text}"
    );
}

#[test]
fn table_applied_inside_expressions_is_still_applied_once() {
    // t2 is already applied in mode 2; a second application inside an expression is an error
    // at the second use.
    let src = EFFECTS.replace(
        "h.e.b = pass8(both);",
        "h.e.b = pass8(both || t2.apply().miss);",
    );
    assert_ne!(src, EFFECTS);
    let (loc, text) = errors(&src);
    let l = line_of(&src, "pass8(both || t2.apply().miss)");
    assert_eq!(loc, format!("t.p4:{l}:35"));
    assert!(
        text.contains("table `t2` is applied more than once"),
        "{text}"
    );
}

#[test]
fn inout_arguments_must_be_l_values() {
    let src = EFFECTS.replace("bump(h.s[h.e.idx].v);", "bump(h.s[h.e.idx].v + 1);");
    assert_ne!(src, EFFECTS);
    let (loc, text) = errors(&src);
    let l = line_of(&src, "bump(h.s[h.e.idx].v + 1);");
    assert_eq!(loc, format!("t.p4:{l}:18"));
    assert!(
        text.contains("argument for `inout x` must be an l-value"),
        "{text}"
    );
}

#[test]
fn control_constructor_arguments_are_counted() {
    const CTOR: &str = include_str!("../../../p4/tests/ctor.p4");
    let src = CTOR.replace("Add(8w3) add3;", "Add() add3;");
    assert_ne!(src, CTOR);
    let (loc, text) = errors(&src);
    let l = line_of(&src, "Add() add3;");
    assert_eq!(loc, format!("t.p4:{l}:5"));
    assert!(
        text.contains("control `Add` expects 1 constructor argument(s) but got 0"),
        "{text}"
    );
}

#[test]
fn parser_constructor_arguments_are_checked() {
    let src = include_str!("../../../p4/tests/parserctor.p4");
    let missing = src.replace("Tag(8w1) plus1;", "Tag() plus1;");
    let (loc, text) = errors(&missing);
    assert_eq!(loc, format!("t.p4:{}:5", line_of(&missing, "Tag() plus1;")));
    assert!(
        text.contains("`Tag` expects 1 constructor argument(s) but got 0"),
        "{text}"
    );
    let not_const = src.replace("Tag(8w1) plus1;", "Tag(m.sum) plus1;");
    let (_, text) = errors(&not_const);
    assert!(
        text.contains("constructor argument `add` of `Tag` must be a compile-time constant"),
        "{text}"
    );
    let top = src.replace("V1Switch(P(16w0x9999)", "V1Switch(P()");
    let (_, text) = errors(&top);
    assert!(
        text.contains("`P` expects 1 constructor argument(s) but got 0"),
        "{text}"
    );
}

#[test]
fn table_of_a_control_instance_applied_twice_is_reported() {
    // One instance (`Seq() s;`) applied from two controls: its externs are shared, and a
    // table in it would be applied twice, which BMv2 JSON cannot express.
    let src = include_str!("../../../p4/tests/sharedinst.p4")
        .replace(
            "    register<bit<8>>(1) r;",
            "    register<bit<8>>(1) r;\n    action nop() { }\n    table t { actions = { nop; } default_action = nop(); }",
        )
        .replace("        r.read(v, 0);", "        t.apply();\n        r.read(v, 0);");
    let (_, text) = errors(&src);
    assert!(
        text.contains("table `I.s.t` is applied more than once"),
        "{text}"
    );
}

/// An `if` directly in a parser state compiles (the state is split at it); one inside a
/// function called from a state is refused where the `if` is, saying so.
#[test]
fn if_in_a_function_called_from_a_parser_state() {
    let src = BASIC
        .replace(
            "parser MyParser(",
            "bit<8> pick(in bit<8> v) {\n    if (v == 1) { return 8w2; }\n    return 8w3;\n}\n\nparser MyParser(",
        )
        .replace(
            "        packet.extract(hdr.ipv4);\n",
            "        packet.extract(hdr.ipv4);\n        hdr.ipv4.diffserv = pick(hdr.ipv4.ttl);\n",
        );
    assert_ne!(src, BASIC);
    let (loc, text) = errors(&src);
    assert!(
        text.contains("`if` inside a function called from a parser state is not supported"),
        "{text}"
    );
    let l = line_of(&src, "if (v == 1)");
    assert_eq!(loc, format!("t.p4:{l}:5"));

    // The same `if` written in the state itself compiles.
    let ok = BASIC.replace(
        "        packet.extract(hdr.ipv4);\n",
        "        packet.extract(hdr.ipv4);\n        if (hdr.ipv4.ttl == 1) { hdr.ipv4.diffserv = 2; } else { hdr.ipv4.diffserv = 3; }\n",
    );
    assert_ne!(ok, BASIC);
    compile_str(&ok, "t.p4", &Options::default()).unwrap_or_else(|d| panic!("{d}"));
}
