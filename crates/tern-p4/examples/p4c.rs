//! Compile a P4 file and print the BMv2 JSON (or the errors): `cargo run --example p4c -- f.p4`.
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: p4c FILE.p4 [--p4info]");
        std::process::exit(2);
    };
    match tern_p4::compile_file(std::path::Path::new(path), &tern_p4::Options::default()) {
        Ok(c) => {
            if args.iter().any(|a| a == "--p4info") {
                print!("{}", c.p4info);
            } else {
                println!("{}", c.json);
            }
        }
        Err(d) => {
            eprint!("{d}");
            std::process::exit(1);
        }
    }
}
