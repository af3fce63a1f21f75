//! The `tern` command: run, compile, test, cli, bench.
fn main() {
    eprintln!("tern: not wired yet");
    std::process::exit(2);
}
