//! p4c's STF packet-test format: parser and runner.
