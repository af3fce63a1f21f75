//! A bounds-checking wrapper around Thrift's binary input protocol.
//!
//! The stock `TBinaryInputProtocol` trusts the lengths it reads from the wire: a negative or
//! huge string or container length makes it allocate without limit or panic. Every byte a
//! peer sends passes through [`GuardedInput`] first, which rejects such lengths with a
//! protocol error (so the connection is closed) before anything is allocated, and reads
//! strings incrementally so a short stream cannot reserve memory it never delivers.

use std::io::Read;

use thrift::protocol::{
    TBinaryInputProtocol, TFieldIdentifier, TInputProtocol, TListIdentifier, TMapIdentifier,
    TMessageIdentifier, TMessageType, TSetIdentifier, TStructIdentifier,
};
use thrift::transport::TReadTransport;
use thrift::{ProtocolError, ProtocolErrorKind};

/// Upper bounds on what one peer message may declare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Longest string or binary value, in bytes.
    pub(crate) max_bytes: usize,
    /// Most elements in one list, set or map.
    pub(crate) max_elements: usize,
}

impl Limits {
    /// What the server accepts from a client: a 64 MiB config, a million list elements.
    pub(crate) const SERVER: Limits = Limits {
        max_bytes: 64 << 20,
        max_elements: 1 << 20,
    };
    /// What the client accepts from a server (large table dumps).
    pub(crate) const CLIENT: Limits = Limits {
        max_bytes: 256 << 20,
        max_elements: 1 << 24,
    };
}

/// The strict binary protocol, with every declared length checked against [`Limits`].
pub(crate) struct GuardedInput<T: TReadTransport> {
    inner: TBinaryInputProtocol<T>,
    limits: Limits,
    failed: bool,
}

fn invalid(kind: ProtocolErrorKind, message: String) -> thrift::Error {
    thrift::Error::Protocol(ProtocolError { kind, message })
}

impl<T: TReadTransport> GuardedInput<T> {
    pub(crate) fn new(transport: T, limits: Limits) -> Self {
        GuardedInput {
            inner: TBinaryInputProtocol::new(transport, true),
            limits,
            failed: false,
        }
    }

    /// Whether any read has failed: the stream is then out of step and must be dropped,
    /// even if the processor turned the failure into an exception reply.
    pub(crate) fn failed(&self) -> bool {
        self.failed
    }

    fn track<V>(&mut self, r: thrift::Result<V>) -> thrift::Result<V> {
        if r.is_err() {
            self.failed = true;
        }
        r
    }

    fn check_len(&self, declared: i32, what: &str, max: usize) -> thrift::Result<usize> {
        match usize::try_from(declared) {
            Ok(n) if n <= max => Ok(n),
            Ok(n) => Err(invalid(
                ProtocolErrorKind::SizeLimit,
                format!("{what} length {n} exceeds the limit of {max}"),
            )),
            Err(_) => Err(invalid(
                ProtocolErrorKind::NegativeSize,
                format!("{what} length {declared} is negative"),
            )),
        }
    }

    fn check_elems(&self, declared: i32, what: &str) -> thrift::Result<()> {
        self.check_len(declared, what, self.limits.max_elements)
            .map(|_| ())
    }
}

impl<T: TReadTransport> GuardedInput<T> {
    fn raw_message_begin(&mut self) -> thrift::Result<TMessageIdentifier> {
        let header = self.inner.read_i32()?;
        if header < 0 {
            // Strict form: version word, then name and sequence number.
            let word = header as u32;
            if word & 0xffff_0000 != 0x8001_0000 {
                return Err(invalid(
                    ProtocolErrorKind::BadVersion,
                    format!("message header {word:#010x} is not binary protocol version 1"),
                ));
            }
            let message_type = TMessageType::try_from((word & 0xff) as u8)?;
            let name = self.raw_string()?;
            let sequence_number = self.inner.read_i32()?;
            Ok(TMessageIdentifier::new(name, message_type, sequence_number))
        } else {
            // Old (non-strict) form, which BMv2's C++ server also accepts: the header is the
            // name's length, then the name, a type byte and the sequence number.
            let n = self.check_len(header, "message name", self.limits.max_bytes)?;
            let name = self.read_exactly(n)?;
            let name = String::from_utf8(name).map_err(|e| {
                invalid(
                    ProtocolErrorKind::InvalidData,
                    format!("message name is not UTF-8: {e}"),
                )
            })?;
            let message_type = TMessageType::try_from(self.inner.read_byte()?)?;
            let sequence_number = self.inner.read_i32()?;
            Ok(TMessageIdentifier::new(name, message_type, sequence_number))
        }
    }
    fn raw_message_end(&mut self) -> thrift::Result<()> {
        self.inner.read_message_end()
    }
    fn raw_struct_begin(&mut self) -> thrift::Result<Option<TStructIdentifier>> {
        self.inner.read_struct_begin()
    }
    fn raw_struct_end(&mut self) -> thrift::Result<()> {
        self.inner.read_struct_end()
    }
    fn raw_field_begin(&mut self) -> thrift::Result<TFieldIdentifier> {
        self.inner.read_field_begin()
    }
    fn raw_field_end(&mut self) -> thrift::Result<()> {
        self.inner.read_field_end()
    }
    fn raw_bool(&mut self) -> thrift::Result<bool> {
        self.inner.read_bool()
    }
    fn raw_bytes(&mut self) -> thrift::Result<Vec<u8>> {
        let declared = self.inner.read_i32()?;
        let n = self.check_len(declared, "string/binary", self.limits.max_bytes)?;
        self.read_exactly(n)
    }
    /// Exactly `n` bytes, read incrementally (nothing is reserved up front).
    fn read_exactly(&mut self, n: usize) -> thrift::Result<Vec<u8>> {
        let mut buf = Vec::new();
        (&mut self.inner.transport)
            .take(n as u64)
            .read_to_end(&mut buf)?;
        if buf.len() != n {
            return Err(thrift::Error::Transport(thrift::TransportError::new(
                thrift::TransportErrorKind::EndOfFile,
                format!(
                    "stream ended inside a {n}-byte string after {} bytes",
                    buf.len()
                ),
            )));
        }
        Ok(buf)
    }
    fn raw_i8(&mut self) -> thrift::Result<i8> {
        self.inner.read_i8()
    }
    fn raw_i16(&mut self) -> thrift::Result<i16> {
        self.inner.read_i16()
    }
    fn raw_i32(&mut self) -> thrift::Result<i32> {
        self.inner.read_i32()
    }
    fn raw_i64(&mut self) -> thrift::Result<i64> {
        self.inner.read_i64()
    }
    fn raw_double(&mut self) -> thrift::Result<f64> {
        self.inner.read_double()
    }
    fn raw_string(&mut self) -> thrift::Result<String> {
        let bytes = self.raw_bytes()?;
        String::from_utf8(bytes).map_err(|e| {
            invalid(
                ProtocolErrorKind::InvalidData,
                format!("string is not UTF-8: {e}"),
            )
        })
    }
    fn raw_list_begin(&mut self) -> thrift::Result<TListIdentifier> {
        let id = self.inner.read_list_begin()?;
        self.check_elems(id.size, "list")?;
        Ok(id)
    }
    fn raw_list_end(&mut self) -> thrift::Result<()> {
        self.inner.read_list_end()
    }
    fn raw_set_begin(&mut self) -> thrift::Result<TSetIdentifier> {
        let id = self.inner.read_set_begin()?;
        self.check_elems(id.size, "set")?;
        Ok(id)
    }
    fn raw_set_end(&mut self) -> thrift::Result<()> {
        self.inner.read_set_end()
    }
    fn raw_map_begin(&mut self) -> thrift::Result<TMapIdentifier> {
        let id = self.inner.read_map_begin()?;
        self.check_elems(id.size, "map")?;
        Ok(id)
    }
    fn raw_map_end(&mut self) -> thrift::Result<()> {
        self.inner.read_map_end()
    }
    fn raw_byte(&mut self) -> thrift::Result<u8> {
        self.inner.read_byte()
    }
}

impl<T: TReadTransport> TInputProtocol for GuardedInput<T> {
    fn read_message_begin(&mut self) -> thrift::Result<TMessageIdentifier> {
        let r = self.raw_message_begin();
        self.track(r)
    }
    fn read_message_end(&mut self) -> thrift::Result<()> {
        let r = self.raw_message_end();
        self.track(r)
    }
    fn read_struct_begin(&mut self) -> thrift::Result<Option<TStructIdentifier>> {
        let r = self.raw_struct_begin();
        self.track(r)
    }
    fn read_struct_end(&mut self) -> thrift::Result<()> {
        let r = self.raw_struct_end();
        self.track(r)
    }
    fn read_field_begin(&mut self) -> thrift::Result<TFieldIdentifier> {
        let r = self.raw_field_begin();
        self.track(r)
    }
    fn read_field_end(&mut self) -> thrift::Result<()> {
        let r = self.raw_field_end();
        self.track(r)
    }
    fn read_bool(&mut self) -> thrift::Result<bool> {
        let r = self.raw_bool();
        self.track(r)
    }
    fn read_bytes(&mut self) -> thrift::Result<Vec<u8>> {
        let r = self.raw_bytes();
        self.track(r)
    }
    fn read_i8(&mut self) -> thrift::Result<i8> {
        let r = self.raw_i8();
        self.track(r)
    }
    fn read_i16(&mut self) -> thrift::Result<i16> {
        let r = self.raw_i16();
        self.track(r)
    }
    fn read_i32(&mut self) -> thrift::Result<i32> {
        let r = self.raw_i32();
        self.track(r)
    }
    fn read_i64(&mut self) -> thrift::Result<i64> {
        let r = self.raw_i64();
        self.track(r)
    }
    fn read_double(&mut self) -> thrift::Result<f64> {
        let r = self.raw_double();
        self.track(r)
    }
    fn read_string(&mut self) -> thrift::Result<String> {
        let r = self.raw_string();
        self.track(r)
    }
    fn read_list_begin(&mut self) -> thrift::Result<TListIdentifier> {
        let r = self.raw_list_begin();
        self.track(r)
    }
    fn read_list_end(&mut self) -> thrift::Result<()> {
        let r = self.raw_list_end();
        self.track(r)
    }
    fn read_set_begin(&mut self) -> thrift::Result<TSetIdentifier> {
        let r = self.raw_set_begin();
        self.track(r)
    }
    fn read_set_end(&mut self) -> thrift::Result<()> {
        let r = self.raw_set_end();
        self.track(r)
    }
    fn read_map_begin(&mut self) -> thrift::Result<TMapIdentifier> {
        let r = self.raw_map_begin();
        self.track(r)
    }
    fn read_map_end(&mut self) -> thrift::Result<()> {
        let r = self.raw_map_end();
        self.track(r)
    }
    fn read_byte(&mut self) -> thrift::Result<u8> {
        let r = self.raw_byte();
        self.track(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(bytes: &[u8]) -> GuardedInput<std::io::Cursor<Vec<u8>>> {
        GuardedInput::new(std::io::Cursor::new(bytes.to_vec()), Limits::SERVER)
    }

    #[test]
    fn negative_string_length_is_an_error_not_a_panic() {
        let err = input(&[0xff, 0xff, 0xff, 0xff]).read_bytes().unwrap_err();
        assert!(format!("{err:?}").contains("negative"), "{err:?}");
    }

    #[test]
    fn huge_string_length_is_refused_before_allocating() {
        let err = input(&[0x7f, 0xff, 0xff, 0xff]).read_string().unwrap_err();
        assert!(format!("{err:?}").contains("exceeds the limit"), "{err:?}");
    }

    #[test]
    fn truncated_string_is_an_eof_error() {
        let err = input(&[0, 0, 0, 5, b'a', b'b']).read_string().unwrap_err();
        assert!(format!("{err:?}").contains("after 2 bytes"), "{err:?}");
    }

    #[test]
    fn huge_list_is_refused() {
        // element type 8 (i32), size 0x7fffffff
        let err = input(&[8, 0x7f, 0xff, 0xff, 0xff])
            .read_list_begin()
            .unwrap_err();
        assert!(format!("{err:?}").contains("list length"), "{err:?}");
    }

    #[test]
    fn well_formed_values_read_back() {
        let mut p = input(&[0, 0, 0, 2, b'h', b'i', 8, 0, 0, 0, 3]);
        assert_eq!(p.read_string().unwrap(), "hi");
        assert_eq!(p.read_list_begin().unwrap().size, 3);
    }

    #[test]
    fn strict_and_old_style_headers_are_read_and_bad_versions_refused() {
        let mut strict = vec![0x80, 0x01, 0x00, 0x01, 0, 0, 0, 1, b'f', 0, 0, 0, 7];
        let id = input(&strict).read_message_begin().unwrap();
        assert_eq!((id.name.as_str(), id.sequence_number), ("f", 7));
        assert_eq!(id.message_type, TMessageType::Call);
        strict[3] = 9; // message type 9 does not exist
        assert!(input(&strict).read_message_begin().is_err());
        let err = input(&[0x80, 0x02, 0, 1]).read_message_begin().unwrap_err();
        assert!(format!("{err:?}").contains("version 1"), "{err:?}");
        // Non-strict: name length, name, type byte, sequence number.
        let old = [0, 0, 0, 2, b'h', b'i', 1, 0, 0, 0, 9];
        let id = input(&old).read_message_begin().unwrap();
        assert_eq!((id.name.as_str(), id.sequence_number), ("hi", 9));
        // "GET " read as a name length is far beyond the limit.
        let err = input(b"GET / HTTP/1.1").read_message_begin().unwrap_err();
        assert!(format!("{err:?}").contains("exceeds the limit"), "{err:?}");
    }
}
