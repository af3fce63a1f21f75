//! A local control transport: `tern cli --connect` drives a running switch.
//!
//! Protocol (one TCP connection = one CLI session): the client sends one command line
//! terminated by `\n`; the server runs it with its own [`Cli`] against the shared switch and
//! replies with a big-endian `u32` length followed by that many bytes of UTF-8 output.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::thread;

use tern_model::Program;
use tern_runtime::Runtime;

use crate::Cli;

/// Longest command line the server accepts (longer lines get an error reply).
pub const MAX_LINE: usize = 1 << 20;
/// Largest reply the client accepts.
pub const MAX_REPLY: usize = 256 << 20;

/// Serve CLI sessions on `listener` until it fails: a blocking accept loop, one thread per
/// client. Every command locks `sw` for its duration.
pub fn serve<R: Runtime + Send + 'static>(
    listener: TcpListener,
    sw: Arc<Mutex<R>>,
    program: Program,
) -> io::Result<()> {
    let cli = Cli::new(&program);
    for conn in listener.incoming() {
        let stream = match conn {
            Ok(s) => s,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let sw = Arc::clone(&sw);
        let cli = cli.clone();
        thread::spawn(move || {
            // A client that disconnects mid-command only ends its own session.
            let _ = session(stream, sw, cli);
        });
    }
    Ok(())
}

fn reply(w: &mut impl Write, text: &str) -> io::Result<()> {
    let len = u32::try_from(text.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "reply too long"))?;
    w.write_all(&len.to_be_bytes())?;
    w.write_all(text.as_bytes())?;
    w.flush()
}

fn session<R: Runtime>(stream: TcpStream, sw: Arc<Mutex<R>>, mut cli: Cli) -> io::Result<()> {
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = (&mut reader)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)?;
        if n == 0 {
            return Ok(());
        }
        // A last line without newline (connection closing) is still run.
        if buf.last() != Some(&b'\n') && buf.len() > MAX_LINE {
            reply(
                &mut writer,
                &format!("Error: command line longer than {MAX_LINE} bytes\n"),
            )?;
            // Skip the rest of the oversized line.
            loop {
                buf.clear();
                let n = (&mut reader)
                    .take(MAX_LINE as u64)
                    .read_until(b'\n', &mut buf)?;
                if n == 0 || buf.last() == Some(&b'\n') {
                    break;
                }
            }
            continue;
        }
        let line = String::from_utf8_lossy(&buf);
        let out = {
            let mut guard = sw.lock().unwrap_or_else(|p| p.into_inner());
            cli.execute(&mut *guard, &line)
        };
        reply(&mut writer, &out)?;
    }
}

/// A connection to a [`serve`]d switch.
pub struct Client {
    stream: TcpStream,
}

impl Client {
    /// Connect to a server.
    pub fn connect(addr: impl ToSocketAddrs) -> io::Result<Client> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        Ok(Client { stream })
    }

    /// Run one command remotely and return its output.
    pub fn execute(&mut self, line: &str) -> io::Result<String> {
        if line.contains('\n') || line.contains('\r') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a command must be a single line",
            ));
        }
        let mut msg = Vec::with_capacity(line.len() + 1);
        msg.extend_from_slice(line.as_bytes());
        msg.push(b'\n');
        self.stream.write_all(&msg)?;
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len)?;
        let len = u32::from_be_bytes(len) as usize;
        if len > MAX_REPLY {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("reply of {len} bytes exceeds the {MAX_REPLY}-byte limit"),
            ));
        }
        let mut body = vec![0u8; len];
        self.stream.read_exact(&mut body)?;
        String::from_utf8(body)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "reply is not UTF-8"))
    }
}
