//! Match engines: exact, LPM, ternary, range tables with BMv2's priority and tie rules.
